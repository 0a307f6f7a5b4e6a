/* Loading tokenizer.json: the top level, the added tokens (with the ids
 * `tokenizers` itself would give them), the post-processor and the decoder;
 * the model, normalizer and pre-tokenizer have their own files. Any field
 * that would change the ids or the text and that we do not implement is
 * refused with its JSON path, never ignored. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/tokenizer/internal.h"

int rl_tok_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || errlen == 0)
		return -1;
	n = snprintf(err, errlen, "%s: ", path ? path : "tokenizer");
	if (n >= 0 && (size_t)n < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const char *str_or(json_t *v, const char *dflt)
{
	return json_is_string(v) ? json_string_value(v) : dflt;
}

/* The id `tokenizers`' AddedVocabulary::add_tokens gives the next token. */
static int32_t next_added_id(const struct rl_tokenizer *tok, size_t n_done)
{
	int64_t max = -1, vocab = (int64_t)tok->vocab_count;

	for (size_t i = 0; i < n_done; i++)
		max = tok->added[i].id > max ? tok->added[i].id : max;
	if (n_done == 0)
		return (int32_t)vocab;
	return (int32_t)(max >= vocab || vocab == 0 ? max + 1 : vocab);
}

static int load_added_token(struct rl_tokenizer *tok, json_t *t, size_t i, char *err, size_t errlen)
{
	static const char *const unsupported[] = {"single_word", "lstrip", "rstrip"};
	json_t *content = json_object_get(t, "content"), *id = json_object_get(t, "id");
	json_t *special = json_object_get(t, "special"), *norm = json_object_get(t, "normalized");
	struct rl_tok_added *a = &tok->added[i];

	if (!json_is_string(content) || json_string_length(content) == 0 ||
	    strlen(json_string_value(content)) != json_string_length(content))
		return rl_tok_err(err, errlen, tok->path,
		                  "added_tokens[%zu].content: expected a non-empty string", i);
	const char *s = json_string_value(content);
	if (!json_is_integer(id) || !json_is_boolean(special) || (norm && !json_is_boolean(norm)))
		return rl_tok_err(err, errlen, tok->path,
		                  "added_tokens[%zu] (\"%s\"): expected an integer id and boolean "
		                  "special and normalized",
		                  i, s);
	for (size_t k = 0; k < 3; k++) {
		json_t *v = json_object_get(t, unsupported[k]);

		if (v && !json_is_false(v))
			return rl_tok_err(err, errlen, tok->path,
			                  "added_tokens[%zu].%s: only false is supported (\"%s\")",
			                  i, unsupported[k], s);
	}
	for (size_t k = 0; k < i; k++)
		if (strcmp(tok->added[k].content, s) == 0)
			return rl_tok_err(err, errlen, tok->path,
			                  "added_tokens[%zu].content: \"%s\" is listed twice", i,
			                  s);

	int32_t want = rl_tok_vocab_find(tok, s, strlen(s));
	if (want < 0)
		want = next_added_id(tok, i);
	if (json_integer_value(id) != want)
		return rl_tok_err(
		    err, errlen, tok->path,
		    "added_tokens[%zu].id: %lld, but tokenizers gives \"%s\" the id %d", i,
		    (long long)json_integer_value(id), s, want);
	if (want < tok->n_ids && tok->tokens[want] && strcmp(tok->tokens[want], s) != 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "added_tokens[%zu].id: %d is model.vocab's \"%s\"", i, want,
		                  tok->tokens[want]);

	a->id = want;
	a->normalized = !norm || json_is_true(norm); /* the default of AddedToken */
	a->content = strdup(s);
	a->len = strlen(s);
	if (a->normalized && tok->nfc) {
		if (!a->content || rl_tok_nfc(s, a->len, &a->match, &a->len))
			a->match = NULL;
	} else {
		a->match = strdup(s);
	}
	if (!a->content || !a->match ||
	    ((want >= tok->n_ids || !tok->tokens[want]) &&
	     rl_tok_add_id(tok, want, a->content, strlen(s))))
		return rl_tok_err(err, errlen, tok->path, "added_tokens: out of memory");
	tok->flags[want] |= RL_TOK_ADDED | (json_is_true(special) ? RL_TOK_SPECIAL : 0);
	return 0;
}

struct sort_key {
	unsigned char first;
	size_t len, index;
};

static int by_first_byte_longest(const void *pa, const void *pb)
{
	const struct sort_key *a = pa, *b = pb;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	return 0;
}

/* order[kind]: the tokens of one kind by first byte, longest first; start[kind][b]
 * where those with first byte b begin. */
static int index_added(struct rl_tokenizer *tok, int kind)
{
	struct sort_key *keys = calloc(tok->n_added + 1, sizeof(*keys));
	size_t m = 0, j = 0;

	if (!keys)
		return -1;
	for (size_t i = 0; i < tok->n_added; i++)
		if (tok->added[i].normalized == (kind == 1))
			keys[m++] = (struct sort_key){(unsigned char)tok->added[i].match[0],
			                              tok->added[i].len, i};
	qsort(keys, m, sizeof(*keys), by_first_byte_longest);
	for (size_t i = 0; i < m; i++)
		tok->order[kind][i] = keys[i].index;
	for (int b = 0; b <= 256; b++) {
		while (j < m && keys[j].first < b)
			j++;
		tok->start[kind][b] = j;
	}
	free(keys);
	return 0;
}

static int load_added_tokens(struct rl_tokenizer *tok, json_t *list, char *err, size_t errlen)
{
	size_t n = json_array_size(list);

	if (list && !json_is_null(list) && !json_is_array(list))
		return rl_tok_err(err, errlen, tok->path, "added_tokens: expected an array");
	tok->added = calloc(n + 1, sizeof(*tok->added));
	tok->order[0] = calloc(n + 1, sizeof(size_t));
	tok->order[1] = calloc(n + 1, sizeof(size_t));
	if (!tok->added || !tok->order[0] || !tok->order[1])
		return rl_tok_err(err, errlen, tok->path, "added_tokens: out of memory");
	for (size_t i = 0; i < n; i++) {
		int rc = load_added_token(tok, json_array_get(list, i), i, err, errlen);

		tok->n_added = i + 1; /* what is allocated gets freed */
		if (rc)
			return -1;
	}
	if (index_added(tok, 0) || index_added(tok, 1))
		return rl_tok_err(err, errlen, tok->path, "added_tokens: out of memory");
	return 0;
}

static int push_id(int32_t **v, size_t *n, int32_t id)
{
	int32_t *nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	nv[(*n)++] = id;
	*v = nv;
	return 0;
}

/* TemplateProcessing's "single": special tokens, $A, special tokens. */
static int load_template(struct rl_tokenizer *tok, json_t *pp, const char *name, char *err,
                         size_t errlen)
{
	json_t *single = json_object_get(pp, "single"), *specials;
	bool seen_a = false;

	specials = json_object_get(pp, "special_tokens");
	if (!json_is_array(single))
		return rl_tok_err(err, errlen, tok->path, "%s.single: expected an array", name);
	for (size_t i = 0; i < json_array_size(single); i++) {
		json_t *item = json_array_get(single, i);
		json_t *seq = json_object_get(item, "Sequence"),
		       *sp = json_object_get(item, "SpecialToken");

		if (seq) {
			if (strcmp(str_or(json_object_get(seq, "id"), ""), "A") != 0 || seen_a)
				return rl_tok_err(
				    err, errlen, tok->path,
				    "%s.single[%zu]: only one Sequence, A, is supported", name, i);
			seen_a = true;
			continue;
		}
		const char *key = str_or(json_object_get(sp, "id"), NULL);
		json_t *ids = json_object_get(json_object_get(specials, key ? key : ""), "ids");
		if (!key || !json_is_array(ids))
			return rl_tok_err(err, errlen, tok->path,
			                  "%s.single[%zu]: expected a SpecialToken listed in "
			                  "special_tokens",
			                  name, i);
		for (size_t k = 0; k < json_array_size(ids); k++) {
			json_int_t id = json_integer_value(json_array_get(ids, k));

			if (id < 0 || id >= tok->n_ids || !tok->tokens[id])
				return rl_tok_err(
				    err, errlen, tok->path,
				    "%s.special_tokens[\"%s\"].ids[%zu]: %lld is not in the "
				    "vocabulary",
				    name, key, k, (long long)id);
			if (seen_a ? push_id(&tok->suffix, &tok->n_suffix, (int32_t)id)
			           : push_id(&tok->prefix, &tok->n_prefix, (int32_t)id))
				return rl_tok_err(err, errlen, tok->path, "out of memory");
		}
	}
	if (!seen_a)
		return rl_tok_err(err, errlen, tok->path, "%s.single: no Sequence A", name);
	return 0;
}

/* ByteLevel only trims offsets; TemplateProcessing adds ids. */
static int load_post_processor(struct rl_tokenizer *tok, json_t *pp, char *err, size_t errlen)
{
	const char *type = str_or(json_object_get(pp, "type"), "(missing)");
	json_t *list;
	bool template = false;
	char name[64];

	if (!pp || json_is_null(pp) || strcmp(type, "ByteLevel") == 0)
		return 0;
	if (strcmp(type, "TemplateProcessing") == 0)
		return load_template(tok, pp, "post_processor", err, errlen);
	if (strcmp(type, "Sequence") != 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "post_processor.type: \"%s\" is not supported (ByteLevel, "
		                  "TemplateProcessing or a Sequence of those)",
		                  type);
	list = json_object_get(pp, "processors");
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *p = json_array_get(list, i);
		const char *t = str_or(json_object_get(p, "type"), "(missing)");

		snprintf(name, sizeof(name), "post_processor.processors[%zu]", i);
		if (strcmp(t, "ByteLevel") == 0)
			continue;
		if (strcmp(t, "TemplateProcessing") != 0 || template)
			return rl_tok_err(
			    err, errlen, tok->path,
			    "%s.type: \"%s\" is not supported here (ByteLevel, and one "
			    "TemplateProcessing)",
			    name, t);
		template = true;
		if (load_template(tok, p, name, err, errlen))
			return -1;
	}
	return 0;
}

static int load_root(struct rl_tokenizer *tok, json_t *root, char *err, size_t errlen)
{
	static const char *const must_be_null[] = {"truncation", "padding"};
	json_t *version = json_object_get(root, "version");
	const char *decoder;

	if (!json_is_object(root))
		return rl_tok_err(err, errlen, tok->path, "expected a JSON object");
	if (version && strcmp(str_or(version, ""), "1.0") != 0)
		return rl_tok_err(err, errlen, tok->path, "version: only \"1.0\" is known");
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(root, must_be_null[i]);

		if (v && !json_is_null(v))
			return rl_tok_err(err, errlen, tok->path, "%s: only null is supported",
			                  must_be_null[i]);
	}
	decoder = str_or(json_object_get(json_object_get(root, "decoder"), "type"), "(missing)");
	if (strcmp(decoder, "ByteLevel") != 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "decoder.type: \"%s\" is not supported (only ByteLevel)",
		                  decoder);
	if (rl_tok_load_model(tok, json_object_get(root, "model"),
	                      json_array_size(json_object_get(root, "added_tokens")), err,
	                      errlen) ||
	    rl_tok_load_normalizer(tok, json_object_get(root, "normalizer"), "normalizer", err,
	                           errlen) ||
	    load_added_tokens(tok, json_object_get(root, "added_tokens"), err, errlen) ||
	    rl_tok_load_pre_tokenizer(tok, json_object_get(root, "pre_tokenizer"), err, errlen) ||
	    load_post_processor(tok, json_object_get(root, "post_processor"), err, errlen))
		return -1;
	return 0;
}

/* Builds tok from the parsed root (NULL: the parse failed, as jerr says). */
static int finish_load(struct rl_tokenizer **out, struct rl_tokenizer *tok, json_t *root,
                       const json_error_t *jerr, char *err, size_t errlen)
{
	int rc;

	if (!root) {
		rl_tok_err(err, errlen, tok->path, "line %d, column %d: %s", jerr->line,
		           jerr->column, jerr->text);
		rl_tokenizer_free(tok);
		return -1;
	}
	rc = load_root(tok, root, err, errlen);
	json_decref(root);
	if (rc) {
		rl_tokenizer_free(tok);
		return -1;
	}
	*out = tok;
	return 0;
}

int rl_tokenizer_load_json(struct rl_tokenizer **out, const char *json, size_t len,
                           const char *origin, char *err, size_t errlen)
{
	struct rl_tokenizer *tok;
	json_error_t jerr;
	json_t *root;

	*out = NULL;
	tok = calloc(1, sizeof(*tok));
	if (!tok || !(tok->path = strdup(origin))) {
		free(tok);
		return rl_tok_err(err, errlen, origin, "out of memory");
	}
	tok->unk_id = -1;
	root = json_loadb(json, len, 0, &jerr);
	return finish_load(out, tok, root, &jerr, err, errlen);
}

int rl_tokenizer_load(struct rl_tokenizer **out, const char *path, char *err, size_t errlen)
{
	struct rl_tokenizer *tok;
	struct stat st;
	json_error_t jerr;
	json_t *root;

	*out = NULL;
	tok = calloc(1, sizeof(*tok));
	if (!tok)
		return rl_tok_err(err, errlen, path, "out of memory");
	tok->unk_id = -1;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		size_t n = strlen(path) + sizeof("/tokenizer.json");

		tok->path = malloc(n);
		if (tok->path)
			snprintf(tok->path, n, "%s/tokenizer.json", path);
	} else {
		tok->path = strdup(path);
	}
	if (!tok->path) {
		free(tok);
		return rl_tok_err(err, errlen, path, "out of memory");
	}
	root = json_load_file(tok->path, 0, &jerr);
	return finish_load(out, tok, root, &jerr, err, errlen);
}

void rl_tokenizer_free(struct rl_tokenizer *tok)
{
	if (!tok)
		return;
	for (size_t i = 0; i < tok->n_splits; i++)
		pcre2_code_free(tok->splits[i]);
	free(tok->splits);
	for (size_t i = 0; i < tok->n_added; i++) {
		free(tok->added[i].content);
		free(tok->added[i].match);
	}
	free(tok->added);
	free(tok->order[0]);
	free(tok->order[1]);
	free(tok->prefix);
	free(tok->suffix);
	free(tok->vocab.slots);
	free(tok->merges.slots);
	free(tok->tokens);
	free(tok->token_len);
	free(tok->flags);
	free(tok->arena);
	free(tok->path);
	free(tok);
}

int rl_tokenizer_vocab_size(const struct rl_tokenizer *tok)
{
	return tok->n_ids;
}

/* Added tokens first, as `tokenizers`' token_to_id; same ids either way. */
int32_t rl_tokenizer_token_to_id(const struct rl_tokenizer *tok, const char *token)
{
	if (!token)
		return -1;
	for (size_t i = 0; i < tok->n_added; i++)
		if (strcmp(tok->added[i].content, token) == 0)
			return tok->added[i].id;
	return rl_tok_vocab_find(tok, token, strlen(token));
}

const char *rl_tokenizer_id_to_token(const struct rl_tokenizer *tok, int32_t id)
{
	if (id < 0 || id >= tok->n_ids)
		return NULL;
	return tok->tokens[id];
}
