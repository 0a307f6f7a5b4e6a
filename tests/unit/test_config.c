/* The config language against hand-written configs on disk: inheritance,
 * overrides, references, every kind of error with its position, and the
 * resolved-config printer read back by the loader. */
#include "tests/unit/helpers.h"

#include <math.h>
#include <sys/stat.h>

static const char *srcdir(void)
{
	const char *s = getenv("top_srcdir");
	return s ? s : ".";
}

static char *src_path(const char *rel)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", srcdir(), rel), 0);
	return p;
}

/* Loads text as a file in a temporary directory; returns the load status. */
static int load_text(const char *text, char *const *ov, size_t n, struct rl_config *cfg,
                     struct rl_diags *d)
{
	char *dir = tmp_dir();
	char *path = write_file(dir, "c.yaml", text);
	int rc = rl_config_load(path, ov, n, cfg, d);
	remove_tree(dir);
	free(path);
	free(dir);
	return rc;
}

#define MINIMAL "policy:\n  model_name: m\ndata:\n  dataset_name: copy\n"

Test(config, example_tiny_loads_with_file_values_and_defaults)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *p = src_path("etc/examples/grpo-tiny.yaml");
	cr_assert_eq(rl_config_load(p, NULL, 0, &c, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(c.grpo.num_prompts_per_step, 64);
	cr_expect_eq(c.grpo.max_num_epochs, 1, "a default from the table");
	cr_expect_str_eq(c.loss_fn.reference_policy_kl_type, "k3");
	cr_expect_float_eq(c.policy.optimizer.lr, 1.0e-3, 1e-15);
	cr_assert_eq(c.policy.optimizer.betas.n, 2);
	cr_expect_float_eq(c.policy.optimizer.betas.v[1], 0.99, 1e-15);
	cr_expect_str_eq(c.policy.tokenizer_name, c.policy.model_name,
	                 "null tokenizer follows the model");
	cr_expect_eq(c.data.max_input_seq_length.value, 16,
	             "a ${} reference to an int stays an int");
	cr_expect_eq(c.policy.sequence_packing.train_mb_tokens.value, 16 * 64);
	cr_expect(!c.policy.generation.top_k.set);
	cr_expect(!c.policy.parallel.autoplan);
	rl_config_free(&c);
	rl_diags_free(&d);
	free(p);
}

Test(config, override_reaches_inherited_key_and_references_see_it)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *p = src_path("tests/configs/chain/child.yaml");
	char *ov[] = {"policy.max_total_sequence_length=256", "++grpo.num_prompts_per_step=3"};
	cr_assert_eq(rl_config_load(p, ov, 2, &c, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(c.grpo.seed, 3, "the file itself wins over its defaults");
	cr_expect_str_eq(c.policy.model_name, "models/middle",
	                 "the middle file wins over the base");
	cr_expect_eq(c.grpo.num_generations_per_prompt, 2, "deep merge keeps the base's siblings");
	cr_expect_eq(c.grpo.num_prompts_per_step, 3,
	             "an override reaches a key only the base sets");
	cr_expect_eq(c.policy.generation.max_new_tokens.value, 256,
	             "a reference resolved after overrides sees the overridden value");
	cr_expect_str_eq(c.data.dataset_name, "copy");
	rl_config_free(&c);
	rl_diags_free(&d);
	free(p);
}

Test(config, defaults_list_later_entries_win)
{
	char *dir = tmp_dir();
	free(write_file(dir, "a.yaml", "grpo:\n  seed: 1\n  max_num_steps: 7\n"));
	free(write_file(dir, "b.yaml", "grpo:\n  seed: 2\n"));
	char *p = write_file(dir, "c.yaml", "defaults: [a.yaml, b.yaml]\n" MINIMAL);
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_eq(rl_config_load(p, NULL, 0, &c, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(c.grpo.seed, 2);
	cr_expect_eq(c.grpo.max_num_steps, 7);
	rl_config_free(&c);
	rl_diags_free(&d);
	remove_tree(dir);
	free(p);
	free(dir);
}

Test(config, defaults_cycle_is_an_error_naming_the_chain)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *p = src_path("tests/configs/chain/cycle_a.yaml");
	cr_assert_neq(rl_config_load(p, NULL, 0, &c, &d), 0);
	char *t = diag_text(&d);
	expect_contains(t, "cycle_b.yaml:1:11: error: defaults: cycle in defaults:");
	expect_contains(t, "cycle_a.yaml -> ");
	free(t);
	rl_diags_free(&d);
	free(p);
}

Test(config, missing_defaults_file_points_at_the_entry)
{
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(load_text("# x\ndefaults: nope.yaml\n" MINIMAL, NULL, 0, &c, &d), 0);
	cr_assert_eq(d.n, 1);
	cr_expect_eq(d.v[0].line, 2);
	cr_expect_eq(d.v[0].col, 11);
	cr_expect(strstr(d.v[0].msg, "nope.yaml") != NULL);
	rl_diags_free(&d);
}

Test(config, four_errors_each_with_its_position)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *p = src_path("tests/configs/four-errors.yaml");
	cr_assert_neq(rl_config_load(p, NULL, 0, &c, &d), 0);
	char *t = diag_text(&d);
	cr_assert_eq(d.n, 4, "%s", t);
	const struct rl_diag *e;
	cr_assert_not_null(e = find_diag(&d, "grpo.num_prompts_per_stepp"), "%s", t);
	cr_expect(e->line == 5 && e->col == 3);
	cr_expect(strstr(e->msg, "did you mean grpo.num_prompts_per_step?") != NULL, "%s", e->msg);
	cr_assert_not_null(e = find_diag(&d, "grpo.num_generations_per_prompt"), "%s", t);
	cr_expect(e->line == 6 && e->col == 31, "%d:%d", e->line, e->col);
	cr_expect(strstr(e->msg, "expected an integer") != NULL);
	cr_assert_not_null(e = find_diag(&d, "policy.generation.top_p"), "%s", t);
	cr_expect(e->line == 10 && e->col == 12, "%d:%d", e->line, e->col);
	cr_expect(strstr(e->msg, "out of range: expected a value in (0, 1]") != NULL, "%s", e->msg);
	cr_assert_eq(d.v[3].line, 12, "%s", t);
	cr_expect_eq(d.v[3].col, 11);
	cr_expect(strstr(d.v[3].msg, "undefined reference ${policy.no_such_key}") != NULL, "%s", t);
	free(t);
	rl_diags_free(&d);
	free(p);
}

Test(config, wrong_types_are_named)
{
	struct rl_config c;
	struct rl_diags d = {0};
	const char *text = MINIMAL "grpo:\n"
	                           "  normalize_rewards: yes\n" /* 6 */
	                           "  seed: \"5\"\n"            /* 7 */
	                           "  max_num_steps: [1]\n"     /* 8 */
	                           "checkpointing:\n"
	                           "  checkpoint_dir: {a: 1}\n" /* 10 */
	                           "loss_fn:\n"
	                           "  reference_policy_kl_type: k4\n"; /* 12 */
	cr_assert_neq(load_text(text, NULL, 0, &c, &d), 0);
	char *t = diag_text(&d);
	cr_assert_eq(d.n, 5, "%s", t);
	expect_contains(t, ":6:22: error: grpo.normalize_rewards: expected true or false, got yes");
	expect_contains(t, ":7:9: error: grpo.seed: expected an integer, got \"5\"");
	expect_contains(t, ":8:18: error: grpo.max_num_steps: expected an integer, got a list");
	cr_expect(
	    strstr(
	        t,
	        ":10:19: error: checkpointing.checkpoint_dir: expected a string, got a mapping") !=
	        NULL,
	    "%s", t);
	expect_contains(t, ":12:29: error: loss_fn.reference_policy_kl_type: expected one of "
	                   "k1|k2|k3, got k4");
	free(t);
	rl_diags_free(&d);
}

Test(config, missing_required_key_points_at_its_section)
{
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(
	    load_text(
	        "grpo:\n  seed: 1\npolicy:\n  precision: float32\ndata:\n  dataset_name: copy\n",
	        NULL, 0, &c, &d),
	    0);
	cr_assert_eq(d.n, 1);
	cr_expect_str_eq(d.v[0].key, "policy.model_name");
	cr_expect(d.v[0].line == 3 && d.v[0].col == 1);
	cr_expect(strstr(d.v[0].msg, "missing required key") != NULL);
	rl_diags_free(&d);
}

Test(config, nemo_rl_keys_we_lack_say_not_supported)
{
	struct rl_config c;
	struct rl_diags d = {0};
	const char *text = MINIMAL "logger:\n  wandb_enabled: false\n  mlflow_enabled: true\n"
	                           "policy_x: 1\n";
	/* an enabled block NeMo-RL has and slurm-rl lacks, inside an enabled
	 * backend block */
	char *ov[] = {"policy.dtensor_cfg.enabled=true",
	              "policy.dtensor_cfg.lora_cfg.enabled=true"};
	cr_assert_neq(load_text(text, ov, 2, &c, &d), 0);
	char *t = diag_text(&d);
	cr_assert_eq(d.n, 3, "%s", t);
	expect_contains(t, "logger.mlflow_enabled: not supported yet");
	expect_contains(t, "<command line>:2:1: error: policy.dtensor_cfg.lora_cfg: not supported "
	                   "yet");
	expect_contains(t, "policy_x: unknown key; did you mean policy?");
	free(t);
	rl_diags_free(&d);
}

Test(config, references_keep_types_and_interpolate_strings)
{
	struct rl_config c;
	struct rl_diags d = {0};
	const char *text =
	    MINIMAL "grpo:\n  seed: 7\n  max_num_steps: ${grpo.seed}\n"
	            "checkpointing:\n  checkpoint_dir: runs/s${grpo.seed}/\\${literal}\n"
	            "logger:\n  log_dir: ${checkpointing.checkpoint_dir}\n";
	cr_assert_eq(load_text(text, NULL, 0, &c, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(c.grpo.max_num_steps, 7);
	cr_expect_str_eq(c.checkpointing.checkpoint_dir, "runs/s7/${literal}");
	cr_expect_str_eq(c.logger.log_dir, "runs/s7/${literal}");
	rl_config_free(&c);
	rl_diags_free(&d);
}

/* NeMo-RL's resolvers with Python's arithmetic, nested and relative
 * references: values worked by hand. */
Test(config, nemo_rl_resolvers_nest_and_keep_python_types)
{
	struct rl_config c;
	struct rl_diags d = {0};
	setenv("RL_TEST_RESOLVER_DIR", "from-env", 1);
	const char *text = MINIMAL
	    "grpo:\n  seed: 7\n  max_num_steps: ${mul:${grpo.seed}, ${mul:2, 3}}\n"
	    "  max_num_epochs: ${max:${.seed}, 3}\n  val_period: ${min:${..grpo.seed}, 3}\n"
	    "  val_batch_size: ${add:1,${grpo.seed}}\n"
	    "loss_fn:\n  reference_policy_kl_penalty: ${div:7,2}\n"
	    "  ratio_clip_max: ${div:4,2}\n"
	    "logger:\n  log_dir: ${oc.env:RL_TEST_RESOLVER_DIR}/${oc.env:RL_NO_SUCH_VAR_X,dflt}\n";
	cr_assert_eq(load_text(text, NULL, 0, &c, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(c.grpo.max_num_steps, 42);
	cr_expect_eq(c.grpo.max_num_epochs, 7);
	cr_expect_eq(c.grpo.val_period, 3);
	cr_expect_eq(c.grpo.val_batch_size, 8);
	cr_expect_float_eq(c.loss_fn.reference_policy_kl_penalty, 3.5, 0);
	/* true division: a float even when exact */
	cr_expect_float_eq(c.loss_fn.ratio_clip_max, 2.0, 0);
	cr_expect_str_eq(c.logger.log_dir, "from-env/dflt");
	rl_config_free(&c);
	rl_diags_free(&d);
	/* div gives a float, which an int key refuses, as NeMo-RL's would */
	const char *bad = MINIMAL "grpo:\n  max_num_steps: ${div:4,2}\n";
	cr_assert_neq(load_text(bad, NULL, 0, &c, &d), 0);
	char *t = diag_text(&d);
	expect_contains(t, "grpo.max_num_steps: expected an integer, got 2.0");
	free(t);
	rl_diags_free(&d);
}

Test(config, reference_errors)
{
	struct rl_config c;
	struct rl_diags d = {0};
	const char *text =
	    MINIMAL "grpo:\n  seed: ${grpo.max_num_steps}\n  max_num_steps: ${grpo.seed}\n"
	            "  max_num_epochs: ${nope:2,3}\n";
	cr_assert_neq(load_text(text, NULL, 0, &c, &d), 0);
	char *t = diag_text(&d);
	expect_contains(t, "reference cycle");
	expect_contains(t, ":8:19: error: grpo.max_num_epochs: unknown resolver nope");
	free(t);
	rl_diags_free(&d);
}

Test(config, parallel_auto_and_back)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *ov1[] = {"policy.parallel=auto"};
	cr_assert_eq(load_text(MINIMAL, ov1, 1, &c, &d), 0, "%s", diag_text(&d));
	cr_expect(c.policy.parallel.autoplan);
	rl_config_free(&c);
	char *ov2[] = {"policy.parallel.tensor=2"};
	cr_assert_eq(
	    load_text("policy:\n  model_name: m\n  parallel: auto\ndata:\n  dataset_name: copy\n",
	              ov2, 1, &c, &d),
	    0, "%s", diag_text(&d));
	cr_expect(!c.policy.parallel.autoplan, "an explicit size replaces auto");
	cr_expect_eq(c.policy.parallel.tensor, 2);
	rl_config_free(&c);
	rl_diags_free(&d);
}

Test(config, env_entries_get_defaults)
{
	struct rl_config c;
	struct rl_diags d = {0};
	const char *text =
	    MINIMAL "env:\n  math: {}\n  judge:\n    command: ./judge.py\n    timeout: 5\n"
	            "    sample_timeout: 0.5\n";
	cr_assert_eq(load_text(text, NULL, 0, &c, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(c.n_env, 2);
	const struct rl_cfg_env *e = rl_config_env(&c, "judge");
	cr_assert_not_null(e);
	/* beside the config file (see relative_paths_resolve_...) */
	cr_expect(e->command[0] == '/' && strstr(e->command, "/judge.py"), "%s", e->command);
	cr_expect_float_eq(e->timeout, 5.0, 0);
	cr_expect(e->sample_timeout.set && e->sample_timeout.value == 0.5);
	cr_expect(!rl_config_env(&c, "math")->sample_timeout.set,
	          "sample_timeout defaults to null");
	cr_expect(!e->num_workers.set, "num_workers defaults to null (the rank's CPUs)");
	cr_expect_null(rl_config_env(&c, "math")->command);
	rl_config_free(&c);
	rl_diags_free(&d);
}

Test(config, override_syntax_errors_point_into_the_argument)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *ov[] = {"grpo.seed=1", "noequals", "grpo.seed=[1,", "grpo..seed=2"};
	cr_assert_neq(load_text(MINIMAL, ov, 4, &c, &d), 0);
	char *t = diag_text(&d);
	cr_expect_eq(d.n, 3, "%s", t);
	expect_contains(t, "<command line>:2:1: error: 'noequals': expected KEY=VALUE");
	expect_contains(t, "<command line>:3:");
	expect_contains(t, "<command line>:4:1: error: 'grpo..seed=2'");
	free(t);
	rl_diags_free(&d);
}

Test(config, yaml_syntax_error_has_libyaml_position)
{
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(load_text("grpo:\n  seed: [1, 2\n", NULL, 0, &c, &d), 0);
	cr_assert_eq(d.n, 1);
	cr_expect(strstr(d.v[0].msg, "YAML syntax") != NULL, "%s", d.v[0].msg);
	cr_expect_geq(d.v[0].line, 2);
	rl_diags_free(&d);
}

Test(config, duplicate_keys_and_aliases)
{
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(load_text("grpo:\n  seed: 1\n  seed: 2\n", NULL, 0, &c, &d), 0);
	cr_expect(strstr(d.v[0].msg, "duplicate key") != NULL);
	cr_expect_eq(d.v[0].line, 3);
	rl_diags_free(&d);
	const char *ok = MINIMAL "grpo:\n  seed: &s 9\n  max_num_steps: *s\n";
	cr_assert_eq(load_text(ok, NULL, 0, &c, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(c.grpo.max_num_steps, 9);
	rl_config_free(&c);
	rl_diags_free(&d);
}

Test(config, alias_bombs_are_refused)
{
	/* each level doubles: 2^30 nodes if expanded */
	char text[4096] = "a0: &a0 [x, x]\n";
	for (int i = 1; i <= 30; i++) {
		char line[64];
		snprintf(line, sizeof(line), "a%d: &a%d [*a%d, *a%d]\n", i, i, i - 1, i - 1);
		strcat(text, line);
	}
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(load_text(text, NULL, 0, &c, &d), 0);
	cr_expect(strstr(d.v[0].msg, "too large") != NULL, "%s", d.v[0].msg);
	rl_diags_free(&d);
}

Test(config, rules_between_keys)
{
	struct rl_config c;
	struct rl_diags d = {0};
	const char *text = MINIMAL "loss_fn:\n  sequence_level_importance_ratios: true\n"
	                           "grpo:\n  async_grpo:\n    enabled: true\n";
	cr_assert_neq(load_text(text, NULL, 0, &c, &d), 0);
	char *t = diag_text(&d);
	cr_expect_eq(d.n, 3, "%s", t);
	expect_contains(t, ":6:3: error: loss_fn.sequence_level_importance_ratios: sequence-level");
	expect_contains(t, ":9:5: error: grpo.async_grpo.enabled: asynchronous GRPO needs "
	                   "loss_fn.use_importance_sampling_correction");
	expect_contains(t, ":9:5: error: grpo.async_grpo.enabled: asynchronous GRPO needs "
	                   "policy.generation.colocated.enabled: false");
	free(t);
	rl_diags_free(&d);
}

Test(config, unreadable_files)
{
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(rl_config_load("/nonexistent/x.yaml", NULL, 0, &c, &d), 0);
	cr_expect(strstr(d.v[0].msg, "No such file") != NULL);
	rl_diags_free(&d);
	cr_assert_neq(rl_config_load("/tmp", NULL, 0, &c, &d), 0);
	cr_expect(strstr(d.v[0].msg, "not a regular file") != NULL);
	rl_diags_free(&d);
}

/* The printer's output, read back, prints the same: every value survives,
 * including strings that look like other types. */
Test(config, resolved_yaml_reads_back_identically)
{
	char *dir = tmp_dir();
	const char *good =
	    "policy:\n  model_name: m\n  tokenizer:\n    name: \"true\"\n"
	    "  generation:\n    stop_strings: [\"</s>\", \"null\", \"\"]\n"
	    "    stop_token_ids: [1, 2]\n    top_k: 5\n  parallel: auto\n"
	    "data:\n  dataset_name: copy\n"
	    "checkpointing:\n  checkpoint_dir: \"123\"\n  metric_name: \"a: b # c\"\n"
	    "logger:\n  log_dir: \"l\\u00f6gs/\\t\\\\${x}\"\n"
	    "env:\n  x:\n    timeout: 0.1\n";
	char *p1 = write_file(dir, "in.yaml", good);
	struct rl_config c1, c2;
	struct rl_diags d = {0};
	cr_assert_eq(rl_config_load(p1, NULL, 0, &c1, &d), 0, "%s", diag_text(&d));
	cr_expect_str_eq(c1.logger.log_dir, "l\xc3\xb6gs/\t${x}");
	char *out1 = NULL, *out2 = NULL;
	size_t n1 = 0, n2 = 0;
	FILE *f = open_memstream(&out1, &n1);
	cr_assert_eq(rl_config_write_yaml(&c1, f), 0);
	fclose(f);
	char *p2 = write_file(dir, "out.yaml", out1);
	cr_assert_eq(rl_config_load(p2, NULL, 0, &c2, &d), 0, "%s\n%s", diag_text(&d), out1);
	f = open_memstream(&out2, &n2);
	cr_assert_eq(rl_config_write_yaml(&c2, f), 0);
	fclose(f);
	cr_expect_str_eq(out1, out2);
	cr_expect_str_eq(c2.policy.tokenizer_name, "true");
	cr_expect_str_eq(c2.checkpointing.checkpoint_dir, "123");
	cr_expect_str_eq(c2.checkpointing.metric_name, "a: b # c");
	cr_assert_eq(c2.policy.generation.stop_strings.n, 3);
	cr_expect_str_eq(c2.policy.generation.stop_strings.v[1], "null");
	cr_expect_str_eq(c2.policy.generation.stop_strings.v[2], "");
	cr_expect(c2.policy.parallel.autoplan);
	cr_expect_float_eq(rl_config_env(&c2, "x")->timeout, 0.1, 0);
	cr_expect_str_eq(c2.logger.log_dir, "l\xc3\xb6gs/\t${x}");
	rl_config_free(&c1);
	rl_config_free(&c2);
	free(out1);
	free(out2);
	remove_tree(dir);
	free(p1);
	free(p2);
	free(dir);
	rl_diags_free(&d);
}

/* Derived sizes multiply keys together: the table's bounds keep that from
 * overflowing, and a number too large for int64 is not an integer. */
Test(config, sizes_are_bounded_before_they_multiply)
{
	struct rl_config c;
	struct rl_diags d = {0};
	char *ov[] = {"policy.max_total_sequence_length=9223372036854775807",
	              "policy.train_micro_batch_size=99999999999999999999"};
	cr_assert_neq(load_text(MINIMAL, ov, 2, &c, &d), 0);
	char *t = diag_text(&d);
	cr_expect_eq(d.n, 2, "%s", t);
	expect_contains(t,
	                "<command line>:1:34: error: policy.max_total_sequence_length: "
	                "9223372036854775807 is out of range: expected a value in [2, 16777216]");
	expect_contains(t, "<command line>:2:31: error: policy.train_micro_batch_size: expected an "
	                   "integer, got 99999999999999999999");
	free(t);
	rl_diags_free(&d);
}

/* Relative input paths name files beside the file that wrote them: a
 * parent in another directory resolves against its own; an override
 * against the working directory; a model name only where it exists there. */
Test(config, relative_paths_resolve_against_their_files_directory)
{
	char *dir = tmp_dir(), *sub = NULL, *base = NULL, *model = NULL, *cwd = getcwd(NULL, 0);
	cr_assert_geq(asprintf(&sub, "%s/sub", dir), 0);
	cr_assert_geq(asprintf(&base, "%s/base", dir), 0);
	cr_assert_geq(asprintf(&model, "%s/sub/my-model", dir), 0);
	cr_assert_eq(mkdir(sub, 0700), 0);
	cr_assert_eq(mkdir(base, 0700), 0);
	cr_assert_eq(mkdir(model, 0700), 0);
	char *parent = write_file(base, "parent.yaml",
	                          "data:\n  validation:\n    path: val.jsonl\n"
	                          "  system_prompt_file: ../prompts/system.txt\n");
	char *child = write_file(sub, "child.yaml",
	                         "defaults: ../base/parent.yaml\n"
	                         "policy:\n  model_name: my-model\n  tokenizer:\n"
	                         "    name: Qwen/Qwen3-8B\n    chat_template: tpl/chat.jinja\n"
	                         "data:\n  train:\n    path: ./data/train.jsonl\n"
	                         "  prompt_file: /abs/prompt.txt\n"
	                         "env:\n  judge:\n    command: rewards/judge.sh --strict\n"
	                         "  py:\n    command: python3 score.py\n");
	char *ov[] = {"data.prompt_file=p.txt"};
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_eq(rl_config_load(child, ov, 1, &c, &d), 0, "%s", diag_text(&d));
	char *want = NULL;
	cr_assert_geq(asprintf(&want, "%s/data/train.jsonl", sub), 0);
	cr_expect_str_eq(c.data.train_path, want);
	free(want);
	cr_assert_geq(asprintf(&want, "%s/val.jsonl", base), 0);
	cr_expect_str_eq(c.data.validation_path, want);
	free(want);
	cr_assert_geq(asprintf(&want, "%s/../prompts/system.txt", base), 0);
	cr_expect_str_eq(c.data.system_prompt_file, want);
	free(want);
	cr_assert_geq(asprintf(&want, "%s/p.txt", cwd), 0);
	cr_expect_str_eq(c.data.prompt_file, want, "an override resolves against the cwd");
	free(want);
	cr_expect_str_eq(c.policy.model_name, model, "exists beside the config");
	cr_expect_str_eq(c.policy.tokenizer_name, "Qwen/Qwen3-8B", "a hub name stays as written");
	cr_assert_geq(asprintf(&want, "%s/tpl/chat.jinja", sub), 0);
	cr_expect_str_eq(c.policy.chat_template, want, "a .jinja template file beside the config");
	free(want);
	cr_assert_geq(asprintf(&want, "%s/rewards/judge.sh --strict", sub), 0);
	cr_expect_str_eq(rl_config_env(&c, "judge")->command, want);
	free(want);
	cr_expect_str_eq(rl_config_env(&c, "py")->command, "python3 score.py",
	                 "a program without a slash is looked up in PATH");
	rl_config_free(&c);
	rl_diags_free(&d);
	remove_tree(dir);
	free(parent);
	free(child);
	free(dir);
	free(sub);
	free(base);
	free(model);
	free(cwd);
}
