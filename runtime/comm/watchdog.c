/* When a wait is stuck, say which rank is to blame, and end the process.
 *
 * Two threads of the watchdog's own, started before MPI so that a
 * rendezvous that never completes is caught too:
 * - the watcher, every 20 ms: answers the other ranks' "where are you?",
 *   takes another rank's verdict, times the main thread's wait (a
 *   collective, or a blocking setup call) against the timeout, and asks
 *   each NCCL group whether its library saw a failure by itself. It never
 *   waits for the main thread, which may be inside MPI, UCX or CUDA for
 *   good.
 * - the monitor, every 100 ms, is PyTorch's heartbeat monitor: when a
 *   report has not ended by its deadline (MPI itself stuck), it ends the
 *   process; when the watcher has not come round for seconds while the
 *   main thread's wait is past the timeout (the watcher is stuck inside
 *   MPI), it reports what this rank knows without asking anyone.
 *
 * Giving up: the first thread to claim the report asks every other rank
 * where it stands (census.c), prints which wait is stuck, which ranks do
 * not answer and where the others are, sends that verdict to the ranks
 * that answered (they give up at once and name the same ranks, instead of
 * timing out one after another, and a rank stuck outside any collective
 * ends too), runs the run's failure handler (the requeue), aborts the
 * device groups (ncclCommAbort) and exits with RL_COMM_EXIT. Everything
 * after the claim has a deadline the monitor keeps: the process ends
 * within the timeout + 10 s of the wait's start, whatever MPI does. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/comm/backend.h"
#include "runtime/comm/census.h"

#define WATCH_PERIOD_MS   20
#define MONITOR_PERIOD_MS 100
/* a watcher that has not come round for this long is stuck inside MPI */
#define STALL_S 2.0
/* how often the watcher asks the NCCL groups for their errors */
#define CHECK_PERIOD_S 0.2
/* what the failure handler may take (a message or two to slurmctld) */
#define HANDLER_S 4.0

/* Long enough for a rank busy between two collectives to answer (its
 * watcher answers within 20 ms), short next to the timeout, and short
 * enough that the census, the verdict's acknowledgements (a rank giving
 * up at the same time acknowledges after its own census) and the handler
 * end within 10 s. */
static double grace_s(const struct rl_comm_world *w)
{
	double g = w->timeout_s / 5;
	return g < 0.5 ? 0.5 : g > 2 ? 2 : g;
}

static double acks_s(const struct rl_comm_world *w)
{
	return grace_s(w) + 0.5;
}

/* A rank that cannot ask the others (its MPI aborted under it, or its
 * watcher is stuck in MPI) leaves them this long to find the failure
 * themselves before its handler ends the step or requeues the job, which
 * would kill them unheard: their census and their verdict's
 * acknowledgements, and after an abort, which comes the moment a peer
 * dies, their whole timeout too (a stuck watcher's wait is already past
 * it, as theirs are). 0 where nobody else is there to wait for. */
static double others_s(const struct rl_comm_world *w, bool ask, bool told)
{
	if (ask || told || w->size < 2 || w->timeout_s <= 0)
		return 0;
	return (atomic_load(&w->aborted) ? w->timeout_s : 0) + grace_s(w) + acks_s(w);
}

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000 * 1000};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static _Noreturn void hold(void)
{
	for (;;)
		pause(); /* the thread that reports ends the process */
}

static void set_deadline(struct rl_comm_world *w, double seconds)
{
	atomic_store(&w->deadline, (long long)((rl_now() + seconds) * 1000));
}

/* This rank's activity and how long its wait has lasted (0 when it is
 * not waiting); giving_up: from now on its answers say so. */
static struct rl_comm_activity mine(struct rl_comm_world *w, double *waited, bool giving_up)
{
	struct rl_comm_activity a;

	pthread_mutex_lock(&w->lock);
	a = w->now;
	*waited = a.state == RL_WAITING ? rl_now() - w->since : 0;
	if (giving_up)
		w->now.state = RL_GIVING_UP;
	pthread_mutex_unlock(&w->lock);
	return a;
}

static void run_handler(struct rl_comm_world *w, bool found_here, bool own, const char *report,
                        const int *lost, int n_lost)
{
	rl_comm_failure_fn fn;
	void *arg;

	pthread_mutex_lock(&w->lock);
	fn = w->on_failure;
	arg = w->on_failure_arg;
	pthread_mutex_unlock(&w->lock);
	if (!fn)
		return;
	const char **hosts = calloc((size_t)(n_lost > 0 ? n_lost : 1), sizeof *hosts);
	for (int i = 0; hosts && i < n_lost; i++)
		hosts[i] = rl_comm_peer_host(w, lost[i]);
	struct rl_comm_failure f = {
	    .rank = w->rank,
	    .host = rl_comm_peer_host(w, w->rank),
	    .found_here = found_here,
	    .own = own,
	    .report = report ? report : "",
	    .n_lost = hosts ? n_lost : 0,
	    .lost = lost,
	    .lost_hosts = hosts,
	};
	fn(arg, &f);
	free(hosts);
}

static void abort_groups(struct rl_comm_world *w)
{
	pthread_mutex_lock(&w->lock);
	for (struct rl_comm *g = w->open; g; g = g->next_open) {
		if (g->device && g->device != g)
			g->device->be->abort(g->device);
		g->be->abort(g);
	}
	pthread_mutex_unlock(&w->lock);
}

/* Gives up on this rank's wait: why is the error (NULL: the timeout),
 * told the verdict of another rank (NULL: found here), ask whether the
 * other ranks may be asked from this thread. */
static _Noreturn void give_up(struct rl_comm_world *w, const char *why,
                              const struct rl_verdict *told, bool ask)
{
	if (atomic_exchange(&w->firing, 1))
		hold();
	double others = others_s(w, ask, told != NULL);
	set_deadline(w, (ask && !told ? grace_s(w) + acks_s(w) : 0.2) + others + HANDLER_S + 1);

	double waited;
	struct rl_comm_activity me = mine(w, &waited, true);
	/* size is 0 before MPI_Init returns: a rendezvous that never ends */
	int *lost = calloc((size_t)(w->size > 0 ? w->size : 1), sizeof *lost), n_lost = 0;
	struct rl_census cs = {0};
	bool asked = false;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	FILE *out = f ? f : stderr;

	if (told) {
		rl_verdict_report(out, w, told, &me, waited);
		n_lost = told->n_lost < RL_VERDICT_MAX_LOST ? told->n_lost : RL_VERDICT_MAX_LOST;
		for (int i = 0; lost && i < n_lost; i++)
			lost[i] = told->lost[i];
	} else {
		asked = ask && lost && rl_census_take(w, &cs, grace_s(w)) == 0;
		if (lost)
			n_lost =
			    rl_census_report(out, w, &me, waited, why, asked ? &cs : NULL, lost);
		else
			fprintf(
			    out,
			    "rlrun: rank %d: %.*s is stuck, and no memory is left to say more\n",
			    w->rank, (int)sizeof me.what, me.what);
	}
	if (f) {
		fclose(f);
		fputs(text, stderr);
	}
	fflush(stderr);
	/* the report is out: the ranks waiting for it may go */
	if (told && ask) {
		rl_verdict_ack(w, told->from);
		rl_verdict_ack_pending(w);
	}
	if (asked) {
		struct rl_verdict v = {.from = w->rank, .n_lost = n_lost, .at = me};

		for (int i = 0; i < n_lost && i < RL_VERDICT_MAX_LOST; i++)
			v.lost[i] = lost[i];
		snprintf(v.why, sizeof v.why, "%s", why ? why : "");
		rl_verdict_ack_pending(w);
		rl_verdict_send(w, &cs, &v, acks_s(w));
	}
	if (others > 0 && n_lost < w->size - 1) { /* someone is left to hear it */
		fprintf(
		    stderr,
		    "rlrun: rank %d: the other ranks were not told: they have %.0f s to find it "
		    "themselves before this rank ends the step\n",
		    w->rank, others);
		fflush(stderr);
		pause_ms((long)(others * 1000));
	}
	run_handler(w, !told, false, text, lost, lost ? n_lost : 0);
	abort_groups(w);
	_exit(RL_COMM_EXIT);
}

_Noreturn void rl_watchdog_fire(struct rl_comm_world *w, const char *why)
{
	give_up(w, why, NULL, atomic_load(&w->mpi_up));
}

void rl_watchdog_claim(struct rl_comm_world *w, const char *msg)
{
	double waited;

	if (atomic_exchange(&w->firing, 1))
		hold();
	set_deadline(w, HANDLER_S + 2);
	mine(w, &waited, true);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
	run_handler(w, true, true, msg, NULL, 0);
}

void rl_watchdog_begin_wait(struct rl_comm_world *w, const char *desc, bool collective)
{
	pthread_mutex_lock(&w->lock);
	if (w->now.state != RL_GIVING_UP)
		w->now.state = RL_WAITING;
	w->now.collective = collective;
	snprintf(w->now.what, sizeof w->now.what, "%s", desc);
	w->since = rl_now();
	pthread_mutex_unlock(&w->lock);
}

void rl_watchdog_end_wait(struct rl_comm_world *w)
{
	pthread_mutex_lock(&w->lock);
	if (w->now.state == RL_WAITING)
		w->now.state = RL_WORKING;
	pthread_mutex_unlock(&w->lock);
}

void rl_watchdog_serve(struct rl_comm_world *w)
{
	struct rl_verdict v;

	if (!atomic_load(&w->mpi_up))
		return;
	rl_census_answer(w);
	if (rl_verdict_take(w, &v))
		give_up(w, NULL, &v, true);
}

void rl_watchdog_allow_mpi(struct rl_comm_world *w, bool allow)
{
	pthread_mutex_lock(&w->mpi_use);
	atomic_store(&w->mpi_up, allow);
	pthread_mutex_unlock(&w->mpi_use);
}

/* The main thread's wait, against the timeout. */
static void check_wait(struct rl_comm_world *w, bool ask)
{
	double waited;
	struct rl_comm_activity a = mine(w, &waited, false);

	if (a.state != RL_WAITING || w->timeout_s <= 0 || waited <= w->timeout_s)
		return;
	if (atomic_load(&w->patient) && ask && rl_census_others_working(w, grace_s(w))) {
		/* another role's long phase: wait another timeout */
		pthread_mutex_lock(&w->lock);
		if (w->now.seq == a.seq && w->now.state == RL_WAITING)
			w->since = rl_now();
		pthread_mutex_unlock(&w->lock);
		return;
	}
	give_up(w, NULL, NULL, ask);
}

/* Each group's library, for a failure it found by itself. */
static void check_groups(struct rl_comm_world *w, bool ask)
{
	char err[512], why[640];
	bool failed = false;

	pthread_mutex_lock(&w->lock);
	for (struct rl_comm *g = w->open; g && !failed; g = g->next_open) {
		struct rl_comm *d = g->device;

		if (d && d != g && d->be->check && d->be->check(d, err, sizeof err)) {
			snprintf(why, sizeof why, "%s on group %s: %s", d->be->name, g->name, err);
			failed = true;
		}
	}
	pthread_mutex_unlock(&w->lock);
	if (failed)
		give_up(w, why, NULL, ask);
}

static void *watch(void *arg)
{
	struct rl_comm_world *w = arg;
	double checked = 0;

	while (!atomic_load(&w->stop)) {
		struct rl_verdict v;

		atomic_fetch_add(&w->beat, 1);
		pthread_mutex_lock(&w->mpi_use);
		bool ask = atomic_load(&w->mpi_up) && w->thread_multiple;
		if (ask) {
			rl_census_answer(w);
			if (rl_verdict_take(w, &v))
				give_up(w, NULL, &v, true);
		}
		check_wait(w, ask);
		if (rl_now() - checked >= CHECK_PERIOD_S) {
			check_groups(w, ask);
			checked = rl_now();
		}
		pthread_mutex_unlock(&w->mpi_use);
		pause_ms(WATCH_PERIOD_MS);
	}
	return NULL;
}

static void *report_alone(void *arg)
{
	struct rl_comm_world *w = arg;
	char why[200];

	if (atomic_load(&w->aborted))
		snprintf(why, sizeof why,
		         "this rank aborted (SIGABRT: the message above is its library's; UCX ends "
		         "a rank that way when the peer of a transfer is gone)");
	else
		snprintf(why, sizeof why,
		         "this rank's watchdog cannot ask the other ranks: its thread has not come "
		         "back from MPI for %.0f s",
		         STALL_S);
	give_up(w, why, NULL, false);
}

static void *monitor(void *arg)
{
	struct rl_comm_world *w = arg;
	unsigned long long last = atomic_load(&w->beat);
	double seen = rl_now();
	bool spawned = false;

	while (!atomic_load(&w->stop)) {
		pause_ms(MONITOR_PERIOD_MS);
		double t = rl_now(), waited;
		if (atomic_load(&w->firing)) {
			if (t * 1000 > (double)atomic_load(&w->deadline)) {
				fprintf(
				    stderr,
				    "rlrun: rank %d: the watchdog's report did not end in time "
				    "(MPI, or the failure handler, does not return): the process "
				    "ends now\n",
				    w->rank);
				_exit(RL_COMM_EXIT);
			}
			continue;
		}
		unsigned long long b = atomic_load(&w->beat);
		if (b != last) {
			last = b;
			seen = t;
			continue;
		}
		struct rl_comm_activity a = mine(w, &waited, false);
		/* an abort parks its thread (rl_watchdog_catch_abort), which may
		 * hold MPI's lock: reported at once, without MPI */
		bool aborted = atomic_load(&w->aborted);
		if (spawned || (!aborted && t - seen < STALL_S))
			continue;
		if (!aborted &&
		    (a.state != RL_WAITING || w->timeout_s <= 0 || waited <= w->timeout_s))
			continue;
		/* the watcher is stuck: report from a thread of its own, so
		 * that this one keeps the report's deadline */
		pthread_t th;
		spawned = true;
		if (pthread_create(&th, NULL, report_alone, w) == 0) {
			pthread_detach(th);
		} else {
			fprintf(stderr,
			        "rlrun: rank %d: %s has waited %.1f s and the watchdog is stuck\n",
			        w->rank, a.what, waited);
			_exit(RL_COMM_EXIT);
		}
	}
	return NULL;
}

/* The world whose watchdog reports an abort: one per process. */
static struct rl_comm_world *abort_world;
static struct sigaction abort_before;

/* UCX ends a rank whose transfer's peer is gone with abort() (its fatal
 * error: process_vm_readv, No such process): the thread that aborted is
 * parked here, and the monitor reports what this node shows of the lost
 * ranks, runs the failure handler and ends the process. The rank stays
 * one that names the lost one, instead of being lost itself. */
static void on_abort(int sig)
{
	(void)sig;
	if (abort_world)
		atomic_store(&abort_world->aborted, 1);
	for (;;)
		pause();
}

void rl_watchdog_catch_abort(struct rl_comm_world *w, bool catch)
{
	if (catch && !abort_world) {
		struct sigaction sa;

		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_abort;
		sigemptyset(&sa.sa_mask);
		abort_world = w;
		sigaction(SIGABRT, &sa, &abort_before);
	} else if (!catch && abort_world == w) {
		sigaction(SIGABRT, &abort_before, NULL);
		abort_world = NULL;
	}
}

int rl_watchdog_start(struct rl_comm_world *w, char *err, size_t errlen)
{
	atomic_store(&w->stop, 0);
	if (pthread_create(&w->watcher, NULL, watch, w) != 0) {
		snprintf(err, errlen, "cannot start the watchdog's thread");
		return -1;
	}
	if (pthread_create(&w->monitor, NULL, monitor, w) != 0) {
		atomic_store(&w->stop, 1);
		pthread_join(w->watcher, NULL);
		snprintf(err, errlen, "cannot start the watchdog's monitor thread");
		return -1;
	}
	w->has_threads = true;
	return 0;
}

void rl_watchdog_stop(struct rl_comm_world *w)
{
	if (!w->has_threads)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->watcher, NULL);
	pthread_join(w->monitor, NULL);
	w->has_threads = false;
}
