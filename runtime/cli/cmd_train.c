/* rlrun train [CONFIG] [KEY=VALUE...]: a GRPO run in this process. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cli/commands.h"
#include "runtime/cli/load_config.h"
#include "runtime/comm/dist.h"
#include "runtime/train/train.h"
#include "runtime/plan/identity.h"

static const char usage[] =
    "usage: rlrun train [CONFIG] [KEY=VALUE...]\n"
    "Runs GRPO as CONFIG says (default: $RL_CONFIG, then the built-in grpo-tiny.yaml):\n"
    "one progress line per step here, one JSON line per step in\n"
    "logger.log_dir/metrics.jsonl.\n";

int rl_cmd_train(int argc, char **argv)
{
	struct rl_config cfg;
	char err[2048];

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return RL_EXIT_OK;
		}
	int rc = rl_cli_load_config("train", usage, argv + 1, argc - 1, &cfg);
	if (rc != RL_EXIT_OK)
		return rc;
	struct rl_identity id;
	if (rl_identity_get(&cfg, &id, err, sizeof err) != 0) {
		/* a layout the tasks cannot form is the same on every rank (the
		 * rank is 0 when the launcher's variables were the problem) */
		if (id.rank == 0)
			fprintf(stderr, "rlrun train: %s\n", err);
		rl_config_free(&cfg);
		return RL_EXIT_USAGE;
	}
	/* every rank has the same config: the first speaks for all, before
	 * they meet, so a refusal is one line and a plain exit */
	if (rl_train_check(&cfg, err, sizeof err)) {
		if (id.rank == 0)
			fprintf(stderr, "rlrun train: %s\n", err);
		rl_config_free(&cfg);
		return RL_EXIT_FAIL;
	}
	/* one process needs no MPI; several meet in it */
	struct rl_dist dist, *d = NULL;
	if (id.world > 1) {
		struct rl_dist_roles roles = {id.generation_ranks, id.generation_tp};

		if (rl_dist_init(&dist, &id.layout, &roles, id.rank,
		                 cfg.cluster.collective_timeout, err, sizeof err)) {
			fprintf(stderr, "rlrun train: rank %d of %d: %s\n", id.rank, id.world, err);
			rl_config_free(&cfg);
			return RL_EXIT_FAIL;
		}
		d = &dist;
	}
	/* a reward program that dies must not take us with it on the next
	 * write to its pipe; the reward code reports it instead */
	signal(SIGPIPE, SIG_IGN);
	int trained = rl_train(&cfg, d, stdout, err, sizeof err);
	rc = trained == 0                  ? RL_EXIT_OK
	     : trained == RL_TRAIN_STOPPED ? RL_EXIT_STOPPED
	                                   : RL_EXIT_FAIL;
	if (trained == RL_TRAIN_AGREED_FAILURE) {
		if (err[0] && d)
			fprintf(stderr, "rlrun train: rank %d: %s\n", d->rank, err);
		else if (err[0])
			fprintf(stderr, "rlrun train: %s\n", err);
	} else if (rc == RL_EXIT_FAIL) {
		char msg[2300];

		if (!d) {
			fprintf(stderr, "rlrun train: %s\n", err);
		} else {
			/* the others would wait for this rank until their timeout */
			snprintf(msg, sizeof msg, "rlrun train: rank %d: %s", d->rank, err);
			rl_comm_abort_run(d->world, RL_EXIT_FAIL, msg);
		}
	}
	if (d)
		rl_dist_finalize(d);
	rl_config_free(&cfg);
	return rc;
}
