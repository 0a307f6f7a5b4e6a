#define _GNU_SOURCE
/* The run: its setup agreed on by every rank, the resume, then step after
 * step with validation, checkpoints and the early stop, until the last
 * step or the end of the data; a generation rank serves instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/base/plural.h"
#include "runtime/chat/chat_template.h"
#include "runtime/job/failure.h"
#include "runtime/job/slurm_job.h"
#include "runtime/job/stop_signal.h"
#include "runtime/job/watch.h"
#include "runtime/rollout/serve.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/resume.h"
#include "runtime/train/setup.h"
#include "runtime/train/step.h"
#include "runtime/train/stop.h"
#include "runtime/train/train.h"
#include "runtime/train/validate.h"

/* SFT's second line: its steps are global batches of examples */
static void describe_sft(const struct rl_trainer *t, FILE *out)
{
	const struct rl_config *c = t->cfg;

	fprintf(out,
	        "rlrun sft: %lld step%s of %lld example%s from %s (%zu), one optimizer update "
	        "each; metrics in %s\n",
	        (long long)c->grpo.max_num_steps, rl_plural(c->grpo.max_num_steps),
	        (long long)c->policy.train_global_batch_size,
	        rl_plural(c->policy.train_global_batch_size), c->data.train_path, t->data.train.n,
	        t->log.path);
}

/* The parameters of this rank's shard of the policy. */
static int64_t shard_params(const struct rl_model *m)
{
	int64_t params = 0;

	for (int i = 0; i < m->n_params; i++)
		params += m->params[i].numel;
	return params;
}

/* What this rank's backend memory holds once the run is set up, by kind
 * (kernels/memory_use.h), per parameter of its shard; the activations and
 * the KV cache come with the steps, in the first step's metrics. */
static void describe_memory(const struct rl_trainer *t, FILE *out)
{
	struct rl_mem_use u;
	double p = (double)shard_params(t->model);
	const double mib = 1024.0 * 1024.0;

	rl_mem_use_read(&u);
	fprintf(out, "rlrun train: memory of rank 0 after setup (%.2fM parameters):", p / 1e6);
	for (int k = 0; k < RL_MEM_KINDS; k++) {
		if (k == RL_MEM_ACTIVATIONS || k == RL_MEM_KV_CACHE)
			continue;
		fprintf(out, "%s %s %.1f MiB (%.2f B/param)", k ? "," : "",
		        rl_mem_kind_name((enum rl_mem_kind)k), (double)u.live[k] / mib,
		        p > 0 ? (double)u.live[k] / p : 0.0);
	}
	fprintf(out, "; activations and KV cache in step %lld's mem_*_bytes\n",
	        (long long)t->resumed_step + 1);
}

static void describe(const struct rl_trainer *t, FILE *out)
{
	const struct rl_config *c = t->cfg;
	const struct rl_model_config *mc = &t->model->cfg;
	int64_t params = shard_params(t->model);
	if (c->algorithm == RL_ALGO_SFT) {
		/* SFT: examples from the data, no generation */
		fprintf(out,
		        "rlrun sft: %s (%s, %d layer%s, hidden %d, %.2fM parameters) on %s, data "
		        "%s\n",
		        c->policy.model_name, mc->architecture, mc->n_layers,
		        rl_plural(mc->n_layers), mc->hidden_size, (double)params / 1e6,
		        t->model->ops->name, c->data.dataset_name);
		describe_sft(t, out);
	} else if (c->algorithm == RL_ALGO_DPO) {
		/* DPO: pairs of sequences from the data, no generation */
		fprintf(out,
		        "rlrun dpo: %s (%s, %d layer%s, hidden %d, %.2fM parameters) on %s, data "
		        "%s\n"
		        "rlrun dpo: %lld step%s of %lld preference pair%s (%lld sequences), one "
		        "optimizer update per step; metrics in %s\n",
		        c->policy.model_name, mc->architecture, mc->n_layers,
		        rl_plural(mc->n_layers), mc->hidden_size, (double)params / 1e6,
		        t->model->ops->name, c->data.dataset_name, (long long)c->grpo.max_num_steps,
		        rl_plural(c->grpo.max_num_steps),
		        (long long)c->policy.train_global_batch_size,
		        rl_plural(c->policy.train_global_batch_size),
		        (long long)t->samples_per_step, t->log.path);
	} else {
		fprintf(
		    out,
		    "rlrun train: %s (%s, %d layer%s, hidden %d, %.2fM parameters) on %s, data %s, "
		    "reward %s\n"
		    "rlrun train: %lld step%s of %lld prompt%s x %lld sample%s, %lld optimizer "
		    "update%s per step; metrics in %s\n",
		    c->policy.model_name, mc->architecture, mc->n_layers, rl_plural(mc->n_layers),
		    mc->hidden_size, (double)params / 1e6, t->model->ops->name,
		    c->data.dataset_name, t->reward.name, (long long)c->grpo.max_num_steps,
		    rl_plural(c->grpo.max_num_steps), (long long)c->grpo.num_prompts_per_step,
		    rl_plural(c->grpo.num_prompts_per_step),
		    (long long)c->grpo.num_generations_per_prompt,
		    rl_plural(c->grpo.num_generations_per_prompt), (long long)t->updates_per_step,
		    rl_plural(t->updates_per_step), t->log.path);
	}
	describe_memory(t, out);
	fprintf(out, "rlrun train: precision %s%s%s\n", c->policy.precision,
	        t->model->precision == RL_BF16
	            ? " (the passes read the weights rounded to bf16; fp32 master weights, "
	              "gradients and moments)"
	            : "",
	        c->policy.parallel.activation_checkpointing
	            ? "; activation checkpointing: each layer recomputed in the backward pass"
	            : "");
	if (t->data.prompt.chat)
		fprintf(out, "rlrun train: prompts through the chat template of %s\n",
		        rl_chat_template_source(t->data.prompt.chat));
	if (c->grpo.use_dynamic_sampling)
		fprintf(out,
		        "rlrun train: dynamic sampling: groups whose rewards are all equal are "
		        "dropped; rounds of %d prompts until %lld are kept, at most %lld a step\n",
		        (int)((double)c->grpo.num_prompts_per_step * c->grpo.batch_multiplier),
		        (long long)c->grpo.num_prompts_per_step,
		        (long long)c->grpo.dynamic_sampling_max_gen_batches);
	if (t->remote_generation)
		fprintf(out,
		        "rlrun train: %d training rank%s; generation on %d rank%s of their own "
		        "(tensor parallel %lld), refit after each step\n",
		        t->dist->size, rl_plural(t->dist->size), t->dist->all_size - t->dist->size,
		        rl_plural(t->dist->all_size - t->dist->size),
		        (long long)c->policy.generation.tensor_parallel_size);
	fflush(out);
}

/* The first step's line carries this rank's memory by kind: the most
 * each kind has held so far. */
static void note_memory(const struct rl_trainer *t, struct rl_step_metrics *m)
{
	struct rl_mem_use u;

	rl_mem_use_read(&u);
	m->has_memory = true;
	m->num_params = shard_params(t->model);
	for (int k = 0; k < RL_MEM_KINDS; k++)
		m->mem_bytes[k] = (int64_t)u.peak[k];
}

/* After setup, which holds no collective, every rank has either failed or
 * not: they agree on it, so that a refusal every rank meets (a model the
 * layout cannot cut) is one message and a plain exit, not an abort. The
 * first rank that failed keeps its message; the others' err is empty. */
static bool failed_somewhere(struct rl_comm *group, bool failed, char *err)
{
	int me = rl_comm_rank(group), size = rl_comm_size(group);
	int first = failed ? me : size;

	rl_comm_all_reduce(group, &first, 1, RL_COMM_I32, RL_COMM_MIN, "setup agreement");
	if (first != me)
		err[0] = '\0';
	return first < size;
}

/* RL_HOLD_AFTER_STEP (rlrun(1)): the step after which every rank waits
 * for a stop signal; 0: none. The tests' way to have a preemption come at
 * the step boundary they choose, however fast the machine runs steps. */
static int64_t hold_after_step(void)
{
	const char *v = getenv("RL_HOLD_AFTER_STEP");
	char *end;
	long long n = v && *v ? strtoll(v, &end, 10) : 0;

	return n > 0 && !*end ? (int64_t)n : 0;
}

/* The training ranks' run, set up; t is freed by the caller. */
static int train_steps(struct rl_trainer *t, const struct rl_config *cfg, struct rl_dist *dist,
                       char *err, size_t errlen)
{
	struct rl_job_watch watch;
	double started, spent = 0;
	int rc = -1;
	FILE *progress = t->progress; /* NULL on every rank but the first */

	if (t->ckpt && rl_trainer_resume(t, &t->resumed_step, err, errlen)) {
		if (!dist)
			return -1;
		/* agreed on every training rank: the first with a reason gives it */
		failed_somewhere(dist->g[RL_G_WORLD], err[0] != '\0', err);
		return RL_TRAIN_AGREED_FAILURE;
	}
	/* the generation ranks start from the weights training starts from,
	 * a checkpoint's included */
	if (rl_rollout_begin(&t->rollouts, t->resumed_step, err, errlen))
		goto out;
	if (rl_trainer_open_metrics(t, err, errlen) || rl_trainer_gpu_watch_open(t, err, errlen))
		goto out;
	if (progress)
		describe(t, progress);
	if (t->ckpt) {
		t->ckpt->committed = t->resumed_step;
		rl_job_watch_open(&watch, rl_trainer_is_main(t), progress,
		                  cfg->checkpointing.signal);
	}
	if (t->resumed_step >= cfg->grpo.max_num_steps) {
		if (progress)
			fprintf(progress,
			        "rlrun train: the checkpoint holds step %lld of %lld: nothing left "
			        "to do\n",
			        (long long)t->resumed_step, (long long)cfg->grpo.max_num_steps);
		rc = 0;
		goto out;
	}
	if (cfg->grpo.val_at_start && t->resumed_step == 0) {
		/* no training reward yet: null in metrics.jsonl, a gap in the plot */
		struct rl_step_metrics m = {
		    .step = 0, .total_steps = cfg->grpo.max_num_steps, .reward_mean = NAN};
		if ((rc = t->algo->validate(t, 0, &m, err, errlen)))
			goto out;
		rc = -1;
		if (m.has_val && rl_trainer_is_main(t) &&
		    rl_metrics_write(&t->log, &m, err, errlen))
			goto out;
		if (progress)
			rl_metrics_progress_validation(progress, &m);
	}
	started = rl_now();
	int64_t done = t->resumed_step, saved = t->resumed_step, hold = hold_after_step();
	struct rl_step_metrics last = {.step = done, .reward_mean = NAN};
	struct rl_run_summary summary = {0};
	for (int64_t step = done + 1; step <= cfg->grpo.max_num_steps; step++) {
		struct rl_step_metrics m = {.total_steps = cfg->grpo.max_num_steps};
		int reason = t->ckpt
		                 ? rl_job_stop_due(&watch, dist ? dist->g[RL_G_WORLD] : NULL,
		                                   done > t->resumed_step, t->ckpt->last_seconds)
		                 : 0;

		if (reason) {
			rc = rl_trainer_stop(t, &watch, reason, done, saved, &last, err, errlen);
			rc = rc ? rc : RL_TRAIN_STOPPED;
			goto out;
		}
		double step_started = rl_now();
		int got = t->algo->step(t, step, &m, err, errlen);

		if (got < 0) {
			rc = got; /* RL_TRAIN_AGREED_FAILURE stays one */
			goto out;
		}
		if (got > 0) {
			if (progress)
				fprintf(progress,
				        "rlrun train: the data ran out after %lld "
				        "epoch%s, at step %lld\n",
				        (long long)cfg->grpo.max_num_epochs,
				        rl_plural(cfg->grpo.max_num_epochs), (long long)step);
			break;
		}
		if (cfg->grpo.val_period > 0 && step % cfg->grpo.val_period == 0 &&
		    (rc = t->algo->validate(t, step, &m, err, errlen)))
			goto out;
		rc = -1;
		done = step;
		if (t->ckpt) {
			double t0 = rl_now();
			bool due = step % cfg->checkpointing.save_period == 0 ||
			           step == cfg->grpo.max_num_steps;

			if (rl_trainer_save_poll(t, false, err, errlen) ||
			    (due && rl_trainer_save(t, step, &m, err, errlen)))
				goto out;
			saved = due ? step : saved;
			m.t.checkpointing = rl_now() - t0;
		}
		rl_trainer_gpu_stats(t, &m);
		if (step == t->resumed_step + 1)
			note_memory(t, &m);
		if (rl_trainer_is_main(t) && rl_metrics_write(&t->log, &m, err, errlen))
			goto out;
		last = m;
		rl_run_summary_add(&summary, &m);
		double step_seconds = rl_now() - step_started;
		if (t->ckpt && step_seconds > watch.longest_step)
			watch.longest_step = step_seconds;
		spent = rl_now() - started;
		if (progress)
			rl_metrics_progress(progress, &m,
			                    spent / (double)(step - t->resumed_step) *
			                        (double)(cfg->grpo.max_num_steps - step));
		/* only with checkpointing are the stop signals caught */
		if (step == hold && t->ckpt) {
			if (progress) {
				fprintf(progress,
				        "rlrun train: RL_HOLD_AFTER_STEP: holding after step %lld "
				        "until a stop signal\n",
				        (long long)step);
				fflush(progress);
			}
			rl_stop_signal_wait();
		}
	}
	if (t->ckpt && saved != done) {
		/* the data ran out before the last step: keep what was done */
		if (rl_trainer_save(t, done, &last, err, errlen))
			goto out;
	}
	if (rl_trainer_save_poll(t, true, err, errlen))
		goto out;
	if (progress) {
		char *tb = cfg->logger.tensorboard_enabled ? rl_trainer_tensorboard_dir(cfg) : NULL;
		rl_run_summary_print(progress, &summary, cfg->logger.log_dir, tb,
		                     t->ckpt ? cfg->checkpointing.checkpoint_dir : NULL);
		free(tb);
	}
	rc = 0;
out:
	return rc;
}

/* What a failure does: before the ranks meet, end the step (early); from
 * open_failures on, the run's policy. Two records, as a failure's handler
 * may be reading the first (on the watchdog's thread) when the second is
 * handed to the world. */
static struct rl_job_failures failures_early, failures;

void rl_train_watch_failures(void)
{
	rl_job_failures_early(&failures_early);
	rl_comm_on_failure(NULL, rl_job_failure_handle, &failures_early);
}

/* What a failure does from here on (runtime/job/failure.h): every task
 * of the run, the generation ranks' included, learns from the first
 * whether the job can be requeued, and each hands the watchdog the
 * handler that records the failure and requeues the job or ends its step.
 * Not before: a refusal of the setup is the user's to fix, not a restart's. */
static void open_failures(const struct rl_config *cfg, struct rl_dist *dist, FILE *progress,
                          struct rl_job_failures *f)
{
	const struct rl_cfg_checkpointing *c = &cfg->checkpointing;
	struct rl_job_failure_policy p = {c->requeue_on_failure, c->max_failure_restarts,
	                                  c->exclude_failed_nodes,
	                                  c->enabled ? c->checkpoint_dir : NULL};
	int requeueable = 0;
	bool first = !dist || dist->all_rank == 0;

	if (first && c->enabled) {
		struct rl_slurm_job j;

		rl_slurm_job_query(&j);
		requeueable = j.known && j.batch && j.requeue;
	}
	if (dist)
		rl_comm_broadcast(dist->all, &requeueable, 1, RL_COMM_I32, 0,
		                  "whether the job can be requeued");
	rl_job_failures_open(f, &p, requeueable, first ? progress : NULL);
	if (dist)
		rl_comm_on_failure(dist->world, rl_job_failure_handle, f);
}

static int train(const struct rl_config *cfg, struct rl_dist *dist, FILE *progress, char *err,
                 size_t errlen)
{
	struct rl_trainer t;
	bool failed = rl_trainer_setup(&t, cfg, dist, progress, err, errlen) != 0;

	/* every task of the run, the generation ranks' included */
	if (dist && failed_somewhere(dist->all, failed, err)) {
		if (!failed)
			rl_trainer_free(&t);
		return RL_TRAIN_AGREED_FAILURE;
	}
	if (failed)
		return -1;
	open_failures(cfg, dist, progress, &failures);
	/* each role waits on the other's whole phase */
	if (t.remote_generation || (dist && dist->generation))
		rl_comm_set_patient(dist->all, true);
	int rc;
	if (dist && dist->generation) {
		struct rl_serve serve = {t.model, t.tok, &t.gen, dist, t.episodes};

		rc = rl_generation_serve(&serve, err, errlen);
	} else {
		rc = train_steps(&t, cfg, dist, err, errlen);
		/* a failed rank ends the whole run instead (cmd_train) */
		if (rc != -1)
			rl_rollout_end(&t.rollouts);
		if (rc >= 0 && t.progress && t.zero.buckets_total > 0)
			fprintf(
			    t.progress,
			    "rlrun train: %lld of %lld gradient bucket%s reduce-scattered during "
			    "the backward pass\n",
			    (long long)t.zero.early_total, (long long)t.zero.buckets_total,
			    rl_plural(t.zero.buckets_total));
	}
	if (dist) {
		/* the run's end (MPI_Finalize): no requeue, but no hung step */
		rl_comm_on_failure(dist->world, rl_job_failure_handle, &failures_early);
	} else if (rc == -1) {
		/* one task: no watchdog; its own error is the failure */
		struct rl_comm_failure f = {
		    .rank = 0, .host = "", .found_here = true, .own = true, .report = err};
		rl_job_failure_handle(&failures, &f);
	}
	rl_trainer_free(&t);
	return rc;
}

int rl_train(const struct rl_config *cfg, struct rl_dist *dist, FILE *progress, char *err,
             size_t errlen)
{
	/* from before the setup: a preemption while the model loads must not
	 * kill the run before it can requeue itself */
	if (cfg->checkpointing.enabled &&
	    rl_stop_signal_arm(cfg->checkpointing.signal, err, errlen))
		return -1;
	int rc = train(cfg, dist, progress, err, errlen);
	rl_stop_signal_disarm();
	rl_slurm_job_done();
	return rc;
}
