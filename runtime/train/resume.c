/* Resuming a GRPO run. The first rank lists the committed checkpoints;
 * every rank verifies a share of the newest one's files against its
 * manifest, and only a checkpoint that every rank found whole is loaded:
 * an older one is tried otherwise. Every rank then reads, from whichever
 * shard files hold them, the blocks of the tensors it holds, so the layout
 * that wrote the checkpoint does not matter. Every collective here runs
 * on every rank whatever happened locally, so a rank's failure is agreed
 * on, not waited for. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/store.h"
#include "runtime/ckpt/verify.h"
#include "runtime/rollout/replay_buffer.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/resume.h"

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

	if (rl_trainer_rank(t) == 0 &&
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
	if (rl_trainer_rank(t) == 0)
		memcpy(steps, l.steps, (size_t)count * sizeof *steps);
	rl_ckpt_listing_free(&l);
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], steps, (size_t)count, RL_COMM_I64, 0,
		                  "checkpoint list");
	return steps;
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
	if (s->teacher_xxh3 != t->teacher_xxh3) {
		snprintf(err, errlen,
		         "%s was written by a run with %s teacher than teacher.model_name gives "
		         "now (xxh3 %016" PRIx64 ", now %016" PRIx64 "): the distillation "
		         "target would change under the run",
		         dir, s->teacher_xxh3 && t->teacher_xxh3 ? "another" : "no or another",
		         s->teacher_xxh3, t->teacher_xxh3);
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

/* Every parameter's weights and moments of this rank's cut, as read from
 * the checkpoint: host memory the model and optimizer do not see until
 * the checkpoint is known good. */
struct staged {
	float *w, *mom1, *mom2;
};

static void staged_free(struct staged *st)
{
	free(st->w);
	free(st->mom1);
	free(st->mom2);
	memset(st, 0, sizeof *st);
}

static int stage_tensors(struct rl_trainer *t, const struct rl_ckpt_shard_set *sh,
                         struct staged *st, char *err, size_t errlen)
{
	struct rl_model *m = t->model;
	size_t n = (size_t)m->n_elems;

	st->w = malloc(n * sizeof *st->w);
	st->mom1 = malloc(n * sizeof *st->mom1);
	st->mom2 = malloc(n * sizeof *st->mom2);
	if (!st->w || !st->mom1 || !st->mom2) {
		snprintf(err, errlen, "out of memory for %zu MB of checkpoint", 3 * n * 4 >> 20);
		return -1;
	}
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		struct rl_ckpt_block b;

		rl_trainer_param_block(t, i, &b);
		if (rl_ckpt_fill(&sh->ix, RL_CKPT_WEIGHT, &b, st->w + p->offset, err, errlen) ||
		    rl_ckpt_fill(&sh->ix, RL_CKPT_EXP_AVG, &b, st->mom1 + p->offset, err, errlen) ||
		    rl_ckpt_fill(&sh->ix, RL_CKPT_EXP_AVG_SQ, &b, st->mom2 + p->offset, err,
		                 errlen))
			return -1;
	}
	return 0;
}

/* The staged tensors into the model and the optimizer. */
static int apply_staged(struct rl_trainer *t, const struct staged *st,
                        const struct rl_ckpt_run_state *s, char *err, size_t errlen)
{
	struct rl_model *m = t->model;
	const struct rl_ops *ops = m->ops;
	size_t n = (size_t)m->n_elems;

	if (ops->from_host(m->flat, st->w, n * sizeof *st->w, NULL)) {
		snprintf(err, errlen, "the %s backend cannot take the weights", ops->name);
		return -1;
	}
	if (t->dist) {
		if (rl_zero_restore(&t->zero, m, st->mom1, st->mom2, s->optimizer_steps, err,
		                    errlen) ||
		    (t->zero_experts.group &&
		     rl_zero_restore(&t->zero_experts, m, st->mom1, st->mom2, s->optimizer_steps,
		                     err, errlen)))
			return -1;
	} else if (ops->from_host(t->opt.m, st->mom1, n * sizeof *st->mom1, NULL) ||
	           ops->from_host(t->opt.v, st->mom2, n * sizeof *st->mom2, NULL)) {
		snprintf(err, errlen, "the %s backend cannot take the optimizer state", ops->name);
		return -1;
	} else {
		t->opt.step = s->optimizer_steps;
	}
	t->optimizer_steps = s->optimizer_steps;
	return 0;
}

static bool lists(const struct rl_ckpt_manifest *man, const char *name)
{
	for (int i = 0; i < man->n_files; i++)
		if (strcmp(man->files[i].name, name) == 0)
			return true;
	return false;
}

/* The buffer file's bytes on every training rank, which all need the
 * whole of it: read once, by the first, and broadcast, rather than read
 * by every rank from the shared file system. NULL with err where it
 * failed (agreed on). Collective. */
static unsigned char *buffer_bytes(struct rl_trainer *t, const char *dir, size_t *len, char *err,
                                   size_t errlen)
{
	bool first = rl_trainer_rank(t) == 0;
	unsigned char *buf = first ? rl_replay_buffer_load(dir, len, err, errlen) : NULL;
	int64_t size = buf ? (int64_t)*len : -1;

	if (!t->dist)
		return buf;
	rl_comm_broadcast(t->dist->g[RL_G_WORLD], &size, 1, RL_COMM_I64, 0, "rollout buffer size");
	if (size < 0) {
		if (!first)
			snprintf(err, errlen, "rank 0 cannot read %s/%s", dir,
			         RL_CKPT_ROLLOUT_BUFFER);
		return NULL;
	}
	if (!first && !(buf = malloc((size_t)size + 1)))
		snprintf(err, errlen, "out of memory for %s/%s (%lld bytes)", dir,
		         RL_CKPT_ROLLOUT_BUFFER, (long long)size);
	/* every rank takes part in the broadcast, or none does */
	if (!all_ok(t, buf != NULL, "rollout buffer memory")) {
		free(buf);
		return NULL;
	}
	rl_comm_broadcast(t->dist->g[RL_G_WORLD], buf, (size_t)size, RL_COMM_U8, 0,
	                  "rollout buffer");
	*len = (size_t)size;
	return buf;
}

/* Asynchronous GRPO: the rollouts the checkpoint's run had in flight
 * become the next steps', as that run would have trained on them. The
 * data stands before their prompts (checkpoint.c). A run that is not
 * asynchronous, or whose steps no longer fit them, generates them anew
 * from the same prompts; one with a smaller max_trajectory_age_steps keeps
 * those that are young enough for it. Collective: every rank decides
 * alike, on the same bytes. */
static int take_buffer(struct rl_trainer *t, const char *dir, const struct rl_ckpt_manifest *man,
                       int *kept, char *err, size_t errlen)
{
	const char *why = NULL;
	struct rl_buffered *b = NULL;
	unsigned char *bytes;
	size_t len;
	int n = 0, rc = -1;

	*kept = 0;
	if (!lists(man, RL_CKPT_ROLLOUT_BUFFER))
		return 0;
	if (rl_rollout_keeps_in_flight(&t->rollouts)) {
		if (!(bytes = buffer_bytes(t, dir, &len, err, errlen)))
			return -1;
		int parsed = rl_replay_buffer_parse(bytes, len, dir, man->step + 1, INT32_MAX, &b,
		                                    &n, err, errlen);
		free(bytes);
		if (parsed)
			return -1;
	}
	if (rl_rollout_adopt(&t->rollouts, b, n, dir, kept, &why, err, errlen))
		goto out;
	if (why && t->progress)
		fprintf(t->progress,
		        "rlrun train: note: %s/%s: the rollout in flight for step %" PRId64
		        " is not used (%s); it and the ones after are generated anew\n",
		        dir, RL_CKPT_ROLLOUT_BUFFER, man->step + 1 + *kept, why);
	rc = 0;
out:
	rl_replay_buffer_free(b, n);
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
 * keep_top_k and be tried again at every start. Whether it was renamed
 * (on the first rank; false elsewhere). */
static bool set_aside(struct rl_trainer *t, const char *root, int64_t step, bool older)
{
	char from[4200], to[4300], why[256];
	const char *next = older ? "; trying an older checkpoint" : "";

	if (rl_trainer_rank(t) != 0 ||
	    rl_ckpt_path(from, sizeof from, root, step, false, why, sizeof why))
		return false;
	snprintf(to, sizeof to, "%s/rejected_step_%" PRId64, root, step);
	if (rename(from, to) == 0) {
		fprintf(t->progress ? t->progress : stderr,
		        "rlrun train: warning: %s failed verification and is kept as %s%s\n", from,
		        to, next);
		return true;
	}
	fprintf(t->progress ? t->progress : stderr,
	        "rlrun train: warning: %s failed verification (and cannot be renamed: %s)%s\n",
	        from, strerror(errno), next);
	return false;
}

/* The checkpoints an earlier start set aside (rejected_step_N), as the
 * first rank counts them: *newest is the highest N. Collective. */
static int count_rejected(struct rl_trainer *t, const char *root, int64_t *newest)
{
	int64_t v[2] = {0, -1};

	if (rl_trainer_rank(t) == 0) {
		DIR *d = opendir(root);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			char *end;
			const char *num = e->d_name + strlen("rejected_step_");

			if (strncmp(e->d_name, "rejected_step_", strlen("rejected_step_")) != 0 ||
			    !*num)
				continue;
			long long step = strtoll(num, &end, 10);
			if (*end || step < 0)
				continue;
			v[0]++;
			v[1] = step > v[1] ? step : v[1];
		}
		if (d)
			closedir(d);
	}
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], v, 2, RL_COMM_I64, 0,
		                  "rejected checkpoints");
	*newest = v[1];
	return (int)v[0];
}

/* Appends to list (of len bytes) "; ITEM", or the first ITEM. */
static void list_add(char *list, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void list_add(char *list, size_t len, const char *fmt, ...)
{
	size_t at = strlen(list);
	va_list ap;

	if (at + 3 >= len)
		return;
	if (at) {
		memcpy(list + at, "; ", 3);
		at += 2;
	}
	va_start(ap, fmt);
	vsnprintf(list + at, len - at, fmt, ap);
	va_end(ap);
}

/* No checkpoint was loaded. With checkpoints there (this start's, or some
 * an earlier start set aside), starting at step 1 would throw their steps
 * away, under a requeue unseen: auto stops, auto_or_fresh starts afresh
 * and says so. Collective (every rank alike). */
static int none_loaded(struct rl_trainer *t, int n, const char *refused, char *err, size_t errlen)
{
	const struct rl_cfg_checkpointing *c = &t->cfg->checkpointing;
	int64_t newest;
	int rejected = count_rejected(t, c->checkpoint_dir, &newest) - n;
	char earlier[200] = "";

	if (strcmp(c->resume, "must") == 0) {
		snprintf(err, errlen,
		         "checkpointing.resume is must, but %s holds no complete checkpoint%s%s",
		         c->checkpoint_dir, refused[0] ? " that loads: " : "", refused);
		return -1;
	}
	/* this start's rejected ones are in refused already (and may be the
	 * newest of them all) */
	if (rejected > 0 && n > 0)
		snprintf(earlier, sizeof earlier, "; %d more set aside by an earlier start",
		         rejected);
	else if (rejected > 0)
		snprintf(earlier, sizeof earlier,
		         "%d set aside by an earlier start (rejected_step_%" PRId64 "%s)", rejected,
		         newest, rejected > 1 ? " the newest" : "");
	if (n == 0 && rejected <= 0)
		return 0;
	if (strcmp(c->resume, "auto_or_fresh") == 0) {
		if (t->progress)
			fprintf(
			    t->progress,
			    "rlrun train: note: no checkpoint in %s loads (%s%s); "
			    "checkpointing.resume is auto_or_fresh: starting afresh at step 1\n",
			    c->checkpoint_dir, refused, earlier);
		return 0;
	}
	err[0] = '\0';
	if (rl_trainer_rank(t) == 0)
		snprintf(err, errlen,
		         "checkpointing.resume is auto, but no checkpoint in %s loads (%s%s): "
		         "starting at step 1 would throw their steps away. Repair or remove them "
		         "(rlrun ckpt verify says what is wrong with each), or set "
		         "checkpointing.resume: auto_or_fresh to start afresh",
		         c->checkpoint_dir, refused, earlier);
	return -1;
}

/* Reads DIR into st while this rank's share of its files is checked
 * against the manifest in a thread: *verified says whether they matched
 * (why says why not). Returns whether the reading went well (err). */
static bool stage(struct rl_trainer *t, const char *dir, struct rl_ckpt_manifest *man,
                  struct rl_ckpt_run_state *s, struct staged *st, bool *verified, char *why,
                  size_t whylen, char *err, size_t errlen)
{
	struct rl_ckpt_shard_set sh = {0};
	struct rl_ckpt_verify v;

	*verified = false;
	if (rl_ckpt_manifest_read(dir, man, why, whylen))
		return false;
	rl_ckpt_verify_start(&v, dir, man, rl_trainer_rank(t), rl_trainer_world_size(t));
	bool ok = check_state(t, dir, man->step, s, err, errlen) == 0 &&
	          rl_ckpt_shard_set_open(&sh, dir, man, err, errlen) == 0 &&
	          stage_tensors(t, &sh, st, err, errlen) == 0;
	*verified = rl_ckpt_verify_join(&v, why, whylen) == 0;
	rl_ckpt_shard_set_close(&sh);
	return ok;
}

int rl_trainer_resume(struct rl_trainer *t, int64_t *done_steps, char *err, size_t errlen)
{
	const struct rl_cfg_checkpointing *c = &t->cfg->checkpointing;
	const char *mode = c->resume;
	int n;
	int64_t *steps = list_steps(t, &n, err, errlen);
	bool loaded = false, failed = false;
	char refused[1400] = ""; /* each candidate refused, and why */

	*done_steps = 0;
	if (n < 0) {
		if (rl_trainer_rank(t) != 0)
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
		struct rl_ckpt_run_state s = {0};
		struct staged st = {0};
		bool mine;
		int ahead = 0;
		err[0] = '\0';
		bool read = stage(t, dir, &man, &s, &st, &mine, why, sizeof why, err, errlen);
		if (!all_ok(t, mine, "checkpoint verification")) {
			if (!mine)
				fprintf(stderr, "rlrun train: rank %d: %s is not loadable: %s\n",
				        rl_trainer_rank(t), dir, why);
			bool renamed = set_aside(t, c->checkpoint_dir, steps[i], i > 0);
			char kept[64] = "";
			if (renamed)
				snprintf(kept, sizeof kept, ", now rejected_step_%" PRId64,
				         steps[i]);
			list_add(refused, sizeof refused, "step_%" PRId64 ": %.200s%s", steps[i],
			         mine ? "not whole on another rank" : why, kept);
		} else if (all_ok(t, read && apply_staged(t, &st, &s, err, errlen) == 0,
		                  "checkpoint load") &&
		           /* on every rank, or on none: it broadcasts */
		           all_ok(t, take_buffer(t, dir, &man, &ahead, err, errlen) == 0,
		                  "rollout buffer")) {
			loaded = true;
			*done_steps = s.step;
			say_resumed(t, dir, &s);
			if (ahead == 1 && t->progress)
				fprintf(t->progress,
				        "rlrun train: step %" PRId64 " trains on the rollout in "
				        "flight that %s/%s holds, as the saved run would have\n",
				        s.step + 1, dir, RL_CKPT_ROLLOUT_BUFFER);
			else if (ahead > 1 && t->progress)
				fprintf(t->progress,
				        "rlrun train: steps %" PRId64 "-%" PRId64 " train on the "
				        "rollouts in flight that %s/%s holds, as the saved run "
				        "would have\n",
				        s.step + 1, s.step + ahead, dir, RL_CKPT_ROLLOUT_BUFFER);
		} else {
			/* a verified checkpoint that does not fit this run is the
			 * user's to sort out, not a reason to go further back */
			failed = true;
			if (!err[0])
				snprintf(err, errlen, "%s could not be loaded on another rank",
				         dir);
		}
		staged_free(&st);
		json_decref(s.metrics);
		rl_ckpt_manifest_free(&man);
	}
	free(steps);
	if (failed || (!loaded && none_loaded(t, n, refused, err, errlen)))
		return -1;
	/* what a crash left behind goes before anything new is written */
	int cleaned = 0;
	if (rl_trainer_rank(t) == 0)
		cleaned = rl_ckpt_clean_leftovers(c->checkpoint_dir, err, errlen) == 0;
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], &cleaned, 1, RL_COMM_I32, 0,
		                  "checkpoint leftovers");
	if (!cleaned && rl_trainer_rank(t) != 0)
		snprintf(err, errlen, "rank 0 cannot clean %s", c->checkpoint_dir);
	return cleaned ? 0 : -1;
}
