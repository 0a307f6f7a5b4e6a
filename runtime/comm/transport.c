#define _GNU_SOURCE
/* The choice of the device transport. Every rank sends a fixed record of
 * itself to every other (one all-gather on the host), so that all decide
 * the same from the same table, without a second round. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/comm/transport.h"

struct place {
	char host[64];
	char gpu[32];
	char nic[64];
	char backend[16];
	uint8_t nccl, staged; /* can carry device memory that way */
	char want[8];         /* RL_COMM_TRANSPORT, as this rank sees it */
};

static void put(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src && *src ? src : "-");
}

static void describe_me(const struct rl_dist_device *me, struct place *p)
{
	char host[256] = "?";

	memset(p, 0, sizeof *p);
	gethostname(host, sizeof host - 1);
	put(p->host, sizeof p->host, host);
	put(p->gpu, sizeof p->gpu, me->gpu);
	put(p->nic, sizeof p->nic, getenv("NCCL_IB_HCA"));
	put(p->backend, sizeof p->backend, me->backend);
	p->nccl = me->nccl;
	p->staged = me->stage != NULL;
	put(p->want, sizeof p->want, getenv("RL_COMM_TRANSPORT"));
}

/* Two ranks of one node on one GPU. */
static bool gpu_shared(const struct place *all, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (strcmp(all[i].gpu, "-") != 0 && strcmp(all[i].host, all[j].host) == 0 &&
			    strcmp(all[i].gpu, all[j].gpu) == 0)
				return true;
	return false;
}

static int choose(const struct place *all, int n, enum rl_comm_transport *t, bool *shared,
                  char *err, size_t errlen)
{
	bool nccl = true, staged = true, host = true;
	const char *want = all[0].want;

	for (int i = 0; i < n; i++) {
		nccl = nccl && all[i].nccl;
		staged = staged && all[i].staged;
		host = host && !all[i].staged && !all[i].nccl;
	}
	*shared = gpu_shared(all, n);
	if (host) {
		*t = RL_COMM_MPI;
		return 0;
	}
	if (strcmp(want, "nccl") == 0 || strcmp(want, "staged") == 0) {
		bool can = want[0] == 'n' ? nccl : staged;

		if (!can) {
			snprintf(err, errlen,
			         "RL_COMM_TRANSPORT=%s: not every rank's backend can use it (%s)",
			         want, all[0].backend);
			return -1;
		}
		*t = want[0] == 'n' ? RL_COMM_NCCL : RL_COMM_STAGED;
		return 0;
	}
	if (strcmp(want, "-") != 0 && strcmp(want, "auto") != 0) {
		snprintf(err, errlen, "RL_COMM_TRANSPORT=%s: not a transport (auto, nccl, staged)",
		         want);
		return -1;
	}
	if (nccl && !*shared) {
		*t = RL_COMM_NCCL;
		return 0;
	}
	if (!staged) {
		snprintf(err, errlen,
		         "the ranks' devices cannot all use one transport (backends %s ... %s)",
		         all[0].backend, all[n - 1].backend);
		return -1;
	}
	*t = RL_COMM_STAGED;
	return 0;
}

/* Rank 0's lines: one node at a time, its ranks in order. */
static void print_places(const struct place *all, int n, enum rl_comm_transport t, bool shared,
                         FILE *log)
{
	char *done = calloc((size_t)n, 1);

	fprintf(log, "rlrun train: device collectives over %s%s\n", rl_comm_transport_name(t),
	        t == RL_COMM_STAGED && shared ? " (ranks share a GPU: NCCL refuses that)"
	        : t == RL_COMM_NCCL && shared ? " (ranks share a GPU: one NCCL_HOSTID each)"
	        : t == RL_COMM_MPI            ? " (the backend's memory is host memory)"
	                                      : "");
	for (int i = 0; done && i < n; i++) {
		if (done[i])
			continue;
		fprintf(log, "rlrun train: node %s:", all[i].host);
		for (int j = i; j < n; j++)
			if (!done[j] && strcmp(all[j].host, all[i].host) == 0) {
				done[j] = 1;
				fprintf(log, " rank %d %s %s nic %s;", j, all[j].backend,
				        all[j].gpu, all[j].nic);
			}
		fputc('\n', log);
	}
	fflush(log);
	free(done);
}

int rl_dist_place_devices(struct rl_dist *d, const struct rl_dist_device *me, FILE *log, char *err,
                          size_t errlen)
{
	struct rl_comm *world = d->g[RL_G_WORLD];
	int n = rl_comm_size(world);
	struct place mine, *all = calloc((size_t)n, sizeof *all);
	enum rl_comm_transport t;
	bool shared;

	if (!all) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	describe_me(me, &mine);
	rl_comm_all_gather(world, &mine, all, sizeof mine, RL_COMM_U8, "the ranks' devices");
	if (choose(all, n, &t, &shared, err, errlen)) {
		free(all);
		return -1;
	}
	if (t == RL_COMM_NCCL && shared) {
		/* read by NCCL when its first communicator is made: ranks of
		 * different hash are different hosts to it */
		char id[96];

		snprintf(id, sizeof id, "%s-rl-rank-%d", mine.host, d->rank);
		setenv("NCCL_HOSTID", id, 1);
	}
	if (log && d->rank == 0)
		print_places(all, n, t, shared, log);
	free(all);
	return rl_dist_connect_devices(d, t, me->stage, err, errlen);
}
