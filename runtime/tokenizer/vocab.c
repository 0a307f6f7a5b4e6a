/* The BPE model of tokenizer.json: "vocab" into a string -> id table,
 * "merges" into a (left id, right id) -> (rank, new id) table. Both are open
 * addressing over power-of-two arrays, so a 128k vocabulary with 280k merges
 * loads in one pass each, without per-entry allocations. */
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer/internal.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t key)
{
	key ^= key >> 31;
	key *= 0x9e3779b97f4a7c15ull;
	return key ^ (key >> 32);
}

/* Smallest power of two with n / size <= 0.7. */
static size_t table_size(size_t n)
{
	size_t size = 16;

	while (size * 7 < n * 10)
		size *= 2;
	return size;
}

int rl_tok_vocab_init(struct rl_tok_vocab *v, size_t n)
{
	size_t size = table_size(n);

	v->slots = malloc(size * sizeof(*v->slots));
	if (!v->slots)
		return -1;
	memset(v->slots, 0xff, size * sizeof(*v->slots));
	v->mask = size - 1;
	return 0;
}

int32_t rl_tok_vocab_insert(const struct rl_tokenizer *tok, int32_t id)
{
	const struct rl_tok_vocab *v = &tok->vocab;
	const char *s = tok->tokens[id];
	size_t len = tok->token_len[id];

	for (size_t i = hash_bytes(s, len) & v->mask;; i = (i + 1) & v->mask) {
		int32_t there = v->slots[i];

		if (there < 0) {
			v->slots[i] = id;
			return -1;
		}
		if (tok->token_len[there] == len && memcmp(tok->tokens[there], s, len) == 0)
			return there;
	}
}

int32_t rl_tok_vocab_find(const struct rl_tokenizer *tok, const char *s, size_t len)
{
	const struct rl_tok_vocab *v = &tok->vocab;

	if (!v->slots)
		return -1;
	for (size_t i = hash_bytes(s, len) & v->mask;; i = (i + 1) & v->mask) {
		int32_t id = v->slots[i];

		if (id < 0)
			return -1;
		if (tok->token_len[id] == len && memcmp(tok->tokens[id], s, len) == 0)
			return id;
	}
}

int rl_tok_merges_init(struct rl_tok_merges *m, size_t n)
{
	size_t size = table_size(n);

	m->slots = malloc(size * sizeof(*m->slots));
	if (!m->slots)
		return -1;
	for (size_t i = 0; i < size; i++)
		m->slots[i].rank = -1;
	m->mask = size - 1;
	return 0;
}

/* A pair listed twice keeps the later rank, as `tokenizers`' HashMap collect does. */
void rl_tok_merges_put(struct rl_tok_merges *m, int32_t a, int32_t b, int32_t rank, int32_t new_id)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;

	for (size_t i = hash_pair(key) & m->mask;; i = (i + 1) & m->mask) {
		struct rl_tok_merge *s = &m->slots[i];

		if (s->rank < 0 || s->key == key) {
			s->key = key;
			s->rank = rank;
			s->new_id = new_id;
			return;
		}
	}
}

const struct rl_tok_merge *rl_tok_merges_find(const struct rl_tok_merges *m, int32_t a, int32_t b)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;

	for (size_t i = hash_pair(key) & m->mask;; i = (i + 1) & m->mask) {
		const struct rl_tok_merge *s = &m->slots[i];

		if (s->rank < 0)
			return NULL;
		if (s->key == key)
			return s;
	}
}

/* Grows the id tables to n ids; new ids have no token yet. */
static int ensure_ids(struct rl_tokenizer *tok, int32_t n)
{
	if (n <= tok->n_ids)
		return 0;
	char **tokens = realloc(tok->tokens, (size_t)n * sizeof(*tokens));
	if (tokens)
		tok->tokens = tokens;
	uint32_t *len = realloc(tok->token_len, (size_t)n * sizeof(*len));
	if (len)
		tok->token_len = len;
	uint8_t *flags = realloc(tok->flags, (size_t)n);
	if (flags)
		tok->flags = flags;
	if (!tokens || !len || !flags)
		return -1;
	for (int32_t i = tok->n_ids; i < n; i++) {
		tokens[i] = NULL;
		len[i] = 0;
		flags[i] = 0;
	}
	tok->n_ids = n;
	return 0;
}

int rl_tok_add_id(struct rl_tokenizer *tok, int32_t id, char *s, size_t len)
{
	if (ensure_ids(tok, id + 1))
		return -1;
	tok->tokens[id] = s;
	tok->token_len[id] = (uint32_t)len;
	return 0;
}

/* The id tables are sized by the largest id, so ids are bounded by what the
 * file holds before they size anything: real files number the vocabulary's
 * entries, then the added tokens not in it, from 0, and a 1 KB file naming
 * the id 2^31 - 2 must not ask for 28 GB. */
static int load_vocab(struct rl_tokenizer *tok, json_t *vocab, size_t n_added_listed, char *err,
                      size_t errlen)
{
	size_t bytes = 0;
	json_int_t max_id = -1, n_ids;

	if (!json_is_object(vocab))
		return rl_tok_err(err, errlen, tok->path, "model.vocab: expected an object");
	n_ids = (json_int_t)json_object_size(vocab) + (json_int_t)n_added_listed;
	if (n_ids > INT32_MAX)
		n_ids = INT32_MAX;
	for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
		json_t *v = json_object_iter_value(it);
		json_int_t id = json_integer_value(v);

		if (!json_is_integer(v) || id < 0)
			return rl_tok_err(err, errlen, tok->path,
			                  "model.vocab[\"%s\"]: expected a non-negative integer id",
			                  json_object_iter_key(it));
		if (id >= n_ids)
			return rl_tok_err(err, errlen, tok->path,
			                  "model.vocab[\"%s\"]: id %lld is past the %lld ids that "
			                  "model.vocab's %zu entries and added_tokens' %zu can "
			                  "have",
			                  json_object_iter_key(it), (long long)id, (long long)n_ids,
			                  json_object_size(vocab), n_added_listed);
		max_id = id > max_id ? id : max_id;
		bytes += json_object_iter_key_len(it) + 1;
	}
	tok->vocab_count = json_object_size(vocab);
	tok->arena = malloc(bytes ? bytes : 1);
	if (!tok->arena || ensure_ids(tok, (int32_t)(max_id + 1)) ||
	    rl_tok_vocab_init(&tok->vocab, tok->vocab_count))
		return rl_tok_err(err, errlen, tok->path, "model.vocab: out of memory");

	char *p = tok->arena;
	for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
		int32_t id = (int32_t)json_integer_value(json_object_iter_value(it));
		size_t len = json_object_iter_key_len(it);

		if (tok->tokens[id])
			return rl_tok_err(err, errlen, tok->path,
			                  "model.vocab: id %d is given to both \"%s\" and \"%s\"",
			                  id, tok->tokens[id], json_object_iter_key(it));
		memcpy(p, json_object_iter_key(it), len + 1);
		tok->tokens[id] = p;
		tok->token_len[id] = (uint32_t)len;
		p += len + 1;
		rl_tok_vocab_insert(tok, id); /* keys of one JSON object are distinct */
	}
	return 0;
}

/* One merge, either "left right" (older files) or ["left", "right"]. */
static int merge_parts(json_t *m, const char **a, size_t *alen, const char **b, size_t *blen)
{
	if (json_is_string(m)) {
		const char *s = json_string_value(m), *sp = strchr(s, ' ');
		size_t len = json_string_length(m);

		/* `tokenizers` splits on every space and wants exactly two parts */
		if (!sp || sp == s || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)) ||
		    (size_t)(sp + 1 - s) == len)
			return -1;
		*a = s;
		*alen = (size_t)(sp - s);
		*b = sp + 1;
		*blen = len - *alen - 1;
		return 0;
	}
	if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
	    json_is_string(json_array_get(m, 1))) {
		*a = json_string_value(json_array_get(m, 0));
		*alen = json_string_length(json_array_get(m, 0));
		*b = json_string_value(json_array_get(m, 1));
		*blen = json_string_length(json_array_get(m, 1));
		return 0;
	}
	return -1;
}

static int load_merges(struct rl_tokenizer *tok, json_t *merges, char *err, size_t errlen)
{
	size_t n = json_array_size(merges), cap = 64;
	char *buf = malloc(cap);

	if (!json_is_array(merges))
		n = 0;
	if (!json_is_array(merges) || !buf || rl_tok_merges_init(&tok->merges, n)) {
		free(buf);
		return rl_tok_err(err, errlen, tok->path, "model.merges: %s",
		                  json_is_array(merges) ? "out of memory" : "expected an array");
	}
	if (n >= INT32_MAX) {
		free(buf);
		return rl_tok_err(err, errlen, tok->path, "model.merges: too many");
	}
	for (size_t i = 0; i < n; i++) {
		const char *a, *b;
		size_t alen, blen;

		if (merge_parts(json_array_get(merges, i), &a, &alen, &b, &blen)) {
			free(buf);
			return rl_tok_err(
			    err, errlen, tok->path,
			    "model.merges[%zu]: expected \"left right\" or [left, right]", i);
		}
		int32_t ia = rl_tok_vocab_find(tok, a, alen), ib = rl_tok_vocab_find(tok, b, blen);
		if (alen + blen + 1 > cap) {
			char *nb = realloc(buf, cap = 2 * (alen + blen + 1));
			if (!nb) {
				free(buf);
				return rl_tok_err(err, errlen, tok->path, "out of memory");
			}
			buf = nb;
		}
		memcpy(buf, a, alen);
		memcpy(buf + alen, b, blen);
		buf[alen + blen] = 0;
		int32_t inew = rl_tok_vocab_find(tok, buf, alen + blen);
		if (ia < 0 || ib < 0 || inew < 0) {
			const char *missing = ia < 0 ? a : ib < 0 ? b : buf;
			int mlen = (int)(ia < 0 ? alen : ib < 0 ? blen : alen + blen);
			int rc = rl_tok_err(err, errlen, tok->path,
			                    "model.merges[%zu]: \"%.*s\" is not in model.vocab", i,
			                    mlen, missing);
			free(buf);
			return rc;
		}
		rl_tok_merges_put(&tok->merges, ia, ib, (int32_t)i, inew);
	}
	free(buf);
	return 0;
}

/* A string option that changes results unless null (or ""). */
static int null_or_empty(struct rl_tokenizer *tok, json_t *model, const char *key, char *err,
                         size_t errlen)
{
	json_t *v = json_object_get(model, key);

	if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0))
		return 0;
	return rl_tok_err(err, errlen, tok->path, "model.%s: only null or \"\" is supported", key);
}

static int bool_field(struct rl_tokenizer *tok, json_t *obj, const char *name, const char *key,
                      bool *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v)) {
		*out = false;
		return 0;
	}
	if (!json_is_boolean(v))
		return rl_tok_err(err, errlen, tok->path, "%s.%s: expected true or false", name,
		                  key);
	*out = json_is_true(v);
	return 0;
}

int rl_tok_load_model(struct rl_tokenizer *tok, json_t *model, size_t n_added_listed, char *err,
                      size_t errlen)
{
	json_t *type = json_object_get(model, "type"), *v;
	bool byte_fallback = false;

	if (!json_is_object(model))
		return rl_tok_err(err, errlen, tok->path, "model: expected an object");
	if (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "model.type: \"%s\" is not supported (only \"BPE\")",
		                  json_is_string(type) ? json_string_value(type) : "(missing)");
	v = json_object_get(model, "dropout");
	if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0.0))
		return rl_tok_err(err, errlen, tok->path,
		                  "model.dropout: only null is supported (dropout is random)");
	if (null_or_empty(tok, model, "continuing_subword_prefix", err, errlen) ||
	    null_or_empty(tok, model, "end_of_word_suffix", err, errlen) ||
	    bool_field(tok, model, "model", "fuse_unk", &tok->fuse_unk, err, errlen) ||
	    bool_field(tok, model, "model", "byte_fallback", &byte_fallback, err, errlen) ||
	    bool_field(tok, model, "model", "ignore_merges", &tok->ignore_merges, err, errlen))
		return -1;
	if (byte_fallback)
		return rl_tok_err(
		    err, errlen, tok->path,
		    "model.byte_fallback: true is not supported (byte-level BPE only)");
	if (load_vocab(tok, json_object_get(model, "vocab"), n_added_listed, err, errlen) ||
	    load_merges(tok, json_object_get(model, "merges"), err, errlen))
		return -1;

	v = json_object_get(model, "unk_token");
	tok->unk_id = -1;
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return rl_tok_err(err, errlen, tok->path,
			                  "model.unk_token: expected a string or null");
		tok->unk_id = rl_tok_vocab_find(tok, json_string_value(v), json_string_length(v));
		if (tok->unk_id < 0)
			return rl_tok_err(err, errlen, tok->path,
			                  "model.unk_token: \"%s\" is not in model.vocab",
			                  json_string_value(v));
	}
	for (int b = 0; b < 256; b++) {
		uint32_t cp = rl_tok_byte_to_char((unsigned char)b);
		char s[2] = {(char)cp, 0};
		size_t len = 1;

		if (cp >= 0x80) { /* all below U+0800: two bytes */
			s[0] = (char)(0xc0 | cp >> 6);
			s[1] = (char)(0x80 | (cp & 0x3f));
			len = 2;
		}
		tok->byte_ids[b] = rl_tok_vocab_find(tok, s, len);
	}
	return 0;
}
