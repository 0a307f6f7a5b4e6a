/* A typed pointer: an activation's address and its element type, passed by
 * value through the op table, so that one op serves fp32 and bf16 buffers
 * and a mismatch is refused before any work instead of read as the wrong
 * bytes. Shapes stay ints beside it, as before; only the type travels.
 *
 * The types an op takes are in its header and in the table of kernels/ops.h;
 * an op given a combination it does not support returns -1 before reading
 * anything. What stays fp32 on every path (rstd, lse, the fp32 gradients of
 * the weights, their master) keeps a plain float *.
 * defines: struct rl_buf, struct rl_cbuf, rl_buf_f32, rl_buf_bf16,
 * rl_cbuf_f32, rl_cbuf_bf16, rl_cbuf_of, rl_buf_at, rl_cbuf_at, rl_buf_bytes,
 * rl_act_type_ok */
#ifndef RL_KERNELS_BUF_H
#define RL_KERNELS_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writable and read-only. p NULL is "none" where an op allows it (a bias, a
 * gradient it need not compute), whatever t says. */
struct rl_buf {
	void *p;
	enum rl_dtype t;
};

struct rl_cbuf {
	const void *p;
	enum rl_dtype t;
};

static inline struct rl_buf rl_buf_f32(float *p)
{
	struct rl_buf b;

	b.p = p;
	b.t = RL_F32;
	return b;
}

static inline struct rl_buf rl_buf_bf16(uint16_t *p)
{
	struct rl_buf b;

	b.p = p;
	b.t = RL_BF16;
	return b;
}

static inline struct rl_cbuf rl_cbuf_f32(const float *p)
{
	struct rl_cbuf b;

	b.p = p;
	b.t = RL_F32;
	return b;
}

static inline struct rl_cbuf rl_cbuf_bf16(const uint16_t *p)
{
	struct rl_cbuf b;

	b.p = p;
	b.t = RL_BF16;
	return b;
}

static inline struct rl_cbuf rl_cbuf_of(struct rl_buf b)
{
	struct rl_cbuf c;

	c.p = b.p;
	c.t = b.t;
	return c;
}

/* The buffer i elements further on (NULL stays NULL). */
static inline struct rl_buf rl_buf_at(struct rl_buf b, size_t i)
{
	if (b.p)
		b.p = (char *)b.p + i * rl_dtype_size(b.t);
	return b;
}

static inline struct rl_cbuf rl_cbuf_at(struct rl_cbuf b, size_t i)
{
	if (b.p)
		b.p = (const char *)b.p + i * rl_dtype_size(b.t);
	return b;
}

/* Bytes of n elements of type t. */
static inline size_t rl_buf_bytes(enum rl_dtype t, size_t n)
{
	return n * rl_dtype_size(t);
}

/* The activation types the ops take: fp32, and bf16 (fp16 is a file
 * format here, not an activation type). */
static inline bool rl_act_type_ok(enum rl_dtype t)
{
	return t == RL_F32 || t == RL_BF16;
}

#ifdef __cplusplus
}
#endif

#endif
