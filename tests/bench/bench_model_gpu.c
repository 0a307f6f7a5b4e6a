/* Whole-model throughput on the CUDA backend beside PyTorch on the same GPU:
 * a random ~1B Llama written as a Hugging Face directory and loaded on
 * rl_ops_cuda; one training step (forward, log-probs, backward, grad-norm
 * clip, AdamW) over a packed batch, with MFU against the device's dense bf16
 * peak; greedy generation through the KV cache at several batch sizes, with
 * the decode rate against the HBM-bandwidth limit. The PyTorch column
 * (bench_model_gpu_torch.py: eager fp32 and bf16 autocast, HF generate) runs
 * first, before this process holds device memory: the CUDA backend's pool
 * keeps what it frees for the life of the process, so torch would find the
 * GPU full after us. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdio.h>

#ifdef RL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"
#include "kernels/memory.h"
#include "runtime/generate/generate.h"
#include "runtime/model/model.h"
#include "runtime/model/optimizer.h"
#include "tests/bench/clock.h"
#include "tests/bench/random_llama.h"

enum {
	N_SEQS = 8,
	SEQ_LEN = 2048,
	PROMPT_LEN = 128,
	NEW_TOKENS = 64,
	MAX_BATCH = 256,
	TRAIN_WARMUP = 2,
	TRAIN_REPS = 5,
	GEN_REPS = 3,
	LOGPROB_CHUNK = 4096, /* the trainer's default logprob_chunk_size */
};
static const int gen_batches[] = {1, 16, 64, MAX_BATCH};
#define N_BATCHES ((int)(sizeof gen_batches / sizeof *gen_batches))
#define GB        1e9

/* random_llama writes no lm_head.weight, so the embeddings are tied. */
static const char config_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
    " \"vocab_size\": 32768, \"hidden_size\": 2048, \"intermediate_size\": 8192,\n"
    " \"num_hidden_layers\": 16, \"num_attention_heads\": 32, \"num_key_value_heads\": 8,\n"
    " \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0,\n"
    " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"bos_token_id\": 0,\n"
    " \"eos_token_id\": 1, \"torch_dtype\": \"float32\"}\n";

/* What the runtime computes in, and the bytes a decode step reads per weight
 * and per cached key or value. RL_BENCH_PRECISION picks policy.precision's
 * value (bfloat16, the runtime's default, or float32). bfloat16 today rounds
 * the weights to bf16 and computes with fp32 activations and fp32 GEMMs: it
 * reads fp32 weights, and its MFU is the fp32 one until the bf16 kernels
 * are in the model; the table's name says "fp32" for the arithmetic. */
struct precision {
	const char *name, *detail;
	int weight_bytes, kv_bytes;
	enum rl_dtype weights;
};
static const struct precision prec_f32 = {
    "fp32", "fp32 weights and activations, GEMMs fp32 on cuBLASLt with TF32 off", 4, 4, RL_F32};
static const struct precision prec_bf16_weights = {
    "fp32", "policy.precision bfloat16: weights rounded to bf16, fp32 activations and GEMMs", 4, 4,
    RL_BF16};
static struct precision ours_prec;

/* Published dense peaks (no sparsity), TFLOP/s, and HBM bandwidth, TB/s,
 * matched on the name CUDA reports, most specific first. */
static const struct peak {
	const char *match, *label;
	double bf16, tf32, fp32, hbm;
} peaks[] = {
    {"GH200", "GH200", 989.4, 494.7, 66.9, 4.0},
    {"H200 NVL", "H200 NVL", 835.6, 417.8, 60.0, 4.8},
    {"H200", "H200 SXM", 989.4, 494.7, 66.9, 4.8},
    {"H100 NVL", "H100 NVL", 835.6, 417.8, 60.0, 3.9},
    {"H100 PCIe", "H100 PCIe", 756.5, 378.0, 51.2, 2.0},
    {"H100", "H100 SXM", 989.4, 494.7, 66.9, 3.35},
    {"A100", "A100", 312.0, 156.0, 19.5, 2.0},
};

struct gpu {
	char name[256];
	double mem_bytes;
	const struct peak *peak; /* NULL: not in the table */
	double hbm;              /* bytes/s */
	int mem_clock_khz, bus_bits;
};

static void gpu_describe(struct gpu *g, const struct cudaDeviceProp *prop)
{
	snprintf(g->name, sizeof g->name, "%s", prop->name);
	g->mem_bytes = (double)prop->totalGlobalMem;
	g->peak = NULL;
	for (size_t i = 0; i < sizeof peaks / sizeof *peaks && !g->peak; i++)
		if (strstr(g->name, peaks[i].match))
			g->peak = &peaks[i];
	/* HBM moves data on both clock edges */
	if (cudaDeviceGetAttribute(&g->mem_clock_khz, cudaDevAttrMemoryClockRate, 0) ||
	    cudaDeviceGetAttribute(&g->bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0))
		g->mem_clock_khz = g->bus_bits = 0;
	g->hbm = 2.0 * g->mem_clock_khz * 1e3 * g->bus_bits / 8.0;
	if (g->hbm <= 0 && g->peak)
		g->hbm = g->peak->hbm * 1e12;
}

/* Llama without biases, as config_json: every parameter, and those of the
 * matrix products (the layers' and the LM head's; the embedding lookup is
 * none, and with tied embeddings its matrix is the LM head's). */
static void count_params(const struct rl_model_config *c, double *all, double *matmul)
{
	double d = c->hidden_size, qd = (double)c->n_heads * c->head_dim,
	       kvd = (double)c->n_kv_heads * c->head_dim, I = c->intermediate_size,
	       V = c->vocab_size;
	double mm = 2 * d * qd + 2 * d * kvd + 3 * d * I;

	*matmul = c->n_layers * mm + V * d;
	*all = c->n_layers * (mm + 2 * d) + V * d * (c->tie_word_embeddings ? 1 : 2) + d;
}

/* Device bytes per token of rl_acts_new (runtime/model/acts.c, which this
 * mirrors for a single-rank Llama: keep the two in step) and of the log-prob
 * chunk's scratch. */
static double acts_bytes_per_token(const struct rl_model_config *c)
{
	double d = c->hidden_size, qd = (double)c->n_heads * c->head_dim,
	       kvd = (double)c->n_kv_heads * c->head_dim, I = c->intermediate_size;
	double layer = 4 * d + 2 * qd + 2 * kvd + 3 * I + c->n_heads + 2;
	double rest = 5 * d + 2 * qd + 2 * kvd + 3 * I + 3 + 4; /* + ids, pos, targets, cu */

	return 4.0 * (c->n_layers * layer + rest + LOGPROB_CHUNK);
}

/* Parameters, gradients and AdamW's two moments, all fp32, plus the
 * activations of n_tokens and a margin for the CUDA context, cuBLASLt's
 * workspace, the ops' scratch and the pool's rounding. */
static double train_bytes(const struct rl_model_config *c, double n_params, int n_tokens)
{
	return 16.0 * n_params + n_tokens * acts_bytes_per_token(c) + 4.0 * GB;
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

/* ---- the PyTorch column ---- */

struct torch_col {
	int status; /* 0 ran, 1 no torch here, -1 failed */
	char why[512];
	char line[8192]; /* the script's JSON line */
};

/* Prints the end of the script's stderr, for a failure. */
static void print_tail(const char *path)
{
	char buf[2048];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) == 0) {
		long n = ftell(f);
		if (n > (long)sizeof buf - 1)
			fseek(f, n - (long)sizeof buf + 1, SEEK_SET);
		else
			rewind(f);
	}
	size_t got = fread(buf, 1, sizeof buf - 1, f);
	buf[got] = '\0';
	fclose(f);
	printf("  | %s\n", buf);
}

static void torch_run(const char *dir, int n_seqs, struct torch_col *t)
{
	char script[4096], cmd[16384], log[4200], line[8192];
	const char *sdir = getenv("RL_BENCH_TORCH_DIR");
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

	memset(t, 0, sizeof *t);
	if (system("python3 -c 'import torch, transformers' >/dev/null 2>&1") != 0) {
		t->status = 1;
		snprintf(t->why, sizeof t->why, "python3 with torch and transformers not found");
		return;
	}
	if (sdir)
		snprintf(script, sizeof script, "%s/bench_model_gpu_torch.py", sdir);
	else
		snprintf(script, sizeof script, "%s/tests/bench/bench_model_gpu_torch.py", top);
	snprintf(log, sizeof log, "%s/torch_stderr.txt", dir);
	snprintf(cmd, sizeof cmd, "python3 '%s' '%s' %d %d %d %d %d,%d,%d,%d %d %d 2>'%s'", script,
	         dir, n_seqs, SEQ_LEN, PROMPT_LEN, NEW_TOKENS, gen_batches[0], gen_batches[1],
	         gen_batches[2], gen_batches[3], TRAIN_REPS, GEN_REPS, log);
	FILE *p = popen(cmd, "r");
	if (!p) {
		t->status = -1;
		snprintf(t->why, sizeof t->why, "cannot run python3");
		return;
	}
	while (fgets(line, sizeof line, p))
		if (line[0] == '{')
			snprintf(t->line, sizeof t->line, "%s", line);
	int rc = pclose(p);
	const char *e = strstr(t->line, "\"error\": \"");
	if (e) {
		t->status = -1;
		snprintf(t->why, sizeof t->why, "%.*s", (int)strcspn(e + 10, "\""), e + 10);
	} else if (rc != 0 || !t->line[0]) {
		t->status = -1;
		snprintf(t->why, sizeof t->why,
		         "%.400s exited with status %d; its stderr ends:", script, rc);
		printf("bench_model_gpu: pytorch column failed: %s\n", t->why);
		print_tail(log);
	}
}

/* The script's number under key, or -1 when it has none (null: out of
 * memory, or the column did not run). */
static double torch_value(const struct torch_col *t, const char *key)
{
	char pat[128];
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	const char *p = t->status == 0 ? strstr(t->line, pat) : NULL;
	if (!p)
		return -1;
	char *end;
	p += strlen(pat);
	double v = strtod(p, &end);
	return end == p || !(v > 0) ? -1 : v;
}

/* ---- our numbers ---- */

/* One training step as the GRPO trainer takes it (runtime/train/policy_pass.c and update.c). */
static int train_step(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b,
                      struct rl_optimizer *o, float *lp, const float *dlp, char *err, size_t errlen)
{
	double norm;

	snprintf(err, errlen, "zeroing the gradients failed");
	if (rl_model_zero_grad(m) || rl_model_forward(m, a, b, err, errlen) ||
	    rl_model_logprobs(m, a, lp, 1.0f, LOGPROB_CHUNK, err, errlen) ||
	    rl_model_backward(m, a, dlp, err, errlen))
		return -1;
	if (rl_clip_grad_norm(m, 1.0, &norm) || rl_optimizer_step(o, m)) {
		snprintf(err, errlen, "grad-norm clip or AdamW step failed");
		return -1;
	}
	return 0;
}

static int synced(char *err, size_t errlen)
{
	cudaError_t rc = cudaDeviceSynchronize();

	if (rc != cudaSuccess) {
		snprintf(err, errlen, "cudaDeviceSynchronize: %s", cudaGetErrorString(rc));
		return -1;
	}
	return 0;
}

/* Median seconds per training step over n_seqs x SEQ_LEN packed tokens.
 * -1 with err on failure; -2 when the activations do not fit. */
static int bench_train(struct rl_model *m, int n_seqs, double *secs, char *err, size_t errlen)
{
	int T = n_seqs * SEQ_LEN, rc = -1;
	int32_t *ids = malloc((size_t)T * sizeof *ids), *targets = malloc((size_t)T * sizeof *ids);
	int32_t *cu = malloc((size_t)(n_seqs + 1) * sizeof *cu);
	float *lp = malloc((size_t)T * sizeof *lp), *dlp = malloc((size_t)T * sizeof *dlp);
	struct rl_adamw_hparams hp = {1e-6f, 0.9f, 0.999f, 1e-8f, 0.01f};
	struct rl_optimizer o = {0};
	struct rl_acts *a = NULL;
	double t[TRAIN_REPS];
	uint32_t seed = 99;

	if (!ids || !targets || !cu || !lp || !dlp) {
		snprintf(err, errlen, "out of host memory for the batch");
		goto out;
	}
	for (int s = 0; s <= n_seqs; s++)
		cu[s] = s * SEQ_LEN;
	for (int i = 0; i < T; i++)
		ids[i] = (int32_t)(bench_rng_next(&seed) % (uint32_t)m->cfg.vocab_size);
	for (int i = 0; i < T; i++) {
		targets[i] = (i + 1) % SEQ_LEN ? ids[i + 1] : -1;
		dlp[i] = -1.0f / (float)(n_seqs * (SEQ_LEN - 1)); /* the mean NLL */
	}
	struct rl_batch b = {T, n_seqs, ids, cu, targets};
	if (rl_optimizer_init(&o, m, &hp, err, errlen))
		goto out;
	if (!(a = rl_acts_new(m, T))) {
		snprintf(err, errlen, "cannot allocate the activations of %d tokens", T);
		rc = -2;
		goto out;
	}
	for (int r = 0; r < TRAIN_WARMUP; r++)
		if (train_step(m, a, &b, &o, lp, dlp, err, errlen))
			goto out;
	for (int r = 0; r < TRAIN_REPS; r++) {
		if (synced(err, errlen))
			goto out;
		double t0 = bench_now();
		if (train_step(m, a, &b, &o, lp, dlp, err, errlen) || synced(err, errlen))
			goto out;
		t[r] = bench_now() - t0;
	}
	*secs = median(t, TRAIN_REPS);
	rc = 0;
out:
	rl_acts_free(m, a);
	rl_optimizer_free(&o);
	free(ids);
	free(targets);
	free(cu);
	free(lp);
	free(dlp);
	return rc;
}

/* Median seconds of rl_generate for the first batch prompts, new_tokens
 * each, greedy; no EOS ids, so every sequence runs to new_tokens. */
static int bench_gen(struct rl_model *m, int32_t *const *prompts, int batch, int new_tokens,
                     double *secs, char *err, size_t errlen)
{
	struct rl_gen_output out[MAX_BATCH];
	/* RL_BENCH_INVARIANT=0: the fastest GEMMs instead of the
	 * batch-invariant ones (policy.generation.batch_invariant) */
	const char *inv = getenv("RL_BENCH_INVARIANT");
	struct rl_gen_params p = {.sampling = {0, -1, 1},
	                          .stop = {.max_new_tokens = (size_t)new_tokens},
	                          .batch_invariant = !inv || strcmp(inv, "0") != 0};
	int lens[MAX_BATCH];
	double t[GEN_REPS];

	for (int i = 0; i < batch; i++)
		lens[i] = PROMPT_LEN;
	for (int r = -1; r < GEN_REPS; r++) { /* r = -1: warm-up */
		if (synced(err, errlen))
			return -1;
		double t0 = bench_now();
		if (rl_generate(m, NULL, batch, (const int32_t *const *)prompts, lens, &p, out, err,
		                errlen))
			return -1;
		if (synced(err, errlen)) {
			rl_gen_outputs_free(out, batch);
			return -1;
		}
		if (r >= 0)
			t[r] = bench_now() - t0;
		rl_gen_outputs_free(out, batch);
	}
	*secs = median(t, GEN_REPS);
	return 0;
}

struct gen_rates {
	double e2e, decode; /* tokens/s: prefill included; decode steps only (-1: unmeasurable) */
};

/* decode = batch x (new - 1) / (t(new) - t(1)): the prefill and the first
 * token cancel out. */
static int gen_rates(struct rl_model *m, int32_t *const *prompts, int batch, struct gen_rates *g,
                     char *err, size_t errlen)
{
	double t_full, t_one;

	if (bench_gen(m, prompts, batch, NEW_TOKENS, &t_full, err, errlen) ||
	    bench_gen(m, prompts, batch, 1, &t_one, err, errlen))
		return -1;
	g->e2e = batch * NEW_TOKENS / t_full;
	g->decode = t_full > t_one ? batch * (NEW_TOKENS - 1) / (t_full - t_one) : -1;
	return 0;
}

/* Tokens/s at which a decode step of batch sequences would only stream
 * HBM: every weight once (the LM head included; the embedding lookup reads
 * batch rows, nothing) plus the cache of keys and values at its mean
 * length over the decode steps, prompt + new / 2. */
static double hbm_limit(const struct rl_model_config *c, double n_params, int batch,
                        int weight_bytes, int kv_bytes, double hbm)
{
	double embed_only = c->tie_word_embeddings ? 0 : (double)c->vocab_size * c->hidden_size;
	double weights = (n_params - embed_only) * weight_bytes;
	double kv_token = 2.0 * c->n_layers * c->n_kv_heads * c->head_dim * kv_bytes;
	double kv = (double)batch * (PROMPT_LEN + NEW_TOKENS / 2.0) * kv_token;

	return batch / ((weights + kv) / hbm);
}

/* ---- the table ---- */

static void cell(double v, const char *fmt)
{
	if (v > 0)
		printf(fmt, v);
	else
		printf("%12s", "-");
}

static void row(const char *name, const char *fmt, double ours, double t32, double t16,
                bool same_is_bf16)
{
	double same = same_is_bf16 ? t16 : t32;

	printf("%-26s %5s", name, ours_prec.name);
	cell(ours, fmt);
	cell(t32, fmt);
	cell(t16, fmt);
	cell(ours > 0 && same > 0 ? ours / same : -1, "%12.2f");
	printf("\n");
}

/* How the script fitted the training batch, when it had to cut it. */
static void torch_micro_note(const struct torch_col *tc, const char *prec, int n_seqs)
{
	char key[64];

	snprintf(key, sizeof key, "train_%s_micro", prec);
	double micro = torch_value(tc, key);
	if (tc->status != 0 || micro >= n_seqs)
		return;
	if (micro > 0)
		printf("(torch %s: the whole batch ran out of memory; micro-batches of %.0f "
		       "sequences accumulated into the same step)\n",
		       prec, micro);
	else
		printf("(torch %s: out of memory even at one sequence)\n", prec);
}

static void print_results(const struct gpu *g, const struct rl_model_config *c, double n_params,
                          double n_mm, int n_seqs, double t_train, const struct gen_rates *gr,
                          const struct torch_col *tc)
{
	bool bf16 = strcmp(ours_prec.name, "bf16") == 0;
	double sum_len2 = (double)n_seqs * SEQ_LEN * SEQ_LEN, T = (double)n_seqs * SEQ_LEN;
	double attn = 6.0 * c->n_layers * c->n_heads * c->head_dim * sum_len2;
	double flops = 6.0 * n_mm * T + attn, per_token = flops / T;
	double ours_train = t_train > 0 ? T / t_train : -1;
	double t32 = torch_value(tc, "train_fp32_tok_s"), t16 = torch_value(tc, "train_bf16_tok_s");
	double peak = g->peak ? g->peak->bf16 * 1e12 : 0;
	char key[64];

	printf("model FLOPs per step = 6 N T + 12 L H D sum(len^2) / 2 (causal attention) = "
	       "%.3g\n  (N = %.3fB matmul parameters, T = %.0f tokens, L %d, H %d, D %d; the LM "
	       "head's recomputation in backward not counted)\n",
	       flops, n_mm / 1e9, T, c->n_layers, c->n_heads, c->head_dim);
	printf("\n%-26s %5s %12s %12s %12s %12s\n", "metric", "prec", "ours", "torch fp32",
	       "torch bf16", bf16 ? "ours/bf16" : "ours/fp32");
	row("train tokens/s", "%12.1f", ours_train, t32, t16, bf16);
	if (peak > 0) {
		double scale = per_token / peak * 100;
		row("train MFU % (bf16 peak)", "%12.2f", ours_train * scale, t32 * scale,
		    t16 * scale, bf16);
	}
	for (int i = 0; i < N_BATCHES; i++) {
		char name[64];
		int b = gen_batches[i];
		snprintf(name, sizeof name, "decode B=%d tokens/s", b);
		snprintf(key, sizeof key, "dec_fp32_b%d_tok_s", b);
		double d32 = torch_value(tc, key);
		snprintf(key, sizeof key, "dec_bf16_b%d_tok_s", b);
		row(name, "%12.1f", gr[i].decode, d32, torch_value(tc, key), bf16);
	}
	for (int i = 0; i < N_BATCHES; i++) {
		char name[64];
		int b = gen_batches[i];
		snprintf(name, sizeof name, "generate B=%d tokens/s", b);
		snprintf(key, sizeof key, "gen_fp32_b%d_tok_s", b);
		double e32 = torch_value(tc, key);
		snprintf(key, sizeof key, "gen_bf16_b%d_tok_s", b);
		row(name, "%12.1f", gr[i].e2e, e32, torch_value(tc, key), bf16);
	}
	if (tc->status != 0)
		printf("(pytorch columns: %s)\n", tc->why);
	torch_micro_note(tc, "fp32", n_seqs);
	torch_micro_note(tc, "bf16", n_seqs);
	if (peak > 0 && ours_train > 0 && !bf16)
		printf("ours: %.1f%% of the %s fp32 non-tensor peak %.1f TFLOP/s (the ceiling of "
		       "fp32 GEMMs with TF32 off), %.1f%% of its TF32 peak %.1f\n",
		       100 * flops / t_train / (g->peak->fp32 * 1e12), g->peak->label,
		       g->peak->fp32, 100 * flops / t_train / (g->peak->tf32 * 1e12),
		       g->peak->tf32);

	if (g->hbm <= 0)
		return;
	printf("\n%-26s %12s %8s %8s %12s %8s\n", "decode vs HBM limit", "limit fp32", "ours %",
	       "torch %", "limit bf16", "torch %");
	for (int i = 0; i < N_BATCHES; i++) {
		int b = gen_batches[i];
		double l32 = hbm_limit(c, n_params, b, 4, 4, g->hbm);
		double l16 = hbm_limit(c, n_params, b, 2, 2, g->hbm);
		double lours =
		    hbm_limit(c, n_params, b, ours_prec.weight_bytes, ours_prec.kv_bytes, g->hbm);
		snprintf(key, sizeof key, "dec_fp32_b%d_tok_s", b);
		double d32 = torch_value(tc, key);
		snprintf(key, sizeof key, "dec_bf16_b%d_tok_s", b);
		double d16 = torch_value(tc, key);
		char name[64];
		snprintf(name, sizeof name, "B=%d tokens/s", b);
		printf("%-26s %12.1f", name, l32);
		if (gr[i].decode > 0)
			printf(" %8.1f", 100 * gr[i].decode / lours);
		else
			printf(" %8s", "-");
		if (d32 > 0)
			printf(" %8.1f", 100 * d32 / l32);
		else
			printf(" %8s", "-");
		printf(" %12.1f", l16);
		if (d16 > 0)
			printf(" %8.1f\n", 100 * d16 / l16);
		else
			printf(" %8s\n", "-");
	}
	printf("(limit = B / ((weight bytes + KV-cache bytes at mean length %d) / %.2f TB/s); "
	       "ours %% is of the %s limit)\n",
	       PROMPT_LEN + NEW_TOKENS / 2, g->hbm / 1e12, ours_prec.name);
}

/* ---- main ---- */

static int run(const char *dir, const struct gpu *g)
{
	struct rl_model_config cfg;
	struct rl_model *m = NULL;
	struct torch_col tc;
	struct gen_rates gr[N_BATCHES];
	int32_t *prompts[MAX_BATCH] = {0};
	char err[1024], desc[256];
	double n_params, n_mm, t_train = -1;
	int rc = 1;

	double t0 = bench_now();
	if (bench_write_random_llama(dir, config_json)) {
		fprintf(stderr, "bench_model_gpu: cannot write the random model in %s\n", dir);
		return 1;
	}
	if (rl_model_config_load(&cfg, dir, err, sizeof err)) {
		fprintf(stderr, "bench_model_gpu: %s\n", err);
		return 1;
	}
	count_params(&cfg, &n_params, &n_mm);
	printf("model: Llama %.3fB parameters (%.3fB in matmuls), hidden %d, %d layers, %d heads / "
	       "%d kv heads x %d, intermediate %d, vocab %d, %s embeddings, written as fp32 "
	       "safetensors in %.1f s\n",
	       n_params / 1e9, n_mm / 1e9, cfg.hidden_size, cfg.n_layers, cfg.n_heads,
	       cfg.n_kv_heads, cfg.head_dim, cfg.intermediate_size, cfg.vocab_size,
	       cfg.tie_word_embeddings ? "tied" : "untied", bench_now() - t0);

	int n_seqs = N_SEQS;
	while (n_seqs > 1 && train_bytes(&cfg, n_params, n_seqs * SEQ_LEN) > g->mem_bytes)
		n_seqs /= 2;
	printf("train batch: %d x %d tokens packed; device memory estimate %.1f GB of %.1f GB "
	       "(weights, grads, AdamW m and v %.1f GB + activations %.2f MB/token + 4 GB)\n",
	       n_seqs, SEQ_LEN, train_bytes(&cfg, n_params, n_seqs * SEQ_LEN) / GB,
	       g->mem_bytes / GB, 16 * n_params / GB, acts_bytes_per_token(&cfg) / 1e6);
	printf("decode: prompts of %d tokens, %d new, greedy, batches %d / %d / %d / %d; decode "
	       "tokens/s = B (new - 1) / (t(new) - t(1)), prefill cancelled; %s GEMMs "
	       "(RL_BENCH_INVARIANT)\n",
	       PROMPT_LEN, NEW_TOKENS, gen_batches[0], gen_batches[1], gen_batches[2],
	       gen_batches[3],
	       getenv("RL_BENCH_INVARIANT") && !strcmp(getenv("RL_BENCH_INVARIANT"), "0")
	           ? "the fastest"
	           : "batch-invariant");
	fflush(stdout);

	torch_run(dir, n_seqs, &tc);
	if (tc.status == 0)
		printf("pytorch: %s", tc.line);
	fflush(stdout);

	if (rl_cuda_device_open(0, desc, sizeof desc, err, sizeof err)) {
		fprintf(stderr, "bench_model_gpu: %s\n", err);
		return 1;
	}
	t0 = bench_now();
	if (rl_model_load(&m, dir, &rl_ops_cuda, err, sizeof err) ||
	    rl_model_set_precision(m, ours_prec.weights, err, sizeof err)) {
		fprintf(stderr, "bench_model_gpu: %s\n", err);
		return 1;
	}
	printf("ours: %s, loaded %lld parameters in %.1f s, computing in %s (%s)\n", desc,
	       (long long)m->n_elems, bench_now() - t0, ours_prec.name, ours_prec.detail);

	int train_rc, tried = n_seqs;
	while ((train_rc = bench_train(m, n_seqs, &t_train, err, sizeof err)) == -2 && n_seqs > 1)
		n_seqs /= 2;
	if (train_rc) {
		fprintf(stderr, "bench_model_gpu: training step: %s\n", err);
		goto out;
	}
	if (n_seqs != tried)
		printf("NOTE: the activations of %d sequences did not fit, ours ran %d: the train "
		       "row compares different batches\n",
		       tried, n_seqs);
	struct rl_cuda_memory_stats ms;
	if (rl_cuda_memory_stats(&ms) == 0)
		printf("ours: device pool peak %.1f GB during the training step\n",
		       (double)ms.peak_in_use / GB);

	uint32_t seed = 7;
	for (int i = 0; i < MAX_BATCH; i++) {
		if (!(prompts[i] = malloc(PROMPT_LEN * sizeof **prompts))) {
			fprintf(stderr, "bench_model_gpu: out of host memory\n");
			goto out;
		}
		for (int t = 0; t < PROMPT_LEN; t++)
			prompts[i][t] = (int32_t)(bench_rng_next(&seed) % (uint32_t)cfg.vocab_size);
	}
	for (int i = 0; i < N_BATCHES; i++)
		if (gen_rates(m, prompts, gen_batches[i], &gr[i], err, sizeof err)) {
			fprintf(stderr, "bench_model_gpu: generation at batch %d: %s\n",
			        gen_batches[i], err);
			goto out;
		}
	print_results(g, &cfg, n_params, n_mm, n_seqs, t_train, gr, &tc);
	rc = 0;
out:
	for (int i = 0; i < MAX_BATCH; i++)
		free(prompts[i]);
	rl_model_free(m);
	return rc;
}

int main(void)
{
	char err[512];
	struct cudaDeviceProp prop;
	struct gpu g;

	if (rl_cuda_device_count(err, sizeof err) == 0) {
		printf("bench_model_gpu: skipped: no CUDA device (%s)\n", err);
		return 0;
	}
	const char *missing = rl_ops_missing(&rl_ops_cuda);
	if (missing) {
		printf("bench_model_gpu: skipped: the cuda op table has no %s yet\n", missing);
		return 0;
	}
	/* properties and attributes only: no context, no device memory yet */
	if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
		fprintf(stderr, "bench_model_gpu: cudaGetDeviceProperties failed\n");
		return 1;
	}
	const char *want = getenv("RL_BENCH_PRECISION") ? getenv("RL_BENCH_PRECISION") : "bfloat16";
	if (strcmp(want, "bfloat16") && strcmp(want, "float32")) {
		fprintf(stderr, "bench_model_gpu: RL_BENCH_PRECISION=%s: bfloat16 or float32\n",
		        want);
		return 2;
	}
	ours_prec = strcmp(want, "float32") ? prec_bf16_weights : prec_f32;
	gpu_describe(&g, &prop);
	printf("bench_model_gpu: %s, %.1f GB\n", g.name, g.mem_bytes / GB);
	if (g.peak)
		printf("peaks (%s, by name): bf16 dense %.1f TFLOP/s (MFU's denominator), TF32 "
		       "dense %.1f, fp32 non-tensor %.1f\n",
		       g.peak->label, g.peak->bf16, g.peak->tf32, g.peak->fp32);
	else
		printf("peaks: '%s' is not in the table, no MFU\n", g.name);
	if (g.mem_clock_khz > 0 && g.peak)
		printf("HBM: %.2f TB/s (memory clock %d MHz x %d-bit bus x 2; spec %.2f)\n",
		       g.hbm / 1e12, g.mem_clock_khz / 1000, g.bus_bits, g.peak->hbm);
	else if (g.mem_clock_khz > 0)
		printf("HBM: %.2f TB/s (memory clock %d MHz x %d-bit bus x 2)\n", g.hbm / 1e12,
		       g.mem_clock_khz / 1000, g.bus_bits);
	else if (g.hbm > 0)
		printf("HBM: %.2f TB/s (spec, by name)\n", g.hbm / 1e12);

	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[4096], cmd[4200];
	snprintf(dir, sizeof dir, "%s/rl-bench-model-gpu-XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "bench_model_gpu: mkdtemp in %s failed\n", tmp);
		return 1;
	}
	int rc = run(dir, &g);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}

#else

int main(void)
{
	printf("bench_model_gpu: skipped: built without --with-cuda\n");
	return 0;
}

#endif
