/* Refit on real MPI ranks (started by tests/mpi/refit_test.sh on 4
 * ranks): ranks 0-1 train, ranks 2-3 generate, as a non-colocated run
 * splits them. The training ranks hold one random model cut over their
 * tensor-parallel group (or two data-parallel copies of it), the generation
 * ranks a different one cut over theirs; after rl_refit_send and
 * rl_refit_recv every generation rank's tensors must be, bit for bit, its
 * cut of the training model, cut here by the test's own slicing of the
 * whole tensors. Every pairing of tensor parallelism 1 and 2 on the two
 * sides, with buckets small enough that a bucket holds one tensor, some,
 * or all of them, and a vocabulary that two ranks split unevenly; a
 * mixture of experts whose experts the training ranks split (expert
 * parallelism 2) or both hold, for generation ranks that hold them all;
 * sent at
 * once, or started and left to complete from a copy after the sending
 * model is freed (asynchronous GRPO's refit). Prints
 * "N passed, M failed" on rank 0. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/comm.h"
#include "runtime/comm/outbox.h"
#include "runtime/rollout/refit.h"
#include "runtime/model/model.h"
#include "runtime/parallel/ep_group.h"
#include "runtime/parallel/tp_group.h"
#include "tests/mpi/mpi_check.h"
#include "tests/mpi/random_model.h"

static void config_of(struct rl_model_config *c, bool qwen3, bool tie, bool moe)
{
	memset(c, 0, sizeof *c);
	c->arch = moe ? RL_ARCH_QWEN3_MOE : qwen3 ? RL_ARCH_QWEN3 : RL_ARCH_LLAMA;
	if (moe) {
		c->moe.n_experts = 4;
		c->moe.top_k = 2;
		c->moe.intermediate = 16;
		c->moe.sparse_step = 1;
		c->moe.norm_topk_prob = true;
	}
	c->vocab_size = 37; /* 19 + 18 on two ranks */
	c->hidden_size = 32;
	c->intermediate_size = 48;
	c->n_layers = 2;
	c->n_heads = 4;
	c->n_kv_heads = 2;
	c->head_dim = 8;
	c->max_position_embeddings = 64;
	c->rms_norm_eps = 1e-6;
	c->rope_theta = 10000;
	c->tie_word_embeddings = tie;
	c->qkv_bias = qwen3;
	c->qk_norm = qwen3;
	c->bos_token_id = -1;
	c->torch_dtype = RL_F32;
}

/* The test's own cut: rows or columns [start, start + len) of a whole
 * [rows, cols] tensor, the first (total % size) ranks one more. */
static void expected_part(const struct rl_param *whole, int split_dim, int rank, int size,
                          float *out)
{
	int64_t rows = whole->shape[0], cols = whole->ndim == 2 ? whole->shape[1] : 1;
	int64_t cut = split_dim == 0 ? rows : cols, base = cut / size, extra = cut % size;
	int64_t len = base + (rank < extra), start = rank * base + (rank < extra ? rank : extra);
	size_t at = 0;

	if (split_dim < 0) {
		memcpy(out, whole->data, (size_t)(rows * cols) * sizeof *out);
		return;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t k = 0; k < cols; k++) {
			int64_t along = split_dim == 0 ? r : k;

			if (along >= start && along < start + len)
				out[at++] = whole->data[r * cols + k];
		}
}

static struct rl_comm *split(struct rl_comm *world, int color, int key, const char *name)
{
	struct rl_comm *c;
	char err[256];

	must(rl_comm_split(world, color, key, name, &c, err, sizeof err), name, err);
	return c;
}

static void one_case(struct rl_comm *world, bool qwen3, bool tie, int train_ep, int train_tp,
                     int gen_tp, size_t bucket_bytes, bool later)
{
	struct rl_outbox out = {0};
	bool gen = me >= 2;
	int role_rank = me % 2;
	struct rl_model_config c;
	struct rl_model_cut cut = {0};
	char err[512], what[160];

	snprintf(what, sizeof what, "%s%s, train ep%d tp%d -> generation tp%d, %zu-byte buckets%s",
	         train_ep ? "qwen3-moe"
	         : qwen3  ? "qwen3"
	                  : "llama",
	         tie ? " tied" : "", train_ep ? train_ep : 1, train_tp, gen_tp, bucket_bytes,
	         later ? ", sent later" : "");
	int tp = gen ? gen_tp : train_tp;
	/* tensor-parallel peers together, the rest alone */
	struct rl_comm *tp_comm = split(world, tp == 2 ? (gen ? 1 : 0) : 2 + me, role_rank, "tp");
	struct rl_comm *bridge = split(world, me == 0 || gen ? 0 : -1, gen ? me - 1 : 0, "bridge");
	/* the training ranks split the experts; the generation ranks hold
	 * them all */
	struct rl_comm *ep_comm = split(world, !gen && train_ep == 2 ? 0 : -1, me, "ep");
	config_of(&c, qwen3, tie, train_ep > 0);
	struct rl_model *trained = random_model(&c, 7, 7 * 131),
	                *m = random_model(&c, gen ? 8 : 7, gen ? 8 * 131 : 7 * 131);
	rl_tp_group_bind(&cut.tp, tp_comm);
	if (ep_comm)
		rl_ep_group_bind(&cut.ep, ep_comm);
	cut.pp.size = 1;
	cut.cp.size = 1;
	must(rl_model_split(&m, &cut, err, sizeof err), what, err);
	if (gen) {
		must(rl_refit_recv(m, bridge, err, sizeof err), what, err);
		for (int i = 0; i < m->n_params; i++) {
			const struct rl_param *p = &m->params[i];
			float *want = malloc((size_t)p->numel * sizeof *want);

			expected_part(&trained->params[i], p->split_dim, cut.tp.rank, cut.tp.size,
			              want);
			check(strcmp(p->name, trained->params[i].name) == 0 &&
			          memcmp(p->data, want, (size_t)p->numel * sizeof *want) == 0,
			      "%s: %s differs from its cut of the training model", what, p->name);
			free(want);
		}
	} else {
		/* rank 1 without tensor parallelism is a second data-parallel
		 * copy of the dense tensors, which refit leaves out; under
		 * expert parallelism it holds half the experts */
		struct rl_refit_sender from = {
		    .bridge = bridge, .dense = role_rank == 0 || train_tp == 2, .experts = ep_comm};

		if (from.dense || from.experts)
			must(rl_refit_send(m, &from, bucket_bytes, later ? &out : NULL, err,
			                   sizeof err),
			     what, err);
	}
	rl_model_free(trained);
	rl_model_free(m);
	/* sent later, the weights went from a copy: the model is gone by now */
	rl_outbox_free(&out);
	if (bridge)
		rl_comm_free(bridge);
	if (ep_comm)
		rl_comm_free(ep_comm);
	rl_comm_free(tp_comm);
}

int main(void)
{
	struct rl_comm_world *w;
	struct rl_comm *world;

	start_ranks(&w, &world, 4, "test_refit");
	/* one tensor per bucket, a few, all of them */
	static const size_t buckets[] = {4, 8192, 64u << 20};
	for (int train_tp = 1; train_tp <= 2; train_tp++)
		for (int gen_tp = 1; gen_tp <= 2; gen_tp++)
			for (size_t b = 0; b < sizeof buckets / sizeof *buckets; b++) {
				one_case(world, false, true, 0, train_tp, gen_tp, buckets[b],
				         b == 1);
				one_case(world, true, false, 0, train_tp, gen_tp, buckets[b],
				         b != 1);
				for (int ep = 1; ep <= 2; ep++)
					one_case(world, false, false, ep, train_tp, gen_tp,
					         buckets[b], b == 1);
			}
	return finish_ranks(w, world, "test_refit");
}
