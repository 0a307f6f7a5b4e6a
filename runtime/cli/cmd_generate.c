#define _GNU_SOURCE
/* rlrun generate: sample a continuation of one prompt with the KV cache, as
 * the GRPO loop does for every prompt of a batch. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cli/parse.h"
#include "runtime/cli/commands.h"
#include "runtime/generate/generate.h"
#include "runtime/model/hub.h"

static const char usage[] =
    "usage: rlrun generate --model DIR (--prompt TEXT | --ids ID,...) [--tokenizer DIR]\n"
    "                      [--max-new-tokens N] [--temperature T] [--top-p P] [--top-k K]\n"
    "                      [--seed S] [--stop STRING]... [--print-ids]\n";

#define MAX_STOPS 16

struct gen_args {
	const char *model, *tokenizer, *prompt, *ids;
	const char *stops[MAX_STOPS];
	size_t n_stops;
	long max_new, top_k;
	float temperature, top_p;
	unsigned long long seed;
	int print_ids;
};

static int parse(int argc, char **argv, struct gen_args *g, char *err, size_t errlen)
{
	static const struct option opts[] = {{"model", required_argument, NULL, 'm'},
	                                     {"tokenizer", required_argument, NULL, 'k'},
	                                     {"prompt", required_argument, NULL, 'p'},
	                                     {"ids", required_argument, NULL, 'i'},
	                                     {"max-new-tokens", required_argument, NULL, 'n'},
	                                     {"temperature", required_argument, NULL, 't'},
	                                     {"top-p", required_argument, NULL, 'P'},
	                                     {"top-k", required_argument, NULL, 'K'},
	                                     {"seed", required_argument, NULL, 's'},
	                                     {"stop", required_argument, NULL, 'S'},
	                                     {"print-ids", no_argument, NULL, 'I'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	long seed;
	int c;

	*g = (struct gen_args){.max_new = 64, .top_k = -1, .temperature = 1.0f, .top_p = 1.0f};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'm':
			g->model = optarg;
			break;
		case 'k':
			g->tokenizer = optarg;
			break;
		case 'p':
			g->prompt = optarg;
			break;
		case 'i':
			g->ids = optarg;
			break;
		case 'n':
			bad = rl_parse_long("--max-new-tokens", optarg, 1, 1 << 24, &g->max_new,
			                    err, errlen);
			break;
		case 't':
			bad = rl_parse_float("--temperature", optarg, 0, 1e4, &g->temperature, err,
			                     errlen);
			break;
		case 'P':
			bad = rl_parse_float("--top-p", optarg, 1e-9, 1, &g->top_p, err, errlen);
			break;
		case 'K':
			bad = rl_parse_long("--top-k", optarg, -1, 1 << 30, &g->top_k, err, errlen);
			break;
		case 's':
			bad = rl_parse_long("--seed", optarg, 0, __LONG_MAX__, &seed, err, errlen);
			g->seed = (unsigned long long)seed;
			break;
		case 'S':
			if (g->n_stops == MAX_STOPS || !*optarg) {
				snprintf(err, errlen, "--stop: at most %d non-empty strings",
				         MAX_STOPS);
				bad = 1;
			} else {
				g->stops[g->n_stops++] = optarg;
			}
			break;
		case 'I':
			g->print_ids = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(RL_EXIT_OK);
		default:
			return -1;
		}
		if (bad)
			return -1;
	}
	if (!g->model || !g->prompt == !g->ids || optind != argc) {
		snprintf(err, errlen, "give --model and exactly one of --prompt and --ids");
		return -1;
	}
	if (!g->tokenizer)
		g->tokenizer = g->model;
	return 0;
}

static void print_result(const struct gen_args *g, const struct rl_gen_output *o)
{
	if (o->text) {
		fwrite(o->text, 1, o->text_len, stdout);
		putchar('\n');
	}
	if (g->print_ids || !o->text) {
		fputs("ids:", stdout);
		for (size_t i = 0; i < o->n_tokens; i++)
			printf("%s%d", i ? "," : " ", o->tokens[i]);
		putchar('\n');
		fputs("logprobs:", stdout);
		for (size_t i = 0; i < o->n_tokens; i++)
			printf("%s%.6g", i ? "," : " ", o->logprobs[i]);
		putchar('\n');
	}
	fprintf(stderr, "rlrun generate: %zu tokens, stopped by %s\n", o->n_tokens,
	        rl_stop_reason_name(o->reason));
}

int rl_cmd_generate(int argc, char **argv)
{
	struct gen_args g;
	struct rl_model *m = NULL;
	struct rl_tokenizer *tok = NULL;
	struct rl_gen_output out = {0};
	int32_t *ids = NULL;
	size_t n_ids = 0;
	char err[1024], path[4096], *model_dir = NULL, *tok_dir = NULL;
	int rc = RL_EXIT_FAIL;

	if (parse(argc, argv, &g, err, sizeof err)) {
		fprintf(stderr, "rlrun generate: %s\n%s", err, usage);
		return RL_EXIT_USAGE;
	}
	if (g.ids && rl_parse_ids("--ids", g.ids, &ids, &n_ids, err, sizeof err)) {
		fprintf(stderr, "rlrun generate: %s\n", err);
		return RL_EXIT_USAGE;
	}
	/* directories, or hub names in the local Hugging Face cache */
	if (!(model_dir = rl_hub_resolve(g.model, "--model", NULL, err, sizeof err)) ||
	    !(tok_dir =
	          rl_hub_resolve(g.tokenizer, g.tokenizer == g.model ? "--model" : "--tokenizer",
	                         NULL, err, sizeof err)) ||
	    rl_model_load(&m, model_dir, &rl_ops_cpu, err, sizeof err))
		goto out;
	/* the tokenizer is optional with --ids: ids in, ids out */
	snprintf(path, sizeof path, "%s/tokenizer.json", tok_dir);
	if ((g.prompt || g.n_stops || access(path, F_OK) == 0) &&
	    rl_tokenizer_load(&tok, tok_dir, err, sizeof err))
		goto out;
	if (g.prompt && rl_tokenizer_encode(tok, g.prompt, strlen(g.prompt), true, &ids, &n_ids,
	                                    err, sizeof err))
		goto out;
	struct rl_gen_params p = {
	    .sampling = {g.temperature, (int)g.top_k, g.top_p},
	    .stop = {.eos_ids = m->cfg.eos_token_ids,
	             .n_eos_ids = (size_t)m->cfg.n_eos,
	             .stop_strings = g.stops,
	             .n_stop_strings = g.n_stops,
	             .max_new_tokens = (size_t)g.max_new},
	    .seed = g.seed,
	};
	const int32_t *prompts[1] = {ids};
	int lens[1] = {(int)n_ids};
	if (rl_generate(m, tok, 1, prompts, lens, &p, &out, err, sizeof err))
		goto out;
	print_result(&g, &out);
	rc = RL_EXIT_OK;
out:
	if (rc)
		fprintf(stderr, "rlrun generate: %s\n", err);
	rl_gen_outputs_free(&out, 1);
	rl_tokenizer_free(tok);
	rl_model_free(m);
	free(ids);
	free(model_dir);
	free(tok_dir);
	return rc;
}
