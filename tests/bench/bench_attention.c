/* The bf16 attention (kernels/attention_bf16.h) against PyTorch's flash SDPA
 * on the same shapes, in the same run: causal, head_dim 128, 16 query heads
 * with 16 and with 4 kv heads, sequences of 1024 .. 8192 tokens batched to
 * 16384 tokens. Each timing is the median of REPS runs after WARMUP, with
 * CUDA events around the call. TFLOP/s count FLOPs as FlashAttention's
 * benchmark does for causal attention: forward 4 S^2 D H / 2 per sequence,
 * backward 2.5 times that (our deterministic backward recomputes S and dP
 * once more than FlashAttention-2's, so it does 7/5 of those FLOPs). The
 * PyTorch numbers come from tests/bench/bench_attention_torch.py through
 * popen(); without torch or without a GPU the table says so and the
 * program still exits 0. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef RL_HAVE_CUDA

int main(void)
{
	printf("bench_attention: skipped: built without --with-cuda\n");
	return 0;
}

#else

#include <cuda_runtime_api.h>

#include "kernels/attention_bf16.h"
#include "kernels/dtype.h"

#define HEAD_DIM 128
#define N_HEADS  16
#define TOKENS   16384
#define WARMUP   3
#define REPS     20

static const int seq_lens[] = {1024, 2048, 4096, 8192};
static const int kv_heads[] = {16, 4};

#define N_SHAPES ((int)(sizeof(seq_lens) / sizeof(seq_lens[0]) * 2))

struct row {
	int seq, kv;
	double fwd_ms, bwd_ms;
	int torch_ok; /* 1: numbers, 0: none for this shape */
	double t_fwd_ms, t_fwdbwd_ms;
	char gqa[16];
};

#define CHECK(call)                                                                                \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "bench_attention: %s: %s\n", #call,                        \
			        cudaGetErrorString(e_));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* forward FLOPs of one batch, as FlashAttention's benchmark counts them */
static double fwd_flops(int seq)
{
	return 4.0 * seq * (double)seq * HEAD_DIM * N_HEADS / 2.0 * (TOKENS / seq);
}

struct bufs {
	uint16_t *q, *k, *v, *out, *dout, *dq, *dk, *dv;
	float *lse, *ws;
	int32_t *cu;
};

/* Median milliseconds of the forward (which = 0) or the backward (1). */
static double time_op(const struct bufs *b, int which, int seq, int kv)
{
	const struct rl_attention_shape sh = {N_HEADS, kv, HEAD_DIM, 0.08838834764831845f};
	const int n_seqs = TOKENS / seq;
	double ms[REPS];
	cudaEvent_t start, stop;

	CHECK(cudaEventCreate(&start));
	CHECK(cudaEventCreate(&stop));
	for (int r = -WARMUP; r < REPS; r++) {
		int rc;

		CHECK(cudaEventRecord(start, NULL));
		if (which == 0)
			rc = rl_attention_forward_bf16_cuda(b->out, b->lse, b->q, b->k, b->v, b->cu,
			                                    n_seqs, seq, &sh, NULL);
		else
			rc = rl_attention_backward_bf16_cuda(b->dq, b->dk, b->dv, b->dout, b->q,
			                                     b->k, b->v, b->out, b->lse, b->cu,
			                                     n_seqs, seq, &sh, b->ws, NULL);
		CHECK(cudaEventRecord(stop, NULL));
		CHECK(cudaEventSynchronize(stop));
		if (rc) {
			fprintf(stderr, "bench_attention: %s returned -1 (seq %d, kv %d)\n",
			        which ? "backward" : "forward", seq, kv);
			exit(1);
		}
		float t;
		CHECK(cudaEventElapsedTime(&t, start, stop));
		if (r >= 0)
			ms[r] = t;
	}
	CHECK(cudaEventDestroy(start));
	CHECK(cudaEventDestroy(stop));
	qsort(ms, REPS, sizeof(ms[0]), cmp_double);
	return ms[REPS / 2];
}

static uint16_t *dev_random_bf16(size_t n, uint32_t *seed)
{
	uint16_t *h = malloc(n * sizeof(*h)), *d;

	if (!h)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1664525u + 1013904223u;
		h[i] = rl_f32_to_bf16((float)(*seed >> 8) / 8388608.0f - 1.0f);
	}
	CHECK(cudaMalloc((void **)&d, n * sizeof(*d)));
	CHECK(cudaMemcpy(d, h, n * sizeof(*d), cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* Fills the torch columns; returns NULL or the reason they are empty. */
static const char *torch_numbers(struct row *rows, int n, char *why, size_t whylen)
{
	char cmd[4096], line[1024], dir[2048];
	/* RL_BENCH_TORCH_DIR: where the script is when the bench was packed
	 * for another machine (tests/cuda/device-pack.sh) */
	const char *packed = getenv("RL_BENCH_TORCH_DIR");
	const char *src = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

	if (packed)
		snprintf(dir, sizeof dir, "%s", packed);
	else
		snprintf(dir, sizeof dir, "%s/tests/bench", src);
	int len = snprintf(cmd, sizeof cmd, "python3 '%s/bench_attention_torch.py' %d %d %d", dir,
	                   HEAD_DIM, N_HEADS, TOKENS);

	for (int i = 0; i < n; i++)
		len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %d:%d", rows[i].seq,
		                rows[i].kv);
	snprintf(cmd + len, sizeof cmd - (size_t)len, " 2>&1");

	FILE *p = popen(cmd, "r");
	int got = 0;

	snprintf(why, whylen, "no output from python3");
	if (!p)
		return "popen failed";
	while (fgets(line, sizeof line, p)) {
		int seq, kv;
		double f, fb;
		char gqa[16];

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "torch seq=%d kv=%d fwd_ms=%lf fwdbwd_ms=%lf gqa=%15s", &seq, &kv,
		           &f, &fb, gqa) == 5) {
			for (int i = 0; i < n; i++)
				if (rows[i].seq == seq && rows[i].kv == kv) {
					rows[i].torch_ok = 1;
					rows[i].t_fwd_ms = f;
					rows[i].t_fwdbwd_ms = fb;
					snprintf(rows[i].gqa, sizeof rows[i].gqa, "%s", gqa);
					got++;
				}
		} else if (!got) {
			/* the first other line says why (no torch, no GPU, a
			 * traceback's last words end up here too) */
			snprintf(why, whylen, "%s", line);
		}
	}
	int status = pclose(p);
	if (got)
		return NULL;
	if (status != 0 && strcmp(why, "no output from python3") == 0)
		snprintf(why, whylen, "python3 failed (status %d)", status);
	return why;
}

int main(void)
{
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);

	if (err != cudaSuccess || count == 0) {
		printf("bench_attention: skipped: no CUDA device (%s)\n",
		       err != cudaSuccess ? cudaGetErrorString(err)
		                          : "cudaGetDeviceCount found none");
		return 0;
	}

	struct cudaDeviceProp prop;
	CHECK(cudaGetDeviceProperties(&prop, 0));

	const size_t nq = (size_t)TOKENS * N_HEADS * HEAD_DIM, nl = (size_t)TOKENS * N_HEADS;
	const int max_seqs = TOKENS / seq_lens[0];
	uint32_t seed = 42;
	struct bufs b;
	int32_t *cu = malloc(((size_t)max_seqs + 1) * sizeof(*cu));

	if (!cu)
		return 1;
	/* kv tensors sized for 16 kv heads serve the 4-head shapes too */
	b.q = dev_random_bf16(nq, &seed);
	b.k = dev_random_bf16(nq, &seed);
	b.v = dev_random_bf16(nq, &seed);
	b.dout = dev_random_bf16(nq, &seed);
	CHECK(cudaMalloc((void **)&b.out, nq * 2));
	CHECK(cudaMalloc((void **)&b.dq, nq * 2));
	CHECK(cudaMalloc((void **)&b.dk, nq * 2));
	CHECK(cudaMalloc((void **)&b.dv, nq * 2));
	CHECK(cudaMalloc((void **)&b.lse, nl * sizeof(float)));
	CHECK(cudaMalloc((void **)&b.cu, ((size_t)max_seqs + 1) * sizeof(int32_t)));
	{
		const struct rl_attention_shape sh = {N_HEADS, N_HEADS, HEAD_DIM, 0.0884f};
		CHECK(cudaMalloc((void **)&b.ws,
		                 rl_attention_backward_bf16_workspace_size(TOKENS, &sh)));
	}

	struct row rows[N_SHAPES];
	int n = 0;

	for (size_t s = 0; s < sizeof(seq_lens) / sizeof(seq_lens[0]); s++)
		for (size_t h = 0; h < sizeof(kv_heads) / sizeof(kv_heads[0]); h++) {
			struct row *r = &rows[n++];
			const int seq = seq_lens[s];

			memset(r, 0, sizeof(*r));
			r->seq = seq;
			r->kv = kv_heads[h];
			for (int i = 0; i <= TOKENS / seq; i++)
				cu[i] = i * seq;
			CHECK(cudaMemcpy(b.cu, cu, ((size_t)TOKENS / seq + 1) * sizeof(int32_t),
			                 cudaMemcpyHostToDevice));
			r->fwd_ms = time_op(&b, 0, seq, r->kv);
			r->bwd_ms = time_op(&b, 1, seq, r->kv);
		}

	char why[1024];
	const char *no_torch = torch_numbers(rows, n, why, sizeof why);

	printf("bench_attention: %s, causal bf16, head_dim %d, %d query heads, %d tokens per "
	       "batch\n",
	       prop.name, HEAD_DIM, N_HEADS, TOKENS);
	printf("TFLOP/s (FlashAttention's count: fwd 2 S^2 D H per sequence, bwd 2.5x); "
	       "ratio = ours / torch\n");
	printf("%6s %5s %3s | %9s %9s | %9s %9s %6s | %9s %9s\n", "seq", "batch", "kv", "ours fwd",
	       "ours bwd", "torch fwd", "torch bwd", "gqa", "fwd ratio", "bwd ratio");
	for (int i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		const double f = fwd_flops(r->seq), fb = 2.5 * f;
		const double of = f / (r->fwd_ms * 1e9), ob = fb / (r->bwd_ms * 1e9);

		printf("%6d %5d %3d | %9.1f %9.1f |", r->seq, TOKENS / r->seq, r->kv, of, ob);
		if (r->torch_ok) {
			const double tb_ms = r->t_fwdbwd_ms - r->t_fwd_ms;
			const double tf = f / (r->t_fwd_ms * 1e9), tb = fb / (tb_ms * 1e9);

			printf(" %9.1f %9.1f %6s | %9.2f %9.2f\n", tf, tb, r->gqa, of / tf,
			       ob / tb);
		} else {
			printf(" %9s %9s %6s | %9s %9s\n", "n/a", "n/a", "", "n/a", "n/a");
		}
	}
	if (no_torch)
		printf("torch: n/a: %s\n", no_torch);

	cudaFree(b.q);
	cudaFree(b.k);
	cudaFree(b.v);
	cudaFree(b.dout);
	cudaFree(b.out);
	cudaFree(b.dq);
	cudaFree(b.dk);
	cudaFree(b.dv);
	cudaFree(b.lse);
	cudaFree(b.ws);
	cudaFree(b.cu);
	free(cu);
	return 0;
}

#endif
