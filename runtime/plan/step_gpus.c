#define _GNU_SOURCE
/* The GPUs of a step, as Slurm names them. Slurm numbers a node's GPUs in
 * its gres.conf order, which with AutoDetect=nvml or /dev/nvidia[0-N] files
 * is NVML's: PCI bus order, the order of topo->gpus. hwloc here has no NVML
 * to ask, so that order is what ties Slurm's indexes to bus ids. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/step_gpus.h"

static int add(struct rl_step_gpus *g, int gpu, const char *token, size_t token_len)
{
	int *ng = realloc(g->gpu, (size_t)(g->n + 1) * sizeof *ng);
	if (!ng)
		return -1;
	g->gpu = ng;
	char **nt = realloc(g->token, (size_t)(g->n + 1) * sizeof *nt);
	if (!nt)
		return -1;
	g->token = nt;
	g->token[g->n] = strndup(token, token_len);
	if (!g->token[g->n])
		return -1;
	g->gpu[g->n++] = gpu;
	return 0;
}

/* One entry of a list: a decimal index into the node's GPUs in PCI order,
 * or a PCI bus id. */
static int resolve(const struct rl_topo *topo, const char *var, const char *tok, size_t len,
                   char *err, size_t errlen)
{
	char buf[64];
	if (len == 0 || len >= sizeof buf) {
		snprintf(err, errlen, "%s: empty or overlong entry", var);
		return -1;
	}
	memcpy(buf, tok, len);
	buf[len] = '\0';
	if (strchr(buf, ':')) {
		int i = rl_topo_find_gpu(topo, buf);
		if (i < 0)
			snprintf(err, errlen, "%s: no GPU with PCI bus id %s on this node (%s)",
			         var, buf, topo->source);
		return i;
	}
	char *end;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (*end || errno || v < 0) {
		snprintf(err, errlen,
		         "%s: '%s' is neither a GPU index nor a PCI bus id (GPU UUIDs need NVML, "
		         "which this build does not use)",
		         var, buf);
		return -1;
	}
	if (v >= topo->n_gpus) {
		snprintf(err, errlen, "%s: GPU %ld, but this node has %d GPU%s (%s)", var, v,
		         topo->n_gpus, topo->n_gpus == 1 ? "" : "s", topo->source);
		return -1;
	}
	return (int)v;
}

static int count_entries(const char *list)
{
	int n = 0;
	for (const char *p = list; *p; p++)
		n += *p == ',';
	return *list ? n + 1 : 0;
}

/* The i-th entry of a comma list */
static const char *entry(const char *list, int i, size_t *len)
{
	const char *p = list;
	while (i-- > 0)
		p = strchr(p, ',') + 1;
	const char *end = strchr(p, ',');
	*len = end ? (size_t)(end - p) : strlen(p);
	return p;
}

int rl_step_gpus_parse(const struct rl_topo *topo, const char *slurm_step_gpus,
                       const char *cuda_visible_devices, struct rl_step_gpus *out, char *err,
                       size_t errlen)
{
	memset(out, 0, sizeof *out);
	const char *var = slurm_step_gpus ? "SLURM_STEP_GPUS" : "CUDA_VISIBLE_DEVICES";
	const char *list = slurm_step_gpus ? slurm_step_gpus : cuda_visible_devices;
	if (!list) {
		out->n = -1;
		return 0;
	}
	/* Slurm sets both; CUDA_VISIBLE_DEVICES is then how the task must name
	 * its GPU (0..k-1 under ConstrainDevices, Slurm's indexes otherwise) */
	const char *names = cuda_visible_devices && slurm_step_gpus &&
	                            count_entries(cuda_visible_devices) == count_entries(list)
	                        ? cuda_visible_devices
	                        : list;
	int n = count_entries(list);
	for (int i = 0; i < n; i++) {
		size_t len, name_len;
		const char *tok = entry(list, i, &len);
		const char *name = entry(names, i, &name_len);
		while (len > 0 && isspace((unsigned char)*tok))
			tok++, len--;
		int gpu = resolve(topo, var, tok, len, err, errlen);
		if (gpu < 0) {
			rl_step_gpus_free(out);
			return -1;
		}
		for (int j = 0; j < out->n; j++)
			if (out->gpu[j] == gpu) {
				snprintf(err, errlen, "%s=%s names GPU %d twice", var, list, gpu);
				rl_step_gpus_free(out);
				return -1;
			}
		if (add(out, gpu, name, name_len) != 0) {
			snprintf(err, errlen, "out of memory");
			rl_step_gpus_free(out);
			return -1;
		}
	}
	return 0;
}

void rl_step_gpus_free(struct rl_step_gpus *g)
{
	for (int i = 0; i < g->n; i++)
		free(g->token[i]);
	free(g->token);
	free(g->gpu);
	memset(g, 0, sizeof *g);
}
