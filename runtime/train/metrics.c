#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/train/metrics.h"
#include "runtime/base/durable.h"

int rl_metrics_open(struct rl_metrics_log *log, const char *log_dir, char **kept_as, char *err,
                    size_t errlen)
{
	*kept_as = NULL;
	memset(log, 0, sizeof *log);
	if (rl_make_dirs(log_dir, "logger.log_dir", err, errlen))
		return -1;
	if (asprintf(&log->path, "%s/metrics.jsonl", log_dir) < 0) {
		log->path = NULL;
		snprintf(err, errlen, "%s: out of memory", log_dir);
		return -1;
	}
	if (access(log->path, F_OK) == 0) {
		/* never overwrite an earlier run's record */
		for (int n = 1; n < 100000; n++) {
			char *old;
			if (asprintf(&old, "%s/metrics.%d.jsonl", log_dir, n) < 0)
				break;
			if (access(old, F_OK) != 0 && errno == ENOENT) {
				/* link + unlink rather than rename: a concurrent run
				 * cannot make us replace its file */
				if (link(log->path, old) == 0 && unlink(log->path) == 0) {
					*kept_as = old;
					break;
				}
				snprintf(err, errlen, "cannot keep %s as %s: %s", log->path, old,
				         strerror(errno));
				free(old);
				goto fail;
			}
			free(old);
		}
	}
	log->f = fopen(log->path, "wx");
	if (!log->f) {
		snprintf(err, errlen, "cannot create %s: %s", log->path, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	free(log->path);
	log->path = NULL;
	return -1;
}

/* The "step" of a metrics line; -1 when it has none. */
static int64_t line_step(const char *line)
{
	json_t *o = json_loads(line, 0, NULL);
	json_t *v = json_object_get(o, "step");
	int64_t step = json_is_integer(v) ? json_integer_value(v) : -1;

	json_decref(o);
	return step;
}

int rl_metrics_open_resumed(struct rl_metrics_log *log, const char *log_dir, int64_t through,
                            char *err, size_t errlen)
{
	char *tmp = NULL, *line = NULL;
	size_t cap = 0;
	FILE *in = NULL, *out = NULL;
	int rc = -1;

	memset(log, 0, sizeof *log);
	if (rl_make_dirs(log_dir, "logger.log_dir", err, errlen))
		return -1;
	if (asprintf(&log->path, "%s/metrics.jsonl", log_dir) < 0 ||
	    asprintf(&tmp, "%s/metrics.jsonl.tmp", log_dir) < 0) {
		log->path = tmp = NULL;
		snprintf(err, errlen, "%s: out of memory", log_dir);
		goto out;
	}
	out = fopen(tmp, "w");
	if (!out) {
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	in = fopen(log->path, "r");
	/* a line cut short by a kill has no step and goes with the steps
	 * after the checkpoint */
	ssize_t n;
	while (in && (n = getline(&line, &cap, in)) > 0) {
		int64_t step = line[n - 1] == '\n' ? line_step(line) : -1;
		if (step >= 0 && step <= through && fputs(line, out) < 0)
			break;
	}
	if (ferror(out) || fflush(out) || fsync(fileno(out)) || rename(tmp, log->path) ||
	    rl_sync_parent(log->path)) {
		snprintf(err, errlen, "cannot rewrite %s: %s", log->path, strerror(errno));
		goto out;
	}
	log->f = out;
	out = NULL;
	rc = 0;
out:
	if (in)
		fclose(in);
	if (out) {
		fclose(out);
		unlink(tmp);
	}
	free(line);
	free(tmp);
	if (rc) {
		free(log->path);
		log->path = NULL;
	}
	return rc;
}

static void put_num(json_t *o, const char *key, double v)
{
	/* JSON has no NaN or infinity: a diverged value is written as null */
	json_object_set_new(o, key, isfinite(v) ? json_real(v) : json_null());
}

/* num_params and mem_KIND_bytes, at the end of the line that has them
 * (after the timers, which the tests that compare two runs leave out) */
static void memory_json(json_t *o, const struct rl_step_metrics *m)
{
	if (!m->has_memory)
		return;
	json_object_set_new(o, "num_params", json_integer(m->num_params));
	for (int k = 0; k < RL_MEM_KINDS; k++) {
		char key[64];

		snprintf(key, sizeof key, "mem_%s_bytes", rl_mem_kind_name((enum rl_mem_kind)k));
		json_object_set_new(o, key, json_integer(m->mem_bytes[k]));
	}
}

/* SFT's line: NeMo-RL's train/ and validation/ metrics of sft.py, and its
 * timers */
static json_t *supervised_json(json_t *o, const struct rl_step_metrics *m)
{
	json_object_set_new(o, "step", json_integer(m->step));
	if (m->has_val)
		put_num(o, "val_loss", m->val_loss);
	if (m->tokens == 0) {
		/* sft.val_at_start's line: validation, no training step */
		put_num(o, "validation", m->t.validation);
		return o;
	}
	put_num(o, "loss", m->loss);
	put_num(o, "grad_norm", m->grad_norm);
	put_num(o, "lr", m->lr);
	if (m->moe)
		put_num(o, "moe_aux_loss", m->moe_aux_loss);
	json_object_set_new(o, "global_valid_toks", json_integer(m->valid_tokens));
	json_object_set_new(o, "tokens", json_integer(m->tokens));
	put_num(o, "tokens_per_sec", m->tokens_per_sec);
	put_num(o, "total_step_time", m->t.total_step_time);
	put_num(o, "data_processing", m->t.data_processing);
	put_num(o, "policy_training", m->t.policy_training);
	put_num(o, "checkpointing", m->t.checkpointing);
	put_num(o, "validation", m->t.validation);
	memory_json(o, m);
	return o;
}

/* An extra metric by name (NAN when the step has none) */
static double extra(const struct rl_step_metrics *m, const char *name)
{
	for (int i = 0; i < m->n_extra; i++)
		if (strcmp(m->extra[i].name, name) == 0)
			return m->extra[i].v;
	return NAN;
}

/* DPO's line: NeMo-RL's train/ and validation/ metrics of dpo.py (its
 * extras, in the order the step and the validation put them), and the
 * timers it has */
static json_t *preference_json(json_t *o, const struct rl_step_metrics *m)
{
	json_object_set_new(o, "step", json_integer(m->step));
	if (m->tokens > 0)
		put_num(o, "loss", m->loss);
	for (int i = 0; i < m->n_extra; i++)
		put_num(o, m->extra[i].name, m->extra[i].v);
	if (m->tokens == 0) {
		/* dpo.val_at_start's line: validation, no training step */
		put_num(o, "validation", m->t.validation);
		return o;
	}
	put_num(o, "grad_norm", m->grad_norm);
	put_num(o, "lr", m->lr);
	if (m->moe)
		put_num(o, "moe_aux_loss", m->moe_aux_loss);
	/* the pairs too long for max_total_sequence_length, left out */
	json_object_set_new(o, "prompts_truncated", json_integer(m->prompts_truncated));
	json_object_set_new(o, "tokens", json_integer(m->tokens));
	put_num(o, "tokens_per_sec", m->tokens_per_sec);
	put_num(o, "total_step_time", m->t.total_step_time);
	put_num(o, "policy_and_reference_logprobs", m->t.policy_and_reference_logprobs);
	put_num(o, "policy_training", m->t.policy_training);
	put_num(o, "checkpointing", m->t.checkpointing);
	put_num(o, "validation", m->t.validation);
	memory_json(o, m);
	return o;
}

json_t *rl_metrics_json(const struct rl_step_metrics *m)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (m->supervised)
		return supervised_json(o, m);
	if (m->preference)
		return preference_json(o, m);
	json_object_set_new(o, "step", json_integer(m->step));
	put_num(o, "reward_mean", m->reward_mean);
	put_num(o, "reward_std", m->reward_std);
	if (m->has_val)
		put_num(o, "val_reward", m->val_reward);
	put_num(o, "loss", m->loss);
	put_num(o, "actor_loss", m->actor_loss);
	put_num(o, "kl", m->kl);
	if (m->distill)
		put_num(o, "reverse_kl", m->reverse_kl);
	put_num(o, "token_mult_prob_error", m->token_mult_prob_error);
	put_num(o, "gen_logprob_max_diff", m->gen_logprob_max_diff);
	put_num(o, "probs_ratio", m->probs_ratio);
	put_num(o, "clip_fraction", m->clip_fraction);
	put_num(o, "importance_weight", m->importance_weight);
	if (m->moe)
		put_num(o, "moe_aux_loss", m->moe_aux_loss);
	put_num(o, "grad_norm", m->grad_norm);
	put_num(o, "lr", m->lr);
	put_num(o, "response_tokens_mean", m->response_tokens_mean);
	put_num(o, "truncated_fraction", m->truncated_fraction);
	if (m->multi_turn) {
		put_num(o, "avg_turns_per_sample", m->avg_turns_per_sample);
		json_object_set_new(o, "max_turns_per_sample",
		                    json_integer(m->max_turns_per_sample));
		put_num(o, "natural_termination_rate", m->natural_termination_rate);
		put_num(o, "max_turns_reached_rate", m->max_turns_reached_rate);
		put_num(o, "mean_total_tokens_per_sample", m->mean_total_tokens_per_sample);
		put_num(o, "mean_env_tokens_per_sample", m->mean_env_tokens_per_sample);
		json_object_set_new(o, "max_gen_tokens_per_sample",
		                    json_integer(m->max_gen_tokens_per_sample));
		json_object_set_new(o, "env_failures", json_integer(m->env_failures));
	}
	if (m->dynamic_sampling) {
		put_num(o, "filtered_reward", m->filtered_reward);
		json_object_set_new(o, "dynamic_sampling_num_gen_batches",
		                    json_integer(m->ds_num_gen_batches));
		json_object_set_new(o, "dynamic_sampling_num_discarded_valid_samples",
		                    json_integer(m->ds_discarded_valid_samples));
		json_object_set_new(o, "dynamic_sampling_num_dropped_groups",
		                    json_integer(m->ds_dropped_groups));
	}
	json_object_set_new(o, "reward_failures", json_integer(m->reward_failures));
	json_object_set_new(o, "prompts_truncated", json_integer(m->prompts_truncated));
	json_object_set_new(o, "tokens", json_integer(m->tokens));
	put_num(o, "tokens_per_sec", m->tokens_per_sec);
	put_num(o, "total_step_time", m->t.total_step_time);
	put_num(o, "generation", m->t.generation);
	put_num(o, "reward_calculation", m->t.reward_calculation);
	put_num(o, "policy_and_reference_logprobs", m->t.policy_and_reference_logprobs);
	put_num(o, "policy_training", m->t.policy_training);
	put_num(o, "refit", m->t.refit);
	put_num(o, "checkpointing", m->t.checkpointing);
	put_num(o, "validation", m->t.validation);
	if (m->t.async) {
		put_num(o, "exposed_generation", m->t.exposed_generation);
		put_num(o, "weight_sync", m->t.refit);
		put_num(o, "idle/buffer_starvation", m->t.buffer_starvation);
		json_object_set_new(o, "avg_trajectory_age", json_integer(m->trajectory_age));
	}
	for (int i = 0; i < m->n_gpus; i++) {
		const struct rl_gpu_stat *g = &m->gpus[i];
		char key[96];

		snprintf(key, sizeof key, "node.%d.gpu.%u.mem_gb", g->node, g->index);
		put_num(o, key, g->mem_gb);
		snprintf(key, sizeof key, "node.%d.gpu.%u.mem_total_gb", g->node, g->index);
		put_num(o, key, g->mem_total_gb);
		snprintf(key, sizeof key, "node.%d.gpu.%u.util", g->node, g->index);
		put_num(o, key, g->util);
	}
	memory_json(o, m);
	return o;
}

/* metrics.jsonl's names that NeMo-RL logs under a name of its own; the
 * timers are its timing/train/ names already, the GPUs' its GPU
 * monitor's; a key val_X is validation/X, every other train/KEY */
static const struct {
	const char *key, *tag;
} renamed[] = {
    {"reward_mean", "train/reward"},
    {"val_reward", "validation/accuracy"},
    {"response_tokens_mean", "train/mean_gen_tokens_per_sample"},
    {"truncated_fraction", "train/truncation_rate"},
    {"tokens", "train/total_num_tokens"},
    {"tokens_per_sec", "performance/tokens_per_sec"},
    {"validation", "timing/validation/total_validation_time"},
};
static const char *const timers[] = {"total_step_time",
                                     "generation",
                                     "data_processing",
                                     "reward_calculation",
                                     "policy_and_reference_logprobs",
                                     "policy_training",
                                     "refit",
                                     "checkpointing",
                                     "exposed_generation",
                                     "weight_sync",
                                     "idle/buffer_starvation"};

const char *rl_metrics_tag(const char *key, char *buf, size_t len)
{
	for (size_t i = 0; i < sizeof renamed / sizeof *renamed; i++)
		if (strcmp(key, renamed[i].key) == 0)
			return renamed[i].tag;
	for (size_t i = 0; i < sizeof timers / sizeof *timers; i++)
		if (strcmp(key, timers[i]) == 0) {
			snprintf(buf, len, "timing/train/%s", key);
			return buf;
		}
	if (strncmp(key, "val_", 4) == 0) {
		snprintf(buf, len, "validation/%s", key + 4);
		return buf;
	}
	snprintf(buf, len, "%s/%s", strncmp(key, "node.", 5) == 0 ? "ray" : "train", key);
	return buf;
}

int rl_metrics_open_tensorboard(struct rl_metrics_log *log, const char *dir, int64_t through,
                                char *err, size_t errlen)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	double wall = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
	if (rl_tb_open(&log->tb, dir, wall, err, errlen))
		return -1;
	if (through > 0 && (rl_tb_purge_from(&log->tb, through + 1, wall, err, errlen) ||
	                    rl_tb_flush(&log->tb, err, errlen))) {
		rl_tb_close(&log->tb);
		return -1;
	}
	return 0;
}

/* Every number of the step's line, one scalar each; nulls (a diverged
 * value, a step without training reward) are left out. */
static int write_tensorboard(struct rl_metrics_log *log, const struct rl_step_metrics *m, json_t *o,
                             char *err, size_t errlen)
{
	struct timespec now;
	const char *key;
	json_t *v;

	clock_gettime(CLOCK_REALTIME, &now);
	double wall = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
	int64_t step = json_integer_value(json_object_get(o, "step"));
	json_object_foreach(o, key, v)
	{
		char buf[160];

		if (strcmp(key, "step") == 0 || !json_is_number(v))
			continue;
		/* NeMo-RL's SFT logs its val_loss as validation/val_loss (its
		 * DPO, whose val_loss is validation/loss, as the rule says) */
		const char *tag = m->supervised && strcmp(key, "val_loss") == 0
		                      ? "validation/val_loss"
		                      : rl_metrics_tag(key, buf, sizeof buf);
		if (rl_tb_scalar(&log->tb, tag, json_number_value(v), step, wall, err, errlen))
			return -1;
	}
	return rl_tb_flush(&log->tb, err, errlen);
}

int rl_metrics_write(struct rl_metrics_log *log, const struct rl_step_metrics *m, char *err,
                     size_t errlen)
{
	json_t *o = rl_metrics_json(m);
	char *line =
	    o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) : NULL;
	int rc = -1;

	if (!line)
		snprintf(err, errlen, "%s: out of memory", log->path);
	else if (fprintf(log->f, "%s\n", line) < 0 || fflush(log->f))
		snprintf(err, errlen, "%s: %s", log->path, strerror(errno));
	else if (!log->tb.f || write_tensorboard(log, m, o, err, errlen) == 0)
		rc = 0;
	free(line);
	json_decref(o);
	return rc;
}

void rl_metrics_close(struct rl_metrics_log *log)
{
	if (log->f)
		fclose(log->f);
	rl_tb_close(&log->tb);
	free(log->path);
	memset(log, 0, sizeof *log);
}

static void gpu_line(FILE *out, const struct rl_step_metrics *m);

/* SFT's two lines: the loss and its tokens, then the time */
static void supervised_progress(FILE *out, const struct rl_step_metrics *m, long eta)
{
	const struct rl_step_timers *t = &m->t;

	fprintf(
	    out,
	    "step %lld/%lld  loss %.4f  grad norm %.3g  lr %.2e  %lld tokens, %lld in the loss\n",
	    (long long)m->step, (long long)m->total_steps, m->loss, m->grad_norm, m->lr,
	    (long long)m->tokens, (long long)m->valid_tokens);
	fprintf(out,
	        "    data %.2fs  train %.2fs  ckpt %.2fs | %.2f s/step, %.0f tok/s, ETA %ld:%02ld",
	        t->data_processing, t->policy_training, t->checkpointing, t->total_step_time,
	        m->tokens_per_sec, eta / 60, eta % 60);
	gpu_line(out, m);
	rl_metrics_progress_validation(out, m);
	fflush(out);
}

/* DPO's two lines: the loss, the reward accuracy and margin, then the time */
static void preference_progress(FILE *out, const struct rl_step_metrics *m, long eta)
{
	const struct rl_step_timers *t = &m->t;

	fprintf(out,
	        "step %lld/%lld  loss %.4f  accuracy %.3f  margin %+.3f  grad norm %.3g  lr %.2e"
	        "  %.0f pairs\n",
	        (long long)m->step, (long long)m->total_steps, m->loss, extra(m, "accuracy"),
	        extra(m, "rewards_margin_mean"), m->grad_norm, m->lr,
	        extra(m, "num_valid_samples"));
	fprintf(out,
	        "    logprobs %.2fs  train %.2fs  ckpt %.2fs | %.2f s/step, %.0f tok/s, ETA "
	        "%ld:%02ld",
	        t->policy_and_reference_logprobs, t->policy_training, t->checkpointing,
	        t->total_step_time, m->tokens_per_sec, eta / 60, eta % 60);
	gpu_line(out, m);
	rl_metrics_progress_validation(out, m);
	fflush(out);
}

void rl_metrics_progress_validation(FILE *out, const struct rl_step_metrics *m)
{
	if (!m->has_val)
		return;
	fprintf(out, "step %lld/%lld  validation ", (long long)m->step, (long long)m->total_steps);
	if (m->supervised)
		fprintf(out, "loss %.4f", m->val_loss);
	else if (m->preference)
		fprintf(out, "loss %.4f, accuracy %.3f", extra(m, "val_loss"),
		        extra(m, "val_accuracy"));
	else
		fprintf(out, "reward %.3f", m->val_reward);
	fprintf(out, " (%.2fs)\n", m->t.validation);
}

/* the fullest GPU and the mean utilisation, and the line's end */
static void gpu_line(FILE *out, const struct rl_step_metrics *m)
{
	if (m->n_gpus > 0) {
		double used = 0, total = 0, util = 0;
		for (int i = 0; i < m->n_gpus; i++) {
			if (m->gpus[i].mem_gb >= used)
				used = m->gpus[i].mem_gb, total = m->gpus[i].mem_total_gb;
			util += m->gpus[i].util / m->n_gpus;
		}
		fprintf(out, " | GPU %.1f/%.0f GiB, %.0f%% busy", used, total, util);
	}
	fputc('\n', out);
}

void rl_metrics_progress(FILE *out, const struct rl_step_metrics *m, double eta_s)
{
	const struct rl_step_timers *t = &m->t;
	long eta = isfinite(eta_s) && eta_s > 0 ? lround(eta_s) : 0;

	if (m->supervised) {
		supervised_progress(out, m, eta);
		return;
	}
	if (m->preference) {
		preference_progress(out, m, eta);
		return;
	}
	/* what NeMo-RL's users watch, then where the step's time went */
	fprintf(out,
	        "step %lld/%lld  reward %.3f ±%.3f  loss %+.4f  kl %.4f  grad norm %.3g  lr %.2e"
	        "  response %.0f tok, %.0f%% cut  reward failures %lld",
	        (long long)m->step, (long long)m->total_steps, m->reward_mean, m->reward_std,
	        m->loss, m->kl, m->grad_norm, m->lr, m->response_tokens_mean,
	        100 * m->truncated_fraction, (long long)m->reward_failures);
	if (m->dynamic_sampling)
		fprintf(
		    out,
		    "  dynamic sampling: trained on reward %.3f, %lld round%s, %lld groups dropped",
		    m->filtered_reward, (long long)m->ds_num_gen_batches,
		    m->ds_num_gen_batches == 1 ? "" : "s", (long long)m->ds_dropped_groups);
	if (m->multi_turn)
		fprintf(out, "  episodes: %.2f turns, %.0f%% done, %lld env failures",
		        m->avg_turns_per_sample, 100 * m->natural_termination_rate,
		        (long long)m->env_failures);
	fputc('\n', out);
	fprintf(out,
	        "    gen %.2fs  reward %.2fs  logprobs %.2fs  train %.2fs  refit %.3fs  ckpt %.2fs"
	        " | %.2f s/step, %.0f tok/s, ETA %ld:%02ld",
	        t->generation, t->reward_calculation, t->policy_and_reference_logprobs,
	        t->policy_training, t->refit, t->checkpointing, t->total_step_time,
	        m->tokens_per_sec, eta / 60, eta % 60);
	gpu_line(out, m);
	rl_metrics_progress_validation(out, m);
	fflush(out);
}

void rl_run_summary_add(struct rl_run_summary *s, const struct rl_step_metrics *m)
{
	if (m->supervised) {
		/* the loss in the reward's place, lower is better: negated in,
		 * negated out (rl_run_summary_print) */
		struct rl_step_metrics n = *m;

		n.supervised = false;
		n.reward_mean = -m->loss;
		n.val_reward = -m->val_loss;
		rl_run_summary_add(s, &n);
		s->supervised = true;
		return;
	}
	if (m->preference) {
		/* the reward accuracy in the reward's place */
		struct rl_step_metrics n = *m;

		n.preference = false;
		n.reward_mean = m->tokens > 0 ? extra(m, "accuracy") : NAN;
		n.val_reward = extra(m, "val_accuracy");
		rl_run_summary_add(s, &n);
		s->preference = true;
		return;
	}
	if (s->steps++ == 0) {
		s->first_step = m->step;
		s->first_reward = m->reward_mean;
		s->best_reward = NAN;
		s->best_val = s->final_val = NAN;
	}
	s->last_step = m->step;
	s->final_reward = m->reward_mean;
	s->seconds += m->t.total_step_time;
	s->tokens += m->tokens;
	if (isfinite(m->reward_mean) && !(m->reward_mean <= s->best_reward))
		s->best_reward = m->reward_mean, s->best_step = m->step;
	if (m->has_val && isfinite(m->val_reward)) {
		s->final_val = m->val_reward, s->final_val_step = m->step;
		if (!(m->val_reward <= s->best_val))
			s->best_val = m->val_reward, s->best_val_step = m->step;
	}
}

void rl_run_summary_print(FILE *out, const struct rl_run_summary *s, const char *log_dir,
                          const char *tb_dir, const char *ckpt_dir)
{
	long secs = lround(s->seconds);

	if (s->steps == 0)
		return;
	fprintf(out,
	        "rlrun train: %lld step%s (%lld to %lld) in %ld:%02ld:%02ld, %.2f s/step, %.0f "
	        "tok/s\n",
	        (long long)s->steps, s->steps == 1 ? "" : "s", (long long)s->first_step,
	        (long long)s->last_step, secs / 3600, secs / 60 % 60, secs % 60,
	        s->seconds / (double)s->steps, s->seconds > 0 ? (double)s->tokens / s->seconds : 0);
	double sign = s->supervised ? -1 : 1;
	const char *what = s->supervised ? "loss" : s->preference ? "reward accuracy" : "reward";
	fprintf(out,
	        "rlrun train: %s %.3f at step %lld, %.3f at step %lld; best %.3f at step %lld\n",
	        what, sign * s->first_reward, (long long)s->first_step, sign * s->final_reward,
	        (long long)s->last_step, sign * s->best_reward, (long long)s->best_step);
	if (isfinite(s->final_val))
		fprintf(out,
		        "rlrun train: validation %s %.3f at step %lld; best %.3f at step %lld\n",
		        what, sign * s->final_val, (long long)s->final_val_step, sign * s->best_val,
		        (long long)s->best_val_step);
	fprintf(out, "rlrun train: metrics in %s/metrics.jsonl (plots: rlrun plot %s)\n", log_dir,
	        log_dir);
	if (tb_dir)
		fprintf(out, "rlrun train: TensorBoard files in %s (tensorboard --logdir %s)\n",
		        tb_dir, tb_dir);
	if (ckpt_dir)
		fprintf(out, "rlrun train: checkpoints in %s (rlrun ckpt list %s)\n", ckpt_dir,
		        ckpt_dir);
	fflush(out);
}
