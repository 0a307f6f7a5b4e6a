/* Internal to runtime/model: how a model is cut for tensor parallelism,
 * and the collectives the passes make over the tensor- and
 * context-parallel groups.
 * defines: rl_model_shard_whole, rl_model_new_shard, struct rl_rows,
 * rl_rows_of, rl_tp_gather_rows, rl_tp_sum_rows, rl_tp_sum_target,
 * rl_tp_local_row, rl_tp_row_bias, rl_tp_gather_split, rl_tp_gather_vocab,
 * rl_cp_layout, rl_cp_gather_kv, rl_cp_scatter_kv_grad, rl_cp_gather_logprobs,
 * rl_cp_origin */
#ifndef RL_MODEL_SPLIT_H
#define RL_MODEL_SPLIT_H

#include "runtime/model/model.h"

/* The cut that is the whole model: one rank. */
void rl_model_shard_whole(struct rl_model_shard *s, const struct rl_model_config *c);
/* A model with cfg's shape cut as shard says, every weight zero: the table,
 * the flat buffers and the rotary frequencies, on ops' backend. */
int rl_model_new_shard(struct rl_model **out, const struct rl_model_config *cfg,
                       const struct rl_model_shard *shard, const char *dir,
                       const struct rl_ops *ops, char *err, size_t errlen);

/* The rows of one pass over T tokens: with sequence parallelism this rank
 * owns the residual stream's rows [first, first + n), otherwise all of
 * them (first 0, n T). Buffers of the residual stream hold a rank's own
 * rows from their start; the inputs of the column-parallel layers are
 * whole [T, d], this rank's rows at first. */
struct rl_rows {
	int T, first, n;
	bool sp;
};

/* T must be a multiple of the group's size when sp. */
void rl_rows_of(const struct rl_model *m, int T, bool sp, struct rl_rows *r);
/* mine [n, d], this rank's rows, into buf [T, d] with every rank's rows;
 * mine may be buf + first x d (in place). */
void rl_tp_gather_rows(const struct rl_model *m, const struct rl_rows *r, const float *mine,
                       float *buf, int d, const char *what);
/* A token id as this rank's row of the vocabulary, -1 where another rank
 * holds it (or id is -1). */
int32_t rl_tp_local_row(const struct rl_model *m, int32_t id);
/* The buffer a partial sum of [T, d] goes to before rl_tp_sum_rows: out
 * itself unless sp (then scratch). */
float *rl_tp_sum_target(const struct rl_model *m, const struct rl_rows *r, float *out,
                        float *scratch);
/* partial [T, d], this rank's part of a sum over the group, summed into
 * out (this rank's rows, [n, d]); partial is out unless sp. */
void rl_tp_sum_rows(const struct rl_model *m, const struct rl_rows *r, float *partial, float *out,
                    int d, const char *what);
/* The bias of a row-parallel layer: added by the first rank only, since
 * the others' outputs are summed onto it. */
const float *rl_tp_row_bias(const struct rl_model *m, const float *bias);
/* A [rows, cols] tensor cut along split_dim (0 rows, 1 columns) over tp,
 * as rl_split_range cuts it: this rank's part local into full, every
 * rank's part in place (host memory). what names it in messages.
 * Collective. */
int rl_tp_gather_split(const struct rl_tp_group *tp, const float *local, float *full, int64_t rows,
                       int64_t cols, int split_dim, const char *what, char *err, size_t errlen);
/* local [rows, vocab of this rank] (backend memory) into full_host [rows,
 * whole vocab], from every rank's slice. Collective. */
int rl_tp_gather_vocab(const struct rl_model *m, const float *local, int rows, float *full_host,
                       char *err, size_t errlen);

/* logprob[t] and lse[t], from this rank's slice of the vocabulary (a
 * target elsewhere: logprob 0, targets_host[t] -1), become the whole
 * vocabulary's: lse folded over the ranks in double, the target's logit
 * from its rank. scratch: (tp size + 1) T floats. Host memory (tensor
 * parallelism is cpu-only). The logprob pass and generation both end
 * here, so their logprobs agree. Collective. */
void rl_tp_combine_logprobs(const struct rl_model *m, float *logprob, float *lse,
                            const int32_t *targets_host, int T, float *scratch);

/* cp_pass.c: context parallelism. */
/* The batch as this rank's rows: ids and targets (this rank's vocabulary
 * rows), positions and the target mask into ids, tgt, pos and
 * a->target_mask, the chunk table and the all-gather's maps into a.
 * Returns the rows (the same on every rank), or -1 with err. */
int rl_cp_layout(const struct rl_model *m, struct rl_acts *a, const struct rl_batch *b,
                 int32_t *ids, int32_t *pos, int32_t *tgt, char *err, size_t errlen);
/* local [n_tokens, width] of every rank into full [padded whole batch,
 * width]. Collective. */
void rl_cp_gather_kv(const struct rl_model *m, struct rl_acts *a, const float *local, float *full,
                     int width, const char *what);
/* The gradient full [padded whole batch, width], this rank's part of a sum
 * over the group, summed into local [n_tokens, width] (each rank its own
 * rows). Collective. */
void rl_cp_scatter_kv_grad(const struct rl_model *m, struct rl_acts *a, const float *full,
                           float *local, int width, const char *what);
/* mine [n_tokens] of every rank into out (the caller's batch order; the
 * padding dropped), both host memory. Collective. */
void rl_cp_gather_logprobs(const struct rl_model *m, struct rl_acts *a, const float *mine,
                           float *out);
/* The caller's token at this rank's row, -1 for padding. */
int32_t rl_cp_origin(const struct rl_model *m, const struct rl_acts *a, int row);

#endif
