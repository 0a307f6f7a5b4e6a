/* Saving a GRPO run. Each rank writes one shard with the pieces only it
 * holds: the weights of its cut of the model, each tensor by one of the
 * ranks that hold the same cut (spread over data and context parallel);
 * the Adam moments as the distributed optimizer's slices, which no other
 * rank has. The first rank adds the run state and the config. Training
 * waits only while the pieces are copied to host memory; a thread writes
 * them, and the commit (manifest, rename, latest) happens at a later step
 * boundary once every rank's thread is done. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/base/clock.h"
#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/retain.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/store.h"
#include "runtime/job/slurm_job.h"
#include "runtime/rollout/replay_buffer.h"
#include "runtime/train/checkpoint.h"

/* per rank, after a write: ok, shard bytes, shard xxh3, microseconds */
enum { SUMS = 4 };

void rl_trainer_param_block(const struct rl_trainer *t, int i, struct rl_ckpt_block *b)
{
	const struct rl_model *m = t->model;
	const struct rl_param *p = &m->params[i];

	memset(b, 0, sizeof *b);
	b->tensor = p->name;
	b->ndim = p->ndim;
	for (int d = 0; d < p->ndim; d++) {
		b->global_shape[d] = p->full_shape[d];
		b->shape[d] = p->shape[d];
	}
	if (p->split_dim >= 0) {
		int64_t len;

		rl_split_range(p->full_shape[p->split_dim], m->shard.tp.size, m->shard.tp.rank,
		               &b->offset[p->split_dim], &len);
	}
}

static int axis_size(const struct rl_trainer *t, enum rl_axis a)
{
	return t->dist ? t->dist->layout.size[a] : 1;
}

static int add_piece(struct rl_ckpt_save *s, const struct rl_ckpt_block *b, enum rl_ckpt_kind kind,
                     int64_t flat_start, int64_t flat_len, const float *src)
{
	if (s->n_pieces == s->pieces_cap) {
		int cap = s->pieces_cap ? 2 * s->pieces_cap : 64;
		struct rl_ckpt_piece *more = realloc(s->pieces, (size_t)cap * sizeof *more);
		if (!more)
			return -1;
		s->pieces = more;
		s->pieces_cap = cap;
	}
	struct rl_ckpt_piece *p = &s->pieces[s->n_pieces++];
	memset(p, 0, sizeof *p);
	snprintf(p->tensor, sizeof p->tensor, "%s", b->tensor);
	p->kind = kind;
	p->ndim = b->ndim;
	for (int d = 0; d < b->ndim; d++) {
		p->global_shape[d] = b->global_shape[d];
		p->block_offset[d] = b->offset[d];
		p->block_shape[d] = b->shape[d];
	}
	p->flat_start = flat_start;
	p->flat_len = flat_len;
	p->data = src; /* backend memory until the host copy */
	return 0;
}

/* Written by exactly one rank of the model's copies: not a tensor-parallel
 * replica, nor the last stage's copy of a tied embedding. */
static bool saved_here(const struct rl_param *p)
{
	return !p->replica && !p->tied_copy;
}

/* The Adam moments: the distributed optimizer's slices, as runs of the
 * tensors they cut through, or the whole of every tensor on one rank. */
static int plan_moments(struct rl_trainer *t, struct rl_ckpt_save *s)
{
	const struct rl_model *m = t->model;

	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		struct rl_ckpt_block b;

		if (!saved_here(p))
			continue;
		rl_trainer_param_block(t, i, &b);
		if (!t->dist) {
			if (add_piece(s, &b, RL_CKPT_EXP_AVG, 0, p->numel, t->opt.m + p->offset) ||
			    add_piece(s, &b, RL_CKPT_EXP_AVG_SQ, 0, p->numel, t->opt.v + p->offset))
				return -1;
			continue;
		}
		/* an expert's moments are in the experts' region */
		const struct rl_zero *z =
		    p->offset >= t->model->expert_start ? &t->zero_experts : &t->zero;
		for (int k = 0; k < z->n_buckets; k++) {
			int64_t from, len, at;

			rl_zero_slice(z, k, &from, &len, &at);
			int64_t lo = from > p->offset ? from : p->offset;
			int64_t hi =
			    from + len < p->offset + p->numel ? from + len : p->offset + p->numel;
			if (lo >= hi)
				continue;
			if (add_piece(s, &b, RL_CKPT_EXP_AVG, lo - p->offset, hi - lo,
			              z->m + at + (lo - from)) ||
			    add_piece(s, &b, RL_CKPT_EXP_AVG_SQ, lo - p->offset, hi - lo,
			              z->v + at + (lo - from)))
				return -1;
		}
	}
	return 0;
}

/* Which of the ranks that hold the same tensors writes each: spread over
 * them in turn; the experts' holders under expert parallelism are their
 * own group. */
struct spread {
	int size, rank, next;
};

static struct spread spread_over(struct rl_comm *c)
{
	return (struct spread){c ? rl_comm_size(c) : 1, c ? rl_comm_rank(c) : 0, 0};
}

static int plan(struct rl_trainer *t, struct rl_ckpt_save *s)
{
	const struct rl_model *m = t->model;
	struct spread dense = spread_over(t->dist ? t->dist->g[RL_G_DP_CP] : NULL);
	struct spread experts = spread_over(t->dist ? t->dist->g[RL_G_EDP] : NULL);

	s->n_pieces = 0;
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		struct spread *by = p->offset >= m->expert_start ? &experts : &dense;
		struct rl_ckpt_block b;

		if (!saved_here(p) || by->next++ % by->size != by->rank)
			continue;
		rl_trainer_param_block(t, i, &b);
		if (add_piece(s, &b, RL_CKPT_WEIGHT, 0, p->numel, p->master))
			return -1;
	}
	return plan_moments(t, s);
}

/* Every piece into host memory, which the pieces then point to. */
static int copy_to_host(struct rl_trainer *t, struct rl_ckpt_save *s, char *err, size_t errlen)
{
	size_t total = 0, at = 0;

	for (int i = 0; i < s->n_pieces; i++)
		total += (size_t)s->pieces[i].flat_len;
	if (total > s->host_cap) {
		float *more = realloc(s->host, total * sizeof *more);
		if (!more) {
			snprintf(err, errlen, "out of memory for a host copy of %zu MB",
			         total * sizeof(float) >> 20);
			return -1;
		}
		s->host = more;
		s->host_cap = total;
	}
	for (int i = 0; i < s->n_pieces; i++) {
		struct rl_ckpt_piece *p = &s->pieces[i];
		size_t bytes = (size_t)p->flat_len * sizeof(float);

		if (t->model->ops->to_host(s->host + at, p->data, bytes, NULL)) {
			snprintf(err, errlen, "the %s backend cannot copy %s to host memory",
			         t->model->ops->name, p->tensor);
			return -1;
		}
		p->data = s->host + at;
		at += (size_t)p->flat_len;
	}
	return 0;
}

static char *config_text(const struct rl_config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	int bad = rl_config_write_yaml(cfg, f);
	if (fclose(f) || bad) {
		free(text);
		return NULL;
	}
	return text;
}

/* data: where the data stood before the rollouts in flight (the resume
 * takes their prompts again and checks them against the buffer's, and a
 * resume that does not use the buffer goes on as it should) */
static char *run_state_text(const struct rl_trainer *t, int64_t step,
                            const struct rl_step_metrics *m, const struct rl_data_position *pos)
{
	struct rl_slurm_job job;

	rl_slurm_job_from_env(&job);
	struct rl_ckpt_run_state s = {
	    .step = step,
	    .optimizer_steps = t->optimizer_steps,
	    .consumed_samples = step * t->samples_per_step,
	    .seed = (uint64_t)t->cfg->grpo.seed,
	    .reference_xxh3 = t->reference_xxh3,
	    .teacher_xxh3 = t->teacher_xxh3,
	    .world_size = rl_trainer_world_size(t),
	    .tensor = axis_size(t, RL_AXIS_TP),
	    .pipeline = axis_size(t, RL_AXIS_PP),
	    .context = axis_size(t, RL_AXIS_CP),
	    .data = axis_size(t, RL_AXIS_DP),
	    .slurm_job_id = job.id,
	    .restart_count = job.restart_count,
	    .metrics = rl_metrics_json(m),
	};
	s.data_epoch = pos->epoch;
	s.data_position = pos->position;
	s.data_examples = pos->examples;
	s.data_next_problem = pos->next_problem;
	rl_ckpt_model_signature(&t->model->cfg, s.model_signature, sizeof s.model_signature);
	char *text = rl_ckpt_run_state_json(&s);
	json_decref(s.metrics);
	return text;
}

/* RL_CKPT_WRITE_DELAY (rlrun(1)): the tests' way to land a signal or a
 * kill inside a write, between this rank's shard and the commit. */
static void write_delay(void)
{
	const char *v = getenv("RL_CKPT_WRITE_DELAY");
	double seconds = v ? strtod(v, NULL) : 0;

	if (seconds > 0 && seconds < 3600) {
		struct timespec ts = {(time_t)seconds,
		                      (long)((seconds - (double)(time_t)seconds) * 1e9)};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

/* The thread's part: every file this rank contributes, made durable. */
static int write_files(struct rl_ckpt_save *s, const char *root, int rank)
{
	char name[4300];

	if (rl_ckpt_begin(root, s->step, s->err, sizeof s->err) ||
	    rl_ckpt_path(s->dir, sizeof s->dir, root, s->step, true, s->err, sizeof s->err))
		return -1;
	snprintf(name, sizeof name, "%s/rank-%05d.safetensors", s->dir, rank);
	if (rl_ckpt_shard_write(name, s->pieces, s->n_pieces, &s->shard_sum, s->err, sizeof s->err))
		return -1;
	write_delay();
	if (rank == 0 &&
	    (rl_ckpt_write_file(s->dir, RL_CKPT_RUN_STATE, s->run_state, strlen(s->run_state),
	                        &s->run_state_sum, s->err, sizeof s->err) ||
	     rl_ckpt_write_file(s->dir, RL_CKPT_CONFIG, s->config, strlen(s->config),
	                        &s->config_sum, s->err, sizeof s->err)))
		return -1;
	if (rank == 0 && s->buffer.len &&
	    rl_ckpt_write_file(s->dir, RL_CKPT_ROLLOUT_BUFFER, s->buffer.buf, s->buffer.len,
	                       &s->buffer_sum, s->err, sizeof s->err))
		return -1;
	return 0;
}

struct writer_args {
	struct rl_ckpt_save *s;
	const char *root;
	int rank;
};

static void *writer(void *arg)
{
	struct writer_args *a = arg;

	a->s->rc = write_files(a->s, a->root, a->rank);
	a->s->finished = rl_now();
	atomic_store(&a->s->written, 1);
	free(a);
	return NULL;
}

/* The first rank's manifest and commit, after every rank's files are
 * durable; all[SUMS r ..] is rank r's (ok, bytes, xxh3, microseconds). */
static int commit(struct rl_trainer *t, struct rl_ckpt_save *s, const int64_t *all, char *err,
                  size_t errlen)
{
	const struct rl_cfg_checkpointing *c = &t->cfg->checkpointing;
	int n = rl_trainer_world_size(t);
	struct rl_ckpt_manifest man = {.step = s->step, .world_size = n};
	int rc = -1;

	for (int r = 0; r < n; r++)
		if (!all[SUMS * r]) {
			snprintf(err, errlen,
			         "checkpoint step_%" PRId64 " is not committed: rank %d could not "
			         "write its shard (its message says why)",
			         s->step, r);
			return -1;
		}
	man.files = calloc((size_t)n + 3, sizeof *man.files);
	if (!man.files) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int r = 0; r < n; r++) {
		snprintf(man.files[r].name, sizeof man.files[r].name, "rank-%05d.safetensors", r);
		man.files[r].sum.bytes = (uint64_t)all[SUMS * r + 1];
		man.files[r].sum.xxh3 = (uint64_t)all[SUMS * r + 2];
	}
	snprintf(man.files[n].name, sizeof man.files[n].name, "%s", RL_CKPT_RUN_STATE);
	man.files[n].sum = s->run_state_sum;
	snprintf(man.files[n + 1].name, sizeof man.files[n + 1].name, "%s", RL_CKPT_CONFIG);
	man.files[n + 1].sum = s->config_sum;
	man.n_files = n + 2;
	if (s->buffer.len) {
		snprintf(man.files[n + 2].name, sizeof man.files[n + 2].name, "%s",
		         RL_CKPT_ROLLOUT_BUFFER);
		man.files[n + 2].sum = s->buffer_sum;
		man.n_files++;
	}
	if (rl_ckpt_manifest_write(s->dir, &man, err, errlen) ||
	    rl_ckpt_commit(c->checkpoint_dir, s->step, err, errlen))
		goto out;
	rc = 0;
	if (c->keep_top_k.set &&
	    rl_ckpt_retain(c->checkpoint_dir, (int)c->keep_top_k.value, c->metric_name,
	                   c->higher_is_better, err, errlen) &&
	    t->progress)
		/* the new checkpoint is safe; an old one that stays is no loss */
		fprintf(t->progress, "rlrun train: warning: keep_top_k: %s\n", err);
out:
	free(man.files);
	return rc;
}

int rl_trainer_save_poll(struct rl_trainer *t, bool wait, char *err, size_t errlen)
{
	struct rl_ckpt_save *s = t->ckpt;
	int n = rl_trainer_world_size(t);

	if (!s || !s->in_flight)
		return 0;
	int written = wait ? 1 : atomic_load(&s->written);
	if (t->dist)
		rl_comm_all_reduce(t->dist->g[RL_G_WORLD], &written, 1, RL_COMM_I32, RL_COMM_MIN,
		                   "checkpoint write finished");
	if (!written)
		return 0;
	if (s->thread_started)
		pthread_join(s->thread, NULL);
	s->thread_started = false;
	s->in_flight = false;

	int64_t mine[SUMS] = {s->rc == 0, (int64_t)s->shard_sum.bytes, (int64_t)s->shard_sum.xxh3,
	                      (int64_t)((s->finished - s->started) * 1e6)};
	int64_t *all = calloc((size_t)n * SUMS, sizeof *all);
	int ok = 0;
	if (!all) {
		snprintf(err, errlen, "out of memory");
		return -1; /* every rank's calloc of a few bytes fails together or not at all */
	}
	if (t->dist)
		rl_comm_all_gather(t->dist->g[RL_G_WORLD], mine, all, SUMS, RL_COMM_I64,
		                   "checkpoint file sums");
	else
		memcpy(all, mine, sizeof mine);
	if (rl_trainer_rank(t) == 0) {
		ok = commit(t, s, all, err, errlen) == 0;
		s->last_seconds = 0;
		for (int r = 0; r < n; r++)
			if ((double)all[SUMS * r + 3] / 1e6 > s->last_seconds)
				s->last_seconds = (double)all[SUMS * r + 3] / 1e6;
	}
	free(all);
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], &ok, 1, RL_COMM_I32, 0,
		                  "checkpoint commit");
	if (s->rc) {
		snprintf(err, errlen, "checkpoint step_%" PRId64 ": %s", s->step, s->err);
		return -1;
	}
	if (!ok) {
		if (rl_trainer_rank(t) != 0)
			snprintf(err, errlen,
			         "checkpoint step_%" PRId64 " was not committed (rank 0 says why)",
			         s->step);
		return -1;
	}
	s->committed = s->step;
	if (t->progress)
		fprintf(t->progress, "rlrun train: checkpoint %s/step_%" PRId64 " committed\n",
		        t->cfg->checkpointing.checkpoint_dir, s->step);
	return 0;
}

int rl_trainer_save(struct rl_trainer *t, int64_t step, const struct rl_step_metrics *m, char *err,
                    size_t errlen)
{
	struct rl_ckpt_save *s = t->ckpt;

	if (rl_trainer_save_poll(t, true, err, errlen))
		return -1;
	rl_model_settle(t->model, 0, -1); /* the weights it copies */
	s->started = rl_now();
	s->step = step;
	s->rc = 0;
	s->err[0] = '\0';
	atomic_store(&s->written, 0);
	free(s->run_state);
	free(s->config);
	s->run_state = s->config = NULL;
	if (plan(t, s)) {
		snprintf(err, errlen, "out of memory planning checkpoint step_%" PRId64, step);
		return -1;
	}
	if (copy_to_host(t, s, err, errlen))
		return -1;
	/* every rank is here: the rollouts in flight are finished and saved
	 * with the step */
	if (rl_rollout_settle(&t->rollouts, err, errlen))
		return -1;
	s->buffer.len = 0;
	if (rl_trainer_rank(t) == 0) {
		struct rl_data_position pos;
		int packed = rl_rollout_save(&t->rollouts, &s->buffer, &pos);

		s->run_state = run_state_text(t, step, m, &pos);
		s->config = config_text(t->cfg);
		if (!s->run_state || !s->config || packed) {
			snprintf(err, errlen, "out of memory writing the run state");
			return -1;
		}
	}
	s->in_flight = true;
	struct writer_args *a = malloc(sizeof *a);
	if (a) {
		*a = (struct writer_args){s, t->cfg->checkpointing.checkpoint_dir,
		                          rl_trainer_rank(t)};
		if (t->cfg->checkpointing.async_save &&
		    pthread_create(&s->thread, NULL, writer, a) == 0)
			s->thread_started = true;
		else
			writer(a); /* synchronous by choice, or no thread to be had */
	} else {
		s->rc = -1;
		snprintf(s->err, sizeof s->err, "out of memory");
		atomic_store(&s->written, 1);
	}
	/* every rank polls at the same points, whatever happened here */
	return t->cfg->checkpointing.async_save ? 0 : rl_trainer_save_poll(t, true, err, errlen);
}

void rl_trainer_save_free(struct rl_trainer *t)
{
	struct rl_ckpt_save *s = t->ckpt;

	if (!s)
		return;
	if (s->thread_started)
		pthread_join(s->thread, NULL);
	free(s->host);
	free(s->pieces);
	free(s->run_state);
	free(s->config);
	rl_wire_free(&s->buffer);
	free(s);
	t->ckpt = NULL;
}
