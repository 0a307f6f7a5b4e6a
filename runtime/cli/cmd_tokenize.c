#define _GNU_SOURCE
/* rlrun tokenize: text to ids and ids to text with a model's tokenizer.json,
 * to check prompts and stop strings against what the model will see. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/parse.h"
#include "runtime/cli/commands.h"
#include "runtime/model/hub.h"
#include "runtime/tokenizer/tokenizer.h"

static const char usage[] =
    "usage: rlrun tokenize --model DIR (--text TEXT | --decode ID,...) [--no-special]\n";

int rl_cmd_tokenize(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"model", required_argument, NULL, 'm'},  {"text", required_argument, NULL, 't'},
	    {"decode", required_argument, NULL, 'd'}, {"no-special", no_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
	const char *dir = NULL, *text = NULL, *decode = NULL;
	int special = 1, c, rc = RL_EXIT_FAIL;
	struct rl_tokenizer *tok = NULL;
	int32_t *ids = NULL;
	char *out = NULL, *model = NULL, err[1024];
	size_t n = 0, len;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			dir = optarg;
			break;
		case 't':
			text = optarg;
			break;
		case 'd':
			decode = optarg;
			break;
		case 'n':
			special = 0;
			break;
		case 'h':
			fputs(usage, stdout);
			return RL_EXIT_OK;
		default:
			fputs(usage, stderr);
			return RL_EXIT_USAGE;
		}
	}
	if (!dir || !text == !decode || optind != argc) {
		fputs(usage, stderr);
		return RL_EXIT_USAGE;
	}
	if (decode && rl_parse_ids("--decode", decode, &ids, &n, err, sizeof err)) {
		fprintf(stderr, "rlrun tokenize: %s\n", err);
		return RL_EXIT_USAGE;
	}
	/* a directory, or a hub name in the local Hugging Face cache */
	if (!(model = rl_hub_resolve(dir, "--model", NULL, err, sizeof err)) ||
	    rl_tokenizer_load(&tok, model, err, sizeof err))
		goto out;
	if (text) {
		/* --no-special: no template tokens (Llama 3's <|begin_of_text|>) */
		if (rl_tokenizer_encode(tok, text, strlen(text), special, &ids, &n, err,
		                        sizeof err))
			goto out;
		for (size_t i = 0; i < n; i++)
			printf("%s%d", i ? "," : "", ids[i]);
		putchar('\n');
	} else {
		/* --no-special: special tokens are left out of the text */
		if (rl_tokenizer_decode(tok, ids, n, !special, &out, &len, err, sizeof err))
			goto out;
		fwrite(out, 1, len, stdout);
		putchar('\n');
	}
	rc = RL_EXIT_OK;
out:
	if (rc)
		fprintf(stderr, "rlrun tokenize: %s\n", err);
	free(out);
	free(ids);
	free(model);
	rl_tokenizer_free(tok);
	return rc;
}
