#define _GNU_SOURCE
/* rlrun forward: the logits of one sequence, for checking a model against
 * another implementation (raw little-endian fp32, [n_ids, vocab]). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/parse.h"
#include "runtime/cli/commands.h"
#include "runtime/model/hub.h"
#include "runtime/model/model.h"

static const char usage[] = "usage: rlrun forward --model DIR --ids ID,ID,... [--out FILE]\n";

static int write_logits(const char *path, const float *logits, size_t n, char *err, size_t errlen)
{
	FILE *f = fopen(path, "wb");

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &logits[i], 4);
		u = __builtin_bswap32(u);
		fwrite(&u, 4, 1, f);
	}
#else
	fwrite(logits, sizeof *logits, n, f);
#endif
	if (ferror(f) | fclose(f)) {
		snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void summarize(const float *logits, int n, int vocab)
{
	printf("forward: %d tokens x %d vocabulary\n", n, vocab);
	for (int t = 0; t < n; t++) {
		const float *row = logits + (size_t)t * (size_t)vocab;
		int best = 0;
		double sum = 0;

		for (int v = 1; v < vocab; v++)
			if (row[v] > row[best])
				best = v;
		for (int v = 0; v < vocab; v++)
			sum += exp((double)row[v] - row[best]);
		printf("  position %d: argmax %d, logit %.6g, p %.6g\n", t, best, row[best],
		       1.0 / sum);
	}
}

int rl_cmd_forward(int argc, char **argv)
{
	static const struct option opts[] = {{"model", required_argument, NULL, 'm'},
	                                     {"ids", required_argument, NULL, 'i'},
	                                     {"out", required_argument, NULL, 'o'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	const char *model_dir = NULL, *ids_text = NULL, *out = NULL;
	char err[1024];
	int c, rc = RL_EXIT_FAIL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case 'i':
			ids_text = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return RL_EXIT_OK;
		default:
			fputs(usage, stderr);
			return RL_EXIT_USAGE;
		}
	}
	if (!model_dir || !ids_text || optind != argc) {
		fputs(usage, stderr);
		return RL_EXIT_USAGE;
	}
	int32_t *ids;
	size_t n;
	if (rl_parse_ids("--ids", ids_text, &ids, &n, err, sizeof err)) {
		fprintf(stderr, "rlrun forward: %s\n", err);
		return RL_EXIT_USAGE;
	}
	struct rl_model *m = NULL;
	struct rl_acts *a = NULL;
	float *logits = NULL;
	int32_t cu[2] = {0, (int32_t)n};

	/* a directory, or a hub name in the local Hugging Face cache */
	char *dir = rl_hub_resolve(model_dir, "--model", NULL, err, sizeof err);
	int loaded = dir ? rl_model_load(&m, dir, &rl_ops_cpu, err, sizeof err) : -1;
	free(dir);
	if (loaded)
		goto out;
	struct rl_batch b = {(int)n, 1, ids, cu, NULL};
	size_t count = n * (size_t)m->cfg.vocab_size;
	a = rl_acts_new(m, (int)n);
	logits = malloc(count * sizeof *logits);
	if (!a || !logits) {
		snprintf(err, sizeof err, "out of memory for %zu tokens", n);
		goto out;
	}
	if (rl_model_forward(m, a, &b, err, sizeof err) ||
	    rl_model_logits(m, a, logits, err, sizeof err))
		goto out;
	if (!out)
		summarize(logits, (int)n, m->cfg.vocab_size);
	else if (write_logits(out, logits, count, err, sizeof err))
		goto out;
	rc = RL_EXIT_OK;
out:
	if (rc)
		fprintf(stderr, "rlrun forward: %s\n", err);
	free(logits);
	if (m)
		rl_acts_free(m, a);
	rl_model_free(m);
	free(ids);
	return rc;
}
