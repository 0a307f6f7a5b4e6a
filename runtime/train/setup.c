/* Every option this release cannot honour is refused here, by name, before
 * any work starts. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "kernels/fenced.h"
#include "kernels/memory_use.h"
#include "runtime/comm/transport.h"
#include "runtime/generate/sampler.h"
#include "runtime/job/stop_signal.h"
#include "runtime/model/backend.h"
#include "runtime/rollout/episodes.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/load_model.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/setup.h"
#include "runtime/train/train.h"
#ifdef RL_HAVE_CUDA
#include "kernels/device.h"
#endif

int rl_train_check(const struct rl_config *c, char *err, size_t errlen)
{
	const struct rl_cfg_parallel *par = &c->policy.parallel;

	if (par->autoplan || par->expert_tensor > 1) {
		snprintf(err, errlen,
		         "policy.parallel: GRPO training runs with tensor, pipeline, context, data "
		         "and expert parallelism (expert tensor parallelism 1) in this release; "
		         "give the sizes and set expert_tensor to 1");
		return -1;
	}
	if (!c->policy.generation.colocated.enabled && par->pipeline > 1) {
		snprintf(err, errlen,
		         "policy.parallel.pipeline: non-colocated generation refits from one "
		         "pipeline stage only in this release; set pipeline to 1 (tensor, context "
		         "and data parallelism train)");
		return -1;
	}
	return 0;
}

/* policy.moe: only a mixture of experts has routers to freeze or to
 * balance; on another model the keys would do nothing, silently. */
static int moe_options(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;

	if (t->model->cfg.moe.n_experts == 0 &&
	    (c->policy.moe.freeze_router || c->policy.moe.aux_loss_coef.set)) {
		snprintf(err, errlen,
		         "policy.moe.%s: %s is not a mixture of experts (its config.json has no "
		         "experts): it has no router",
		         c->policy.moe.freeze_router ? "freeze_router" : "aux_loss_coef",
		         c->policy.model_name);
		return -1;
	}
	t->model->freeze_router = c->policy.moe.freeze_router;
	return 0;
}

/* Each group's device face, for the memory of the table the run computes
 * on: the staged transport moves it with the table's own copies (on
 * CUDA through pinned buffers), NCCL takes it as it is. */
static int connect_devices(struct rl_trainer *t, const struct rl_ops *ops, char *err, size_t errlen)
{
	static struct rl_comm_stage stage;
	char gpu[64];
	struct rl_dist_device me = {.backend = ops->name, .gpu = gpu};
	int on_gpu = rl_backend_gpu(ops, gpu, sizeof gpu, err, errlen);

	if (on_gpu < 0)
		return -1;
	stage = (struct rl_comm_stage){.to_host = ops->to_host, .from_host = ops->from_host};
	if (ops != &rl_ops_cpu)
		me.stage = &stage;
	if (ops == &rl_ops_fenced)
		snprintf(gpu, sizeof gpu, "fenced");
#ifdef RL_HAVE_CUDA
	if (on_gpu) {
		stage.host_alloc = rl_cuda_host_alloc;
		stage.host_release = rl_cuda_host_release;
		me.nccl = true;
	}
#endif
	return rl_dist_place_devices(t->dist, &me, t->progress, err, errlen);
}

static int load_policy(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	const struct rl_ops *ops;
	char desc[300];

	if (rl_backend_pick(c->policy.backend, &ops, desc, sizeof desc, err, errlen))
		return -1;
	if (ops != &rl_ops_cpu && t->progress)
		fprintf(t->progress, "rlrun train: backend %s\n", desc);
	if (t->dist && connect_devices(t, ops, err, errlen))
		return -1;
	if (rl_trainer_load_model(t, ops, c->policy.model_name, "policy.model_name",
	                          c->policy.tokenizer_name, "policy.tokenizer.name", &t->model,
	                          &t->tok, &t->reference_xxh3, err, errlen))
		return -1;
	return moe_options(t, err, errlen);
}

static int buffers(struct rl_trainer *t, char *err, size_t errlen)
{
	int64_t a = rl_mb_token_budget(&t->cfg->policy, true, t->algo->unit);
	int64_t b = rl_mb_token_budget(&t->cfg->policy, false, t->algo->unit);
	int64_t max = a > b ? a : b;

	if (max > (1 << 24)) {
		snprintf(err, errlen,
		         "micro-batches of %lld tokens are more than this release "
		         "handles (2^24)",
		         (long long)max);
		return -1;
	}
	t->max_mb_tokens = (int)max;
	bool acts_ok = rl_trainer_acts_new(t, t->model, &t->acts, &t->n_acts) == 0;
	t->row_lp = calloc((size_t)max, sizeof *t->row_lp);
	t->row_grad = calloc((size_t)max, sizeof *t->row_grad);
	if (!acts_ok || !t->row_lp || !t->row_grad) {
		snprintf(err, errlen, "out of memory for micro-batches of %d tokens",
		         t->max_mb_tokens);
		return -1;
	}
	/* The reference policy is the policy as it starts, a whole copy of
	 * the weights in device memory: held only by the algorithms that read
	 * it (GRPO's KL term, DPO), not by SFT, distillation (its teacher is
	 * a model of its own) or a GRPO without the KL penalty. */
	const struct rl_config *c = t->cfg;
	bool reference =
	    c->algorithm == RL_ALGO_DPO ||
	    (c->algorithm == RL_ALGO_GRPO && c->loss_fn.reference_policy_kl_penalty != 0);
	if (!reference)
		return 0;
	size_t bytes = rl_model_weights_bytes(t->model);
	if (!(t->ref_weights = rl_ops_alloc(t->model->ops, RL_MEM_REFERENCE, bytes ? bytes : 1))) {
		snprintf(err, errlen, "out of memory for the reference policy's %zu bytes", bytes);
		return -1;
	}
	return rl_model_copy_weights(t->model, t->ref_weights, err, errlen);
}

static int optimizer(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_cfg_policy *p = &t->cfg->policy;
	struct rl_adamw_hparams hp = {
	    .lr = (float)p->optimizer.lr,
	    .beta1 = (float)p->optimizer.betas.v[0],
	    .beta2 = (float)p->optimizer.betas.v[1],
	    .eps = (float)p->optimizer.eps,
	    .weight_decay = (float)p->optimizer.weight_decay,
	};
	int64_t total = t->cfg->grpo.max_num_steps * t->updates_per_step;

	if (t->dist) {
		/* Megatron's default bucket is 40M parameters; small models get
		 * one bucket */
		struct rl_model *m = t->model;
		const struct rl_cfg_parallel *par = &p->parallel;

		if (rl_zero_init(&t->zero, t->dist->g[RL_G_DP_CP], t->dist->g[RL_G_MP], m, 0,
		                 m->expert_start, &hp, par->bucket_size, err, errlen))
			return -1;
		/* the experts, held by other ranks than the dense tensors */
		if (m->expert_start < m->n_elems &&
		    rl_zero_init(&t->zero_experts, t->dist->g[RL_G_EDP], t->dist->g[RL_G_EXPERT_MP],
		                 m, m->expert_start, m->n_elems - m->expert_start, &hp,
		                 par->bucket_size, err, errlen))
			return -1;
		/* the dense region's buckets overlap the passes; under expert
		 * parallelism the idle passes after a rank's last micro-batch
		 * make "last" a per-rank notion, so nothing does yet */
		if (m->expert_start == m->n_elems &&
		    (par->overlap_grad_reduce || par->overlap_param_gather) &&
		    rl_zero_overlap(&t->zero, m, par->overlap_grad_reduce,
		                    par->overlap_param_gather, err, errlen))
			return -1;
	} else if (rl_optimizer_init(&t->opt, t->model, &hp, err, errlen)) {
		return -1;
	}
	if (p->scheduler.n) {
		/* NeMo-RL's torch schedulers, from the config's own kinds */
		struct rl_lr_phase ph[RL_LR_MAX_PHASES];
		int n =
		    (int)(p->scheduler.n < RL_LR_MAX_PHASES ? p->scheduler.n : RL_LR_MAX_PHASES);
		for (int i = 0; i < n; i++) {
			const struct rl_cfg_torch_sched *c = &p->scheduler.v[i];
			ph[i] =
			    c->kind == RL_TS_LINEAR
			        ? (struct rl_lr_phase){RL_PHASE_LINEAR, c->start_factor,
			                               c->end_factor, c->total_iters}
			    : c->kind == RL_TS_CONSTANT
			        ? (struct rl_lr_phase){RL_PHASE_CONSTANT, c->factor, 0,
			                               c->total_iters}
			        : (struct rl_lr_phase){RL_PHASE_COSINE, 0, c->eta_min, c->t_max};
		}
		return rl_lr_schedule_torch(&t->lr, p->optimizer.lr, ph, n, p->scheduler.milestones,
		                            err, errlen);
	}
	if (rl_lr_schedule_init(&t->lr, p->lr_schedule.type, p->optimizer.lr, p->lr_schedule.min_lr,
	                        p->lr_schedule.warmup_steps,
	                        p->lr_schedule.decay_steps.set ? p->lr_schedule.decay_steps.value
	                                                       : 0,
	                        total, err, errlen))
		return -1;
	if (p->lr_schedule.warmup_init.set)
		rl_lr_schedule_warmup_from(&t->lr, p->lr_schedule.warmup_init.value);
	return 0;
}

/* A multi-turn run's episodes (rollout/episodes.h): the environment is
 * opened with the rollouts, its copies started at the first episode and
 * kept for the run, on the ranks that generate (training ranks when
 * colocated, else the generation ranks). The ranks that generate one
 * share are the model's tensor and pipeline ranks: the first of them
 * talks to the environment. */
static int open_episodes(struct rl_trainer *t, const sigset_t *stop_signals, char *err,
                         size_t errlen)
{
	struct rl_episode_settings s;

	if (rl_episode_settings_init(&s, t->cfg, stop_signals, err, errlen))
		return -1;
	if (!s.enabled)
		return 0;
	/* non-colocated, the training ranks play none: training rank 0
	 * takes the generation replicas' reports into them */
	return rl_episodes_open(&t->episodes, &s, t->dist ? t->dist->g[RL_G_MP] : NULL, stderr, err,
	                        errlen);
}

/* A generation rank (non-colocated) holds what generation needs: the model
 * cut for its own tensor parallelism, the tokenizer, the sampling
 * settings, and a multi-turn run's episodes. */
static int setup_generation(struct rl_trainer *t, char *err, size_t errlen)
{
	sigset_t stop_signals;

	rl_stop_signal_set(&stop_signals);
	if (load_policy(t, err, errlen) ||
	    rl_gen_settings_init(&t->gen, t->cfg, t->model, err, errlen) ||
	    open_episodes(t, &stop_signals, err, errlen)) {
		rl_trainer_free(t);
		return -1;
	}
	return 0;
}

/* Where the training ranks' rollouts come from, working from what the
 * trainer holds. */
static void open_rollouts(struct rl_trainer *t)
{
	const struct rl_config *c = t->cfg;
	struct rl_rollout_ctx ctx = {
	    .model = t->model,
	    .tok = t->tok,
	    .gen = &t->gen,
	    .data = &t->data,
	    .n_groups = (int)c->grpo.num_prompts_per_step,
	    .group_size = (int)c->grpo.num_generations_per_prompt,
	    .seed = (uint64_t)c->grpo.seed,
	    .dist = t->dist,
	    .dp = t->dp,
	    .episodes = t->episodes,
	    .generation_tp = (int)c->policy.generation.tensor_parallel_size,
	    .last_step = c->grpo.max_num_steps,
	    .max_age_steps = c->grpo.async_grpo.max_trajectory_age_steps,
	};

	rl_rollout_source_open(&t->rollouts, &ctx, t->remote_generation,
	                       c->grpo.async_grpo.enabled);
}

int rl_trainer_setup(struct rl_trainer *t, const struct rl_config *cfg, struct rl_dist *dist,
                     FILE *progress, char *err, size_t errlen)
{
	static const struct rl_trainer_algo *const algos[] = {
	    [RL_ALGO_GRPO] = &rl_trainer_algo_grpo,
	    [RL_ALGO_SFT] = &rl_trainer_algo_sft,
	    [RL_ALGO_DPO] = &rl_trainer_algo_dpo,
	    [RL_ALGO_DISTILLATION] = &rl_trainer_algo_distill,
	};

	memset(t, 0, sizeof *t);
	t->cfg = cfg;
	t->algo = algos[cfg->algorithm];
	t->dist = dist;
	t->dp = dist ? dist->g[RL_G_DP] : NULL;
	t->pp = dist ? dist->g[RL_G_PP] : NULL;
	t->progress = rl_trainer_is_main(t) ? progress : NULL;
	t->grad_dump = getenv("RL_GRAD_DUMP");
	t->samples_per_step = cfg->grpo.num_prompts_per_step * cfg->grpo.num_generations_per_prompt;
	/* a step's samples in global batches, the last one possibly short */
	t->updates_per_step = (t->samples_per_step + cfg->policy.train_global_batch_size - 1) /
	                      cfg->policy.train_global_batch_size;
	/* DPO: one update per step over train_global_batch_size pairs (twice
	 * as many sequences), drawn from the data set */
	int64_t data_per_step = cfg->grpo.num_prompts_per_step;
	if (cfg->algorithm == RL_ALGO_DPO) {
		data_per_step = cfg->policy.train_global_batch_size;
		t->samples_per_step = 2 * data_per_step;
		t->updates_per_step = 1;
	}
	/* SFT: one update per step over train_global_batch_size examples */
	if (cfg->algorithm == RL_ALGO_SFT) {
		data_per_step = t->samples_per_step = cfg->policy.train_global_batch_size;
		t->updates_per_step = 1;
	}
	t->logit_scale = rl_gen_logit_scale(cfg);
	t->logprob_chunk = rl_gen_logprob_chunk(cfg);
	t->remote_generation =
	    dist && !dist->generation && !cfg->policy.generation.colocated.enabled;
	if (dist && dist->generation)
		return setup_generation(t, err, errlen);
	/* the stop signals are armed by now (rl_train): a reward program's
	 * copy they kill scores its sample again */
	sigset_t stop_signals;
	rl_stop_signal_set(&stop_signals);
	if (rl_train_check(cfg, err, errlen) ||
	    rl_loss_init(&t->loss, &cfg->loss_fn, err, errlen) ||
	    /* DPO's data are preference pairs and SFT's answers its data:
	     * scored by no reward */
	    (cfg->algorithm != RL_ALGO_DPO && cfg->algorithm != RL_ALGO_SFT &&
	     rl_rewarder_setup(&t->reward, cfg, &stop_signals, err, errlen)) ||
	    rl_data_source_open(&t->data, cfg, (size_t)data_per_step, err, errlen) ||
	    load_policy(t, err, errlen) ||
	    rl_gen_settings_init(&t->gen, cfg, t->model, err, errlen) || buffers(t, err, errlen) ||
	    optimizer(t, err, errlen) || (t->algo->setup && t->algo->setup(t, err, errlen)) ||
	    /* SFT and DPO have no rollouts to play */
	    (cfg->algorithm != RL_ALGO_SFT && cfg->algorithm != RL_ALGO_DPO &&
	     open_episodes(t, &stop_signals, err, errlen)))
		goto fail;
	open_rollouts(t);
	if (cfg->checkpointing.enabled && !(t->ckpt = calloc(1, sizeof *t->ckpt))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	return 0;
fail:
	rl_trainer_free(t);
	return -1;
}

int rl_trainer_open_metrics(struct rl_trainer *t, char *err, size_t errlen)
{
	const char *dir = t->cfg->logger.log_dir;
	char *kept = NULL;

	if (!rl_trainer_is_main(t))
		return 0;
	if (t->resumed_step > 0) {
		if (rl_metrics_open_resumed(&t->log, dir, t->resumed_step, err, errlen))
			return -1;
	} else {
		if (rl_metrics_open(&t->log, dir, &kept, err, errlen))
			return -1;
		if (kept && t->progress)
			fprintf(t->progress,
			        "rlrun train: the previous run's metrics were kept as %s\n", kept);
		free(kept);
	}
	if (!t->cfg->logger.tensorboard_enabled)
		return 0;
	char *tb = rl_trainer_tensorboard_dir(t->cfg);
	int rc = tb ? rl_metrics_open_tensorboard(&t->log, tb, t->resumed_step, err, errlen) : -1;
	if (!tb)
		snprintf(err, errlen, "out of memory");
	else if (rc == 0 && t->progress)
		fprintf(t->progress, "rlrun train: TensorBoard event file %s\n", t->log.tb.path);
	free(tb);
	return rc;
}

char *rl_trainer_tensorboard_dir(const struct rl_config *c)
{
	char *dir;

	/* NeMo-RL's place when none is given: <logger.log_dir>/tensorboard */
	if (c->logger.tensorboard.log_dir)
		return strdup(c->logger.tensorboard.log_dir);
	return asprintf(&dir, "%s/tensorboard", c->logger.log_dir) < 0 ? NULL : dir;
}

void rl_trainer_free(struct rl_trainer *t)
{
	if (t->algo && t->algo->free)
		t->algo->free(t);
	rl_trainer_save_free(t);
	rl_metrics_close(&t->log);
	rl_trainer_gpu_watch_close(t);
	if (t->model) {
		rl_optimizer_free(&t->opt);
		rl_zero_free(&t->zero);
		rl_zero_free(&t->zero_experts);
		for (int i = 0; i < t->n_acts; i++)
			rl_acts_free(t->model, t->acts[i]);
		free(t->acts);
		if (t->ref_weights)
			rl_ops_release(t->model->ops, t->ref_weights);
	}
	rl_model_free(t->model);
	rl_tokenizer_free(t->tok);
	rl_data_source_close(&t->data);
	rl_packed_free(&t->packed);
	if (t->rollouts.ops)
		rl_rollout_source_free(&t->rollouts);
	rl_episodes_close(t->episodes);
	rl_gen_settings_free(&t->gen);
	free(t->row_lp);
	free(t->row_grad);
	free(t->frozen);
	memset(t, 0, sizeof *t);
}
