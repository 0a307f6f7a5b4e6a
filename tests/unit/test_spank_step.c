#define _GNU_SOURCE
/* The plugin's decisions without Slurm (spank/step.c): plugstack arguments,
 * the overrides taken from the step's command, and a node's plan and task
 * environments on the fixture topologies. Expected values come from the
 * fixtures' descriptions (tests/fixtures/make_topologies.py) and Megatron's
 * rank order, worked out by hand below. Also run under valgrind by
 * tests/cli/spank_glue_valgrind.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spank/step.h"

static char dir[] = "/tmp/rl-spank-step-XXXXXX";
static char config_path[4096];
static char xml[4096];

static const char *srcdir(void)
{
	const char *s = getenv("top_srcdir");
	return s && *s ? s : ".";
}

/* a config on top of the example, so that only the keys under test differ */
static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert(f, "cannot write %s", path);
	fprintf(f, "defaults: %s/etc/examples/grpo-tiny.yaml\n%s", srcdir(), text);
	fclose(f);
}

static void setup(void)
{
	cr_assert(mkdtemp(dir));
	snprintf(config_path, sizeof config_path, "%s/grpo.yaml", dir);
	snprintf(xml, sizeof xml, "%s/tests/topologies/dgx-8gpu-2socket.xml", srcdir());
	write_file(config_path, "policy:\n"
	                        "  backend: cuda\n"
	                        "  parallel:\n"
	                        "    tensor: 2\n"
	                        "    pipeline: 1\n");
}

static void teardown(void)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert(system(cmd) == 0);
}

TestSuite(spank_step, .init = setup, .fini = teardown);

Test(spank_step, plugstack_arguments)
{
	struct rl_spank_args a;
	char err[256];
	char *good[] = {"rlrun=/opt/rl/bin/rlrun", "topology=/etc/rl/node.xml"};
	cr_assert_eq(rl_spank_args_parse(2, good, &a, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(a.rlrun, "/opt/rl/bin/rlrun");
	cr_assert_str_eq(a.topology, "/etc/rl/node.xml");
	rl_spank_args_free(&a);

	char *bad[] = {"rlrun=/x", "colour=blue"};
	cr_assert_eq(rl_spank_args_parse(2, bad, &a, err, sizeof err), -1);
	cr_assert(strstr(err, "colour=blue"), "%s", err);
	char *empty[] = {"topology="};
	cr_assert_eq(rl_spank_args_parse(1, empty, &a, err, sizeof err), -1);
	cr_assert_null(a.rlrun);
}

Test(spank_step, overrides_only_for_rlrun_steps)
{
	struct rl_spank_args a = {0};
	char **ov;
	char *rl[] = {"/usr/bin/rlrun", "train", "grpo.seed=3", "--x=y",
	              "policy.parallel.tensor=2"};
	cr_assert_eq(rl_step_overrides(&a, 5, rl, &ov), 2);
	cr_assert_str_eq(ov[0], "grpo.seed=3");
	cr_assert_str_eq(ov[1], "policy.parallel.tensor=2");
	free(ov);

	char *env[] = {"env", "A=b"};
	cr_assert_eq(rl_step_overrides(&a, 2, env, &ov), 0);
	cr_assert_null(ov);

	a.rlrun = "/opt/x/train-rl";
	char *named[] = {"/opt/x/train-rl", "grpo.seed=1"};
	cr_assert_eq(rl_step_overrides(&a, 2, named, &ov), 1);
	free(ov);
}

/* 16 tasks on 2 DGX nodes, TP 2: node 1 holds ranks 8..15. */
static int prepare_node1(struct rl_spank_step **s, char **error, const char *step_gpus,
                         const char *cvd, int n_local)
{
	int ids[8];
	for (int i = 0; i < 8; i++)
		ids[i] = 8 + i;
	struct rl_step_inputs in = {
	    .config_path = config_path,
	    .topology_xml = xml,
	    .world = 16,
	    .n_nodes = 2,
	    .node_id = 1,
	    .n_local = n_local,
	    .global_ids = ids,
	    .slurm_step_gpus = step_gpus,
	    .cuda_visible_devices = cvd,
	};
	return rl_spank_step_prepare(&in, s, error);
}

static void expect_env(const struct rl_env *env, const char *name, const char *want)
{
	const char *got = rl_env_get(env, name);
	cr_assert(got, "%s is not set", name);
	cr_expect_str_eq(got, want, "%s=%s, expected %s", name, got, want);
}

Test(spank_step, dgx_node_task_environment)
{
	struct rl_spank_step *s;
	char *error;
	cr_assert_eq(prepare_node1(&s, &error, "0,1,2,3,4,5,6,7", "0,1,2,3,4,5,6,7", 8), 0, "%s",
	             error);
	struct rl_env env;
	cr_assert_eq(rl_spank_step_task_env(s, 3, &env), 0);
	/* rank 11 = tp + 2 dp: tp 1, dp 5 of 8 */
	expect_env(&env, "RL_CONFIG", config_path);
	expect_env(&env, "RL_RANK", "11");
	expect_env(&env, "RL_WORLD_SIZE", "16");
	expect_env(&env, "RL_LOCAL_RANK", "3");
	expect_env(&env, "RL_NODE_RANK", "1");
	expect_env(&env, "RL_TP_RANK", "1");
	expect_env(&env, "RL_TP_SIZE", "2");
	expect_env(&env, "RL_DP_RANK", "5");
	expect_env(&env, "RL_DP_SIZE", "8");
	expect_env(&env, "RL_PP_SIZE", "1");
	expect_env(&env, "RL_LAYOUT", "tp-cp-ep-dp-pp");
	/* the fourth GPU (bus 26, socket 0) shares its PCIe switch with mlx5_3;
	 * socket 0's 16 cores (PUs 0-15, threads 32-47) split in 4 */
	expect_env(&env, "CUDA_VISIBLE_DEVICES", "3");
	expect_env(&env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	expect_env(&env, "NCCL_IB_HCA", "=mlx5_3");
	expect_env(&env, "RL_CPUS", "12-15,44-47");
	cr_assert(strstr(rl_env_get(&env, "RL_PLAN"), "tp=2 cp=1 ep=1 dp=8 pp=1"));
	rl_env_free(&env);
	cr_assert_eq(rl_spank_step_task_env(s, 8, &env), -1, "only 8 local tasks");
	rl_spank_step_free(s);
}

Test(spank_step, step_gpus_subset_named_as_slurm_names_them)
{
	/* Slurm gave GPUs 4 and 5 (socket 1) and, under ConstrainDevices, calls
	 * them 0 and 1 in CUDA_VISIBLE_DEVICES */
	struct rl_spank_step *s;
	char *error;
	cr_assert_eq(prepare_node1(&s, &error, "4,5", "0,1", 2), 0, "%s", error);
	struct rl_env env;
	cr_assert_eq(rl_spank_step_task_env(s, 1, &env), 0);
	expect_env(&env, "CUDA_VISIBLE_DEVICES", "1");
	expect_env(&env, "NCCL_IB_HCA", "=mlx5_5");
	rl_env_free(&env);
	cr_assert_eq(s->plan.node.tasks[0].gpu, 4);
	cr_assert_eq(s->plan.node.tasks[1].gpu, 5);
	rl_spank_step_free(s);
}

Test(spank_step, errors_are_kept_as_text)
{
	struct rl_spank_step *s;
	char *error;
	cr_assert_eq(prepare_node1(&s, &error, "0,1,9", NULL, 3), -1);
	cr_assert(strstr(error, "SLURM_STEP_GPUS") && strstr(error, "9"), "%s", error);
	free(error);

	cr_assert_eq(prepare_node1(&s, &error, "0,1", NULL, 3), -1, "3 tasks, 2 GPUs");
	cr_assert(strstr(error, "3") && strstr(error, "2"), "%s", error);
	free(error);

	int ids[] = {8, 10};
	struct rl_step_inputs cyclic = {.config_path = config_path,
	                                .topology_xml = xml,
	                                .world = 16,
	                                .n_nodes = 2,
	                                .node_id = 1,
	                                .n_local = 2,
	                                .global_ids = ids};
	cr_assert_eq(rl_spank_step_prepare(&cyclic, &s, &error), -1);
	cr_assert(strstr(error, "block"), "%s", error);
	free(error);

	write_file(config_path, "grpo:\n  num_prompts_per_stepp: 3\n");
	cr_assert_eq(prepare_node1(&s, &error, NULL, NULL, 8), -1);
	cr_assert(strstr(error, "grpo.yaml:3:3"), "FILE:LINE:COL expected in: %s", error);
	free(error);

	struct rl_step_inputs none = {.n_local = 1, .global_ids = ids};
	cr_assert_eq(rl_spank_step_prepare(&none, &s, &error), -1);
	cr_assert(strstr(error, "RL_CONFIG"), "%s", error);
	free(error);
}

Test(spank_step, cpu_tasks_split_numa_domains)
{
	/* cpu-only.xml: NUMA 0 has cores 0-3, NUMA 1 cores 4-7, no SMT. Four
	 * CPU tasks: two per domain, two cores each. No GPU variables. */
	write_file(config_path, "policy:\n  backend: cpu\n");
	snprintf(xml, sizeof xml, "%s/tests/topologies/cpu-only.xml", srcdir());
	int ids[] = {0, 1, 2, 3};
	struct rl_step_inputs in = {.config_path = config_path,
	                            .topology_xml = xml,
	                            .world = 4,
	                            .n_nodes = 1,
	                            .n_local = 4,
	                            .global_ids = ids};
	struct rl_spank_step *s;
	char *error;
	cr_assert_eq(rl_spank_step_prepare(&in, &s, &error), 0, "%s", error);
	const char *want[] = {"0-1", "2-3", "4-5", "6-7"};
	for (int i = 0; i < 4; i++) {
		struct rl_env env;
		cr_assert_eq(rl_spank_step_task_env(s, i, &env), 0);
		expect_env(&env, "RL_CPUS", want[i]);
		char dp[4];
		snprintf(dp, sizeof dp, "%d", i);
		expect_env(&env, "RL_DP_RANK", dp);
		cr_expect_null(rl_env_get(&env, "CUDA_VISIBLE_DEVICES"));
		cr_expect_null(rl_env_get(&env, "NCCL_IB_HCA"));
		rl_env_free(&env);
	}
	cr_assert(!s->live_topology);
	rl_spank_step_free(s);
}

/* 4 CPU tasks on the CPU fixture, with the config's own keys added */
static int prepare_cpu(const char *keys, const struct rl_hub_env *hub, struct rl_spank_step **s,
                       char **error)
{
	char text[4096];
	snprintf(text, sizeof text, "policy:\n  backend: cpu\n%s", keys);
	write_file(config_path, text);
	snprintf(xml, sizeof xml, "%s/tests/topologies/cpu-only.xml", srcdir());
	static int ids[] = {0, 1, 2, 3};
	struct rl_step_inputs in = {.config_path = config_path,
	                            .topology_xml = xml,
	                            .world = 4,
	                            .n_nodes = 1,
	                            .n_local = 4,
	                            .global_ids = ids,
	                            .hub = hub};
	return rl_spank_step_prepare(&in, s, error);
}

Test(spank_step, a_layout_the_model_cannot_take_is_refused)
{
	/* the built-in tiny model has 4 heads and 2 layers */
	struct rl_spank_step *s;
	char *error;
	cr_assert_eq(prepare_cpu("  parallel:\n    tensor: 4\n", NULL, &s, &error), 0, "%s", error);
	rl_spank_step_free(s);
	cr_assert_eq(prepare_cpu("  parallel:\n    pipeline: 4\n", NULL, &s, &error), -1);
	cr_expect(strstr(error, "policy.parallel.pipeline=4: the model's 2 layers "
	                        "(builtin:tiny-llama) do not split into 4 stages"),
	          "%s", error);
	free(error);
	/* the fixture Llama: 4 heads, 2 key/value heads */
	char keys[4096];
	snprintf(keys, sizeof keys,
	         "  model_name: %s/tests/fixtures/models/llama\n  parallel:\n    tensor: 4\n",
	         srcdir());
	cr_assert_eq(prepare_cpu(keys, NULL, &s, &error), -1);
	cr_expect(strstr(error, "policy.parallel.tensor=4 does not divide the model's 2 key/value "
	                        "heads (") &&
	              strstr(error, "tests/fixtures/models/llama/config.json)"),
	          "%s", error);
	free(error);
}

Test(spank_step, missing_model_or_data_is_refused_with_its_key)
{
	struct rl_spank_step *s;
	char *error, keys[8192];

	snprintf(keys, sizeof keys, "  model_name: %s/no-model\n", dir);
	cr_assert_eq(prepare_cpu(keys, NULL, &s, &error), -1);
	cr_expect(strstr(error, "policy.model_name: ") && strstr(error, "/no-model/config.json: "),
	          "%s", error);
	free(error);

	snprintf(keys, sizeof keys,
	         "  model_name: %s/tests/fixtures/models/llama\n"
	         "data:\n  dataset_name: jsonl\n  train:\n    path: %s/no-train.jsonl\n",
	         srcdir(), dir);
	cr_assert_eq(prepare_cpu(keys, NULL, &s, &error), -1);
	cr_expect(strstr(error, "data.train.path: ") &&
	              strstr(error, "/no-train.jsonl: No such file"),
	          "%s", error);
	free(error);

	/* a directory where a file should be */
	snprintf(keys, sizeof keys,
	         "  model_name: %s/tests/fixtures/models/llama\n"
	         "data:\n  dataset_name: jsonl\n  train:\n    path: %s\n",
	         srcdir(), dir);
	cr_assert_eq(prepare_cpu(keys, NULL, &s, &error), -1);
	cr_expect(strstr(error, "data.train.path: ") && strstr(error, "not a regular file"), "%s",
	          error);
	free(error);
}

Test(spank_step, hub_names_from_the_jobs_environment)
{
	/* the fixture Llama as acme/llama's main in a cache made here, told by
	 * the job's environment (in->hub), not this process's */
	char cmd[16384], keys[1024];
	snprintf(
	    cmd, sizeof cmd,
	    "mkdir -p '%s/hub/models--acme--llama/refs' '%s/hub/models--acme--llama/snapshots' "
	    "&& cp -R '%s/tests/fixtures/models/llama' "
	    "'%s/hub/models--acme--llama/snapshots/abc123' "
	    "&& printf abc123 > '%s/hub/models--acme--llama/refs/main'",
	    dir, dir, srcdir(), dir, dir);
	cr_assert_eq(system(cmd), 0);
	char cache[4200];
	snprintf(cache, sizeof cache, "%s/hub", dir);
	struct rl_hub_env hub = {.hub_cache = cache};
	struct rl_spank_step *s;
	char *error;

	snprintf(keys, sizeof keys, "  model_name: acme/llama\n");
	cr_assert_eq(prepare_cpu(keys, &hub, &s, &error), 0, "%s", error);
	cr_expect_eq(s->plan.job.spec.job.model.n_kv_heads, 2);
	rl_spank_step_free(s);

	snprintf(keys, sizeof keys, "  model_name: acme/llama\n  parallel:\n    tensor: 4\n");
	cr_assert_eq(prepare_cpu(keys, &hub, &s, &error), -1);
	cr_expect(strstr(error, "2 key/value heads") &&
	              strstr(error, "/hub/models--acme--llama/snapshots/abc123/config.json"),
	          "%s", error);
	free(error);

	struct rl_hub_env elsewhere = {.hub_cache = dir};
	snprintf(keys, sizeof keys, "  model_name: acme/llama\n");
	cr_assert_eq(prepare_cpu(keys, &elsewhere, &s, &error), -1);
	cr_expect(strstr(error, "policy.model_name: acme/llama is not a directory") &&
	              strstr(error, "huggingface-cli download acme/llama"),
	          "%s", error);
	free(error);
}
