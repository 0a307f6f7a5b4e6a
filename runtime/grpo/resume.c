/* Resuming a GRPO run. The first rank lists the committed checkpoints;
 * every rank verifies a share of the newest one's files against its
 * manifest, and only a checkpoint that every rank found whole is loaded:
 * an older one is tried otherwise. Every rank then reads, from whichever
 * shard files hold them, the blocks of the tensors it holds, so the layout
 * that wrote the checkpoint does not matter. Every collective here runs
 * on every rank whatever happened locally, so a rank's failure is agreed
 * on, not waited for. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/store.h"
#include "runtime/grpo/checkpoint.h"
#include "runtime/grpo/trainer.h"

static int rank_of(const struct rl_trainer *t)
{
	return t->dist ? t->dist->rank : 0;
}

static int size_of(const struct rl_trainer *t)
{
	return t->dist ? t->dist->size : 1;
}

/* true on every rank when it is true on every rank */
static bool all_ok(struct rl_trainer *t, bool ok, const char *what)
{
	int v = ok;

	if (t->dist)
		rl_comm_all_reduce(t->dist->g[RL_G_WORLD], &v, 1, RL_COMM_I32, RL_COMM_MIN, what);
	return v != 0;
}

/* The committed steps, as the first rank sees them; *n -1 when it could
 * not list them (its err says why). */
static int64_t *list_steps(struct rl_trainer *t, int *n, char *err, size_t errlen)
{
	struct rl_ckpt_listing l = {0};
	int count = -1;

	if (rank_of(t) == 0 &&
	    rl_ckpt_scan(t->cfg->checkpointing.checkpoint_dir, &l, err, errlen) == 0)
		count = l.n;
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], &count, 1, RL_COMM_I32, 0,
		                  "checkpoint list");
	*n = count;
	if (count <= 0) {
		rl_ckpt_listing_free(&l);
		return NULL;
	}
	int64_t *steps = calloc((size_t)count, sizeof *steps);
	if (!steps)
		abort(); /* a few bytes; the others would wait in the broadcast */
	if (rank_of(t) == 0)
		memcpy(steps, l.steps, (size_t)count * sizeof *steps);
	rl_ckpt_listing_free(&l);
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], steps, (size_t)count, RL_COMM_I64, 0,
		                  "checkpoint list");
	return steps;
}

/* This rank's share of the files, and the manifest's own sense. */
static bool verify_share(struct rl_trainer *t, const char *dir, struct rl_ckpt_manifest *man,
                         char *why, size_t whylen)
{
	if (rl_ckpt_manifest_read(dir, man, why, whylen))
		return false;
	for (int i = rank_of(t); i < man->n_files; i += size_of(t))
		if (rl_ckpt_file_verify(dir, &man->files[i], why, whylen))
			return false;
	return true;
}

static bool same_metrics_step(const struct rl_ckpt_run_state *s)
{
	json_t *v = json_object_get(s->metrics, "step");

	return !v || (json_is_integer(v) && json_integer_value(v) == s->step);
}

/* The run state, checked against this run. */
static int check_state(struct rl_trainer *t, const char *dir, int64_t step,
                       struct rl_ckpt_run_state *s, char *err, size_t errlen)
{
	char sig[512];

	if (rl_ckpt_run_state_read(s, dir, err, errlen))
		return -1;
	rl_ckpt_model_signature(&t->model->cfg, sig, sizeof sig);
	if (strcmp(sig, s->model_signature) != 0) {
		snprintf(err, errlen,
		         "%s was written for another model: the checkpoint's is \"%s\", "
		         "policy.model_name's is \"%s\" (choose another "
		         "checkpointing.checkpoint_dir to start afresh)",
		         dir, s->model_signature, sig);
		return -1;
	}
	if (s->reference_xxh3 != t->reference_xxh3) {
		snprintf(err, errlen,
		         "%s started from other weights than policy.model_name holds now (xxh3 "
		         "%016" PRIx64 ", now %016" PRIx64 "): the reference policy would "
		         "change under the run",
		         dir, s->reference_xxh3, t->reference_xxh3);
		return -1;
	}
	if (s->step != step || !same_metrics_step(s)) {
		snprintf(err, errlen,
		         "%s/%s: its step disagrees with the manifest's or its metrics'", dir,
		         RL_CKPT_RUN_STATE);
		return -1;
	}
	struct rl_data_position pos = {
	    .examples = s->data_examples,
	    .epoch = s->data_epoch,
	    .position = s->data_position,
	    .next_problem = s->data_next_problem,
	};
	char why[512];
	if (rl_data_source_restore(&t->data, &pos, why, sizeof why)) {
		snprintf(err, errlen, "%s: %s", dir, why);
		return -1;
	}
	return 0;
}

/* Every parameter's weights, and the moments of this rank's cut into the
 * optimizer. */
static int load_tensors(struct rl_trainer *t, const struct rl_ckpt_shard_set *sh,
                        const struct rl_ckpt_run_state *s, char *err, size_t errlen)
{
	struct rl_model *m = t->model;
	const struct rl_ops *ops = m->ops;
	size_t n = (size_t)m->n_elems;
	float *w = malloc(n * sizeof *w), *mom1 = malloc(n * sizeof *mom1);
	float *mom2 = malloc(n * sizeof *mom2);
	int rc = -1;

	if (!w || !mom1 || !mom2) {
		snprintf(err, errlen, "out of memory for %zu MB of checkpoint", 3 * n * 4 >> 20);
		goto out;
	}
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		struct rl_ckpt_block b;

		rl_trainer_param_block(t, i, &b);
		if (rl_ckpt_fill(&sh->ix, RL_CKPT_WEIGHT, &b, w + p->offset, err, errlen) ||
		    rl_ckpt_fill(&sh->ix, RL_CKPT_EXP_AVG, &b, mom1 + p->offset, err, errlen) ||
		    rl_ckpt_fill(&sh->ix, RL_CKPT_EXP_AVG_SQ, &b, mom2 + p->offset, err, errlen))
			goto out;
	}
	if (ops->from_host(m->flat, w, n * sizeof *w, NULL)) {
		snprintf(err, errlen, "the %s backend cannot take the weights", ops->name);
		goto out;
	}
	if (t->dist) {
		if (rl_zero_restore(&t->zero, m, mom1, mom2, s->optimizer_steps, err, errlen))
			goto out;
	} else if (ops->from_host(t->opt.m, mom1, n * sizeof *mom1, NULL) ||
	           ops->from_host(t->opt.v, mom2, n * sizeof *mom2, NULL)) {
		snprintf(err, errlen, "the %s backend cannot take the optimizer state", ops->name);
		goto out;
	} else {
		t->opt.step = s->optimizer_steps;
	}
	t->optimizer_steps = s->optimizer_steps;
	rc = 0;
out:
	free(w);
	free(mom1);
	free(mom2);
	return rc;
}

static void say_resumed(struct rl_trainer *t, const char *dir, const struct rl_ckpt_run_state *s)
{
	const char *restarts = getenv("SLURM_RESTART_COUNT");

	if (!t->progress)
		return;
	fprintf(t->progress,
	        "rlrun train: resuming from %s (step %" PRId64 ", %" PRId64
	        " optimizer updates; written by %d rank%s: tensor %d, pipeline %d, context %d, "
	        "data %d); SLURM_RESTART_COUNT=%s\n",
	        dir, s->step, s->optimizer_steps, s->world_size, s->world_size == 1 ? "" : "s",
	        s->tensor, s->pipeline, s->context, s->data, restarts ? restarts : "unset");
	if (s->seed != (uint64_t)t->cfg->grpo.seed)
		fprintf(t->progress,
		        "rlrun train: warning: grpo.seed is %lld, the checkpoint's run used "
		        "%" PRIu64 ": the steps to come differ from that run's\n",
		        (long long)t->cfg->grpo.seed, s->seed);
}

/* A checkpoint that failed verification is renamed rejected_step_N, for
 * the user to look at: left as step_N it would count as the newest for
 * keep_top_k and be tried again at every start. */
static void set_aside(struct rl_trainer *t, const char *root, int64_t step)
{
	char from[4200], to[4300], why[256];

	if (rank_of(t) != 0 || rl_ckpt_path(from, sizeof from, root, step, false, why, sizeof why))
		return;
	snprintf(to, sizeof to, "%s/rejected_step_%" PRId64, root, step);
	if (rename(from, to) == 0)
		fprintf(t->progress ? t->progress : stderr,
		        "rlrun train: warning: %s failed verification and is kept as %s; "
		        "trying an older checkpoint\n",
		        from, to);
	else
		fprintf(t->progress ? t->progress : stderr,
		        "rlrun train: warning: %s failed verification (and cannot be renamed: "
		        "%s); trying an older checkpoint\n",
		        from, strerror(errno));
}

/* Loads DIR (verified) into this rank; every rank's outcome agreed. */
static bool load(struct rl_trainer *t, const char *dir, const struct rl_ckpt_manifest *man,
                 struct rl_ckpt_run_state *s, char *err, size_t errlen)
{
	struct rl_ckpt_shard_set sh = {0};
	bool ok = check_state(t, dir, man->step, s, err, errlen) == 0 &&
	          rl_ckpt_shard_set_open(&sh, dir, man, err, errlen) == 0 &&
	          load_tensors(t, &sh, s, err, errlen) == 0;

	rl_ckpt_shard_set_close(&sh);
	return all_ok(t, ok, "checkpoint load");
}

int rl_trainer_resume(struct rl_trainer *t, int64_t *done_steps, char *err, size_t errlen)
{
	const struct rl_cfg_checkpointing *c = &t->cfg->checkpointing;
	const char *mode = c->resume;
	int n;
	int64_t *steps = list_steps(t, &n, err, errlen);
	bool loaded = false, failed = false;

	*done_steps = 0;
	if (n < 0) {
		if (rank_of(t) != 0)
			snprintf(err, errlen, "rank 0 cannot list %s", c->checkpoint_dir);
		return -1;
	}
	if (n > 0 && strcmp(mode, "never") == 0) {
		snprintf(err, errlen,
		         "checkpointing.resume is never, but %s holds checkpoints (step_%" PRId64
		         " the newest): remove them, choose another checkpointing.checkpoint_dir, "
		         "or resume",
		         c->checkpoint_dir, steps[n - 1]);
		free(steps);
		return -1;
	}
	for (int i = n - 1; i >= 0 && !loaded && !failed; i--) {
		struct rl_ckpt_manifest man = {0};
		char dir[4200], why[1024] = "";

		rl_ckpt_path(dir, sizeof dir, c->checkpoint_dir, steps[i], false, why, sizeof why);
		bool mine = verify_share(t, dir, &man, why, sizeof why);
		if (!all_ok(t, mine, "checkpoint verification")) {
			if (!mine)
				fprintf(stderr, "rlrun train: rank %d: %s is not loadable: %s\n",
				        rank_of(t), dir, why);
			set_aside(t, c->checkpoint_dir, steps[i]);
			rl_ckpt_manifest_free(&man);
			continue;
		}
		struct rl_ckpt_run_state s = {0};
		err[0] = '\0';
		if (load(t, dir, &man, &s, err, errlen)) {
			loaded = true;
			*done_steps = s.step;
			say_resumed(t, dir, &s);
		} else {
			/* a verified checkpoint that does not fit this run is the
			 * user's to sort out, not a reason to go further back */
			failed = true;
			if (!err[0])
				snprintf(err, errlen, "%s could not be loaded on another rank",
				         dir);
		}
		json_decref(s.metrics);
		rl_ckpt_manifest_free(&man);
	}
	free(steps);
	if (failed)
		return -1;
	if (!loaded && strcmp(mode, "must") == 0) {
		snprintf(err, errlen,
		         "checkpointing.resume is must, but %s holds no complete checkpoint",
		         c->checkpoint_dir);
		return -1;
	}
	if (!loaded && n > 0 && t->progress)
		fprintf(t->progress,
		        "rlrun train: warning: none of the %d checkpoints in %s is loadable; "
		        "starting afresh\n",
		        n, c->checkpoint_dir);
	/* what a crash left behind goes before anything new is written */
	int cleaned = 0;
	if (rank_of(t) == 0)
		cleaned = rl_ckpt_clean_leftovers(c->checkpoint_dir, err, errlen) == 0;
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], &cleaned, 1, RL_COMM_I32, 0,
		                  "checkpoint leftovers");
	if (!cleaned && rank_of(t) != 0)
		snprintf(err, errlen, "rank 0 cannot clean %s", c->checkpoint_dir);
	return cleaned ? 0 : -1;
}
