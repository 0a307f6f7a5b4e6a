/* The fenced backend: the CPU ops behind device-memory rules, so that CI,
 * which has no GPU, still proves that the runtime treats backend memory as
 * the CUDA backend needs it treated.
 *
 * Its memory is ordinary host memory handed out under a tagged address:
 * bit 54 set makes the pointer non-canonical on x86-64 and outside the user
 * half on arm64 (whose top-byte-ignore covers bits 56..63 only), so code
 * that reads or writes backend memory directly faults at once, as it would
 * with a device pointer. Offsets added to a tagged pointer keep the tag.
 * Every op checks that each pointer the contract calls backend memory is
 * tagged and each host pointer is not (the converse mistake, a host array
 * handed to a kernel, is as fatal on a GPU), then removes the tags and runs
 * the CPU op, so a run on this table must give the CPU table's numbers to
 * the bit. A breach is printed with the op and argument and fails the op.
 *
 * It also knows the size of every allocation it handed out, so the typed
 * ops check that each buffer's elements, at its type's size, lie inside
 * one live allocation: an fp32 read of a bf16 buffer (twice its bytes), a
 * stride or a count off by a factor, becomes a breach here rather than
 * silent corruption on a GPU.
 * defines: rl_ops_fenced, rl_fenced_untag */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fenced.h"
#include "kernels/ops.h"

#define TAG RL_FENCED_TAG

static void *tag(void *p)
{
	return p ? (void *)((uintptr_t)p | TAG) : NULL;
}

void *rl_fenced_untag(const void *p)
{
	return (void *)((uintptr_t)p & ~TAG);
}

static int breach(const char *op, const char *arg, const char *want)
{
	fprintf(stderr, "fenced backend: %s: %s is %s\n", op, arg, want);
	return -1;
}

/* Backend memory: tagged, or NULL where the contract allows it. */
static int dev(const char *op, const char *arg, const void *p, int nullable)
{
	if (!p)
		return nullable ? 0 : breach(op, arg, "NULL");
	if (!((uintptr_t)p & TAG))
		return breach(op, arg, "host memory where the op needs backend memory");
	return 0;
}

static int host(const char *op, const char *arg, const void *p)
{
	if (p && ((uintptr_t)p & TAG))
		return breach(op, arg, "backend memory where the op needs host memory");
	return 0;
}

#define U(p)           rl_fenced_untag(p)
#define DEV(p)         dev(__func__, #p, p, 0)
#define DEV_OR_NULL(p) dev(__func__, #p, p, 1)

/* The live allocations, sorted by their (untagged) address. */
struct block {
	uintptr_t base;
	size_t bytes;
};

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *blocks;
static size_t n_blocks, cap_blocks;

/* The index of the last block whose base is <= a, or n_blocks when none.
 * Called with blocks_lock held. */
static size_t block_at_or_below(uintptr_t a)
{
	size_t lo = 0, hi = n_blocks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (blocks[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? n_blocks : lo - 1;
}

static int note_block(void *p, size_t bytes)
{
	uintptr_t a = (uintptr_t)p;
	int rc = 0;

	pthread_mutex_lock(&blocks_lock);
	if (n_blocks == cap_blocks) {
		size_t cap = cap_blocks ? 2 * cap_blocks : 256;
		struct block *b = realloc(blocks, cap * sizeof *b);

		if (!b) {
			rc = -1;
			goto out;
		}
		blocks = b;
		cap_blocks = cap;
	}
	size_t below = block_at_or_below(a), at = below == n_blocks ? 0 : below + 1;

	memmove(blocks + at + 1, blocks + at, (n_blocks - at) * sizeof *blocks);
	blocks[at].base = a;
	blocks[at].bytes = bytes;
	n_blocks++;
out:
	pthread_mutex_unlock(&blocks_lock);
	return rc;
}

static void forget_block(void *p)
{
	uintptr_t a = (uintptr_t)p;

	pthread_mutex_lock(&blocks_lock);
	size_t i = block_at_or_below(a);

	if (i < n_blocks && blocks[i].base == a) {
		memmove(blocks + i, blocks + i + 1, (n_blocks - i - 1) * sizeof *blocks);
		n_blocks--;
	}
	pthread_mutex_unlock(&blocks_lock);
}

/* bytes at p lie inside one live allocation (NULL passes: the op's own
 * check decides whether NULL is allowed); what names the count in the
 * message. */
static int span_bytes(const char *op, const char *arg, const void *p, size_t bytes,
                      const char *what)
{
	if (!p)
		return 0;

	uintptr_t a = (uintptr_t)U(p);
	size_t have = 0;
	int ok;

	pthread_mutex_lock(&blocks_lock);
	size_t i = block_at_or_below(a);

	ok = i < n_blocks && a - blocks[i].base <= blocks[i].bytes;
	if (ok) {
		have = blocks[i].bytes - (a - blocks[i].base);
		ok = bytes <= have;
	}
	pthread_mutex_unlock(&blocks_lock);
	if (ok)
		return 0;
	fprintf(stderr,
	        "fenced backend: %s: %s: %s (%zu bytes) where its allocation has %zu bytes "
	        "left\n",
	        op, arg, what, bytes, have);
	return -1;
}

/* n elements of type t at p */
static int span(const char *op, const char *arg, const void *p, enum rl_dtype t, size_t n)
{
	char what[64];

	snprintf(what, sizeof what, "%zu %s elements", n, rl_dtype_name(t));
	return span_bytes(op, arg, p, rl_buf_bytes(t, n), what);
}

/* n int32 at p */
static int span_i32(const char *op, const char *arg, const int32_t *p, size_t n)
{
	char what[64];

	snprintf(what, sizeof what, "%zu int32", n);
	return span_bytes(op, arg, p, n * sizeof *p, what);
}

#define SPAN(b, n) span(__func__, #b, (b).p, (b).t, (size_t)(n))

static void *fenced_alloc(size_t bytes)
{
	void *p = rl_ops_cpu.alloc(bytes);

	if (p && note_block(p, bytes)) {
		rl_ops_cpu.release(p);
		return NULL;
	}
	return tag(p);
}

static void fenced_release(void *p)
{
	if (p && !DEV(p)) {
		forget_block(U(p));
		rl_ops_cpu.release(U(p));
	}
}

static int fenced_zero(void *p, size_t bytes, void *stream)
{
	if (!bytes)
		return 0;
	return DEV(p) ? -1 : rl_ops_cpu.zero(U(p), bytes, stream);
}

static int fenced_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
	if (!bytes)
		return 0;
	if (host(__func__, "dst", dst) || DEV(src))
		return -1;
	return rl_ops_cpu.to_host(dst, U(src), bytes, stream);
}

static int fenced_from_host(void *dst, const void *src, size_t bytes, void *stream)
{
	if (!bytes)
		return 0;
	if (DEV(dst) || host(__func__, "src", src))
		return -1;
	return rl_ops_cpu.from_host(U(dst), src, bytes, stream);
}

static int fenced_copy(void *dst, const void *src, size_t bytes, void *stream)
{
	if (!bytes)
		return 0;
	if (DEV(dst) || DEV(src))
		return -1;
	return rl_ops_cpu.copy(U(dst), U(src), bytes, stream);
}

/* A typed buffer untagged. */
static struct rl_buf UB(struct rl_buf b) {
	b.p = U(b.p);
	return b;
}

static struct rl_cbuf
UC(struct rl_cbuf b) {
	b.p = U(b.p);
	return b;
}

static int
fenced_embedding_forward(struct rl_buf out, const int32_t *ids, struct rl_cbuf table, int n,
                         int dim, int vocab, void *stream)
{
	if (DEV(out.p) || DEV(ids) || DEV(table.p))
		return -1;
	if (n > 0 && dim > 0 && vocab >= 0 &&
	    (SPAN(out, (size_t)n * dim) || SPAN(table, (size_t)vocab * dim) ||
	     span_i32(__func__, "ids", ids, (size_t)n)))
		return -1;
	return rl_ops_cpu.embedding_forward(UB(out), U(ids), UC(table), n, dim, vocab, stream);
}

static int fenced_embedding_backward(float *dtable, struct rl_cbuf dout, const int32_t *ids, int n,
                                     int dim, void *stream)
{
	if (DEV(dtable) || DEV(dout.p) || DEV(ids))
		return -1;
	if (n > 0 && dim > 0 &&
	    (SPAN(dout, (size_t)n * dim) || span_i32(__func__, "ids", ids, (size_t)n)))
		return -1;
	return rl_ops_cpu.embedding_backward(U(dtable), UC(dout), U(ids), n, dim, stream);
}

static int fenced_rmsnorm_forward(struct rl_buf y, float *rstd, struct rl_cbuf x,
                                  struct rl_cbuf weight, int rows, int dim, float eps, void *stream)
{
	if (DEV(y.p) || DEV_OR_NULL(rstd) || DEV(x.p) || DEV(weight.p))
		return -1;
	if (rows > 0 && dim > 0 &&
	    (SPAN(y, (size_t)rows * dim) || SPAN(x, (size_t)rows * dim) || SPAN(weight, dim) ||
	     span(__func__, "rstd", rstd, RL_F32, (size_t)rows)))
		return -1;
	return rl_ops_cpu.rmsnorm_forward(UB(y), U(rstd), UC(x), UC(weight), rows, dim, eps,
	                                  stream);
}

static int fenced_rmsnorm_backward(struct rl_buf dx, float *dweight, struct rl_cbuf dy,
                                   struct rl_cbuf x, struct rl_cbuf weight, const float *rstd,
                                   int rows, int dim, void *stream)
{
	if (DEV(dx.p) || DEV_OR_NULL(dweight) || DEV(dy.p) || DEV(x.p) || DEV(weight.p) ||
	    DEV(rstd))
		return -1;
	if (rows > 0 && dim > 0) {
		size_t n = (size_t)rows * dim;

		if (SPAN(dx, n) || SPAN(dy, n) || SPAN(x, n) || SPAN(weight, dim) ||
		    span(__func__, "dweight", dweight, RL_F32, (size_t)dim) ||
		    span(__func__, "rstd", rstd, RL_F32, (size_t)rows))
			return -1;
	}
	return rl_ops_cpu.rmsnorm_backward(UB(dx), U(dweight), UC(dy), UC(x), UC(weight), U(rstd),
	                                   rows, dim, stream);
}

/* The rotation's buffer: tagged, and its n rows of heads inside its
 * allocation. */
static int rope_fenced(const char *op, struct rl_buf x, const int32_t *pos, const float *inv_freq,
                       int n, int n_heads, int head_dim)
{
	if (dev(op, "x", x.p, 0) || dev(op, "pos", pos, 0) || dev(op, "inv_freq", inv_freq, 0))
		return -1;
	if (n > 0 && n_heads > 0 && head_dim > 0 &&
	    (span(op, "x", x.p, x.t, (size_t)n * n_heads * head_dim) ||
	     span_i32(op, "pos", pos, (size_t)n) ||
	     span(op, "inv_freq", inv_freq, RL_F32, (size_t)head_dim / 2)))
		return -1;
	return 0;
}

static int fenced_rope_forward(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                               int n_heads, int head_dim, void *stream)
{
	if (rope_fenced(__func__, x, pos, inv_freq, n, n_heads, head_dim))
		return -1;
	return rl_ops_cpu.rope_forward(UB(x), U(pos), U(inv_freq), n, n_heads, head_dim, stream);
}

static int fenced_rope_backward(struct rl_buf dx, const int32_t *pos, const float *inv_freq, int n,
                                int n_heads, int head_dim, void *stream)
{
	if (rope_fenced(__func__, dx, pos, inv_freq, n, n_heads, head_dim))
		return -1;
	return rl_ops_cpu.rope_backward(UB(dx), U(pos), U(inv_freq), n, n_heads, head_dim, stream);
}

static int fenced_attention_forward(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *cu_seqlens, int n_seqs,
                                    const struct rl_attention_shape *shape, void *stream)
{
	if (DEV(out) || DEV(lse) || DEV(q) || DEV(k) || DEV(v) || DEV(cu_seqlens) ||
	    host(__func__, "shape", shape))
		return -1;
	return rl_ops_cpu.attention_forward(U(out), U(lse), U(q), U(k), U(v), U(cu_seqlens), n_seqs,
	                                    shape, stream);
}

static int fenced_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                     const float *q, const float *k, const float *v,
                                     const float *out, const float *lse, const int32_t *cu_seqlens,
                                     int n_seqs, const struct rl_attention_shape *shape,
                                     void *stream)
{
	if (DEV(dq) || DEV(dk) || DEV(dv) || DEV(dout) || DEV(q) || DEV(k) || DEV(v) || DEV(out) ||
	    DEV(lse) || DEV(cu_seqlens) || host(__func__, "shape", shape))
		return -1;
	return rl_ops_cpu.attention_backward(U(dq), U(dk), U(dv), U(dout), U(q), U(k), U(v), U(out),
	                                     U(lse), U(cu_seqlens), n_seqs, shape, stream);
}

/* The descriptor itself is host memory; the arrays it points to are the
 * backend's. */
static int untag_chunks(const char *op, const struct rl_attention_chunks *c,
                        struct rl_attention_chunks *plain)
{
	if (host(op, "chunks", c) || (c->n > 0 && (dev(op, "chunks->q_start", c->q_start, 0) ||
	                                           dev(op, "chunks->k_start", c->k_start, 0) ||
	                                           dev(op, "chunks->offset", c->offset, 0) ||
	                                           dev(op, "chunks->len", c->len, 0))))
		return -1;
	*plain = (struct rl_attention_chunks){.n = c->n,
	                                      .q_start = U(c->q_start),
	                                      .k_start = U(c->k_start),
	                                      .offset = U(c->offset),
	                                      .len = U(c->len)};
	return 0;
}

static int fenced_attention_chunks_forward(float *out, float *lse, const float *q, const float *k,
                                           const float *v, const struct rl_attention_chunks *chunks,
                                           const struct rl_attention_shape *shape, void *stream)
{
	struct rl_attention_chunks plain;

	if (DEV(out) || DEV(lse) || DEV(q) || DEV(k) || DEV(v) || host(__func__, "shape", shape) ||
	    untag_chunks(__func__, chunks, &plain))
		return -1;
	return rl_ops_cpu.attention_chunks_forward(U(out), U(lse), U(q), U(k), U(v), &plain, shape,
	                                           stream);
}

static int fenced_attention_chunks_backward(float *dq, float *dk, float *dv, const float *dout,
                                            const float *q, const float *k, const float *v,
                                            const float *out, const float *lse,
                                            const struct rl_attention_chunks *chunks,
                                            const struct rl_attention_shape *shape, void *stream)
{
	struct rl_attention_chunks plain;

	if (DEV(dq) || DEV(dk) || DEV(dv) || DEV(dout) || DEV(q) || DEV(k) || DEV(v) || DEV(out) ||
	    DEV(lse) || host(__func__, "shape", shape) || untag_chunks(__func__, chunks, &plain))
		return -1;
	return rl_ops_cpu.attention_chunks_backward(U(dq), U(dk), U(dv), U(dout), U(q), U(k), U(v),
	                                            U(out), U(lse), &plain, shape, stream);
}

static int fenced_swiglu_forward(struct rl_buf h, struct rl_cbuf gate, struct rl_cbuf up, int64_t n,
                                 void *stream)
{
	if (DEV(h.p) || DEV(gate.p) || DEV(up.p))
		return -1;
	if (n > 0 && (SPAN(h, n) || SPAN(gate, n) || SPAN(up, n)))
		return -1;
	return rl_ops_cpu.swiglu_forward(UB(h), UC(gate), UC(up), n, stream);
}

static int fenced_swiglu_backward(struct rl_buf dgate, struct rl_buf dup, struct rl_cbuf dh,
                                  struct rl_cbuf gate, struct rl_cbuf up, int64_t n, void *stream)
{
	if (DEV(dgate.p) || DEV(dup.p) || DEV(dh.p) || DEV(gate.p) || DEV(up.p))
		return -1;
	if (n > 0 &&
	    (SPAN(dgate, n) || SPAN(dup, n) || SPAN(dh, n) || SPAN(gate, n) || SPAN(up, n)))
		return -1;
	return rl_ops_cpu.swiglu_backward(UB(dgate), UB(dup), UC(dh), UC(gate), UC(up), n, stream);
}

/* The buffers of a linear forward: tagged and inside their allocations
 * (sizes are only checked for a call whose shape the op will take). */
static int linear_forward_fenced(const char *op, struct rl_buf y, struct rl_cbuf x,
                                 struct rl_cbuf w, struct rl_cbuf bias, int n, int in_dim,
                                 int out_dim)
{
	if (dev(op, "y", y.p, 0) || dev(op, "x", x.p, 0) || dev(op, "w", w.p, 0) ||
	    dev(op, "bias", bias.p, 1))
		return -1;
	if (n < 0 || in_dim <= 0 || out_dim <= 0)
		return 0;
	size_t rows = (size_t)n;

	return span(op, "y", y.p, y.t, rows * (size_t)out_dim) ||
	               span(op, "x", x.p, x.t, rows * (size_t)in_dim) ||
	               span(op, "w", w.p, w.t, (size_t)out_dim * (size_t)in_dim) ||
	               span(op, "bias", bias.p, bias.t, (size_t)out_dim)
	           ? -1
	           : 0;
}

static int fenced_linear_forward(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                 struct rl_cbuf bias, int n, int in_dim, int out_dim, void *stream)
{
	if (linear_forward_fenced(__func__, y, x, w, bias, n, in_dim, out_dim))
		return -1;
	return rl_ops_cpu.linear_forward(UB(y), UC(x), UC(w), UC(bias), n, in_dim, out_dim, stream);
}

static int fenced_linear_backward(struct rl_buf dx, float *dw, float *dbias, struct rl_cbuf dy,
                                  struct rl_cbuf x, struct rl_cbuf w, int n, int in_dim,
                                  int out_dim, void *stream)
{
	if (DEV_OR_NULL(dx.p) || DEV_OR_NULL(dw) || DEV_OR_NULL(dbias) || DEV(dy.p) ||
	    DEV_OR_NULL(x.p) || DEV_OR_NULL(w.p))
		return -1;
	if (n >= 0 && in_dim > 0 && out_dim > 0) {
		size_t rows = (size_t)n, wn = (size_t)out_dim * (size_t)in_dim;

		if (SPAN(dx, rows * (size_t)in_dim) || SPAN(dy, rows * (size_t)out_dim) ||
		    SPAN(x, rows * (size_t)in_dim) || SPAN(w, wn) ||
		    span(__func__, "dw", dw, RL_F32, wn) ||
		    span(__func__, "dbias", dbias, RL_F32, (size_t)out_dim))
			return -1;
	}
	return rl_ops_cpu.linear_backward(UB(dx), U(dw), U(dbias), UC(dy), UC(x), UC(w), n, in_dim,
	                                  out_dim, stream);
}

/* A fused logprob op's buffers inside their allocations: h, W and the work
 * its type needs (logprobs.h); the outputs and targets, n each. */
static int logprobs_spans(const char *op, struct rl_cbuf h, struct rl_cbuf w,
                          const int32_t *targets, const float *work,
                          const struct rl_lm_logprobs_shape *s)
{
	if (s->n < 0 || s->dim <= 0 || s->vocab <= 0 || s->chunk < 1)
		return 0; /* the op refuses the shape itself */

	struct rl_lm_logprobs_shape clamped = *s;

	clamped.chunk = s->chunk < s->vocab ? s->chunk : s->vocab;
	return span(op, "h", h.p, h.t, (size_t)s->n * s->dim) ||
	       span(op, "w", w.p, w.t, (size_t)s->vocab * s->dim) ||
	       span_i32(op, "targets", targets, (size_t)s->n) ||
	       span(op, "work", work, RL_F32, (size_t)rl_lm_logprobs_work_floats(&clamped, h.t));
}

static int fenced_lm_logprobs_forward(float *logprob, float *lse, struct rl_cbuf h,
                                      struct rl_cbuf w, const int32_t *targets,
                                      const struct rl_lm_logprobs_shape *shape, float *work,
                                      void *stream)
{
	if (DEV(logprob) || DEV(lse) || DEV(h.p) || DEV(w.p) || DEV(targets) || DEV(work) ||
	    host(__func__, "shape", shape) || logprobs_spans(__func__, h, w, targets, work, shape))
		return -1;
	return rl_ops_cpu.lm_logprobs_forward(U(logprob), U(lse), UC(h), UC(w), U(targets), shape,
	                                      U(work), stream);
}

static int fenced_lm_logprobs_backward(struct rl_buf dh, float *dw, const float *dlogprob,
                                       struct rl_cbuf h, struct rl_cbuf w, const int32_t *targets,
                                       const float *lse, const struct rl_lm_logprobs_shape *shape,
                                       float *work, void *stream)
{
	if (DEV_OR_NULL(dh.p) || DEV_OR_NULL(dw) || DEV(dlogprob) || DEV(h.p) || DEV(w.p) ||
	    DEV(targets) || DEV(lse) || DEV(work) || host(__func__, "shape", shape) ||
	    logprobs_spans(__func__, h, w, targets, work, shape) ||
	    (shape->n > 0 && shape->dim > 0 && SPAN(dh, (size_t)shape->n * shape->dim)))
		return -1;
	return rl_ops_cpu.lm_logprobs_backward(UB(dh), U(dw), U(dlogprob), UC(h), UC(w), U(targets),
	                                       U(lse), shape, U(work), stream);
}

static int fenced_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n,
                             const struct rl_adamw_hparams *hp, int64_t step, void *stream)
{
	if (DEV(param) || DEV(grad) || DEV(m) || DEV(v) || host(__func__, "hp", hp))
		return -1;
	return rl_ops_cpu.adamw_step(U(param), U(grad), U(m), U(v), n, hp, step, stream);
}

static int fenced_add(struct rl_buf y, struct rl_cbuf x, int64_t n, void *stream)
{
	if (DEV(y.p) || DEV(x.p))
		return -1;
	if (n > 0 && (SPAN(y, n) || SPAN(x, n)))
		return -1;
	return rl_ops_cpu.add(UB(y), UC(x), n, stream);
}

static int fenced_scale(float *x, int64_t n, float s, void *stream)
{
	if (DEV(x))
		return -1;
	return rl_ops_cpu.scale(U(x), n, s, stream);
}

/* out is backend memory too, as the CUDA op has it: the total stays on the
 * device until the caller copies it back. */
static int fenced_sum_squares(double *out, const float *x, int64_t n, void *stream)
{
	if (DEV(out) || DEV(x))
		return -1;
	return rl_ops_cpu.sum_squares(U(out), U(x), n, stream);
}

static int fenced_round_bf16(float *y, const float *x, int64_t n, void *stream)
{
	if (DEV(y) || DEV(x))
		return -1;
	return rl_ops_cpu.round_bf16(U(y), U(x), n, stream);
}

static int fenced_to_bf16(uint16_t *y, const float *x, int64_t n, void *stream)
{
	if (DEV(y) || DEV(x))
		return -1;
	return rl_ops_cpu.to_bf16(U(y), U(x), n, stream);
}

static int fenced_from_bf16(float *y, const uint16_t *x, int64_t n, void *stream)
{
	if (DEV(y) || DEV(x))
		return -1;
	return rl_ops_cpu.from_bf16(U(y), U(x), n, stream);
}

/* The group offsets are host memory, as the CUDA op reads them to size its
 * launch. */
/* A grouped GEMM's buffers: n = offsets[groups] rows of x and y, groups
 * weights, inside their allocations (checked when the groups are valid;
 * the op refuses the rest itself). */
static int grouped_spans(const char *op, struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                         const int32_t *offsets, int groups, int in_dim, int out_dim)
{
	if (rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim))
		return 0;

	size_t n = (size_t)offsets[groups];

	return span(op, "y", y.p, y.t, n * out_dim) || span(op, "x", x.p, x.t, n * in_dim) ||
	       span(op, "w", w.p, w.t, (size_t)groups * out_dim * in_dim);
}

static int fenced_grouped_linear_forward(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                         const int32_t *offsets, int groups, int in_dim,
                                         int out_dim, void *stream)
{
	if (DEV(y.p) || DEV(x.p) || DEV(w.p) || host(__func__, "offsets", offsets) ||
	    grouped_spans(__func__, y, x, w, offsets, groups, in_dim, out_dim))
		return -1;
	return rl_ops_cpu.grouped_linear_forward(UB(y), UC(x), UC(w), offsets, groups, in_dim,
	                                         out_dim, stream);
}

static int fenced_grouped_linear_backward(struct rl_buf dx, float *dw, struct rl_cbuf dy,
                                          struct rl_cbuf x, struct rl_cbuf w,
                                          const int32_t *offsets, int groups, int in_dim,
                                          int out_dim, void *stream)
{
	if (DEV_OR_NULL(dx.p) || DEV_OR_NULL(dw) || DEV(dy.p) || DEV_OR_NULL(x.p) ||
	    DEV_OR_NULL(w.p) || host(__func__, "offsets", offsets))
		return -1;
	/* dy and dx have y's and x's shapes; dW is w's, in fp32 */
	if (!rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim)) {
		size_t n = (size_t)offsets[groups], nw = (size_t)groups * out_dim * in_dim;

		if (SPAN(dx, n * in_dim) || SPAN(dy, n * out_dim) || SPAN(x, n * in_dim) ||
		    SPAN(w, nw) || span(__func__, "dw", dw, RL_F32, nw))
			return -1;
	}
	return rl_ops_cpu.grouped_linear_backward(UB(dx), U(dw), UC(dy), UC(x), UC(w), offsets,
	                                          groups, in_dim, out_dim, stream);
}

static int fenced_moe_combine_forward(struct rl_buf out, struct rl_cbuf y, const int32_t *slot,
                                      const float *weight, int n_tokens, int k, int dim,
                                      int n_slots, void *stream)
{
	if (DEV(out.p) || DEV_OR_NULL(y.p) || DEV(slot) || DEV(weight))
		return -1;
	if (n_tokens >= 0 && k > 0 && dim > 0 && n_slots >= 0 &&
	    (SPAN(out, (size_t)n_tokens * dim) || SPAN(y, (size_t)n_slots * dim) ||
	     span_i32(__func__, "slot", slot, (size_t)n_tokens * k) ||
	     span(__func__, "weight", weight, RL_F32, (size_t)n_tokens * k)))
		return -1;
	return rl_ops_cpu.moe_combine_forward(UB(out), UC(y), U(slot), U(weight), n_tokens, k, dim,
	                                      n_slots, stream);
}

static int fenced_moe_combine_backward(struct rl_buf dy, float *dweight, struct rl_cbuf dout,
                                       struct rl_cbuf y, const int32_t *slot, const float *weight,
                                       int n_tokens, int k, int dim, void *stream)
{
	if (DEV_OR_NULL(dy.p) || DEV(dweight) || DEV(dout.p) || DEV(y.p) || DEV(slot) ||
	    DEV(weight))
		return -1;
	if (n_tokens >= 0 && k > 0 && dim > 0 &&
	    (SPAN(dout, (size_t)n_tokens * dim) ||
	     span_i32(__func__, "slot", slot, (size_t)n_tokens * k) ||
	     span(__func__, "weight", weight, RL_F32, (size_t)n_tokens * k) ||
	     span(__func__, "dweight", dweight, RL_F32, (size_t)n_tokens * k)))
		return -1;
	return rl_ops_cpu.moe_combine_backward(UB(dy), U(dweight), UC(dout), UC(y), U(slot),
	                                       U(weight), n_tokens, k, dim, stream);
}

static int fenced_kv_append(float *k_cache, float *v_cache, const float *k, const float *v,
                            const int32_t *rows, int n, int row_floats, void *stream)
{
	if (DEV(k_cache) || DEV(v_cache) || DEV(k) || DEV(v) || DEV(rows))
		return -1;
	return rl_ops_cpu.kv_append(U(k_cache), U(v_cache), U(k), U(v), U(rows), n, row_floats,
	                            stream);
}

static int fenced_attention_paged(float *out, float *lse, const float *q, const float *k_cache,
                                  const float *v_cache, const int32_t *table, const int32_t *off,
                                  const int32_t *pos, int n, int block,
                                  const struct rl_attention_shape *shape, void *stream)
{
	if (DEV(out) || DEV_OR_NULL(lse) || DEV(q) || DEV(k_cache) || DEV(v_cache) || DEV(table) ||
	    DEV(off) || DEV(pos) || host(__func__, "shape", shape))
		return -1;
	return rl_ops_cpu.attention_paged(U(out), U(lse), U(q), U(k_cache), U(v_cache), U(table),
	                                  U(off), U(pos), n, block, shape, stream);
}

/* The parameters are host memory; the counters are per row, on the device. */
static int fenced_sample(int32_t *tokens, const float *logits, int n, int vocab, int ld,
                         const struct rl_sample_params *p, const int64_t *counters, void *stream)
{
	if (DEV(tokens) || DEV(logits) || DEV(counters) || host(__func__, "p", p))
		return -1;
	return rl_ops_cpu.sample(U(tokens), U(logits), n, vocab, ld, p, U(counters), stream);
}

static int fenced_logits_logprobs(float *logprob, float *lse, const float *logits, int ld,
                                  const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                                  float *work, void *stream)
{
	if (DEV(logprob) || DEV(lse) || DEV(logits) || DEV(targets) || DEV(work) ||
	    host(__func__, "shape", shape))
		return -1;
	return rl_ops_cpu.logits_logprobs(U(logprob), U(lse), U(logits), ld, U(targets), shape,
	                                  U(work), stream);
}

static int fenced_linear_forward_invariant(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                           struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                           void *stream)
{
	if (linear_forward_fenced(__func__, y, x, w, bias, n, in_dim, out_dim))
		return -1;
	return rl_ops_cpu.linear_forward_invariant(UB(y), UC(x), UC(w), UC(bias), n, in_dim,
	                                           out_dim, stream);
}

static int fenced_lm_logprobs_forward_invariant(float *logprob, float *lse, struct rl_cbuf h,
                                                struct rl_cbuf w, const int32_t *targets,
                                                const struct rl_lm_logprobs_shape *shape,
                                                float *work, void *stream)
{
	if (DEV(logprob) || DEV(lse) || DEV(h.p) || DEV(w.p) || DEV(targets) || DEV(work) ||
	    host(__func__, "shape", shape) || logprobs_spans(__func__, h, w, targets, work, shape))
		return -1;
	return rl_ops_cpu.lm_logprobs_forward_invariant(U(logprob), U(lse), UC(h), UC(w),
	                                                U(targets), shape, U(work), stream);
}

static int fenced_grouped_linear_forward_invariant(struct rl_buf y, struct rl_cbuf x,
                                                   struct rl_cbuf w, const int32_t *offsets,
                                                   int groups, int in_dim, int out_dim,
                                                   void *stream)
{
	if (DEV(y.p) || DEV(x.p) || DEV(w.p) || host(__func__, "offsets", offsets) ||
	    grouped_spans(__func__, y, x, w, offsets, groups, in_dim, out_dim))
		return -1;
	return rl_ops_cpu.grouped_linear_forward_invariant(UB(y), UC(x), UC(w), offsets, groups,
	                                                   in_dim, out_dim, stream);
}

const struct rl_ops rl_ops_fenced = {
    .name = "fenced",
    .alloc = fenced_alloc,
    .release = fenced_release,
    .zero = fenced_zero,
    .to_host = fenced_to_host,
    .from_host = fenced_from_host,
    .copy = fenced_copy,
    .embedding_forward = fenced_embedding_forward,
    .embedding_backward = fenced_embedding_backward,
    .rmsnorm_forward = fenced_rmsnorm_forward,
    .rmsnorm_backward = fenced_rmsnorm_backward,
    .rope_forward = fenced_rope_forward,
    .rope_backward = fenced_rope_backward,
    .attention_forward = fenced_attention_forward,
    .attention_backward = fenced_attention_backward,
    .attention_chunks_forward = fenced_attention_chunks_forward,
    .attention_chunks_backward = fenced_attention_chunks_backward,
    .swiglu_forward = fenced_swiglu_forward,
    .swiglu_backward = fenced_swiglu_backward,
    .linear_forward = fenced_linear_forward,
    .linear_backward = fenced_linear_backward,
    .lm_logprobs_forward = fenced_lm_logprobs_forward,
    .lm_logprobs_backward = fenced_lm_logprobs_backward,
    .adamw_step = fenced_adamw_step,
    .add = fenced_add,
    .scale = fenced_scale,
    .sum_squares = fenced_sum_squares,
    .round_bf16 = fenced_round_bf16,
    .to_bf16 = fenced_to_bf16,
    .from_bf16 = fenced_from_bf16,
    .grouped_linear_forward = fenced_grouped_linear_forward,
    .grouped_linear_backward = fenced_grouped_linear_backward,
    .moe_combine_forward = fenced_moe_combine_forward,
    .moe_combine_backward = fenced_moe_combine_backward,
    .kv_append = fenced_kv_append,
    .attention_paged = fenced_attention_paged,
    .sample = fenced_sample,
    .logits_logprobs = fenced_logits_logprobs,
    .linear_forward_invariant = fenced_linear_forward_invariant,
    .lm_logprobs_forward_invariant = fenced_lm_logprobs_forward_invariant,
    .grouped_linear_forward_invariant = fenced_grouped_linear_forward_invariant,
};
