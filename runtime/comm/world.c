/* The process's place among the ranks: MPI started (or found started), the
 * world group, the watchdog's control channel, and the orderly and the
 * abrupt ends of a run. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/comm/backend.h"

static int dup_world(MPI_Comm **out, char *err, size_t errlen)
{
	*out = malloc(sizeof **out);
	if (!*out || MPI_Comm_dup(MPI_COMM_WORLD, *out) != MPI_SUCCESS) {
		snprintf(err, errlen, "MPI_Comm_dup of the world failed");
		free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

static int world_group(struct rl_comm_world *w, struct rl_comm **out, char *err, size_t errlen)
{
	struct rl_comm *c = calloc(1, sizeof *c);
	MPI_Comm *comm = NULL;

	if (c)
		c->members = malloc((size_t)w->size * sizeof *c->members);
	if (!c || !c->members) {
		snprintf(err, errlen, "out of memory");
		free(c);
		return -1;
	}
	if (dup_world(&comm, err, errlen)) {
		free(c->members);
		free(c);
		return -1;
	}
	for (int r = 0; r < w->size; r++)
		c->members[r] = r;
	c->be = &rl_comm_mpi_backend;
	c->world = w;
	c->impl = c->host = comm;
	c->rank = w->rank;
	c->size = w->size;
	snprintf(c->name, sizeof c->name, "world");
	c->next_open = w->open;
	w->open = c;
	*out = c;
	return 0;
}

int rl_comm_world_init(struct rl_comm_world **out, struct rl_comm **world_comm, int expect_world,
                       double timeout_s, char *err, size_t errlen)
{
	struct rl_comm_world *w = calloc(1, sizeof *w);
	int started = 0, provided = MPI_THREAD_SINGLE;

	*out = NULL;
	*world_comm = NULL;
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_init(&w->lock, NULL);
	w->timeout_s = timeout_s;
	MPI_Initialized(&started);
	if (!started) {
		/* the answering thread talks MPI while the main thread waits */
		if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
			snprintf(err, errlen, "MPI_Init_thread failed");
			free(w);
			return -1;
		}
		w->mpi_started_here = true;
	} else {
		MPI_Query_thread(&provided);
	}
	/* a broken peer must come back to us as an error we can name, not
	 * end the job in MPI's words */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &w->size);
	if (expect_world > 0 && w->size != expect_world) {
		snprintf(err, errlen,
		         "MPI sees %d rank%s but the layout has %d: the launcher did not connect "
		         "the tasks (under Slurm start them with srun --mpi=pmi2, or use mpiexec)",
		         w->size, w->size == 1 ? "" : "s", expect_world);
		goto fail;
	}
	MPI_Comm *control = NULL;
	if (dup_world(&control, err, errlen))
		goto fail;
	w->control = control;
	if (world_group(w, world_comm, err, errlen))
		goto fail;
	w->world_mpi = (*world_comm)->host;
	if (provided == MPI_THREAD_MULTIPLE && rl_watchdog_start(w, err, errlen))
		goto fail;
	*out = w;
	return 0;
fail:
	rl_comm_world_finalize(w);
	*world_comm = NULL;
	return -1;
}

void rl_comm_world_finalize(struct rl_comm_world *w)
{
	if (!w)
		return;
	rl_watchdog_stop(w);
	while (w->open)
		rl_comm_free(w->open);
	if (w->control) {
		MPI_Comm_free((MPI_Comm *)w->control);
		free(w->control);
	}
	if (w->mpi_started_here)
		MPI_Finalize();
	pthread_mutex_destroy(&w->lock);
	free(w);
}

_Noreturn void rl_comm_abort_run(struct rl_comm_world *w, int status, const char *msg)
{
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
	if (w && w->size > 1)
		MPI_Abort(MPI_COMM_WORLD, status);
	_exit(status);
}
