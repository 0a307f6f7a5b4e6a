/* Every rank's process as the others can see it without MPI: its node, its
 * pid and its start time, gathered once when the world is made. A rank
 * whose watchdog cannot ask anyone (MPI itself broken) still tells, of the
 * ranks on its own node, whose process is gone, stopped or running; a
 * census says the same of the ranks that did not answer. Other nodes'
 * processes are out of sight. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/comm/backend.h"

/* The state letter and the start time (clock ticks since boot) of process
 * pid, from /proc/PID/stat; 0 when there is no such process. */
static char proc_state(int pid, unsigned long long *start)
{
	char path[64], buf[1024];
	FILE *f;
	size_t n;

	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: the fields
	 * start after its last ')' */
	char *p = strrchr(buf, ')'), state = 0;
	if (!p || sscanf(p + 1, " %c", &state) != 1)
		return 0;
	/* field 22, starttime: the 20th after the state's */
	p += 2;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%llu", start) != 1)
		return 0;
	return state;
}

int rl_comm_peers_gather(struct rl_comm_world *w, char *err, size_t errlen)
{
	struct rl_comm_peer me = {0};
	unsigned long long start = 0;

	w->peers = calloc((size_t)w->size, sizeof *w->peers);
	if (!w->peers) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* the node's name as the launcher knows it (Slurm's node name may not
	 * be the host's) */
	const char *node = getenv("SLURMD_NODENAME");
	if (node && *node)
		snprintf(me.host, sizeof me.host, "%s", node);
	else if (gethostname(me.host, sizeof me.host - 1) != 0)
		snprintf(me.host, sizeof me.host, "?");
	me.pid = (int32_t)getpid();
	if (proc_state(me.pid, &start))
		me.start = start;
	if (RL_WATCHED(w, "MPI_Allgather of every rank's node and process",
	               MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, w->peers, (int)sizeof me,
	                             MPI_BYTE, *(MPI_Comm *)w->control)) != MPI_SUCCESS) {
		snprintf(err, errlen, "MPI_Allgather of the ranks' nodes failed");
		return -1;
	}
	for (int r = 0; r < w->size; r++)
		w->peers[r].host[RL_COMM_HOST_MAX - 1] = '\0';
	return 0;
}

const char *rl_comm_peer_host(const struct rl_comm_world *w, int r)
{
	return w->peers && r >= 0 && r < w->size ? w->peers[r].host : "";
}

enum rl_peer_state rl_comm_peer_state(const struct rl_comm_world *w, int r)
{
	unsigned long long start = 0;
	const struct rl_comm_peer *p;
	char state;

	if (!w->peers || r < 0 || r >= w->size || r == w->rank)
		return RL_PEER_ELSEWHERE;
	p = &w->peers[r];
	if (strcmp(p->host, w->peers[w->rank].host) != 0 || p->pid <= 0)
		return RL_PEER_ELSEWHERE;
	state = proc_state(p->pid, &start);
	/* another process under a reused pid is the rank's gone too; a
	 * start time we never read cannot tell */
	if (!state || state == 'Z' || state == 'X' || (p->start && start != p->start))
		return RL_PEER_GONE;
	return state == 'T' || state == 't' ? RL_PEER_STOPPED : RL_PEER_RUNNING;
}
