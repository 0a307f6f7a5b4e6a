/* Internal to runtime/comm: the watchdog's exchanges on the control
 * channel — a rank's answer to "where are you?" and the census of every
 * other rank (census.c), the verdict a rank that gives up sends the ones
 * that answered (verdict.c), and the reports printed from them. The watchdog's threads and
 * its decisions are watchdog.c's.
 * defines: struct rl_census, struct rl_verdict, RL_VERDICT_MAX_LOST, RL_TAG_*,
 * rl_census_answer, rl_census_take, rl_census_free, rl_census_others_working,
 * rl_census_report, rl_verdict_take, rl_verdict_send, rl_verdict_ack,
 * rl_verdict_ack_pending, rl_verdict_report, and the helpers both files share */
#ifndef RL_COMM_CENSUS_H
#define RL_COMM_CENSUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "runtime/comm/backend.h"

/* Every other rank's answer, or none within the time given. */
struct rl_census {
	struct rl_comm_activity *answer; /* [size] */
	bool *answered;                  /* [size] */
	bool complete;                   /* no question is left without an answer */
	int size;
	void *recv; /* the answers' MPI requests, [size], cancelled by free */
};

/* A verdict names the ranks that did not answer: its first
 * RL_VERDICT_MAX_LOST, and how many in all. */
#define RL_VERDICT_MAX_LOST 64
struct rl_verdict {
	int32_t from;   /* the rank that gave up */
	int32_t n_lost; /* may be more than listed */
	int32_t lost[RL_VERDICT_MAX_LOST];
	struct rl_comm_activity at; /* its stuck wait */
	char why[160];              /* the error it failed with; "" for a timeout */
};

/* The control channel's tags: questions, answers, verdicts and their
 * acknowledgements. */
enum { RL_TAG_ASK = 1, RL_TAG_ANSWER = 2, RL_TAG_VERDICT = 3, RL_TAG_ACK = 4 };

/* Answers the questions that arrived with what this rank is doing. Safe
 * from two threads at once (matched probes). */
void rl_census_answer(struct rl_comm_world *w);

/* Asks every other rank and waits up to seconds for the answers, serving
 * questions meanwhile (verdicts that arrive are left for the watcher).
 * 0, or -1 out of memory. */
int rl_census_take(struct rl_comm_world *w, struct rl_census *cs, double seconds);
/* Cancels the questions still unanswered (keep: leave them, the process
 * exits next) and frees the census. */
void rl_census_free(struct rl_census *cs, bool keep);

/* Every other rank answers, and one at least is working (between
 * collectives): a long wait is another rank's long work, not a hang. */
bool rl_census_others_working(struct rl_comm_world *w, double seconds);

/* This rank's report: its wait mine (waited seconds; why: the error,
 * NULL for a timeout), the ranks that did not answer (into lost[size]:
 * how many; without a census, cs NULL, the ranks on this node whose
 * process is gone or stopped), what this node sees of them, and where the
 * others are. */
int rl_census_report(FILE *f, const struct rl_comm_world *w, const struct rl_comm_activity *mine,
                     double waited, const char *why, const struct rl_census *cs, int *lost);

/* verdict.c. One verdict that arrived, into v (1), or none (0). */
int rl_verdict_take(struct rl_comm_world *w, struct rl_verdict *v);
/* Sends v to every rank that answered cs, and waits up to seconds for
 * their acknowledgements, answering and acknowledging meanwhile. */
void rl_verdict_send(struct rl_comm_world *w, const struct rl_census *cs,
                     const struct rl_verdict *v, double seconds);
/* This rank's report is out: tells the rank that sent it a verdict, and
 * every other rank whose verdict waits. */
void rl_verdict_ack(struct rl_comm_world *w, int to);
void rl_verdict_ack_pending(struct rl_comm_world *w);
/* A rank told by v: who gave up where, the lost ranks, and where this rank
 * was (mine, waiting waited seconds when waiting). */
void rl_verdict_report(FILE *f, const struct rl_comm_world *w, const struct rl_verdict *v,
                       const struct rl_comm_activity *mine, double waited);

/* Shared by the two files. */
MPI_Comm rl_census_control(const struct rl_comm_world *w);
void rl_census_pause_ms(long ms);
void rl_census_terminate(char *s, size_t n);
/* "collective #12 all_reduce ... over dp (ranks 0,2): grad reduce", or a
 * blocking call's own description */
void rl_census_where(char *buf, size_t len, const struct rl_comm_activity *a);
/* "rlrun: rank ME: rank(s) LOST... do(es) not answer: ..." */
void rl_census_lost_line(FILE *f, int me, const int *lost, int n, int total);

#endif
