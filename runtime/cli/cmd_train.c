/* rlrun train|sft|dpo|distill [CONFIG] [KEY=VALUE...]: a run of the
 * config's algorithm in this process, one runner for every verb: the
 * trainer is the same, only its algorithm's step and loss differ. */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cli/commands.h"
#include "runtime/cli/load_config.h"
#include "runtime/comm/dist.h"
#include "runtime/train/train.h"
#include "runtime/plan/identity.h"

static const char usage_train[] =
    "usage: rlrun train [CONFIG] [KEY=VALUE...]\n"
    "Runs GRPO (DAPO, GSPO, Dr. GRPO: GRPO configs) as CONFIG says (default:\n"
    "$RL_CONFIG, then the built-in grpo-tiny.yaml): one progress line per step here,\n"
    "one JSON line per step in logger.log_dir/metrics.jsonl.\n";
static const char usage_sft[] =
    "usage: rlrun sft CONFIG [KEY=VALUE...]\n"
    "Supervised fine-tuning as CONFIG's sft: block says (NeMo-RL's sft keys).\n";
static const char usage_dpo[] =
    "usage: rlrun dpo CONFIG [KEY=VALUE...]\n"
    "Direct preference optimisation as CONFIG's dpo: block says (NeMo-RL's dpo keys).\n";
static const char usage_distill[] =
    "usage: rlrun distill CONFIG [KEY=VALUE...]\n"
    "On-policy distillation from a teacher as CONFIG's distillation: block says\n"
    "(NeMo-RL's distillation keys).\n";

static const char *const usages[] = {
    [RL_ALGO_GRPO] = usage_train,
    [RL_ALGO_SFT] = usage_sft,
    [RL_ALGO_DPO] = usage_dpo,
    [RL_ALGO_DISTILLATION] = usage_distill,
};

/* The verb's algorithm and the config's must be one: a DPO config given to
 * `rlrun train` would otherwise train something its author did not ask. */
static int check_algorithm(const struct rl_config *cfg, enum rl_algorithm verb)
{
	static const char *const names[] = {
	    [RL_ALGO_GRPO] = "a GRPO",
	    [RL_ALGO_SFT] = "an SFT",
	    [RL_ALGO_DPO] = "a DPO",
	    [RL_ALGO_DISTILLATION] = "a distillation",
	};

	if (cfg->algorithm == verb)
		return 0;
	if (cfg->algorithm == RL_ALGO_GRPO)
		fprintf(stderr,
		        "rlrun %s: %s is a GRPO config (it has no %s: block); run it with "
		        "rlrun train\n",
		        rl_algorithm_verb(verb), cfg->source, rl_algorithm_block(verb));
	else
		fprintf(stderr, "rlrun %s: %s is %s config (its %s: block); run it with rlrun %s\n",
		        rl_algorithm_verb(verb), cfg->source, names[cfg->algorithm],
		        rl_algorithm_block(cfg->algorithm), rl_algorithm_verb(cfg->algorithm));
	return -1;
}

/* any: the plugin's step line (`rlrun [KEY=VALUE...]`), which runs
 * whatever the config is */
static int run(int argc, char **argv, enum rl_algorithm verb, bool any)
{
	struct rl_config cfg;
	char err[2048];
	const char *usage = usages[verb];
	const char *name = rl_algorithm_verb(verb);

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return RL_EXIT_OK;
		}
	bool has_config = getenv("RL_CONFIG") && *getenv("RL_CONFIG");
	for (int i = 1; i < argc && !has_config; i++)
		has_config = strchr(argv[i], '=') == NULL;
	/* only GRPO has a built-in config */
	if (verb != RL_ALGO_GRPO && !has_config) {
		fprintf(stderr, "rlrun %s: no CONFIG given\n%s", name, usage);
		return RL_EXIT_USAGE;
	}
	int rc = rl_cli_load_config(name, usage, argv + 1, argc - 1, &cfg);
	if (rc != RL_EXIT_OK)
		return rc;
	if (any)
		name = rl_algorithm_verb(cfg.algorithm);
	else if (check_algorithm(&cfg, verb)) {
		rl_config_free(&cfg);
		return RL_EXIT_USAGE;
	}
	struct rl_identity id;
	if (rl_identity_get(&cfg, &id, err, sizeof err) != 0) {
		/* a layout the tasks cannot form is the same on every rank (the
		 * rank is 0 when the launcher's variables were the problem) */
		if (id.rank == 0)
			fprintf(stderr, "rlrun %s: %s\n", name, err);
		rl_config_free(&cfg);
		return RL_EXIT_USAGE;
	}
	/* every rank has the same config: the first speaks for all, before
	 * they meet, so a refusal is one line and a plain exit */
	if (rl_train_check(&cfg, err, sizeof err)) {
		if (id.rank == 0)
			fprintf(stderr, "rlrun %s: %s\n", name, err);
		rl_config_free(&cfg);
		return RL_EXIT_FAIL;
	}
	/* one process needs no MPI; several meet in it, their failures
	 * watched from the first moment */
	struct rl_dist dist, *d = NULL;
	if (id.world > 1) {
		rl_train_watch_failures();
		struct rl_dist_roles roles = {id.generation_ranks, id.generation_tp};

		if (rl_dist_init(&dist, &id.layout, &roles, id.rank, cfg.cluster.collective_timeout,
		                 err, sizeof err)) {
			fprintf(stderr, "rlrun %s: rank %d of %d: %s\n", name, id.rank, id.world,
			        err);
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
			fprintf(stderr, "rlrun %s: rank %d: %s\n", name, d->rank, err);
		else if (err[0])
			fprintf(stderr, "rlrun %s: %s\n", name, err);
	} else if (rc == RL_EXIT_FAIL) {
		char msg[2300];

		if (!d) {
			fprintf(stderr, "rlrun %s: %s\n", name, err);
		} else {
			/* the others would wait for this rank until their timeout */
			snprintf(msg, sizeof msg, "rlrun %s: rank %d: %s", name, d->rank, err);
			rl_comm_abort_run(d->world, RL_EXIT_FAIL, msg);
		}
	}
	if (d)
		rl_dist_finalize(d);
	rl_config_free(&cfg);
	return rc;
}

int rl_cmd_train(int argc, char **argv)
{
	return run(argc, argv, RL_ALGO_GRPO, false);
}

int rl_cmd_sft(int argc, char **argv)
{
	return run(argc, argv, RL_ALGO_SFT, false);
}

int rl_cmd_dpo(int argc, char **argv)
{
	return run(argc, argv, RL_ALGO_DPO, false);
}

int rl_cmd_distill(int argc, char **argv)
{
	return run(argc, argv, RL_ALGO_DISTILLATION, false);
}

int rl_cmd_run_config(int argc, char **argv)
{
	return run(argc, argv, RL_ALGO_GRPO, true);
}
