/* The distributed optimizer (ZeRO-1, as Megatron-Core's): a region of the
 * model's flat gradient is reduce-scattered over the data-parallel group
 * bucket by bucket, each rank keeps the fp32 master weights and the Adam
 * moments of its slice of every bucket only, updates that slice, and the
 * new weights are all-gathered back into every rank's model. Under expert
 * parallelism the model has two regions, as Megatron's two buffers: the
 * dense tensors over the data-parallel ranks, the experts over the
 * expert-data-parallel ones (the ranks that hold the same experts).
 * Megatron's overlap: a bucket's reduce-scatter starts during the backward
 * pass of an update's last micro-batch, as soon as every gradient in it is
 * final (rl_zero_overlap binds the model's hooks), and the new weights'
 * all-gather is started at the end of the update and waited for bucket by
 * bucket where a pass first reads them. Either way the same collectives
 * add the same numbers: only when they run changes.
 * defines: struct rl_zero, rl_zero_init, rl_zero_free, rl_zero_reduce_grads,
 * rl_zero_gather_grads, rl_zero_update, rl_zero_slice, rl_zero_restore,
 * rl_zero_overlap, rl_zero_settle */
#ifndef RL_PARALLEL_ZERO_H
#define RL_PARALLEL_ZERO_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/adamw.h"
#include "runtime/comm/comm.h"
#include "runtime/model/model.h"

/* Floats [at, at + len) of the shard, counted in the gradient norm. */
struct rl_zero_piece {
	int64_t at, len;
};

struct rl_zero {
	struct rl_comm *group; /* dp-cp; for the experts, the expert grid's dp */
	/* the ranks that hold one copy of the region (tp-pp; for the experts,
	 * the expert grid's tp-ep-pp); NULL: this one */
	struct rl_comm *mp;
	const struct rl_ops *ops;
	struct rl_adamw_hparams hp;
	int64_t step;    /* updates taken */
	int64_t base, n; /* the region: the model's flat floats [base, base + n) */
	int64_t bucket;  /* floats per bucket, a multiple of the group's size */
	int n_buckets;
	int64_t shard;                /* floats this rank owns, over every bucket */
	float *master, *grad, *m, *v; /* [shard], backend memory */
	float *scratch;               /* one bucket, for the last one, which runs past n */
	/* the shard without the tensors another rank of mp counts
	 * (rl_param.replica): each gradient counts once in the norm */
	struct rl_zero_piece *pieces;
	int n_pieces;
	/* the overlap (rl_zero_overlap): each bucket's collective in flight
	 * (NULL: none), whether a bucket holds a gradient that
	 * rl_model_reduce_grads sums first (tensor-parallel partial sums, the
	 * tied embedding's copies: it starts after them), whether the
	 * weights' all-gather is left in flight, and the buckets whose
	 * reduce-scatter started while layers were left to run backward,
	 * this update and in all (of buckets_total reduced) */
	struct rl_comm_request **pending;
	bool *started; /* pending[b] is in flight (a NULL request completed early) */
	bool *late;
	bool overlap_gather;
	struct rl_model *model;
	float *gather_into; /* the weights' all-gather in flight: into here */
	int early;
	int64_t early_total, buckets_total;
};

/* The region [base, base + n) of m's flat buffers, which must be laid out
 * alike on every rank of group. bucket_floats: the reduce-scatter
 * granularity (rounded to the group size). mp: the group over which the
 * region is cut (tensor and pipeline parallel), NULL for none. Takes the
 * master weights from the model as it is now. */
int rl_zero_init(struct rl_zero *z, struct rl_comm *group, struct rl_comm *mp,
                 const struct rl_model *m, int64_t base, int64_t n,
                 const struct rl_adamw_hparams *hp, int64_t bucket_floats, char *err,
                 size_t errlen);
void rl_zero_free(struct rl_zero *z);

/* The sum over the group of every rank's gradient, this rank's slices. */
int rl_zero_reduce_grads(struct rl_zero *z, struct rl_model *m, char *err, size_t errlen);
/* After rl_zero_reduce_grads: the region's whole summed gradient into
 * full (its n floats, backend memory) on every rank. */
int rl_zero_gather_grads(struct rl_zero *z, float *full, char *err, size_t errlen);
/* After rl_zero_reduce_grads of z and experts (NULL: a model with one
 * region): the global gradient norm into *norm (over every rank's slice
 * and every part of the model, each tensor once, as
 * torch.nn.utils.clip_grad_norm_ over the whole model), the slices of
 * both clipped to max_norm (> 0; <= 0 only measures), one AdamW step with
 * hp.lr as set now, and the new weights in m on every rank. */
int rl_zero_update(struct rl_zero *z, struct rl_zero *experts, struct rl_model *m, double max_norm,
                   double *norm, char *err, size_t errlen);

/* Turns the overlap on (each as asked) and binds m's hooks to z: m's
 * backward pass then starts the buckets it finishes, while
 * m->overlap.last_microbatch is set (the caller sets it for the update's
 * last micro-batch, on every rank of the group alike), and m's readers of
 * the weights wait for the all-gathers they need. 0, or -1 with err. */
int rl_zero_overlap(struct rl_zero *z, struct rl_model *m, bool grads, bool gather, char *err,
                    size_t errlen);
/* Waits for the weights' all-gathers over the model's flat [lo, hi)
 * (hi < 0: to the end); what m's settle hook calls. */
void rl_zero_settle(struct rl_zero *z, int64_t lo, int64_t hi);

/* This rank's slice of bucket b: the model's flat floats [*from, *from +
 * *len) (len 0: the slice is all padding), at shard index *at. */
void rl_zero_slice(const struct rl_zero *z, int b, int64_t *from, int64_t *len, int64_t *at);

/* After a checkpoint was loaded into m: the master weights from m, the
 * moments from exp_avg and exp_avg_sq (m->n_elems floats each, this rank's whole
 * cut of the model, host memory) and the update count. */
int rl_zero_restore(struct rl_zero *z, const struct rl_model *m, const float *exp_avg,
                    const float *exp_avg_sq, int64_t step, char *err, size_t errlen);

#endif
