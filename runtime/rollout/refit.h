/* Refit for non-colocated generation: the training ranks' new weights to
 * the generation ranks, which hold the same model cut for their own
 * tensor parallelism. Each whole tensor is put back together over the
 * training tensor-parallel group of the first model replica (an expert
 * over the ep group that holds it), sent in buckets of whole tensors from
 * training rank 0 to every generation rank, and each generation rank keeps
 * its own cut of it. Both sides walk the model's tensors in the same order
 * (the dense ones, then the experts), so the buckets need no table.
 * defines: struct rl_refit_sender, rl_refit_send, rl_refit_recv */
#ifndef RL_ROLLOUT_REFIT_H
#define RL_ROLLOUT_REFIT_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/comm/comm.h"
#include "runtime/comm/outbox.h"
#include "runtime/model/model.h"

/* Who on the training side takes part in a refit, and how. */
struct rl_refit_sender {
	struct rl_comm *bridge; /* training rank 0's, which sends; NULL on the others */
	/* a rank of the first model replica: gathers the dense tensors over
	 * m's tensor-parallel group (each stage's alike) */
	bool dense;
	/* under expert parallelism, the ep group of training rank 0 (on its
	 * members; NULL elsewhere), over which each layer's experts are
	 * gathered; without, the dense ranks hold every expert */
	struct rl_comm *experts;
};

/* Training side, collective over the tensor-parallel group of the dense
 * ranks and the experts' group. bucket_bytes: the most one broadcast
 * carries (a larger tensor goes alone). The model must be one pipeline
 * stage. later NULL: sent before the call returns, a bucket at a time.
 * Otherwise the sender keeps a copy of the whole model and starts the
 * broadcasts into later (outbox.h), to complete when the generation ranks
 * take them. Returns 0, or -1 with err (out of memory). */
int rl_refit_send(const struct rl_model *m, const struct rl_refit_sender *from, size_t bucket_bytes,
                  struct rl_outbox *later, char *err, size_t errlen);

/* Generation side, collective over bridge (with the sender): m's weights
 * become the sender's, cut for m. Returns 0, or -1 with err when the two
 * models differ in their tensors. */
int rl_refit_recv(struct rl_model *m, struct rl_comm *bridge, char *err, size_t errlen);

#endif
