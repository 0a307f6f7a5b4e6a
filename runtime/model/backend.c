/* Resolving policy.backend. The CUDA table must be complete before a run
 * may use it: a missing op would otherwise surface steps later as a NULL
 * call. Several ranks are the comm room's business (each group's device
 * face: NCCL, or staged through the host where ranks share a GPU). */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fenced.h"
#include "runtime/model/backend.h"
#ifdef RL_HAVE_CUDA
#include "kernels/device.h"
#include "kernels/memory.h"
#endif

/* The CPU table, or the fenced one in its place (RL_OPS_FENCED=1). */
static const struct rl_ops *host_table(void)
{
	const char *fenced = getenv("RL_OPS_FENCED");

	return fenced && strcmp(fenced, "1") == 0 ? &rl_ops_fenced : &rl_ops_cpu;
}

#ifdef RL_HAVE_CUDA
/* 1: the CUDA table is usable here (desc set), 0: it is not (why in err),
 * -1: it should be and failed (err). */
static int open_cuda(char *desc, size_t desclen, char *err, size_t errlen)
{
	const char *missing = rl_ops_missing(&rl_ops_cuda);

	if (missing) {
		snprintf(err, errlen, "the cuda backend has no %s op yet", missing);
		return 0;
	}
	if (rl_cuda_device_count(err, errlen) == 0)
		return 0;
	/* CUDA_VISIBLE_DEVICES (the plugin's, or the user's) leaves the rank's
	 * GPU as ordinal 0 */
	char dev[200];
	if (rl_cuda_device_open(0, dev, sizeof dev, err, errlen))
		return -1;
	snprintf(desc, desclen, "cuda (%s)", dev);
	return 1;
}
#endif

int rl_backend_pick(const char *want, const struct rl_ops **ops, char *desc, size_t desclen,
                    char *err, size_t errlen)
{
	char why[300] = "this rlrun was built without CUDA (configure --with-cuda)";

	if (strcmp(want, "cpu") == 0) {
		*ops = host_table();
		snprintf(desc, desclen, "%s", (*ops)->name);
		return 0;
	}
	if (strcmp(want, "cuda") != 0 && strcmp(want, "auto") != 0) {
		snprintf(err, errlen, "policy.backend: unknown backend '%s' (auto, cpu, cuda)",
		         want);
		return -1;
	}
#ifdef RL_HAVE_CUDA
	int usable = open_cuda(desc, desclen, why, sizeof why);
	if (usable < 0) {
		snprintf(err, errlen, "policy.backend=%s: %s", want, why);
		return -1;
	}
	if (usable) {
		*ops = &rl_ops_cuda;
		return 0;
	}
#endif
	if (strcmp(want, "cuda") == 0) {
		snprintf(err, errlen, "policy.backend=cuda: %s", why);
		return -1;
	}
	*ops = host_table();
	snprintf(desc, desclen, "%s (auto: %s)", (*ops)->name, why);
	return 0;
}

int rl_backend_gpu(const struct rl_ops *ops, char *bus_id, size_t len, char *err, size_t errlen)
{
	*bus_id = 0;
#ifdef RL_HAVE_CUDA
	if (ops == &rl_ops_cuda)
		return rl_cuda_device_bus_id(bus_id, len, err, errlen) ? -1 : 1;
#else
	(void)len, (void)err, (void)errlen;
#endif
	(void)ops;
	return 0;
}

int rl_backend_memory_left(const struct rl_ops *ops, double util, size_t *bytes)
{
	*bytes = 0;
#ifdef RL_HAVE_CUDA
	if (ops == &rl_ops_cuda) {
		struct rl_cuda_memory_stats st;

		if (rl_cuda_memory_stats(&st))
			return -1;
		/* taken: everything the driver does not call free, less the
		 * pool's cached blocks, which the next allocations reuse */
		double budget = util * (double)st.device_total;
		double held =
		    (double)(st.device_total - st.device_free) - (double)(st.reserved - st.in_use);

		*bytes = budget > held ? (size_t)(budget - held) : 0;
		return 1;
	}
#else
	(void)util;
#endif
	(void)ops;
	return 0;
}
