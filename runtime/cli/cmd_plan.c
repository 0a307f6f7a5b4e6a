#define _GNU_SOURCE
/* rlrun plan: the layout and placement a step would get, before anyone
 * copies weights to the cluster: only the config and the model's
 * config.json are read, and the layout is refused when the model cannot
 * take it (topology/model_fit.h), as the plugin and rlrun refuse it. --env RANK prints exactly what
 * the plugin would set in that task (the same code computes both); --explain the planner's time
 * model of one step part by part, with what each part assumes. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/load_config.h"
#include "runtime/cli/parse.h"
#include "runtime/cli/commands.h"
#include "runtime/plan/inputs.h"
#include "runtime/plan/node_plan.h"
#include "runtime/plan/spec.h"

static const char usage[] =
    "usage: rlrun plan [CONFIG] [KEY=VALUE...] [--topology FILE] [--nodes N]\n"
    "                  [--tasks-per-node M] [--step-gpus LIST] [--env RANK] [--explain]\n";

struct plan_opts {
	const char *topology; /* NULL: this machine */
	long nodes;           /* 0: cluster.num_nodes */
	long tasks_per_node;  /* 0: cluster.gpus_per_node, the node's GPUs, or 1 */
	const char *step_gpus;
	long env_rank; /* -1: print the plan */
	bool explain;  /* the step time part by part */
};

/* Splits the options from the config arguments, which keep their order. */
static int parse_opts(int argc, char **argv, struct plan_opts *o, char **rest, int *n_rest)
{
	char err[256];
	*o = (struct plan_opts){.env_rank = -1};
	*n_rest = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		long *num = NULL;
		long lo = 1;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(usage, stdout);
			return 1;
		}
		if (strcmp(a, "--explain") == 0) {
			o->explain = true;
			continue;
		}
		if (strcmp(a, "--topology") == 0 || strcmp(a, "--step-gpus") == 0) {
			if (i + 1 >= argc)
				goto missing;
			*(a[2] == 't' ? &o->topology : &o->step_gpus) = argv[++i];
			continue;
		}
		if (strcmp(a, "--nodes") == 0)
			num = &o->nodes;
		else if (strcmp(a, "--tasks-per-node") == 0)
			num = &o->tasks_per_node;
		else if (strcmp(a, "--env") == 0)
			num = &o->env_rank, lo = 0;
		if (num) {
			if (i + 1 >= argc)
				goto missing;
			if (rl_parse_long(a, argv[++i], lo, 1L << 20, num, err, sizeof err) != 0) {
				fprintf(stderr, "rlrun plan: %s\n%s", err, usage);
				return -1;
			}
			continue;
		}
		rest[(*n_rest)++] = argv[i];
	}
	return 0;
missing:
	fprintf(stderr, "rlrun plan: %s needs a value\n%s", argv[argc - 1], usage);
	return -1;
}

static double gib(double bytes)
{
	return bytes / (1024.0 * 1024.0 * 1024.0);
}

static void print_topology(const struct rl_topo *t)
{
	int n_ib = 0;
	for (int i = 0; i < t->n_nics; i++)
		n_ib += t->nics[i].infiniband;
	printf("node: %s: %d core%s in %d NUMA domain%s, %d GPU%s in %d NVLink domain%s, "
	       "%d InfiniBand NIC%s\n",
	       t->source, t->n_cores, t->n_cores == 1 ? "" : "s", t->n_numas,
	       t->n_numas == 1 ? "" : "s", t->n_gpus, t->n_gpus == 1 ? "" : "s",
	       t->n_nvlink_domains, t->n_nvlink_domains == 1 ? "" : "s", n_ib,
	       n_ib == 1 ? "" : "s");
}

static void print_estimate(const struct rl_job_plan *p)
{
	const struct rl_plan_estimate *e = &p->estimate;
	if (!p->have_estimate) {
		if (p->have_hw && p->spec.have_model)
			printf("memory per GPU (estimate): none: %s\n", e->why);
		return;
	}
	printf("memory per GPU (estimate): %.1f GiB of %.0f GiB: weights %.1f, gradients %.1f, "
	       "optimizer %.1f, activations %.1f, KV cache %.1f%s\n",
	       gib(e->total_mem), gib(p->hw.gpu_mem_bytes), gib(e->weights), gib(e->grads),
	       gib(e->optimizer), gib(e->activations), gib(e->kv_cache),
	       e->fits ? "" : "  DOES NOT FIT");
	printf("step time (estimate): %.2f s: generation %.2f, compute %.2f, TP %.2f, "
	       "PP bubble %.2f, DP %.2f",
	       e->t_step, e->t_generation, e->t_compute, e->t_tp_comm, e->t_pp_bubble,
	       e->t_dp_comm);
	if (e->t_ep_comm > 0)
		printf(", EP %.2f", e->t_ep_comm);
	printf("\n");
}

/* --explain: the estimate part by part; there is none without a GPU the
 * planner knows and the model's config.json. */
static int print_explain(const struct rl_job_plan *p)
{
	char text[4096];

	if (!p->have_estimate) {
		fprintf(stderr, "rlrun plan: --explain: no estimate: %s\n",
		        !p->spec.use_gpus     ? "the step runs on the CPU (policy.backend)"
		        : !p->have_hw         ? "the planner does not know this node's GPU"
		        : !p->spec.have_model ? "the model's config.json cannot be read"
		                              : p->estimate.why);
		return -1;
	}
	rl_plan_explain_step(text, sizeof text, &p->hw, &p->spec.job, &p->estimate);
	fputs(text, stdout);
	if (p->spec.generation_ranks > 0)
		printf("  (the time model is colocated generation's: this step's %d generation "
		       "tasks, and their refit, are not in it)\n",
		       p->spec.generation_ranks);
	return 0;
}

static void print_task(const struct rl_node_plan *np, int local)
{
	const struct rl_task_place *t = &np->node.tasks[local];
	const struct rl_topo *topo = np->topo;
	struct rl_coords c;
	char cpus[512], gpu[96] = "-";

	rl_layout_coords(&np->job.layout, np->first_rank + local, &c);
	rl_cpulist_format(t->cpus, t->n_cpus, cpus, sizeof cpus);
	if (t->gpu >= 0)
		snprintf(gpu, sizeof gpu, "%d %s nvl%d", t->gpu, topo->gpus[t->gpu].busid,
		         topo->gpus[t->gpu].nvlink_domain);
	printf("  %5d %4d %5d %3d %3d %3d %3d %3d  %-28s %-8s %4d  %s\n", np->first_rank + local,
	       np->node_id, local, c.rank[RL_AXIS_TP], c.rank[RL_AXIS_CP],
	       c.expert_rank[RL_AXIS_EP], c.rank[RL_AXIS_DP], c.rank[RL_AXIS_PP], gpu,
	       t->nic >= 0 ? topo->nics[t->nic].name : "-", topo->numas[t->numa].os_index, cpus);
}

/* job: the step's plan from an earlier node, NULL for the first */
static int plan_node(const struct rl_config *cfg, const char *config_path,
                     const struct rl_topo *topo, const struct plan_opts *o, int world, int node,
                     const struct rl_job_plan *job, struct rl_node_plan *np)
{
	int first, n_local;

	rl_node_block(world, (int)o->nodes, node, &first, &n_local);
	struct rl_node_inputs in = {
	    .cfg = cfg,
	    .config_path = config_path,
	    .topo = topo,
	    .world = world,
	    .n_nodes = (int)o->nodes,
	    .node_id = node,
	    .first_rank = first,
	    .n_local = n_local,
	    .slurm_step_gpus = o->step_gpus,
	    .job = job,
	};
	char err[1024];
	if (rl_node_plan_make(&in, np, err, sizeof err) != 0) {
		fprintf(stderr, "rlrun plan: %s\n", err);
		return -1;
	}
	/* the plan is still worth seeing before the model is there; the
	 * plugin refuses it */
	if (!job && !np->job.spec.have_model)
		fprintf(stderr,
		        "rlrun plan: warning: %s: the layout is not checked against the model\n",
		        np->job.spec.model_error);
	else if (!job && rl_plan_check_inputs(cfg, NULL, err, sizeof err) != 0)
		fprintf(stderr,
		        "rlrun plan: warning: %s (here; under the plugin, a step whose nodes "
		        "cannot read it is refused)\n",
		        err);
	return 0;
}

static int print_env(const struct rl_node_plan *np, int rank)
{
	struct rl_env env;
	if (rl_node_plan_task_env(np, rank - np->first_rank, &env) != 0) {
		fprintf(stderr, "rlrun plan: out of memory\n");
		return RL_EXIT_FAIL;
	}
	for (size_t i = 0; i < env.n; i++)
		puts(env.vars[i]);
	rl_env_free(&env);
	return RL_EXIT_OK;
}

static int print_plan(const struct rl_config *cfg, const char *config_path,
                      const struct rl_topo *topo, const struct plan_opts *o, int world)
{
	struct rl_node_plan np;
	struct rl_job_plan job; /* node 0's: the model is read and auto searched once */
	bool warned = false;

	for (int node = 0; node < o->nodes; node++) {
		if (plan_node(cfg, config_path, topo, o, world, node, node ? &job : NULL, &np) != 0)
			return RL_EXIT_FAIL;
		if (node == 0) {
			job = np.job;
			const struct rl_layout *l = &np.job.layout;
			printf("plan: %s\n", np.job.summary);
			print_topology(topo);
			fputs(np.job.explain, stdout);
			print_estimate(&np.job);
			if (o->explain && print_explain(&np.job) != 0) {
				rl_node_plan_free(&np);
				return RL_EXIT_FAIL;
			}
			printf("groups (order %s):\n", RL_LAYOUT_ORDER);
			rl_layout_print_groups(l, stdout, "  ");
			printf("tasks:\n   rank node local  tp  cp  ep  dp  pp  %-28s %-8s numa  "
			       "cpus\n",
			       "gpu (index bus-id nvlink)", "nic");
		}
		for (int i = 0; i < np.node.n_tasks; i++)
			print_task(&np, i);
		if (*np.node.warning && !warned) {
			fprintf(stderr, "rlrun plan: warning: %s\n", np.node.warning);
			warned = true;
		}
		rl_node_plan_free(&np);
	}
	return RL_EXIT_OK;
}

int rl_cmd_plan(int argc, char **argv)
{
	char **rest = calloc((size_t)argc + 1, sizeof *rest);
	struct plan_opts o;
	int n_rest, rc;
	if (!rest)
		return RL_EXIT_FAIL;
	rc = parse_opts(argc, argv, &o, rest, &n_rest);
	if (rc != 0) {
		free(rest);
		return rc > 0 ? RL_EXIT_OK : RL_EXIT_USAGE;
	}
	struct rl_config cfg;
	rc = rl_cli_load_config("plan", usage, rest, n_rest, &cfg);
	free(rest);
	if (rc != RL_EXIT_OK)
		return rc;

	struct rl_topo topo;
	char err[1024];
	if (rl_topo_load(&topo, o.topology, err, sizeof err) != 0) {
		fprintf(stderr, "rlrun plan: %s\n", err);
		rl_config_free(&cfg);
		return RL_EXIT_FAIL;
	}
	rl_plan_step_shape(&cfg, &topo, &o.nodes, &o.tasks_per_node);
	int world = (int)(o.nodes * o.tasks_per_node);
	char real[PATH_MAX];
	/* what the plugin exports: the file's absolute name; none when built in */
	const char *config_path = cfg.source && realpath(cfg.source, real) ? real : NULL;

	if (o.explain && o.env_rank >= 0) {
		fprintf(stderr, "rlrun plan: --explain and --env do not go together\n%s", usage);
		rc = RL_EXIT_USAGE;
	} else if (o.env_rank >= world) {
		fprintf(stderr, "rlrun plan: --env %ld: the step has ranks 0..%d\n", o.env_rank,
		        world - 1);
		rc = RL_EXIT_USAGE;
	} else if (o.env_rank >= 0) {
		struct rl_node_plan np;
		int node = (int)o.env_rank / rl_node_tasks_max(world, (int)o.nodes);
		rc = plan_node(&cfg, config_path, &topo, &o, world, node, NULL, &np) != 0
		         ? RL_EXIT_FAIL
		         : print_env(&np, (int)o.env_rank);
		rl_node_plan_free(&np); /* zeroed when plan_node failed */
	} else {
		rc = print_plan(&cfg, config_path, &topo, &o, world);
	}
	rl_topo_free(&topo);
	rl_config_free(&cfg);
	return rc;
}
