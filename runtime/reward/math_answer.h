/* Rule-based rewards for math answers: find the final answer in a response
 * and compare it with the reference, exactly, as a rational number where both
 * sides are numbers and as normalised LaTeX text otherwise. */
#ifndef RL_REWARD_MATH_ANSWER_H
#define RL_REWARD_MATH_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

/* The final answer of a response: the content of the LAST \boxed{...} or
 * \fbox{...} (balanced braces, nested braces allowed), else the last number in
 * the text (integer, decimal, negative, a fraction a/b, \frac{a}{b} with
 * numeric arguments; 1,234 is one number). Writes it into out (NUL-terminated)
 * as it appears in the response and returns true; false when there is none or
 * it does not fit in cap bytes. */
bool rl_math_extract_answer(const char *response, char *out, size_t cap);

/* Writes the normalised form of an answer (no whitespace, no $ or \( \)
 * delimiters, no \left \right \text{} \mathrm{} wrappers, units of degrees and
 * percent dropped, \dfrac12 -> \frac{1}{2}, \sqrt2 -> \sqrt{2}, no trailing
 * '.', no leading "x ="). False when it does not fit in cap bytes (or out of
 * memory). */
bool rl_math_normalize(const char *answer, char *out, size_t cap);

/* Parses a normalised answer as an exact rational num/den (reduced, den > 0):
 * integers, decimals, 1,234, a/b, \frac{a}{b}, with a sign. False when it is
 * not such a number or does not fit in 64 bits. */
bool rl_math_parse_rational(const char *norm, long long *num, long long *den);

/* Compares an extracted answer with the expected one after normalisation:
 * 1 equal, 0 different, -1 when either side is empty after normalisation
 * (or too long to normalise). Numbers compare as rationals (1/2 == 0.5 ==
 * \frac{1}{2}), anything else as normalised text. */
int rl_math_answers_equal(const char *given, const char *expected);

/* The math reward: 1.0 when the extracted answer equals expected, else 0.0.
 * *failed (may be NULL) is set true when there is no answer to extract, no
 * expected answer, or the comparison returned -1; false otherwise. */
double rl_reward_math(const char *response, const char *expected, bool *failed);

/* The exact reward: 1.0 when the response equals expected after trimming
 * surrounding whitespace on both, else 0.0 (also when expected is NULL). */
double rl_reward_exact(const char *response, const char *expected);

#endif
