#define _GNU_SOURCE
/* rlrun tokenize: text to ids and ids to text with a model's tokenizer.json,
 * and a conversation through the model's chat template, to check prompts and
 * stop strings against what the model will see. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/parse.h"
#include "runtime/cli/commands.h"
#include "runtime/chat/chat_template.h"
#include "runtime/model/hub.h"
#include "runtime/tokenizer/tokenizer.h"

static const char usage[] =
    "usage: rlrun tokenize --model DIR (--text TEXT | --decode ID,...) [--no-special]\n"
    "       rlrun tokenize --model DIR --chat FILE [--add-generation-prompt] [--text-only]\n";

/* FILE's conversation through DIR's chat template: the text, in *out.
 * FILE is {"messages": [...], other keys: the template's variables}. */
static int render_chat(const char *dir, const char *file, int add_generation_prompt, char **out,
                       size_t *len, char *err, size_t errlen)
{
	struct rl_chat_template *t = NULL;
	json_error_t je;
	json_t *doc = json_load_file(file, 0, &je), *messages, *agp;
	int rc = -1;

	if (!doc) {
		snprintf(err, errlen, "%s:%d:%d: %s", file, je.line, je.column, je.text);
		return -1;
	}
	messages = json_object_get(doc, "messages");
	if (!json_is_object(doc) || !json_is_array(messages)) {
		snprintf(err, errlen, "%s: expected {\"messages\": [...], ...template variables}",
		         file);
		goto out;
	}
	agp = json_object_get(doc, "add_generation_prompt");
	if (agp && !json_is_boolean(agp)) {
		snprintf(err, errlen, "%s: add_generation_prompt must be true or false", file);
		goto out;
	}
	if (!add_generation_prompt)
		add_generation_prompt = json_is_true(agp);
	json_incref(messages);
	json_object_del(doc, "messages");
	json_object_del(doc, "add_generation_prompt");
	if (rl_chat_template_load_model(&t, dir, err, errlen))
		goto out_messages;
	if (!t) {
		snprintf(err, errlen,
		         "%s has no chat template (no chat_template.jinja, no chat_template in "
		         "tokenizer_config.json)",
		         dir);
		goto out_messages;
	}
	rc = rl_chat_template_apply(t, messages, doc, add_generation_prompt, out, len, err, errlen);
out_messages:
	json_decref(messages);
out:
	rl_chat_template_free(t);
	json_decref(doc);
	return rc;
}

int rl_cmd_tokenize(int argc, char **argv)
{
	static const struct option opts[] = {{"model", required_argument, NULL, 'm'},
	                                     {"text", required_argument, NULL, 't'},
	                                     {"decode", required_argument, NULL, 'd'},
	                                     {"no-special", no_argument, NULL, 'n'},
	                                     {"chat", required_argument, NULL, 'c'},
	                                     {"add-generation-prompt", no_argument, NULL, 'g'},
	                                     {"text-only", no_argument, NULL, 'o'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	const char *dir = NULL, *text = NULL, *decode = NULL, *chat = NULL;
	int special = 1, c, rc = RL_EXIT_FAIL, agp = 0, text_only = 0;
	char *rendered = NULL;
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
		case 'c':
			chat = optarg;
			break;
		case 'g':
			agp = 1;
			break;
		case 'o':
			text_only = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			return RL_EXIT_OK;
		default:
			fputs(usage, stderr);
			return RL_EXIT_USAGE;
		}
	}
	if (!dir || (!!text + !!decode + !!chat) != 1 || optind != argc ||
	    ((agp || text_only) && !chat) || (chat && !special)) {
		fputs(usage, stderr);
		return RL_EXIT_USAGE;
	}
	if (decode && rl_parse_ids("--decode", decode, &ids, &n, err, sizeof err)) {
		fprintf(stderr, "rlrun tokenize: %s\n", err);
		return RL_EXIT_USAGE;
	}
	/* a directory, or a hub name in the local Hugging Face cache */
	if (!(model = rl_hub_resolve(dir, "--model", NULL, err, sizeof err)))
		goto out;
	if (chat) {
		if (render_chat(model, chat, agp, &rendered, &len, err, sizeof err))
			goto out;
		if (text_only) { /* exactly the text, for diffing against transformers' */
			fwrite(rendered, 1, len, stdout);
			rc = RL_EXIT_OK;
			goto out;
		}
	}
	if (rl_tokenizer_load(&tok, model, err, sizeof err))
		goto out;
	if (chat) {
		/* as apply_chat_template(tokenize=True): the template wrote the
		 * special tokens, none is added */
		if (rl_tokenizer_encode(tok, rendered, len, false, &ids, &n, err, sizeof err))
			goto out;
		fwrite(rendered, 1, len, stdout);
		putchar('\n');
		for (size_t i = 0; i < n; i++)
			printf("%s%d", i ? "," : "", ids[i]);
		putchar('\n');
	} else if (text) {
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
	free(rendered);
	free(ids);
	free(model);
	rl_tokenizer_free(tok);
	return rc;
}
