/* Compares what two runs wrote, within a tolerance:
 *   rl_compare grads RUN.safetensors REFERENCE.safetensors TOL [PART]
 *     every tensor of the reference (RL_GRAD_DUMP's file, or weights)
 *     whose name contains PART (default: all) against the run's
 *     same-named one: ||run - ref|| / ||ref|| <= TOL, norm-wise per tensor
 *     (element-wise ratios explode where a gradient is near 0)
 *   rl_compare metrics RUN.jsonl REFERENCE.jsonl TOL
 *     every number of every step line but the timers, the rates,
 *     gen_logprob_max_diff (the size of float rounding itself) and the
 *     first step's memory of its rank (num_params, mem_*_bytes: a
 *     layout's, not a result):
 *     |run - ref| <= TOL * max(|run|, |ref|, 0.01): relative, and absolute
 *     (TOL / 100) below 0.01, where a loss that is a sum of cancelling
 *     terms has no relative precision to speak of
 *   rl_compare rollout CHECKPOINT_DIR/step_N INDEX MODEL_DIR TOL
 *     rollout INDEX (from 1) of the checkpoint's rollout_buffer.bin: its
 *     generation logprobs against the model's own, |diff| <= TOL for
 *     every response token (rollout_logprobs.c)
 * Prints the worst case and exits 0 when all are within, 1 otherwise, 2
 * when it could not compare. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/safetensors.h"
#include "tests/tools/rl_compare.h"

static int grads(const char *run_path, const char *ref_path, double tol, const char *part)
{
	struct rl_st_archive *run, *ref;
	char err[512];
	double worst = 0, ref_total = 0;
	const char *worst_name = "";
	int bad = 0, compared = 0;

	if (rl_st_open(&run, run_path, err, sizeof err) ||
	    rl_st_open(&ref, ref_path, err, sizeof err)) {
		fprintf(stderr, "rl_compare: %s\n", err);
		return 2;
	}
	for (int i = 0; i < rl_st_count(ref); i++) {
		const struct rl_st_tensor *b = rl_st_at(ref, i);
		const struct rl_st_tensor *a = rl_st_find(run, b->name);
		int64_t n = 1;

		if (!strstr(b->name, part))
			continue;
		compared++;
		for (int d = 0; d < b->ndim; d++)
			n *= b->shape[d];
		float *x = malloc((size_t)n * sizeof *x + 1),
		      *y = malloc((size_t)n * sizeof *y + 1);
		if (!a || !x || !y ||
		    rl_st_read_f32(run, b->name, x, b->ndim, b->shape, err, sizeof err) ||
		    rl_st_read_f32(ref, b->name, y, b->ndim, b->shape, err, sizeof err)) {
			fprintf(stderr, "rl_compare: %s: %s\n", b->name,
			        a ? err : "missing from the run");
			bad++;
			free(x);
			free(y);
			continue;
		}
		double diff = 0, norm = 0;
		for (int64_t k = 0; k < n; k++) {
			diff += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
			norm += (double)y[k] * y[k];
		}
		double rel = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
		if (strcmp(b->name, "loss") != 0)
			ref_total += norm;
		if (rel > tol) {
			fprintf(stderr, "rl_compare: %s: relative difference %.3g > %g\n", b->name,
			        rel, tol);
			bad++;
		}
		if (rel >= worst) {
			worst = rel;
			worst_name = b->name;
		}
		free(x);
		free(y);
	}
	/* two zero gradients agree whatever the code computes */
	if (ref_total == 0 || compared == 0) {
		fprintf(stderr, "rl_compare: %s: %s; it shows nothing\n", ref_path,
		        compared ? "the reference is zero everywhere"
		                 : "no tensor's name contains the part asked for");
		bad++;
	}
	printf("rl_compare: %d tensors, worst %s at %.3g (tolerance %g)\n", compared, worst_name,
	       worst, tol);
	rl_st_close(run);
	rl_st_close(ref);
	return bad ? 1 : 0;
}

static bool is_timer(const char *key)
{
	static const char *const skip[] = {
	    "total_step_time",      "generation",
	    "reward_calculation",   "policy_and_reference_logprobs",
	    "policy_training",      "refit",
	    "checkpointing",        "validation",
	    "tokens_per_sec",       "mfu",
	    "gen_logprob_max_diff", "exposed_generation",
	    "weight_sync",          "idle/buffer_starvation",
	    "data_processing",
	};
	for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
		if (strcmp(key, skip[i]) == 0)
			return true;
	return strcmp(key, "num_params") == 0 ||
	       (strncmp(key, "mem_", 4) == 0 && strstr(key, "_bytes") != NULL);
}

static json_t *read_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	json_t *lines = json_array();
	char buf[65536];

	if (!f) {
		perror(path);
		json_decref(lines);
		return NULL;
	}
	while (fgets(buf, sizeof buf, f)) {
		json_error_t e;
		json_t *v = json_loads(buf, 0, &e);

		if (!v) {
			fprintf(stderr, "rl_compare: %s:%d: %s\n", path, e.line, e.text);
			json_decref(lines);
			fclose(f);
			return NULL;
		}
		json_array_append_new(lines, v);
	}
	fclose(f);
	return lines;
}

static int metrics(const char *run_path, const char *ref_path, double tol)
{
	json_t *run = read_lines(run_path), *ref = read_lines(ref_path);
	double worst = 0;
	char worst_at[128] = "";
	int bad = 0, compared = 0;

	if (!run || !ref)
		return 2;
	if (json_array_size(run) != json_array_size(ref)) {
		fprintf(stderr, "rl_compare: %zu step lines, the reference has %zu\n",
		        json_array_size(run), json_array_size(ref));
		bad++;
	}
	for (size_t i = 0; i < json_array_size(ref) && i < json_array_size(run); i++) {
		json_t *b = json_array_get(ref, i), *a = json_array_get(run, i);
		const char *key;
		json_t *bv;

		json_object_foreach(b, key, bv)
		{
			json_t *av = json_object_get(a, key);

			if (is_timer(key) || json_is_null(bv))
				continue;
			if (!json_is_number(bv) || !json_is_number(av)) {
				if (!json_equal(av, bv)) {
					fprintf(stderr, "rl_compare: line %zu: %s differs\n", i + 1,
					        key);
					bad++;
				}
				continue;
			}
			double x = json_number_value(av), y = json_number_value(bv);
			double scale = fmax(fmax(fabs(x), fabs(y)), 0.01),
			       rel = fabs(x - y) / scale;
			compared++;
			if (rel > tol) {
				fprintf(stderr, "rl_compare: line %zu: %s %.10g, reference %.10g\n",
				        i + 1, key, x, y);
				bad++;
			}
			if (rel >= worst) {
				worst = rel;
				snprintf(worst_at, sizeof worst_at, "line %zu %s", i + 1, key);
			}
		}
	}
	printf("rl_compare: %d numbers, worst %s at %.3g (tolerance %g)\n", compared, worst_at,
	       worst, tol);
	json_decref(run);
	json_decref(ref);
	/* two runs that wrote no step are not alike: they did nothing */
	if (!bad && compared == 0) {
		fprintf(stderr, "rl_compare: %s and %s hold no step to compare\n", run_path,
		        ref_path);
		return 2;
	}
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "grads") == 0)
		return grads(argv[2], argv[3], atof(argv[4]), argc == 6 ? argv[5] : "");
	if (argc == 5 && strcmp(argv[1], "metrics") == 0)
		return metrics(argv[2], argv[3], atof(argv[4]));
	if (argc == 6 && strcmp(argv[1], "rollout") == 0)
		return rl_compare_rollout(argv[2], atoi(argv[3]), argv[4], atof(argv[5]));
	fprintf(stderr, "usage: rl_compare grads RUN REFERENCE TOLERANCE [PART]\n"
	                "       rl_compare metrics RUN REFERENCE TOLERANCE\n"
	                "       rl_compare rollout CHECKPOINT_DIR/step_N INDEX MODEL_DIR "
	                "TOLERANCE\n");
	return 2;
}
