/* Decode throughput of the generation engine on the CUDA backend at the
 * scale of issue 27's acceptance bar: "for the random 8B-shaped Llama
 * (weights 16 GB in bf16) at batch 64 and 256 with ~1k-token contexts:
 * >= 10,000 tokens/s on one H200".
 *
 * A Llama-3-8B-shaped model with random weights is built directly on
 * rl_ops_cuda (no 16 GB file is written and read back); prompts of ~1k
 * distinct pseudo-random tokens are generated greedily through rl_generate
 * with max_slots = B, for each batch B, with batch_invariant on and off.
 * The decode rate is B (new - 1) / (t(new) - t(1)): the prefill and the
 * first token cancel out, so what is left is the decode steps alone, which
 * is what the bar is about. Each rate is set beside the HBM-bandwidth
 * limit: the tokens/s at which a decode step would only stream the weights
 * as the runtime reads them, once, plus the KV cache at its mean length.
 *
 * The device pack runs this under a timeout (~240 s) in which one prefill
 * of 64 x 1024 tokens in fp32 GEMMs takes tens of seconds, so the bench
 * keeps to a time budget: a cheap warm-up, one repetition per row for sure,
 * more (up to RL_DECODE_REPS) only while the rows still to come fit; every
 * line is flushed as soon as it is known, so a cut-off run keeps its rows.
 *
 * Environment: RL_DECODE_LAYERS (32), RL_DECODE_BATCHES ("64,256"),
 * RL_DECODE_PROMPT_LEN (1024), RL_DECODE_NEW_TOKENS (64), RL_DECODE_REPS
 * (3), RL_DECODE_BUDGET_S (200), RL_DECODE_INIT (tiled, or random: see
 * build_model), RL_BENCH_PRECISION (bfloat16 or float32). */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdio.h>

#ifdef RL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"
#include "kernels/memory.h"
#include "runtime/base/rng.h"
#include "runtime/generate/generate.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "runtime/model/split.h"
#include "tests/bench/clock.h"

#define GB         1e9
#define ISSUE_BAR  10000.0 /* tokens/s, issue 27 */
#define MAX_BATCHS 16

enum {
	KV_BLOCK = 16,
	WARMUP_PROMPT = 16,     /* tokens of each prompt the warm-up feeds */
	FILL_FLOATS = 1 << 24,  /* the tiled fill's block of random values */
	STEP_TOKENS = 4096,     /* runtime/generate/generate.c's step budget */
	ISSUE_LAYERS = 32,      /* Llama-3-8B's, which the bar is stated for */
	MARGIN_BYTES = 1 << 30, /* cuBLASLt workspace, handles, pool rounding */
};

struct settings {
	int layers, n_batches, batches[MAX_BATCHS];
	int prompt_len, new_tokens, reps;
	double budget_s;
	bool bf16, random_init;
};

/* Whether the name is one of the issue's devices, for the bar's note. */
static bool is_h200(const char *name)
{
	return strstr(name, "H200") != NULL;
}

/* ---- settings ---- */

/* An integer from the environment in [lo, hi], def when unset; -1 (with a
 * message) when set to anything else. */
static int env_int(const char *name, int def, int lo, int hi)
{
	const char *s = getenv(name);
	char *end;

	if (!s || !*s)
		return def;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "bench_decode_gpu: %s=%s: an integer in [%d, %d]\n", name, s, lo,
		        hi);
		return -1;
	}
	return (int)v;
}

static int parse_batches(struct settings *s)
{
	const char *env = getenv("RL_DECODE_BATCHES");
	const char *p = env && *env ? env : "64,256";

	s->n_batches = 0;
	while (*p) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p || v < 1 || v > 65536 || s->n_batches == MAX_BATCHS ||
		    (*end && *end != ',')) {
			fprintf(stderr,
			        "bench_decode_gpu: RL_DECODE_BATCHES=%s: up to %d batch sizes in "
			        "[1, 65536], comma-separated\n",
			        p, MAX_BATCHS);
			return -1;
		}
		s->batches[s->n_batches++] = (int)v;
		p = *end ? end + 1 : end;
	}
	return s->n_batches ? 0 : -1;
}

static int read_settings(struct settings *s)
{
	const char *prec = getenv("RL_BENCH_PRECISION");
	const char *init = getenv("RL_DECODE_INIT");

	prec = prec && *prec ? prec : "bfloat16";
	if (strcmp(prec, "bfloat16") && strcmp(prec, "float32")) {
		fprintf(stderr, "bench_decode_gpu: RL_BENCH_PRECISION=%s: bfloat16 or float32\n",
		        prec);
		return -1;
	}
	s->bf16 = strcmp(prec, "bfloat16") == 0;
	init = init && *init ? init : "tiled";
	if (strcmp(init, "tiled") && strcmp(init, "random")) {
		fprintf(stderr, "bench_decode_gpu: RL_DECODE_INIT=%s: tiled or random\n", init);
		return -1;
	}
	s->random_init = strcmp(init, "random") == 0;
	s->layers = env_int("RL_DECODE_LAYERS", ISSUE_LAYERS, 1, 1024);
	s->prompt_len = env_int("RL_DECODE_PROMPT_LEN", 1024, 1, 1 << 20);
	/* at least 2: the rate is over new - 1 decode steps */
	s->new_tokens = env_int("RL_DECODE_NEW_TOKENS", 64, 2, 1 << 20);
	s->reps = env_int("RL_DECODE_REPS", 3, 1, 100);
	int budget = env_int("RL_DECODE_BUDGET_S", 200, 1, 1 << 20);
	s->budget_s = budget;
	if (s->layers < 0 || s->prompt_len < 0 || s->new_tokens < 0 || s->reps < 0 || budget < 0)
		return -1;
	return parse_batches(s);
}

/* ---- shape and memory ---- */

/* Llama-3-8B's config.json, with the layer count asked for. The EOS id is
 * only the config's: rl_generate is given none, so every sequence runs to
 * its token budget. */
static void llama8b_config(struct rl_model_config *c, int layers, int max_len)
{
	memset(c, 0, sizeof *c);
	c->arch = RL_ARCH_LLAMA;
	snprintf(c->architecture, sizeof c->architecture, "LlamaForCausalLM");
	c->vocab_size = 128256;
	c->hidden_size = 4096;
	c->intermediate_size = 14336;
	c->n_layers = layers;
	c->n_heads = 32;
	c->n_kv_heads = 8;
	c->head_dim = 128;
	c->max_position_embeddings = max_len > 8192 ? max_len : 8192;
	c->rms_norm_eps = 1e-5;
	c->rope_theta = 500000.0;
	c->rope_scaling.type = RL_ROPE_DEFAULT;
	c->tie_word_embeddings = false;
	c->bos_token_id = 128000;
	c->eos_token_ids[0] = 128001;
	c->n_eos = 1;
	c->torch_dtype = RL_BF16;
}

/* Every parameter of a Llama without biases, untied. */
static double count_params(const struct rl_model_config *c)
{
	double d = c->hidden_size, qd = (double)c->n_heads * c->head_dim,
	       kvd = (double)c->n_kv_heads * c->head_dim, I = c->intermediate_size,
	       V = c->vocab_size;
	double layer = 2 * d * qd + 2 * d * kvd + 3 * d * I + 2 * d;

	return c->n_layers * layer + 2 * V * d + d;
}

/* Device bytes per parameter as params.c allocates them: the fp32 master
 * (flat), the fp32 gradients (flat_grad, allocated whether or not anything
 * trains), and in bf16 the view the passes read, which is a float array
 * holding bf16-rounded values: 4 bytes more, not 2. */
static int bytes_per_param(bool bf16)
{
	return bf16 ? 12 : 8;
}

static int64_t kv_blocks(int batch, const struct settings *s)
{
	return rl_kv_blocks_for(batch, s->prompt_len + s->new_tokens, KV_BLOCK);
}

/* The fp32 KV cache of batch rows, as runtime/model/kv_cache.c sizes it. */
static double kv_bytes(const struct rl_model *m, int batch, const struct settings *s)
{
	return (double)rl_kv_block_bytes(m, KV_BLOCK) * (double)kv_blocks(batch, s);
}

/* What else a generation of batch sequences allocates: the decode scratch
 * (rl_kv_scratch_bytes, for the engine's step of STEP_TOKENS tokens, or a
 * longer prompt, or one token a slot), the engine's logprob work (the
 * whole vocabulary per slot), and the margin. */
static double gen_scratch_bytes(const struct rl_model *m, int batch, const struct settings *s)
{
	int T = STEP_TOKENS;

	if (s->prompt_len > T)
		T = s->prompt_len;
	if (batch > T)
		T = batch;
	return (double)rl_kv_scratch_bytes(m, batch, T) + 4.0 * batch * m->cfg.vocab_size +
	       MARGIN_BYTES;
}

/* Device memory a new allocation can get: what the driver has free plus
 * what the backend's pool holds cached (it keeps freed blocks for the
 * process's life, so the driver's number alone undercounts). */
static double device_available(void)
{
	size_t free_b = 0, total_b = 0;
	struct rl_cuda_memory_stats ms;
	double cached = 0;

	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
		return -1;
	if (rl_cuda_memory_stats(&ms) == 0 && ms.reserved > ms.in_use)
		cached = (double)(ms.reserved - ms.in_use);
	return (double)free_b + cached;
}

/* ---- the model ---- */

/* Fills every matrix of m with N(0, std^2) values and every norm weight
 * with ones, as rl_model_new_random does, but from one block of
 * FILL_FLOATS draws laid over each tensor from its own offset, copied on
 * the device. Drawing 8e9 normals on one host thread, as
 * rl_model_new_random does, takes minutes (~50 ns each), longer than the
 * pack gives the whole bench; a decode step's time does not depend on the
 * values, only on their being finite and of a sane scale. */
static int fill_tiled(struct rl_model *m, uint64_t seed, double std, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	size_t n = FILL_FLOATS, bytes = n * sizeof(float);
	float *host = malloc(bytes), *dev = ops->alloc(bytes), *ones = NULL;
	struct rl_rng rng;
	int rc = -1;

	if (!host || !dev) {
		snprintf(err, errlen, "out of memory for the %zu-byte fill block", bytes);
		goto out;
	}
	rl_rng_seed(&rng, seed, 0);
	for (size_t i = 0; i < n; i += 2) {
		/* Box-Muller: a pair of normals from a pair of uniforms;
		 * 1 - u keeps the logarithm finite */
		double r = sqrt(-2.0 * log(1.0 - rl_rng_uniform(&rng)));
		double a = 2.0 * M_PI * rl_rng_uniform(&rng);
		host[i] = (float)(std * r * cos(a));
		host[i + 1] = (float)(std * r * sin(a));
	}
	if (ops->from_host(dev, host, bytes, NULL)) {
		snprintf(err, errlen, "cannot copy the fill block to the device");
		goto out;
	}
	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];
		size_t numel = (size_t)p->numel;

		if (p->ndim == 1) {
			/* norm weights are ones; Llama has no biases, and
			 * rl_model_new_shard zeroed everything */
			if (!strstr(p->name, "norm"))
				continue;
			float *o = realloc(ones, numel * sizeof *o);
			if (!o) {
				snprintf(err, errlen, "out of host memory");
				goto out;
			}
			ones = o;
			for (size_t k = 0; k < numel; k++)
				ones[k] = 1.0f;
			if (ops->from_host(p->master, ones, numel * sizeof *ones, NULL)) {
				snprintf(err, errlen, "cannot copy %s to the device", p->name);
				goto out;
			}
			continue;
		}
		/* a different phase per tensor, so that no two matrices are
		 * the same values */
		size_t off = (size_t)((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull % n);
		for (size_t done = 0; done < numel;) {
			size_t len = n - off < numel - done ? n - off : numel - done;
			if (ops->copy(p->master + done, dev + off, len * sizeof(float), NULL)) {
				snprintf(err, errlen, "filling %s on the device failed", p->name);
				goto out;
			}
			done += len;
			off = 0;
		}
	}
	rc = 0;
out:
	free(host);
	free(ones);
	ops->release(dev);
	return rc;
}

/* RL_DECODE_INIT=tiled (the default): rl_model_new_shard's zeroed model,
 * filled by fill_tiled. random: rl_model_new_random, transformers' init
 * drawn weight by weight on the host, minutes at this size. */
static int build_model(struct rl_model **m, const struct rl_model_config *c,
                       const struct settings *s, char *err, size_t errlen)
{
	const char *name = "random-llama-8b-shape";
	const uint64_t seed = 27;
	const double std = 0.02; /* Llama's initializer_range */

	*m = NULL;
	if (s->random_init) {
		if (rl_model_new_random(m, c, name, &rl_ops_cuda, seed, std, err, errlen))
			return -1;
	} else {
		struct rl_model_shard whole;

		rl_model_shard_whole(&whole, c);
		if (rl_model_new_shard(m, c, &whole, name, &rl_ops_cuda, err, errlen))
			return -1;
		if (fill_tiled(*m, seed, std, err, errlen)) {
			rl_model_free(*m);
			*m = NULL;
			return -1;
		}
	}
	if (rl_model_set_precision(*m, s->bf16 ? RL_BF16 : RL_F32, err, errlen)) {
		rl_model_free(*m);
		*m = NULL;
		return -1;
	}
	return 0;
}

/* Prompt i: ids in [2, vocab) from its own stream, so no two sequences are
 * the same (the engine would share a repeated prompt's prefill) and none
 * is the config's BOS or a low special id. */
static int32_t **make_prompts(int n, int len, int vocab)
{
	int32_t **p = calloc((size_t)n, sizeof *p);

	if (!p)
		return NULL;
	for (int i = 0; i < n; i++) {
		struct rl_rng rng;

		if (!(p[i] = malloc((size_t)len * sizeof **p))) {
			for (int j = 0; j < i; j++)
				free(p[j]);
			free(p);
			return NULL;
		}
		rl_rng_seed(&rng, 1027, (uint64_t)i);
		for (int t = 0; t < len; t++)
			p[i][t] = 2 + (int32_t)(rl_rng_next(&rng) % (uint64_t)(vocab - 2));
	}
	return p;
}

/* ---- timing ---- */

static int synced(char *err, size_t errlen)
{
	cudaError_t rc = cudaDeviceSynchronize();

	if (rc != cudaSuccess) {
		snprintf(err, errlen, "cudaDeviceSynchronize: %s", cudaGetErrorString(rc));
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* One timed rl_generate of batch prompts of lens tokens, new_tokens each,
 * greedy, with no EOS ids: every sequence must come back with exactly
 * new_tokens, or the rate would count tokens that were not made. Every
 * call of a row gets the same KV-cache size (kv_blocks), so the pool
 * serves each from what the warm-up left it. */
static int gen_once(struct rl_model *m, int32_t *const *prompts, const int *lens, int batch,
                    int new_tokens, bool inv, int64_t blocks, struct rl_gen_output *out,
                    double *secs, char *err, size_t errlen)
{
	struct rl_gen_params p = {.sampling = {0.0f, -1, 1.0f},
	                          .stop = {.max_new_tokens = (size_t)new_tokens},
	                          .max_slots = batch,
	                          .kv_block = KV_BLOCK,
	                          .kv_blocks = (int)blocks,
	                          .batch_invariant = inv};

	if (synced(err, errlen))
		return -1;
	double t0 = bench_now();
	if (rl_generate(m, NULL, batch, (const int32_t *const *)prompts, lens, &p, out, err,
	                errlen))
		return -1;
	int rc = synced(err, errlen);
	*secs = bench_now() - t0;
	for (int i = 0; i < batch && !rc; i++)
		if (out[i].n_tokens != (size_t)new_tokens) {
			snprintf(err, errlen, "sequence %d stopped after %zu of %d tokens", i,
			         out[i].n_tokens, new_tokens);
			rc = -1;
		}
	rl_gen_outputs_free(out, batch);
	return rc;
}

struct row {
	int reps;
	double t_one, t_new; /* medians, seconds */
	double decode;       /* tokens/s; -1: t(new) <= t(1), lost in the noise */
};

/* One row: a warm-up, then pairs t(new), t(1). The warm-up feeds only the
 * first WARMUP_PROMPT tokens of each prompt but asks for the row's KV
 * cache size, so it grows the pool to the row's needs and runs the decode
 * shapes (B rows) once, for about a second instead of a whole prefill.
 * Repetitions after the first are made only while the one just made,
 * again, plus the first repetition of every row still to come
 * (rest_seqs sequences at this row's cost per sequence) fits before
 * deadline. */
static int measure_row(struct rl_model *m, const struct settings *s, int32_t *const *prompts,
                       int batch, bool inv, int rest_seqs, double deadline, double *per_seq,
                       struct row *r, char *err, size_t errlen)
{
	struct rl_gen_output *out = calloc((size_t)batch, sizeof *out);
	int *lens = malloc((size_t)batch * sizeof *lens);
	double t_new[100], t_one[100], t;
	int64_t blocks = kv_blocks(batch, s);
	int rc = -1;

	if (!out || !lens) {
		snprintf(err, errlen, "out of host memory");
		goto out;
	}
	for (int i = 0; i < batch; i++)
		lens[i] = s->prompt_len < WARMUP_PROMPT ? s->prompt_len : WARMUP_PROMPT;
	if (gen_once(m, prompts, lens, batch, 2, inv, blocks, out, &t, err, errlen))
		goto out;
	for (int i = 0; i < batch; i++)
		lens[i] = s->prompt_len;
	r->reps = 0;
	while (r->reps < s->reps) {
		int k = r->reps;
		if (k > 0) {
			double rep = t_new[k - 1] + t_one[k - 1];
			if (bench_now() + rep + rest_seqs * rep / batch > deadline)
				break;
		}
		if (gen_once(m, prompts, lens, batch, s->new_tokens, inv, blocks, out, &t_new[k],
		             err, errlen) ||
		    gen_once(m, prompts, lens, batch, 1, inv, blocks, out, &t_one[k], err, errlen))
			goto out;
		*per_seq = (t_new[k] + t_one[k]) / batch;
		r->reps++;
	}
	r->t_new = median(t_new, r->reps);
	r->t_one = median(t_one, r->reps);
	r->decode = r->t_new > r->t_one ? batch * (s->new_tokens - 1) / (r->t_new - r->t_one) : -1;
	rc = 0;
out:
	free(out);
	free(lens);
	return rc;
}

/* Tokens/s at which a decode step of batch sequences would only stream
 * HBM: every weight once at 4 bytes (fp32, and the bf16 view too, which
 * is floats), less the input embedding, of which a step reads batch rows;
 * plus the fp32 cache of keys and values at its mean length over the
 * decode steps, prompt + new / 2. */
static double hbm_limit(const struct rl_model_config *c, double n_params, int batch,
                        const struct settings *s, double hbm)
{
	double weights = (n_params - (double)c->vocab_size * c->hidden_size) * 4;
	double kv_token = 2.0 * c->n_layers * c->n_kv_heads * c->head_dim * 4;
	double kv = (double)batch * (s->prompt_len + s->new_tokens / 2.0) * kv_token;

	return hbm > 0 ? batch / ((weights + kv) / hbm) : -1;
}

static const char *mode_name(bool inv)
{
	return inv ? "invariant" : "fast";
}

static void print_header(void)
{
	printf("\n%6s %-10s %4s %9s %9s %12s %12s %8s %9s\n", "batch", "mode", "reps", "t(1) s",
	       "t(new) s", "decode tok/s", "HBM limit", "% limit", ">= 10000");
	fflush(stdout);
}

static void print_row(int batch, bool inv, const struct row *r, double limit)
{
	printf("%6d %-10s %4d %9.2f %9.2f", batch, mode_name(inv), r->reps, r->t_one, r->t_new);
	if (r->decode > 0)
		printf(" %12.1f", r->decode);
	else
		printf(" %12s", "-");
	if (limit > 0)
		printf(" %12.1f", limit);
	else
		printf(" %12s", "-");
	if (r->decode > 0 && limit > 0)
		printf(" %8.1f", 100 * r->decode / limit);
	else
		printf(" %8s", "-");
	printf(" %9s\n", r->decode <= 0 ? "-" : r->decode >= ISSUE_BAR ? "met" : "not met");
	fflush(stdout);
}

static bool is_oom(const char *err)
{
	return strstr(err, "out of memory") || strstr(err, "cannot allocate");
}

/* ---- main ---- */

struct gpu {
	char name[256];
	double total, hbm; /* bytes, bytes/s (0: unknown) */
	int mem_clock_khz, bus_bits;
};

static void gpu_describe(struct gpu *g, const struct cudaDeviceProp *prop)
{
	snprintf(g->name, sizeof g->name, "%s", prop->name);
	g->total = (double)prop->totalGlobalMem;
	if (cudaDeviceGetAttribute(&g->mem_clock_khz, cudaDevAttrMemoryClockRate, 0) ||
	    cudaDeviceGetAttribute(&g->bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0))
		g->mem_clock_khz = g->bus_bits = 0;
	/* HBM is double data rate: two transfers a clock */
	g->hbm = 2.0 * g->mem_clock_khz * 1e3 * g->bus_bits / 8.0;
}

static int run(const struct settings *s, const struct gpu *g, double start)
{
	struct rl_model_config cfg;
	struct rl_model *m = NULL;
	int32_t **prompts = NULL;
	char err[1024], desc[256];
	int max_batch = 0, rc = 0;
	double deadline = start + s->budget_s;
	bool fits[MAX_BATCHS];

	for (int i = 0; i < s->n_batches; i++) {
		if (s->batches[i] > max_batch)
			max_batch = s->batches[i];
	}
	llama8b_config(&cfg, s->layers, s->prompt_len + s->new_tokens);
	double n_params = count_params(&cfg);
	double model_bytes = n_params * bytes_per_param(s->bf16);
	printf("model: random Llama-3-8B shape, %.3fB parameters: vocab %d, hidden %d, "
	       "intermediate %d, %d layers%s, %d heads / %d kv heads x %d, untied LM head, rope "
	       "theta %.0f, rms eps %g\n",
	       n_params / 1e9, cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.n_layers,
	       cfg.n_layers == ISSUE_LAYERS ? "" : " (RL_DECODE_LAYERS)", cfg.n_heads,
	       cfg.n_kv_heads, cfg.head_dim, cfg.rope_theta, cfg.rms_norm_eps);
	printf("precision: %s; device memory %d bytes a parameter (fp32 master, fp32 gradients%s) "
	       "= %.1f GB\n",
	       s->bf16 ? "bfloat16" : "float32", bytes_per_param(s->bf16),
	       s->bf16 ? ", the bf16 view stored as fp32 floats" : "", model_bytes / GB);
	printf("decode: prompts of %d distinct pseudo-random tokens, %d new, greedy, no EOS, "
	       "max_slots = B, kv_block %d, batches",
	       s->prompt_len, s->new_tokens, KV_BLOCK);
	for (int i = 0; i < s->n_batches; i++)
		printf("%s%d", i ? ", " : " ", s->batches[i]);
	printf("; decode tokens/s = B (new - 1) / (t(new) - t(1)), medians of up to %d "
	       "repetitions after a warm-up, within %.0f s of the start (RL_DECODE_BUDGET_S)\n",
	       s->reps, s->budget_s);
	fflush(stdout);

	if (rl_cuda_device_open(0, desc, sizeof desc, err, sizeof err)) {
		fprintf(stderr, "bench_decode_gpu: %s\n", err);
		return 1;
	}
	double avail = device_available();
	if (avail < 0) {
		fprintf(stderr, "bench_decode_gpu: cudaMemGetInfo failed\n");
		return 1;
	}
	/* the caches are sized below, by the runtime's own sums, once the
	 * model holds its memory */
	if (model_bytes > avail) {
		printf("bench_decode_gpu: skipped: the model needs %.1f GB, the device has %.1f GB "
		       "free; RL_DECODE_LAYERS shrinks it\n",
		       model_bytes / GB, avail / GB);
		return 0;
	}

	double t0 = bench_now();
	if (build_model(&m, &cfg, s, err, sizeof err)) {
		printf("model: %s: %s\n", is_oom(err) ? "out of memory" : "failed", err);
		for (int i = 0; i < s->n_batches; i++)
			for (int inv = 1; inv >= 0; inv--)
				printf("%6d %-10s out of memory (the model could not be built)\n",
				       s->batches[i], mode_name(inv));
		fflush(stdout);
		return is_oom(err) ? 0 : 1;
	}
	printf("model: %s, built on the device in %.1f s (%s), %lld parameters\n", desc,
	       bench_now() - t0,
	       s->random_init ? "rl_model_new_random, N(0, 0.02^2)"
	                      : "tiled N(0, 0.02^2) block, norms 1",
	       (long long)m->n_elems);
	if (!(prompts = make_prompts(max_batch, s->prompt_len, cfg.vocab_size))) {
		fprintf(stderr, "bench_decode_gpu: out of host memory for the prompts\n");
		rl_model_free(m);
		return 1;
	}

	/* decided once, now that the model holds its memory: the pool keeps
	 * each row's cache for the next, so the sum stays what it is now */
	avail = device_available();
	for (int i = 0; i < s->n_batches; i++)
		fits[i] =
		    kv_bytes(m, s->batches[i], s) + gen_scratch_bytes(m, s->batches[i], s) <= avail;
	if (g->hbm > 0)
		printf("HBM limit = B / ((%.1f GB of weights at 4 bytes + B x %.1f MB of fp32 KV "
		       "cache at mean length %.0f) / %.2f TB/s)\n",
		       (n_params - (double)cfg.vocab_size * cfg.hidden_size) * 4 / GB,
		       2.0 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 *
		           (s->prompt_len + s->new_tokens / 2.0) / 1e6,
		       s->prompt_len + s->new_tokens / 2.0, g->hbm / 1e12);
	print_header();

	double per_seq = -1; /* seconds per sequence of one repetition, the last row's */
	for (int i = 0; i < s->n_batches; i++) {
		int b = s->batches[i];
		double limit = hbm_limit(&cfg, n_params, b, s, g->hbm);

		for (int inv = 1; inv >= 0; inv--) {
			struct row r;
			/* the first repetition of every later row that fits */
			int rest = inv ? b : 0;
			for (int j = i + 1; j < s->n_batches; j++)
				rest += fits[j] ? 2 * s->batches[j] : 0;

			if (!fits[i]) {
				printf(
				    "%6d %-10s out of memory (KV cache %.1f GB + scratch %.1f GB, "
				    "%.1f GB available)\n",
				    b, mode_name(inv), kv_bytes(m, b, s) / GB,
				    gen_scratch_bytes(m, b, s) / GB, avail / GB);
				fflush(stdout);
				continue;
			}
			if (per_seq > 0 && bench_now() + per_seq * b > deadline) {
				printf("%6d %-10s not run: about %.0f s more, past the %.0f s "
				       "budget\n",
				       b, mode_name(inv), per_seq * b, s->budget_s);
				fflush(stdout);
				continue;
			}
			if (measure_row(m, s, prompts, b, inv, rest, deadline, &per_seq, &r, err,
			                sizeof err)) {
				printf("%6d %-10s %s: %s\n", b, mode_name(inv),
				       is_oom(err) ? "out of memory" : "failed", err);
				fflush(stdout);
				if (!is_oom(err))
					rc = 1;
				continue;
			}
			print_row(b, inv, &r, limit);
		}
	}
	printf("(invariant: policy.generation.batch_invariant on, our fixed-order fp32 GEMMs; "
	       "fast: off, cuBLASLt. %% limit is of the HBM limit above; the bar is issue 27's "
	       "%.0f tokens/s",
	       ISSUE_BAR);
	if (cfg.n_layers != ISSUE_LAYERS || !is_h200(g->name))
		printf(", stated for %d layers on an H200: this run is %d layers on %s",
		       ISSUE_LAYERS, cfg.n_layers, g->name);
	printf(")\n");
	fflush(stdout);

	for (int i = 0; i < max_batch; i++)
		free(prompts[i]);
	free(prompts);
	rl_model_free(m);
	return rc;
}

int main(void)
{
	double start = bench_now();
	char err[512];
	struct cudaDeviceProp prop;
	struct settings s;
	struct gpu g;

	if (rl_cuda_device_count(err, sizeof err) == 0) {
		printf("bench_decode_gpu: skipped: no CUDA device (%s)\n", err);
		return 0;
	}
	const char *missing = rl_ops_missing(&rl_ops_cuda);
	if (missing) {
		printf("bench_decode_gpu: skipped: the cuda op table has no %s yet\n", missing);
		return 0;
	}
	if (read_settings(&s))
		return 2;
	/* properties and attributes only: no context, no device memory yet */
	if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
		fprintf(stderr, "bench_decode_gpu: cudaGetDeviceProperties failed\n");
		return 1;
	}
	gpu_describe(&g, &prop);
	printf("bench_decode_gpu: %s, %.1f GB", g.name, g.total / GB);
	if (g.hbm > 0)
		printf("; HBM %.2f TB/s (memory clock %d MHz x %d-bit bus x 2)\n", g.hbm / 1e12,
		       g.mem_clock_khz / 1000, g.bus_bits);
	else
		printf("; HBM bandwidth unknown, no limit column\n");
	fflush(stdout);
	return run(&s, &g, start);
}

#else

int main(void)
{
	printf("bench_decode_gpu: skipped: built without --with-cuda\n");
	return 0;
}

#endif
