#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/job/stop_signal.h"

static const struct {
	const char *name;
	int number;
} names[] = {{"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGHUP", SIGHUP},
             {"SIGALRM", SIGALRM}, {"SIGURG", SIGURG},   {"SIGXCPU", SIGXCPU}};

static volatile sig_atomic_t caught;
static int armed[2];
static struct sigaction before[2];
static int n_armed;

static void note(int sig)
{
	if (!caught)
		caught = sig;
}

int rl_stop_signal_arm(const char *name, char *err, size_t errlen)
{
	int extra = 0;

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(names[i].name, name) == 0)
			extra = names[i].number;
	if (!extra) {
		snprintf(err, errlen, "checkpointing.signal: %s is not a signal slurm-rl catches",
		         name);
		return -1;
	}
	rl_stop_signal_disarm();
	/* SA_RESTART: a read or a wait the signal lands in goes on */
	struct sigaction sa = {.sa_handler = note, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	armed[0] = SIGTERM;
	armed[1] = extra;
	for (n_armed = 0; n_armed < 2; n_armed++)
		if (sigaction(armed[n_armed], &sa, &before[n_armed]) != 0) {
			snprintf(err, errlen, "cannot catch %s: %s", strsignal(armed[n_armed]),
			         strerror(errno));
			rl_stop_signal_disarm();
			return -1;
		}
	return 0;
}

void rl_stop_signal_disarm(void)
{
	while (n_armed > 0) {
		n_armed--;
		sigaction(armed[n_armed], &before[n_armed], NULL);
	}
	caught = 0;
}

int rl_stop_signal_caught(void)
{
	return caught;
}

void rl_stop_signal_set(sigset_t *set)
{
	sigemptyset(set);
	for (int k = 0; k < n_armed; k++)
		sigaddset(set, armed[k]);
}

void rl_stop_signal_wait(void)
{
	/* polled: a process-directed signal may be taken by any thread (the
	 * checkpoint writer's), which a sigsuspend here would not see */
	const struct timespec tick = {0, 10 * 1000 * 1000};

	while (n_armed > 0 && !caught)
		nanosleep(&tick, NULL);
}
