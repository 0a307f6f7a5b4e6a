/* Which transport a run's device collectives take, chosen once the
 * backend is known, from what every rank of the role says about itself.
 * defines: struct rl_dist_device, rl_dist_place_devices */
#ifndef RL_COMM_TRANSPORT_H
#define RL_COMM_TRANSPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "runtime/comm/dist.h"

/* One rank's device, as the runtime describes it. */
struct rl_dist_device {
	const char *backend; /* "cpu", "fenced", "cuda": for the lines printed */
	const char *gpu;     /* the GPU's PCI bus id; NULL or "": none */
	/* how device memory reaches host buffers (RL_COMM_STAGED); NULL: the
	 * backend's memory is host memory and MPI carries it as it is */
	const struct rl_comm_stage *stage;
	bool nccl; /* NCCL can carry the memory (a CUDA build on a GPU) */
};

/* Every rank of the role calls it with its own device. The transport:
 * MPI where the memory is host memory; NCCL where every rank can use it
 * and no two ranks of one node share a GPU (NCCL refuses that); staged
 * otherwise. RL_COMM_TRANSPORT (rank 0's) = staged or nccl forces one; nccl
 * with ranks sharing a GPU gives each rank its own NCCL_HOSTID, so that
 * NCCL takes them for separate hosts (a trial: NCCL may still refuse, and
 * says so). Then connects the groups (rl_dist_connect_devices) and, on
 * the role's rank 0, prints per node each rank's GPU, NIC (NCCL_IB_HCA) and
 * the transport to log (NULL: nothing). */
int rl_dist_place_devices(struct rl_dist *d, const struct rl_dist_device *me, FILE *log, char *err,
                          size_t errlen);

#endif
