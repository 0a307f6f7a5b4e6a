#define _GNU_SOURCE
/* One task's environment: what the plugin sets with spank_setenv and what
 * `rlrun plan --env RANK` prints, from the same function. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/task_env.h"

static int put(struct rl_env *env, const char *name, const char *fmt, ...)
{
	char **grown = realloc(env->vars, (env->n + 1) * sizeof *grown);
	if (!grown)
		return -1;
	env->vars = grown;
	char *value = NULL;
	va_list ap;
	va_start(ap, fmt);
	int rc = vasprintf(&value, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = asprintf(&env->vars[env->n], "%s=%s", name, value);
	free(value);
	if (rc < 0)
		return -1;
	env->n++;
	return 0;
}

void rl_axis_env_name(enum rl_axis a, const char *what, char *buf, size_t len)
{
	const char *lower = rl_axis_name(a);
	char upper[8];
	size_t i = 0;
	for (; lower[i] && i + 1 < sizeof upper; i++)
		upper[i] = (char)(lower[i] - 'a' + 'A');
	upper[i] = '\0';
	snprintf(buf, len, "RL_%s_%s", upper, what);
}

/* The GPU as the task must name it in CUDA_VISIBLE_DEVICES: Slurm's name for
 * it when Slurm gave the step GPUs, else its place in PCI bus order. */
static int gpu_token(const struct rl_step_gpus *gpus, int gpu, char *buf, size_t len)
{
	if (!gpus || gpus->n < 0) {
		snprintf(buf, len, "%d", gpu);
		return 0;
	}
	for (int i = 0; i < gpus->n; i++)
		if (gpus->gpu[i] == gpu) {
			snprintf(buf, len, "%s", gpus->token[i]);
			return 0;
		}
	return -1;
}

int rl_job_task_env(const struct rl_job_plan *plan, const struct rl_topo *topo,
                    const struct rl_node_placement *node, const struct rl_step_gpus *gpus,
                    int node_rank, int first_rank, int local_rank, const char *config_path,
                    struct rl_env *env)
{
	const struct rl_task_place *place = &node->tasks[local_rank];
	int rank = first_rank + local_rank;
	char buf[4096];
	int rc = 0;

	memset(env, 0, sizeof *env);
	if (config_path)
		rc |= put(env, "RL_CONFIG", "%s", config_path);
	rc |= put(env, "RL_RANK", "%d", rank);
	rc |= put(env, "RL_WORLD_SIZE", "%d", plan->spec.world);
	rc |= put(env, "RL_LOCAL_RANK", "%d", local_rank);
	rc |= put(env, "RL_NODE_RANK", "%d", node_rank);
	rc |= put(env, "RL_ROLE", "%s",
	          rl_job_generation_rank(plan, rank) ? "generation" : "training");
	for (int a = 0; a < RL_N_AXES; a++) {
		int axis_rank, axis_size;
		char name[16];
		rl_job_task_axis(plan, rank, a, &axis_rank, &axis_size);
		rl_axis_env_name(a, "RANK", name, sizeof name);
		rc |= put(env, name, "%d", axis_rank);
		rl_axis_env_name(a, "SIZE", name, sizeof name);
		rc |= put(env, name, "%d", axis_size);
	}
	rc |= put(env, "RL_LAYOUT", "%s", RL_LAYOUT_ORDER);
	rc |= put(env, "RL_PLAN", "%s", plan->summary);
	rl_cpulist_format(place->cpus, place->n_cpus, buf, sizeof buf);
	rc |= put(env, "RL_CPUS", "%s", buf);
	if (place->gpu >= 0) {
		if (gpu_token(gpus, place->gpu, buf, sizeof buf) != 0)
			snprintf(buf, sizeof buf, "%d", place->gpu);
		/* indexes then count in bus order, the order Slurm's indexes follow */
		rc |= put(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
		rc |= put(env, "CUDA_VISIBLE_DEVICES", "%s", buf);
	}
	/* "=" asks NCCL for this exact device: mlx5_1 must not also select mlx5_10 */
	if (place->nic >= 0 && topo->nics[place->nic].infiniband)
		rc |= put(env, "NCCL_IB_HCA", "=%s", topo->nics[place->nic].name);
	if (rc != 0) {
		rl_env_free(env);
		return -1;
	}
	return 0;
}

const char *rl_env_get(const struct rl_env *env, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < env->n; i++)
		if (strncmp(env->vars[i], name, len) == 0 && env->vars[i][len] == '=')
			return env->vars[i] + len + 1;
	return NULL;
}

void rl_env_free(struct rl_env *env)
{
	for (size_t i = 0; i < env->n; i++)
		free(env->vars[i]);
	free(env->vars);
	memset(env, 0, sizeof *env);
}
