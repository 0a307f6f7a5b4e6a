/* Math rewards against a hand-written table: every normalisation rule, exact
 * rational comparison, \boxed extraction (nested, last wins, \fbox), the last
 * number when nothing is boxed, and the failures the trainer counts. The
 * expected rewards were decided by hand from the rules, not by running the
 * code. */
#include <stdbool.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/reward/math_answer.h"

struct math_case {
	const char *response;
	const char *expected;
	double reward;
	bool failed;
};

static const struct math_case cases[] = {
    /* \boxed: plain, nested braces, last one wins, \fbox, spaces */
    {"so the answer is \\boxed{42}.", "42", 1, false},
    {"\\boxed{\\frac{1}{2}}", "0.5", 1, false},
    {"first \\boxed{3} then \\boxed{4}", "4", 1, false},
    {"first \\boxed{3} then \\boxed{4}", "3", 0, false},
    {"\\fbox{7}", "7", 1, false},
    {"\\boxed {12}", "12", 1, false},
    {"\\boxed{\\{1, 2\\}}", "\\{1,2\\}", 1, false},
    {"\\boxed{\\sqrt{\\frac{3}{4}}}", "\\sqrt{\\frac34}", 1, false},
    {"boxed wins over a later number: \\boxed{5} (checked 6 times)", "5", 1, false},
    /* last number when nothing is boxed */
    {"2 apples and 3 pears make 5", "5", 1, false},
    {"2 apples and 3 pears make 5 fruits", "3", 0, false},
    {"The total is 1,234 dollars.", "1234", 1, false},
    {"It costs $1,234,567.50", "1234567.5", 1, false},
    {"temperature drops to -7 degrees", "-7", 1, false},
    {"3-5 is a range, the answer 3-5", "5", 1, false},
    {"half is 1/2", "\\frac{1}{2}", 1, false},
    {"we get $\\frac{3}{4}$", "0.75", 1, false},
    {"we get $-\\dfrac{3}{4}$", "-0.75", 1, false},
    {"about .5 of them", "1/2", 1, false},
    {"answer: 3.14.", "3.14", 1, false},
    /* rationals compared exactly */
    {"\\boxed{3.0}", "3", 1, false},
    {"\\boxed{3.00}", "3.0", 1, false},
    {"\\boxed{-\\frac{1}{2}}", "-0.5", 1, false},
    {"\\boxed{\\dfrac12}", "0.5", 1, false},
    {"\\boxed{\\tfrac{2}{4}}", "1/2", 1, false},
    {"\\boxed{0.3333}", "1/3", 0, false},
    {"\\boxed{10/4}", "2.5", 1, false},
    {"\\boxed{\\frac{-6}{4}}", "-3/2", 1, false},
    {"\\boxed{1{,}000}", "1000", 1, false},
    {"\\boxed{+4}", "4", 1, false},
    /* wrappers, delimiters, spacing, units */
    {"\\boxed{$5$}", "5", 1, false},
    {"\\boxed{\\(5\\)}", "5", 1, false},
    {"\\boxed{\\left( 1, 2 \\right)}", "(1,2)", 1, false},
    {"\\boxed{1\\!000\\,000}", "1000000", 1, false},
    {"\\boxed{x = 5}", "5", 1, false},
    {"\\boxed{\\theta=\\frac{\\pi}{2}}", "\\frac\\pi2", 1, false},
    {"\\boxed{90^\\circ}", "90", 1, false},
    {"\\boxed{90^{\\circ}}", "90", 1, false},
    {"\\boxed{50\\%}", "50", 1, false},
    {"\\boxed{50\\%}", "0.5", 0, false},
    {"\\boxed{25%}", "25", 1, false},
    {"\\boxed{\\text{(B)}}", "(B)", 1, false},
    {"\\boxed{\\textbf{yes}}", "yes", 1, false},
    {"\\boxed{\\mathrm{12}}", "12", 1, false},
    {"\\boxed{\\mathbf{x+1}}", "x + 1", 1, false},
    {"\\boxed{\\sqrt2}", "\\sqrt{2}", 1, false},
    {"\\boxed{2\\sqrt 3}", "2\\sqrt{3}", 1, false},
    {"\\boxed{\\sqrt{2}}", "\\sqrt{3}", 0, false},
    {"\\boxed{12.}", "12", 1, false},
    {"\\boxed{7}", "$7$", 1, false},
    {"\\boxed{\\displaystyle \\frac{1}{3}}", "\\dfrac{1}{3}", 1, false},
    /* text answers that are not numbers */
    {"\\boxed{x^2+1}", "x^2 + 1", 1, false},
    {"\\boxed{x^2+1}", "x^2 - 1", 0, false},
    {"\\boxed{5 \\text{ cm}}", "5", 0, false},
    /* overflow falls back to text */
    {"\\boxed{123456789012345678901234567890}", "123456789012345678901234567890", 1, false},
    {"\\boxed{123456789012345678901234567890}", "123456789012345678901234567891", 0, false},
    /* failures: nothing to extract, empty after normalisation, no reference */
    {"I do not know.", "5", 0, true},
    {"", "5", 0, true},
    {"\\boxed{}", "5", 0, true},
    {"\\boxed{\\,}", "5", 0, true},
    {"\\boxed{5}", "", 0, true},
    {"\\boxed{5}", "$ $", 0, true},
    /* an unclosed box is not an answer; the number inside still counts */
    {"\\boxed{5", "5", 1, false},
};

Test(math_answer, table)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct math_case *c = &cases[i];
		bool failed = !c->failed;
		double r = rl_reward_math(c->response, c->expected, &failed);

		cr_expect_eq(r, c->reward, "case %zu: reward(\"%s\", \"%s\") = %g, want %g", i,
		             c->response, c->expected, r, c->reward);
		cr_expect_eq(failed, c->failed, "case %zu: failed(\"%s\", \"%s\") = %d", i,
		             c->response, c->expected, failed);
	}
}

Test(math_answer, no_expected_fails)
{
	bool failed = false;

	cr_expect_eq(rl_reward_math("\\boxed{5}", NULL, &failed), 0.0);
	cr_expect(failed);
	cr_expect_eq(rl_reward_math(NULL, "5", NULL), 0.0);
}

struct extract_case {
	const char *response;
	const char *answer; /* NULL: nothing */
};

static const struct extract_case extracts[] = {
    {"\\boxed{a{b{c}}d}", "a{b{c}}d"},
    {"\\boxed{1} and \\fbox{2}", "2"},
    {"\\fbox{2} and \\boxed{1}", "1"},
    {"\\boxed{\\frac{1}{2}} then 7", "\\frac{1}{2}"},
    {"x = 3, so 2x = 6.", "6"},
    {"1,234 and 5,67", "67"},
    {"costs 1,234.", "1,234"},
    {"is -3/4", "-3/4"},
    {"is $\\dfrac{3}{4}$.", "\\dfrac{3}{4}"},
    {"is 2 - 3", "3"},
    {"at (-2)", "-2"},
    {"no digits here", NULL},
    {"\\boxed{", NULL},
};

Test(math_answer, extract)
{
	char out[64];

	for (size_t i = 0; i < sizeof(extracts) / sizeof(extracts[0]); i++) {
		const struct extract_case *c = &extracts[i];
		bool ok = rl_math_extract_answer(c->response, out, sizeof(out));

		if (!c->answer) {
			cr_expect(!ok, "\"%s\": extracted \"%s\"", c->response, out);
			continue;
		}
		cr_expect(ok, "\"%s\": nothing extracted", c->response);
		if (ok)
			cr_expect_str_eq(out, c->answer, "\"%s\"", c->response);
	}
	/* an answer that does not fit */
	cr_expect(!rl_math_extract_answer("\\boxed{123456}", out, 6));
	cr_expect(rl_math_extract_answer("\\boxed{123456}", out, 7));
}

Test(math_answer, normalize_and_parse)
{
	char out[64];
	long long n, d;

	cr_assert(rl_math_normalize(" $\\dfrac 12$ . ", out, sizeof(out)));
	cr_expect_str_eq(out, "\\frac{1}{2}");
	cr_assert(rl_math_parse_rational(out, &n, &d));
	cr_expect(n == 1 && d == 2);
	cr_assert(rl_math_parse_rational("-1,250.500", &n, &d));
	cr_expect(n == -2501 && d == 2, "%lld/%lld", n, d);
	cr_assert(rl_math_parse_rational("\\frac{0.5}{-3}", &n, &d));
	cr_expect(n == -1 && d == 6, "%lld/%lld", n, d);
	cr_expect(!rl_math_parse_rational("1/0", &n, &d));
	cr_expect(!rl_math_parse_rational("1,23", &n, &d));
	cr_expect(!rl_math_parse_rational("3x", &n, &d));
	cr_expect(!rl_math_parse_rational("99999999999999999999", &n, &d));
	cr_expect(!rl_math_normalize("\\frac{1}{2}", out, 5));
}

Test(math_answer, equal_codes)
{
	cr_expect_eq(rl_math_answers_equal("0.5", "\\frac{1}{2}"), 1);
	cr_expect_eq(rl_math_answers_equal("0.5", "\\frac{1}{3}"), 0);
	cr_expect_eq(rl_math_answers_equal("\\sqrt2", "\\sqrt{2}"), 1);
	cr_expect_eq(rl_math_answers_equal("", "1"), -1);
	cr_expect_eq(rl_math_answers_equal("1", "\\left.\\right."), -1);
	cr_expect_eq(rl_math_answers_equal(NULL, "1"), -1);
}

Test(math_answer, exact)
{
	cr_expect_eq(rl_reward_exact("  Paris\n", "Paris"), 1.0);
	cr_expect_eq(rl_reward_exact("Paris", "\tParis  "), 1.0);
	cr_expect_eq(rl_reward_exact("paris", "Paris"), 0.0);
	cr_expect_eq(rl_reward_exact("Paris, France", "Paris"), 0.0);
	cr_expect_eq(rl_reward_exact("a  b", "a b"), 0.0);
	cr_expect_eq(rl_reward_exact("   ", ""), 1.0);
	cr_expect_eq(rl_reward_exact("x", NULL), 0.0);
}
