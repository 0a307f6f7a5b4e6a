/* The process's place among the ranks: the watchdog's threads, MPI started
 * (or found started), every rank's node, the world group, the watchdog's
 * control channel, and the orderly and the abrupt ends of a run. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/comm/backend.h"

static int dup_world(struct rl_comm_world *w, MPI_Comm **out, const char *desc, char *err,
                     size_t errlen)
{
	*out = malloc(sizeof **out);
	if (!*out || RL_WATCHED(w, desc, MPI_Comm_dup(MPI_COMM_WORLD, *out)) != MPI_SUCCESS) {
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
	if (dup_world(w, &comm, "MPI_Comm_dup of the world", err, errlen)) {
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
	pthread_mutex_lock(&w->lock);
	c->next_open = w->open;
	w->open = c;
	pthread_mutex_unlock(&w->lock);
	*out = c;
	return 0;
}

/* the handler of worlds not made yet (rl_comm_on_failure(NULL, ...)) */
static rl_comm_failure_fn default_fn;
static void *default_arg;

/* The launcher's number for this task, for the watchdog's words before
 * MPI knows it (a rendezvous that never completes). */
static int launcher_rank(void)
{
	static const char *const vars[] = {"PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};

	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);

		if (v && *v)
			return atoi(v);
	}
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
	pthread_mutex_init(&w->mpi_use, NULL);
	w->timeout_s = timeout_s;
	w->rank = launcher_rank();
	w->on_failure = default_fn;
	w->on_failure_arg = default_arg;
	if (rl_watchdog_start(w, err, errlen)) {
		pthread_mutex_destroy(&w->lock);
		pthread_mutex_destroy(&w->mpi_use);
		free(w);
		return -1;
	}
	MPI_Initialized(&started);
	if (!started) {
		/* the watcher talks MPI while the main thread waits */
		if (RL_WATCHED(w, "MPI_Init_thread (the launcher's meeting of every task)",
		               MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided)) !=
		    MPI_SUCCESS) {
			snprintf(err, errlen, "MPI_Init_thread failed");
			goto fail;
		}
		w->mpi_started_here = true;
	} else {
		MPI_Query_thread(&provided);
	}
	w->thread_multiple = provided == MPI_THREAD_MULTIPLE;
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
	if (dup_world(w, &control, "MPI_Comm_dup of the world (the watchdog's channel)", err,
	              errlen))
		goto fail;
	w->control = control;
	if (rl_comm_peers_gather(w, err, errlen))
		goto fail;
	rl_watchdog_allow_mpi(w, true);
	if (w->size > 1)
		rl_watchdog_catch_abort(w, true);
	if (world_group(w, world_comm, err, errlen))
		goto fail;
	w->world_mpi = (*world_comm)->host;
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
	while (w->open)
		rl_comm_free(w->open);
	rl_watchdog_allow_mpi(w, false);
	if (w->control) {
		MPI_Comm_free((MPI_Comm *)w->control);
		free(w->control);
	}
	/* a rank that died at the very end leaves the others here */
	if (w->mpi_started_here)
		RL_WATCHED(w, "MPI_Finalize (every rank ends together)", MPI_Finalize());
	rl_watchdog_stop(w);
	rl_watchdog_catch_abort(w, false);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->mpi_use);
	free(w->peers);
	free(w);
}

void rl_comm_on_failure(struct rl_comm_world *w, rl_comm_failure_fn fn, void *arg)
{
	if (!w) {
		default_fn = fn;
		default_arg = arg;
		return;
	}
	pthread_mutex_lock(&w->lock);
	w->on_failure = fn;
	w->on_failure_arg = arg;
	pthread_mutex_unlock(&w->lock);
}

_Noreturn void rl_comm_abort_run(struct rl_comm_world *w, int status, const char *msg)
{
	if (w) {
		rl_watchdog_claim(w, msg);
	} else {
		fprintf(stderr, "%s\n", msg);
		fflush(stderr);
	}
	/* the watchdog's monitor ends the process if MPI_Abort does not */
	if (w && w->size > 1)
		MPI_Abort(MPI_COMM_WORLD, status);
	_exit(status);
}
