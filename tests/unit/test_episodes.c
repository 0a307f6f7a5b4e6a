/* Multi-turn episodes (rollout/episodes.h, observation.h) on the built-in
 * model with real environment programs: a shell script speaking rl-env(7)
 * whose rules the test knows (the observation "ab" and reward 0.5 until
 * turn T, then done with reward 1), so that every sample's layout and
 * reward is worked out here from those rules, not from the driver. And the
 * observations through Qwen2.5's and Llama 3.1's chat templates against
 * transformers (tests/fixtures/make_episode_fixtures.py). */
#include "tests/unit/helpers.h"

#include <jansson.h>
#include <math.h>

#include "kernels/ops.h"
#include "runtime/model/builtin.h"
#include "runtime/rollout/episodes.h"
#include "runtime/rollout/observation.h"

/* ---- observations through real chat templates, against transformers ---- */

static char *fixture_path(const char *rel)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL;

	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/%s", top, rel), 0);
	return path;
}

static void check_observation(const json_t *c, size_t k)
{
	const char *model = json_string_value(json_object_get(c, "model"));
	char err[512], *rel = NULL, *dir = tmp_dir(), *tpl_text = NULL;
	struct rl_tokenizer *t;
	struct rl_chat_template *chat;
	size_t len = 0;

	cr_assert_geq(asprintf(&rel, "models/%s/tokenizer.json", model), 0);
	char *tok_path = fixture_path(rel);
	free(rel);
	cr_assert_eq(rl_tokenizer_load(&t, tok_path, err, sizeof err), 0, "%s", err);
	/* the special tokens as tokenizer_config.json gives them */
	json_t *special = json_pack("{s:O, s:O}", "bos_token", json_object_get(c, "bos_token"),
	                            "eos_token", json_object_get(c, "eos_token"));
	char *special_text = json_dumps(special, 0);
	free(write_file(dir, "tokenizer_config.json", special_text));
	cr_assert_geq(
	    asprintf(&rel, "chat_templates/%s", json_string_value(json_object_get(c, "template"))),
	    0);
	char *tpl_path = fixture_path(rel);
	FILE *f = fopen(tpl_path, "r");
	cr_assert_not_null(f, "%s", tpl_path);
	cr_assert_geq(getdelim(&tpl_text, &len, '\0', f), 0);
	fclose(f);
	cr_assert_eq(rl_chat_template_from_text(&chat, tpl_text, tpl_path, dir, err, sizeof err), 0,
	             "%s", err);

	struct rl_observation o = {chat, NULL, json_string_value(json_object_get(c, "role")), t};
	const char *obs = json_string_value(json_object_get(c, "observation"));
	const json_t *turn_end = json_object_get(c, "turn_end");
	int32_t *ids;
	size_t n;
	char *text;
	cr_assert_eq(
	    rl_observation_render(&o, json_object_get(c, "messages"),
	                          json_is_string(turn_end) ? json_string_value(turn_end) : NULL,
	                          obs, strlen(obs), &ids, &n, &text, err, sizeof err),
	    0, "case %zu (%s): %s", k, model, err);
	cr_assert_str_eq(text, json_string_value(json_object_get(c, "text")), "case %zu (%s)", k,
	                 model);
	const json_t *want = json_object_get(c, "ids");
	cr_assert_eq(n, json_array_size(want), "case %zu (%s): %zu tokens, want %zu", k, model, n,
	             json_array_size(want));
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(ids[i], json_integer_value(json_array_get(want, i)),
		             "case %zu (%s): token %zu", k, model, i);
	free(ids);
	free(text);
	rl_chat_template_free(chat);
	rl_tokenizer_free(t);
	json_decref(special);
	free(special_text);
	free(tpl_text);
	free(tpl_path);
	free(tok_path);
	free(rel);
	remove_tree(dir);
	free(dir);
}

Test(episodes, observations_through_chat_templates_match_transformers)
{
	char *path = fixture_path("episodes/observations.json");
	json_error_t je;
	json_t *cases = json_load_file(path, 0, &je), *c;
	size_t k;

	cr_assert_not_null(cases, "%s: %s", path, je.text);
	cr_assert_geq(json_array_size(cases), 10);
	json_array_foreach(cases, k, c) check_observation(c, k);
	json_decref(cases);
	free(path);
}

Test(episodes, a_template_without_the_stop_token_has_the_observation_follow_the_turn)
{
	char err[512];
	struct rl_chat_template *chat;
	struct rl_tokenizer *t;
	int32_t *ids;
	size_t n;
	char *text;

	cr_assert_eq(rl_builtin_tokenizer("builtin:tiny-llama", &t, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_chat_template_from_text(
	                 &chat,
	                 "{% for m in messages %}[{{ m.role }}]{{ m.content }}[/]{% endfor %}"
	                 "{% if add_generation_prompt %}[assistant]{% endif %}",
	                 "test", NULL, err, sizeof err),
	             0, "%s", err);
	json_t *msgs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "user", "content",
	                         "1+2=", "role", "assistant", "content", "c");
	struct rl_observation o = {chat, NULL, "tool", t};
	/* stopped otherwise: the template's end of the turn comes first */
	cr_assert_eq(
	    rl_observation_render(&o, msgs, NULL, "3", 1, &ids, &n, &text, err, sizeof err), 0,
	    "%s", err);
	cr_assert_str_eq(text, "[/][tool]3[/][assistant]");
	free(ids);
	free(text);
	/* a stop token the template does not write (NeMo-RL's passthrough
	 * does not): it is in the sequence, the template's text follows */
	cr_assert_eq(
	    rl_observation_render(&o, msgs, "</s>", "3", 1, &ids, &n, &text, err, sizeof err), 0);
	cr_assert_str_eq(text, "[/][tool]3[/][assistant]");
	free(ids);
	free(text);
	/* one it writes is skipped: it is in the sequence already */
	cr_assert_eq(
	    rl_observation_render(&o, msgs, "[/]", "3", 1, &ids, &n, &text, err, sizeof err), 0);
	cr_assert_str_eq(text, "[tool]3[/][assistant]");
	free(ids);
	free(text);
	/* a template that renders the conversation differently once the
	 * observation follows cannot have its tokens appended */
	struct rl_chat_template *odd;
	cr_assert_eq(
	    rl_chat_template_from_text(
	        &odd, "{{ messages | length }}{% for m in messages %}{{ m.content }}{% endfor %}",
	        "odd", NULL, err, sizeof err),
	    0, "%s", err);
	o.chat = odd;
	cr_assert_eq(
	    rl_observation_render(&o, msgs, NULL, "3", 1, &ids, &n, &text, err, sizeof err), -1);
	cr_assert(strstr(err, "differently"), "%s", err);
	rl_chat_template_free(odd);
	json_decref(msgs);
	rl_chat_template_free(chat);
	rl_tokenizer_free(t);
}

/* ---- episodes on the built-in model with a real environment ---- */

/* The environment: `sh env.sh T LOG`. A step of turn < T is answered with
 * the observation "ab", reward 0.5; turn T with done, reward 1. Episodes
 * whose problem is "slow" answer each step two seconds late, those whose
 * problem is "crash" kill the copy at their first step. Each step is
 * logged to LOG as "EPISODE-PROBLEM TURN" in the order answered. */
static const char env_script[] =
    "T=$1; LOG=$2; slow=' '; crash=' '\n"
    "while IFS= read -r line; do\n"
    "  ep=$(printf '%s\\n' \"$line\" | sed -n 's/.*\"episode\": *\\([0-9]*\\).*/\\1/p')\n"
    "  case $line in\n"
    "  *'\"type\":\"start\"'* | *'\"type\": \"start\"'*)\n"
    "    case $line in *'\"problem\":\"slow\"'* | *'\"problem\": \"slow\"'*) slow=\"$slow$ep \";; "
    "esac\n"
    "    case $line in *'\"problem\":\"crash\"'* | *'\"problem\": \"crash\"'*) "
    "crash=\"$crash$ep \";; esac ;;\n"
    "  *'\"type\":\"step\"'* | *'\"type\": \"step\"'*)\n"
    "    turn=$(printf '%s\\n' \"$line\" | sed -n 's/.*\"turn\": *\\([0-9]*\\).*/\\1/p')\n"
    "    case $crash in *\" $ep \"*) exit 3;; esac\n"
    "    what=fast; case $slow in *\" $ep \"*) what=slow; sleep 2;; esac\n"
    "    echo \"$what $turn\" >>\"$LOG\"\n"
    "    if [ \"$turn\" -ge \"$T\" ]; then\n"
    "      printf '{\"episode\":%s,\"observation\":\"\",\"reward\":1,\"done\":true}\\n' \"$ep\"\n"
    "    else\n"
    "      printf '{\"episode\":%s,\"observation\":\"ab\",\"reward\":0.5,\"done\":false}\\n' "
    "\"$ep\"\n"
    "    fi ;;\n"
    "  esac\n"
    "done\n";

struct fx {
	char *dir, *log;
	struct rl_config cfg;
	struct rl_model *m;
	struct rl_tokenizer *tok;
	struct rl_gen_settings g;
	struct rl_episodes *e;
	/* the prompts of the last play, encoded here */
	int32_t *prompt[8];
	size_t prompt_len[8];
};

/* A model, its settings (max_total tokens in all, max_new per turn) and
 * the episodes of the environment above (done at turn T, max_turns),
 * opened here as setup would: the config gives the sampling settings. */
static void fx_open(struct fx *f, int max_total, int max_new, int T, int max_turns, int workers,
                    int in_flight)
{
	char err[512], *text;
	struct rl_diags d = {0};

	memset(f, 0, sizeof *f);
	f->dir = tmp_dir();
	cr_assert_geq(asprintf(&f->log, "%s/steps.log", f->dir), 0);
	free(write_file(f->dir, "env.sh", env_script));
	cr_assert_geq(asprintf(&text,
	                       "grpo: {num_prompts_per_step: 2, num_generations_per_prompt: 2, "
	                       "seed: 7}\n"
	                       "policy:\n"
	                       "  model_name: builtin:tiny-llama\n"
	                       "  precision: float32\n"
	                       "  train_global_batch_size: 4\n"
	                       "  max_total_sequence_length: %d\n"
	                       "  generation: {max_new_tokens: %d}\n"
	                       "checkpointing: {enabled: false}\n"
	                       "data: {dataset_name: copy}\n"
	                       "logger: {log_dir: %s/logs}\n",
	                       max_total, max_new, f->dir),
	              0);
	cr_assert_eq(rl_config_load_text("ep.yaml", text, strlen(text), NULL, NULL, 0, &f->cfg, &d),
	             0, "%s", d.n ? d.v[0].msg : "");
	rl_diags_free(&d);
	free(text);
	cr_assert_eq(
	    rl_builtin_model_new("builtin:tiny-llama", 7, &rl_ops_cpu, &f->m, err, sizeof err), 0,
	    "%s", err);
	cr_assert_eq(rl_builtin_tokenizer("builtin:tiny-llama", &f->tok, err, sizeof err), 0, "%s",
	             err);
	cr_assert_eq(rl_gen_settings_init(&f->g, &f->cfg, f->m, err, sizeof err), 0, "%s", err);

	struct rl_episode_settings s = {
	    .enabled = true, .max_turns = max_turns, .observation_role = "tool"};
	s.name = strdup("test");
	cr_assert_geq(asprintf(&s.command, "sh '%s/env.sh' %d '%s'", f->dir, T, f->log), 0);
	s.program = (struct rl_env_program){.command = s.command,
	                                    .num_workers = workers,
	                                    .max_in_flight = in_flight,
	                                    .turn_timeout_s = 30};
	cr_assert_eq(rl_episodes_open(&f->e, &s, NULL, stderr, err, sizeof err), 0, "%s", err);
}

static void fx_close(struct fx *f)
{
	rl_episodes_close(f->e);
	for (int k = 0; k < 8; k++)
		free(f->prompt[k]);
	rl_gen_settings_free(&f->g);
	rl_tokenizer_free(f->tok);
	rl_model_free(f->m);
	rl_config_free(&f->cfg);
	remove_tree(f->dir);
	free(f->dir);
	free(f->log);
}

/* A rollout of n_groups x group_size with these problems (prompt "P=") */
static void rollout(struct rl_rollout *r, int n_groups, int group_size, const char *const *problems)
{
	cr_assert_eq(rl_rollout_alloc(r, n_groups, group_size), 0);
	for (int k = 0; k < n_groups; k++) {
		r->problems[k] = strdup(problems[k]);
		cr_assert_geq(asprintf(&r->prompts[k], "%s=", problems[k]), 0);
		r->answers[k] = strdup("3");
	}
}

static void play(struct fx *f, struct rl_rollout *r, uint64_t seed)
{
	char err[512];
	int64_t cut = 0;

	for (int k = 0; k < r->n_groups; k++) {
		free(f->prompt[k]);
		cr_assert_eq(rl_tokenizer_encode(f->tok, r->prompts[k], strlen(r->prompts[k]),
		                                 f->g.add_special_tokens, &f->prompt[k],
		                                 &f->prompt_len[k], err, sizeof err),
		             0, "%s", err);
	}
	cr_assert_eq(rl_rollout_episodes_share(f->e, f->m, f->tok, &f->g, NULL, r, seed, &cut, err,
	                                       sizeof err),
	             0, "%s", err);
}

static bool is_stop(const struct fx *f, int32_t id)
{
	for (size_t i = 0; i < f->g.n_stop_ids; i++)
		if (f->g.stop_ids[i] == id)
			return true;
	return false;
}

/* The layout the rules above give: the prompt as the tokenizer encodes
 * it, then runs of the model's tokens (mask 1, logprobs <= 0) each
 * followed, but the last, by the tokens of "ab" (mask 0, logprob exactly
 * 0). Returns the model's turns found. */
static int check_layout(const struct fx *f, const struct rl_sample *s, int max_new)
{
	char err[256];
	int32_t *ab;
	size_t n_ab;
	int turns = 0, i = s->prompt_len;

	cr_assert_eq(rl_tokenizer_encode(f->tok, "ab", 2, false, &ab, &n_ab, err, sizeof err), 0);
	cr_assert_not_null(s->loss_mask);
	cr_assert_eq(s->prompt_len, f->prompt_len[s->group]);
	cr_assert_eq(memcmp(s->ids, f->prompt[s->group], (size_t)s->prompt_len * sizeof(int32_t)),
	             0);
	for (int k = 0; k < s->prompt_len; k++)
		cr_assert_eq(s->loss_mask[k], 0, "prompt token %d in the loss", k);
	while (i < s->len) {
		int run = 0;
		while (i < s->len && s->loss_mask[i]) {
			cr_assert_leq(s->gen_lp[i - s->prompt_len], 0.0f);
			run++, i++;
		}
		cr_assert_gt(run, 0, "a turn of no tokens at %d", i);
		cr_assert_leq(run, max_new, "a turn of %d tokens, past max_new_tokens", run);
		/* a turn shorter than its budget stopped on a stop token */
		if (run < max_new && i < s->len)
			cr_assert(is_stop(f, s->ids[i - 1]), "turn %d stopped early on %d", turns,
			          s->ids[i - 1]);
		turns++;
		if (i == s->len)
			break;
		for (size_t k = 0; k < n_ab; k++, i++) {
			cr_assert_lt(i, s->len, "an observation cut short");
			cr_assert_eq(s->ids[i], ab[k], "observation token %zu at %d", k, i);
			cr_assert_eq(s->loss_mask[i], 0, "observation token at %d in the loss", i);
			cr_assert_eq(s->gen_lp[i - s->prompt_len], 0.0f);
		}
	}
	free(ab);
	return turns;
}

Test(episodes, the_sample_is_prompt_turns_and_observations_with_the_environments_reward)
{
	struct fx f;
	struct rl_rollout r;
	const char *problems[] = {"12+3", "4+5"};

	fx_open(&f, 64, 4, 3, 5, 2, 8);
	rollout(&r, 2, 2, problems);
	play(&f, &r, 11);
	for (int i = 0; i < r.n; i++) {
		const struct rl_sample *s = &r.s[i];
		int turns = check_layout(&f, s, 4);
		cr_assert_eq(turns, 3, "sample %d: %d turns", i, turns);
		cr_assert_eq(s->turns, 3);
		cr_assert(s->env_scored);
		cr_assert(!s->truncated);
		/* 0.5 after each of the first two turns, 1 at the third */
		cr_assert_float_eq(s->reward, 2.0, 1e-12, "sample %d: %g", i, s->reward);
		cr_assert_eq(rl_sample_loss_tokens(s), s->len - s->prompt_len - 2 * 2);
		cr_assert_not_null(s->response);
	}
	struct rl_reward_failures fail = {0};
	rl_episodes_failures(f.e, &fail);
	cr_assert_eq(fail.crashed + fail.timed_out + fail.bad_output, 0);
	struct rl_episode_stats st;
	rl_episodes_take_stats(f.e, &st);
	cr_assert_eq(st.episodes, 4);
	cr_assert_eq(st.turns, 12);
	cr_assert_eq(st.natural, 4);
	cr_assert_eq(st.env_tokens, 4 * 2 * 2);
	rl_rollout_free(&r);
	fx_close(&f);
}

Test(episodes, the_turn_limit_ends_an_episode_with_the_rewards_it_had)
{
	struct fx f;
	struct rl_rollout r;
	const char *problems[] = {"1+2"};

	/* done at turn 5, but two turns at most */
	fx_open(&f, 64, 3, 5, 2, 1, 8);
	rollout(&r, 1, 3, problems);
	play(&f, &r, 3);
	for (int i = 0; i < r.n; i++) {
		cr_assert_eq(check_layout(&f, &r.s[i], 3), 2);
		cr_assert_eq(r.s[i].turns, 2);
		cr_assert(!r.s[i].truncated);
		cr_assert_float_eq(r.s[i].reward, 1.0, 1e-12, "%g", r.s[i].reward);
	}
	struct rl_episode_stats st;
	rl_episodes_take_stats(f.e, &st);
	cr_assert_eq(st.max_turns_reached, 3);
	rl_rollout_free(&r);
	fx_close(&f);
}

Test(episodes, an_observation_that_does_not_fit_ends_the_episode_truncated)
{
	struct fx f;
	struct rl_rollout r;
	const char *problems[] = {"1+2"};

	/* "1+2=" and 4 tokens per turn: 8 + "ab" (2) + 1 > 10 after the
	 * first turn at the latest when it uses its budget; never done */
	fx_open(&f, 10, 4, 100, 100, 1, 8);
	rollout(&r, 1, 4, problems);
	play(&f, &r, 5);
	for (int i = 0; i < r.n; i++) {
		const struct rl_sample *s = &r.s[i];
		cr_assert(s->truncated, "sample %d", i);
		cr_assert_leq(s->len, 10);
		/* the next observation and one token would not have fit */
		cr_assert_gt(s->len + 2 + 1, 10, "sample %d: %d tokens", i, s->len);
		int turns = check_layout(&f, s, 4);
		cr_assert_eq(s->turns, turns);
		cr_assert_float_eq(s->reward, 0.5 * turns, 1e-12);
	}
	rl_rollout_free(&r);
	fx_close(&f);
}

Test(episodes, an_environment_that_crashes_scores_its_episode_0_and_is_counted)
{
	struct fx f;
	struct rl_rollout r;
	const char *problems[] = {"crash", "1+2"};

	/* one episode per copy: the crash costs its episode alone */
	fx_open(&f, 64, 3, 2, 4, 4, 1);
	rollout(&r, 2, 2, problems);
	play(&f, &r, 9);
	for (int i = 0; i < r.n; i++) {
		if (r.s[i].group == 0) {
			cr_assert_float_eq(r.s[i].reward, 0.0, 0, "sample %d", i);
			cr_assert_eq(r.s[i].turns, 1);
		} else {
			cr_assert_float_eq(r.s[i].reward, 1.5, 1e-12, "sample %d", i);
			cr_assert_eq(r.s[i].turns, 2);
		}
	}
	struct rl_reward_failures fail = {0};
	rl_episodes_failures(f.e, &fail);
	cr_assert_eq(fail.crashed, 2);
	struct rl_episode_stats st;
	rl_episodes_take_stats(f.e, &st);
	cr_assert_eq(st.failed, 2);
	rl_rollout_free(&r);
	fx_close(&f);
}

Test(episodes, a_slow_environment_holds_only_its_own_episode, .timeout = 120)
{
	struct fx f;
	struct rl_rollout r;
	const char *problems[] = {"slow", "1+2", "3+4"};

	/* one episode per copy; done at turn 3 */
	fx_open(&f, 64, 3, 3, 5, 8, 1);
	rollout(&r, 3, 1, problems);
	play(&f, &r, 13);
	for (int i = 0; i < r.n; i++)
		cr_assert_eq(r.s[i].turns, 3);
	/* the two fast episodes played all their three turns before the slow
	 * one's first answer came: they went on while it waited (in lock
	 * step, their second turns would wait for it) */
	size_t log_len;
	char *log = slurp(f.log, &log_len);
	const char *slow1 = strstr(log, "slow 1\n");
	cr_assert_not_null(slow1, "%s", log);
	int fast_before = 0;
	for (const char *p = log; (p = strstr(p, "fast ")) && p < slow1; p++)
		fast_before++;
	cr_assert_eq(fast_before, 6, "the steps answered:\n%s", log);
	free(log);
	rl_rollout_free(&r);
	fx_close(&f);
}

Test(episodes, the_samples_are_the_same_whatever_order_the_environment_answers_in, .timeout = 120)
{
	struct fx a, b;
	struct rl_rollout ra, rb;
	const char *pa[] = {"slow", "1+2"}, *pb[] = {"7+8", "slow"};

	/* the same prompts, "slow" one way and the other: episodes of the
	 * same stream get their observations at other engine steps */
	fx_open(&a, 64, 3, 3, 5, 4, 1);
	fx_open(&b, 64, 3, 3, 5, 4, 1);
	rollout(&ra, 2, 2, pa);
	rollout(&rb, 2, 2, pb);
	/* the prompts the model sees are the same: "P=" with P of the group */
	free(rb.prompts[0]);
	free(rb.prompts[1]);
	rb.prompts[0] = strdup(ra.prompts[0]);
	rb.prompts[1] = strdup(ra.prompts[1]);
	play(&a, &ra, 21);
	play(&b, &rb, 21);
	for (int i = 0; i < ra.n; i++) {
		cr_assert_eq(ra.s[i].len, rb.s[i].len, "sample %d", i);
		cr_assert_eq(
		    memcmp(ra.s[i].ids, rb.s[i].ids, (size_t)ra.s[i].len * sizeof(int32_t)), 0,
		    "sample %d", i);
		cr_assert_eq(memcmp(ra.s[i].gen_lp, rb.s[i].gen_lp,
		                    (size_t)(ra.s[i].len - ra.s[i].prompt_len) * sizeof(float)),
		             0, "sample %d", i);
		cr_assert_eq(memcmp(ra.s[i].loss_mask, rb.s[i].loss_mask, (size_t)ra.s[i].len), 0);
	}
	rl_rollout_free(&ra);
	rl_rollout_free(&rb);
	fx_close(&a);
	fx_close(&b);
}
