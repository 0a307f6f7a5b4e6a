#define _GNU_SOURCE
/* The plugin's decisions without SPANK: see step.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/inputs.h"
#include "spank/step.h"

int rl_spank_args_parse(int ac, char **av, struct rl_spank_args *args, char *err, size_t errlen)
{
	memset(args, 0, sizeof *args);
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		char **slot = NULL;
		if (eq && strncmp(av[i], "rlrun=", 6) == 0)
			slot = &args->rlrun;
		else if (eq && strncmp(av[i], "topology=", 9) == 0)
			slot = &args->topology;
		if (!slot || !eq[1]) {
			snprintf(
			    err, errlen,
			    "plugstack.conf: argument '%s': expected rlrun=PATH or topology=FILE",
			    av[i]);
			rl_spank_args_free(args);
			return -1;
		}
		free(*slot);
		if (!(*slot = strdup(eq + 1))) {
			snprintf(err, errlen, "out of memory");
			rl_spank_args_free(args);
			return -1;
		}
	}
	return 0;
}

void rl_spank_args_free(struct rl_spank_args *args)
{
	free(args->rlrun);
	free(args->topology);
	memset(args, 0, sizeof *args);
}

static bool is_rlrun(const struct rl_spank_args *args, const char *prog)
{
	const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
	return strcmp(base, "rlrun") == 0 ||
	       (args && args->rlrun && strcmp(prog, args->rlrun) == 0);
}

size_t rl_step_overrides(const struct rl_spank_args *args, int argc, char **argv, char ***out)
{
	*out = NULL;
	if (argc < 1 || !argv || !argv[0] || !is_rlrun(args, argv[0]))
		return 0;
	char **v = calloc((size_t)argc, sizeof *v);
	size_t n = 0;
	for (int i = 1; v && i < argc; i++)
		if (argv[i][0] != '-' && strchr(argv[i], '='))
			v[n++] = argv[i];
	*out = v;
	return n;
}

static char *message(const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	return text;
}

char *rl_spank_config_errors(struct rl_diags *diags, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem)
		return NULL;
	rl_diags_print(diags, mem);
	fprintf(mem, "%zu error%s in %s", diags->n, diags->n == 1 ? "" : "s", path);
	fclose(mem);
	return text;
}

/* The node's tasks must be consecutive ranks: placement keeps the stride-1
 * axes (TP, CP) on one node's NVLink domain by that. */
static char *check_block(const struct rl_step_inputs *in)
{
	for (int i = 1; i < in->n_local; i++)
		if (in->global_ids[i] != in->global_ids[0] + i)
			return message(
			    "node %d holds tasks %d and %d, not consecutive ranks: slurm-rl "
			    "needs the block distribution (srun -m block, the default)",
			    in->node_id, in->global_ids[0], in->global_ids[i]);
	return NULL;
}

int rl_spank_step_prepare(const struct rl_step_inputs *in, struct rl_spank_step **out, char **error)
{
	*out = NULL;
	*error = NULL;
	if (!in->config_path || !*in->config_path) {
		*error = message("RL_CONFIG is not set in the job's environment");
		return -1;
	}
	if (in->n_local < 1 || !in->global_ids) {
		*error = message("no task on node %d", in->node_id);
		return -1;
	}
	if ((*error = check_block(in)))
		return -1;
	struct rl_spank_step *s = calloc(1, sizeof *s);
	if (!s) {
		*error = message("out of memory");
		return -1;
	}
	struct rl_diags diags = {0};
	if (rl_config_load(in->config_path, in->overrides, in->n_overrides, &s->cfg, &diags) != 0) {
		*error = rl_spank_config_errors(&diags, in->config_path);
		rl_diags_free(&diags);
		free(s);
		return -1;
	}
	rl_diags_free(&diags);
	char err[1024];
	/* here, as the user, in the step's directory: where the tasks read */
	if (rl_plan_check_inputs(&s->cfg, in->hub, err, sizeof err) != 0) {
		*error = message("%s: %s", in->config_path, err);
		rl_config_free(&s->cfg);
		free(s);
		return -1;
	}
	if (rl_topo_load(&s->topo, in->topology_xml, err, sizeof err) != 0) {
		*error = message("%s", err);
		rl_config_free(&s->cfg);
		free(s);
		return -1;
	}
	s->live_topology = !in->topology_xml;
	struct rl_node_inputs ni = {
	    .cfg = &s->cfg,
	    .config_path = in->config_path,
	    .topo = &s->topo,
	    .world = in->world,
	    .n_nodes = in->n_nodes,
	    .node_id = in->node_id,
	    .first_rank = in->global_ids[0],
	    .n_local = in->n_local,
	    .slurm_step_gpus = in->slurm_step_gpus,
	    .cuda_visible_devices = in->cuda_visible_devices,
	    .hub = in->hub,
	};
	if (rl_node_plan_make(&ni, &s->plan, err, sizeof err) != 0) {
		*error = message("%s: %s", in->config_path, err);
		rl_spank_step_free(s);
		return -1;
	}
	/* a config.json that opens but does not parse: no layout check */
	if (!s->plan.job.spec.have_model) {
		*error = message("%s: %s", in->config_path, s->plan.job.spec.model_error);
		rl_spank_step_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

int rl_spank_step_task_env(const struct rl_spank_step *s, int local_id, struct rl_env *env)
{
	if (local_id < 0 || local_id >= s->plan.node.n_tasks)
		return -1;
	return rl_node_plan_task_env(&s->plan, local_id, env);
}

void rl_spank_step_free(struct rl_spank_step *s)
{
	if (!s)
		return;
	rl_node_plan_free(&s->plan);
	rl_topo_free(&s->topo);
	rl_config_free(&s->cfg);
	free(s);
}
