/* srun's local context and sbatch/salloc: run as the user, in the user's
 * working directory, before any task exists. The config is made absolute
 * here (the remote working directory may differ) and checked with the same
 * library rlrun uses, so a bad config fails the submission instead of a
 * job. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"
#include "runtime/plan/node_plan.h"
#include "runtime/plan/spec.h"

/* Loads real with the overrides and reports every problem; 0 when valid.
 * When cfg is not NULL it keeps the loaded config. */
static int check_config(const char *real, char **overrides, size_t n, struct rl_config *cfg)
{
	struct rl_config tmp;
	struct rl_diags diags = {0};
	int rc = rl_config_load(real, overrides, n, cfg ? cfg : &tmp, &diags);
	if (rc == 0 && !cfg)
		rl_config_free(&tmp);
	if (rc != 0 && diags.n > 0) {
		/* the same FILE:LINE:COL lines as `rlrun config`, on the user's terminal */
		char *text = rl_spank_config_errors(&diags, real);
		if (text)
			rl_spank_report(text, false);
		free(text);
	}
	rl_diags_free(&diags);
	return rc == 0 ? 0 : -1;
}

/* Exported even when invalid: Slurm ignores our failure for an `optional`
 * plugin, and then rlrun must fail on the same errors rather than run on
 * some other config. */
static int export_config(const char *real, bool for_steps)
{
	if (setenv("RL_CONFIG", real, 1) != 0 ||
	    (for_steps && setenv(RL_SPANK_JOB_ENV, real, 1) != 0)) {
		slurm_error("%s: cannot set RL_CONFIG: %s", RL_SPANK_PREFIX, strerror(errno));
		return -1;
	}
	return 0;
}

static int resolve(const char *arg, char real[PATH_MAX])
{
	if (!realpath(arg, real)) {
		slurm_error("%s: --rl-config=%s: %s", RL_SPANK_PREFIX, arg, strerror(errno));
		return -1;
	}
	return 0;
}

/* srun, once the step's size is known and before any task starts: the
 * layout, and the model against it (topology/model_fit.h) when its
 * config.json can be read from here (the nodes read it again, where the
 * tasks will: it may live only there). A refusal here is one message,
 * not one per node. --rl-plan prints the layout and groups; placement
 * needs each node's topology, which only the nodes have: their tasks
 * print theirs. */
static int check_plan(spank_t sp, const char *real, const struct rl_config *cfg)
{
	uint32_t world = 0, n_nodes = 0;
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &n_nodes) != ESPANK_SUCCESS || world == 0 ||
	    n_nodes == 0) {
		if (rl_spank.print_plan)
			fprintf(stderr, "%s: --rl-plan: srun did not tell the step's size\n",
			        RL_SPANK_PREFIX);
		return 0;
	}
	struct rl_job_spec spec;
	struct rl_job_plan plan;
	char err[1024], *text = NULL;
	int per = rl_node_tasks_max((int)world, (int)n_nodes);
	/* srun runs as the user, in the user's environment: the hub cache is
	 * this process's */
	if (rl_job_spec_from_config(cfg, (int)world, (int)n_nodes, per, NULL, NULL, &spec, err,
	                            sizeof err) != 0) {
		/* auto on GPUs without the model here: the nodes decide */
		if (rl_spank.print_plan)
			fprintf(stderr, "%s: --rl-plan: %s\n", RL_SPANK_PREFIX, err);
		return 0;
	}
	if (spec.autoplan && spec.use_gpus) {
		if (rl_spank.print_plan)
			fprintf(
			    stderr,
			    "%s: plan: world=%u nodes=%u: policy.parallel: auto is decided on "
			    "the nodes from their topology (each node's first task prints it)\n",
			    RL_SPANK_PREFIX, world, n_nodes);
		return 0;
	}
	if (rl_job_plan_make(&spec, NULL, &plan, err, sizeof err) != 0) {
		if (asprintf(&text, "%s: %s", real, err) < 0)
			text = NULL;
		rl_spank_report(text ? text : err, false);
		free(text);
		return -1;
	}
	if (rl_spank.print_plan) {
		fprintf(stderr, "%s: plan: %s\n", RL_SPANK_PREFIX, plan.summary);
		rl_layout_print_groups(&plan.layout, stderr, RL_SPANK_PREFIX ":   ");
	}
	return 0;
}

int rl_spank_local_user_init(spank_t sp)
{
	const char *arg = rl_spank.config_arg;
	/* inside an allocation made with --rl-config, steps inherit it */
	if (!arg && getenv(RL_SPANK_JOB_ENV) && *getenv(RL_SPANK_JOB_ENV))
		arg = getenv(RL_SPANK_JOB_ENV);
	if (!arg)
		return 0;
	if (rl_spank.error) {
		rl_spank_report(rl_spank.error, false);
		return -1;
	}
	char real[PATH_MAX];
	if (resolve(arg, real) != 0)
		return -1;
	int argc = 0;
	char **argv = NULL, **overrides = NULL;
	size_t n = 0;
	/* KEY=VALUE arguments after rlrun are overrides that rlrun will apply
	 * too: validate with them, so that both see the same config */
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS)
		n = rl_step_overrides(&rl_spank.args, argc, argv, &overrides);
	struct rl_config cfg;
	int rc = check_config(real, overrides, n, &cfg);
	free(overrides);
	if (export_config(real, false) != 0)
		rc = -1;
	if (rc == 0) {
		if (check_plan(sp, real, &cfg) != 0)
			rc = -1;
		rl_config_free(&cfg);
	}
	return rc;
}

/* srun's own command line: before the allocation there is no S_JOB_ARGV,
 * but the step's command is the tail of srun's argv. Fills argv (pointers
 * into *buf); returns argc, 0 when unreadable. */
static int own_argv(char **buf, char ***argv)
{
	*buf = NULL;
	*argv = NULL;
	FILE *f = fopen("/proc/self/cmdline", "r");
	if (!f)
		return 0;
	size_t len = 0, cap = 0;
	char *data = NULL;
	for (int c; (c = fgetc(f)) != EOF;) {
		if (len + 2 > cap) {
			char *grown = realloc(data, cap = cap ? 2 * cap : 4096);
			if (!grown) {
				free(data);
				fclose(f);
				return 0;
			}
			data = grown;
		}
		data[len++] = (char)c;
	}
	fclose(f);
	if (!data)
		return 0;
	data[len] = '\0';
	int argc = 0;
	for (size_t i = 0; i < len; i++)
		argc += data[i] == '\0';
	char **v = calloc((size_t)argc + 1, sizeof *v);
	if (!v) {
		free(data);
		return 0;
	}
	int n = 0;
	for (size_t i = 0; i < len && n < argc; i += strlen(data + i) + 1)
		v[n++] = data + i;
	*buf = data;
	*argv = v;
	return n;
}

/* srun, before it asks for an allocation: a config that cannot run fails
 * here, so no job is created and cancelled for it. The overrides come from
 * the step's command in srun's argv: the arguments after the first one
 * that names rlrun. local_user_init checks again with the authoritative
 * S_JOB_ARGV. */
/* Before the job exists: the plugstack line's error, then the file. */
static int resolve_option(char real[PATH_MAX])
{
	if (rl_spank.error) {
		rl_spank_report(rl_spank.error, false);
		return -1;
	}
	return resolve(rl_spank.config_arg, real);
}

int rl_spank_local_post_opt(spank_t sp)
{
	(void)sp;
	char real[PATH_MAX];
	if (resolve_option(real) != 0)
		return -1;
	char *buf, **argv, **overrides = NULL;
	int argc = own_argv(&buf, &argv);
	size_t n = 0;
	for (int i = 1; i < argc && n == 0 && !overrides; i++)
		n = rl_step_overrides(&rl_spank.args, argc - i, argv + i, &overrides);
	int rc = check_config(real, overrides, n, NULL);
	free(overrides);
	free(argv);
	free(buf);
	return rc;
}

int rl_spank_allocator_post_opt(spank_t sp)
{
	(void)sp;
	char real[PATH_MAX];
	if (resolve_option(real) != 0)
		return -1;
	int rc = check_config(real, NULL, 0, NULL);
	if (export_config(real, true) != 0)
		rc = -1;
	return rc;
}
