/* Whole-model throughput on the CPU backend: forward+backward tokens/s of a
 * packed batch and generation tokens/s through the KV cache, for a random
 * ~25M-parameter Llama written as a Hugging Face directory, beside PyTorch on
 * the same files, shapes and thread count (tests/bench/bench_model_torch.py)
 * when python3 has torch and transformers. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/generate/generate.h"
#include "runtime/model/model.h"
#include "runtime/model/safetensors.h"
#include "runtime/base/omp_policy.h"
#include "tests/bench/random_llama.h"
#include "tests/bench/clock.h"

enum { N_SEQS = 4, SEQ_LEN = 256, N_PROMPTS = 4, PROMPT_LEN = 32, NEW_TOKENS = 64 };

static const char config_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
    " \"vocab_size\": 8192, \"hidden_size\": 512, \"intermediate_size\": 1408,\n"
    " \"num_hidden_layers\": 7, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,\n"
    " \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0,\n"
    " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"bos_token_id\": 0,\n"
    " \"eos_token_id\": 1, \"torch_dtype\": \"float32\"}\n";

/* Seconds per call of a step, repeated for at least two seconds after one
 * warm-up call. */
#define TIME_IT(secs, stmt)                                                                        \
	do {                                                                                       \
		stmt;                                                                              \
		int reps_ = 0;                                                                     \
		double t0_ = bench_now(), t_;                                                      \
		do {                                                                               \
			stmt;                                                                      \
			reps_++;                                                                   \
		} while ((t_ = bench_now() - t0_) < 2.0);                                          \
		(secs) = t_ / reps_;                                                               \
	} while (0)

static int train_step(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, float *lp,
                      float *dlp)
{
	char err[512];

	if (rl_model_zero_grad(m) || rl_model_forward(m, a, b, err, sizeof err) ||
	    rl_model_logprobs(m, a, lp, 1.0f, 4096, err, sizeof err) ||
	    rl_model_backward(m, a, dlp, err, sizeof err)) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
	return 0;
}

/* invariant: policy.generation.batch_invariant's kernels, what training
 * runs generate with by default; otherwise the fastest GEMMs */
static void generate(struct rl_model *m, int32_t *const *prompts, bool invariant)
{
	struct rl_gen_output out[N_PROMPTS];
	struct rl_gen_params p = {.sampling = {0, -1, 1},
	                          .stop = {.max_new_tokens = NEW_TOKENS},
	                          .batch_invariant = invariant};
	int lens[N_PROMPTS];
	char err[512];

	for (int i = 0; i < N_PROMPTS; i++)
		lens[i] = PROMPT_LEN;
	if (rl_generate(m, NULL, N_PROMPTS, (const int32_t *const *)prompts, lens, &p, out, err,
	                sizeof err)) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
	rl_gen_outputs_free(out, N_PROMPTS);
}

/* 0 with PyTorch's numbers; 1 when python3 lacks torch or transformers;
 * -1 when the script failed. */
static int torch_numbers(const char *dir, int threads, double *train, double *gen)
{
	char cmd[8192], line[512];
	const char *src = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

	if (system("python3 -c 'import torch, transformers' >/dev/null 2>&1") != 0)
		return 1;
	snprintf(cmd, sizeof cmd,
	         "python3 '%s/tests/bench/bench_model_torch.py' '%s' %d %d %d %d %d %d 2>/dev/null",
	         src, dir, threads, N_SEQS, SEQ_LEN, N_PROMPTS, PROMPT_LEN, NEW_TOKENS);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	int got = 0;
	while (fgets(line, sizeof line, p))
		got = sscanf(line, "{\"train_tok_s\": %lf, \"gen_tok_s\": %lf}", train, gen) == 2 ||
		      got;
	return pclose(p) == 0 && got ? 0 : -1;
}

int main(int argc, char **argv)
{
	(void)argc;
	/* the PyTorch column inherits the same policy through the environment */
	rl_omp_passive_reexec(argv);
	char dir[] = "/tmp/rl-bench-model-XXXXXX", err[512];
	int threads = omp_get_max_threads();

	if (!mkdtemp(dir) || bench_write_random_llama(dir, config_json))
		return 1;
	struct rl_model *m;
	if (rl_model_load(&m, dir, &rl_ops_cpu, err, sizeof err)) {
		fprintf(stderr, "bench: %s\n", err);
		return 1;
	}
	int T = N_SEQS * SEQ_LEN;
	int32_t *ids = malloc((size_t)T * sizeof *ids), *targets = malloc((size_t)T * sizeof *ids);
	int32_t cu[N_SEQS + 1];
	float *lp = malloc((size_t)T * sizeof *lp), *dlp = malloc((size_t)T * sizeof *dlp);
	uint32_t seed = 99;
	for (int s = 0; s <= N_SEQS; s++)
		cu[s] = s * SEQ_LEN;
	for (int t = 0; t < T; t++)
		ids[t] = (int32_t)(bench_rng_next(&seed) % (uint32_t)m->cfg.vocab_size);
	for (int t = 0; t < T; t++) {
		targets[t] = (t + 1) % SEQ_LEN ? ids[t + 1] : -1;
		dlp[t] = -1.0f / (float)(N_SEQS * (SEQ_LEN - 1));
	}
	struct rl_batch b = {T, N_SEQS, ids, cu, targets};
	struct rl_acts *a = rl_acts_new(m, T);
	int32_t *prompts[N_PROMPTS];
	for (int i = 0; i < N_PROMPTS; i++) {
		prompts[i] = malloc(PROMPT_LEN * sizeof **prompts);
		for (int t = 0; t < PROMPT_LEN; t++)
			prompts[i][t] =
			    (int32_t)(bench_rng_next(&seed) % (uint32_t)m->cfg.vocab_size);
	}

	double t_train, t_gen, t_gen_inv, torch_train = 0, torch_gen = 0;
	TIME_IT(t_train, train_step(m, a, &b, lp, dlp));
	TIME_IT(t_gen, generate(m, prompts, false));
	TIME_IT(t_gen_inv, generate(m, prompts, true));
	int torch_rc = torch_numbers(dir, threads, &torch_train, &torch_gen);
	int have_torch = torch_rc == 0;

	double ours_train = T / t_train, ours_gen = N_PROMPTS * NEW_TOKENS / t_gen;
	printf("model: Llama, %.1fM parameters, fp32, %d threads, OMP_WAIT_POLICY=%s\n",
	       (double)m->n_elems / 1e6, threads, getenv("OMP_WAIT_POLICY"));
	printf("%-34s %12s %12s %8s\n", "metric (tokens/s)", "slurm-rl", "pytorch", "ratio");
	const char *names[3] = {"forward+backward (4 x 256 packed)",
	                        "generation (4 prompts, 64 new)", "  with batch-invariant kernels"};
	double ours[3] = {ours_train, ours_gen, N_PROMPTS * NEW_TOKENS / t_gen_inv},
	       theirs[3] = {torch_train, torch_gen, torch_gen};
	for (int i = 0; i < 3; i++) {
		if (have_torch)
			printf("%-34s %12.1f %12.1f %8.2f\n", names[i], ours[i], theirs[i],
			       ours[i] / theirs[i]);
		else
			printf("%-34s %12.1f %12s %8s\n", names[i], ours[i], "-", "-");
	}
	if (torch_rc > 0)
		printf("(pytorch column skipped: python3 with torch and transformers not found)\n");
	else if (torch_rc < 0)
		printf("(pytorch column failed: tests/bench/bench_model_torch.py under "
		       "top_srcdir=%s)\n",
		       getenv("top_srcdir") ? getenv("top_srcdir") : ".");

	for (int i = 0; i < N_PROMPTS; i++)
		free(prompts[i]);
	rl_acts_free(m, a);
	rl_model_free(m);
	free(ids);
	free(targets);
	free(lp);
	free(dlp);
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
