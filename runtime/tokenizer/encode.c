/* Text to ids in `tokenizers`' order: added tokens that are not normalized
 * are cut out of the raw text (leftmost, then longest), the rest is
 * normalized piece by piece, normalized added tokens are cut out of that,
 * what is left goes through the pre-tokenizer and BPE, and the
 * post-processor's template wraps the result. */
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer/internal.h"

void rl_tok_ids_push(struct rl_tok_ids *ids, int32_t id)
{
	if (!ids->ok)
		return;
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? 2 * ids->cap : 64;
		int32_t *v = realloc(ids->v, cap * sizeof(*v));

		if (!v) {
			ids->ok = false;
			return;
		}
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
}

/* The first added token of this kind in s[from..len): returns its start (len
 * if none), its length and id. Per first byte the list is longest first, so
 * the first hit at the leftmost position is aho-corasick's LeftmostLongest. */
static size_t find_added(const struct rl_tokenizer *tok, int kind, const char *s, size_t len,
                         size_t from, size_t *mlen, int32_t *id)
{
	const size_t *start = tok->start[kind];

	for (size_t i = from; i < len; i++) {
		unsigned char b = (unsigned char)s[i];

		for (size_t j = start[b]; j < start[b + 1]; j++) {
			const struct rl_tok_added *a = &tok->added[tok->order[kind][j]];

			if (a->len <= len - i && memcmp(s + i, a->match, a->len) == 0) {
				*mlen = a->len;
				*id = a->id;
				return i;
			}
		}
	}
	return len;
}

struct ctx {
	const struct rl_tokenizer *tok;
	pcre2_match_data *md;
	struct rl_tok_ids *out;
	char *err;
	size_t errlen;
};

/* kind 0: the raw text; kind 1: a normalized piece between raw added tokens. */
static int encode_piece(struct ctx *c, int kind, const char *s, size_t len)
{
	size_t pos = 0;

	while (pos < len) {
		size_t mlen = 0;
		int32_t id = -1;
		size_t at = find_added(c->tok, kind, s, len, pos, &mlen, &id);

		if (at > pos) {
			const char *gap = s + pos;
			size_t gap_len = at - pos;
			int rc;

			if (kind == 1) {
				rc = rl_tok_pre_tokenize(c->tok, c->md, 0, gap, gap_len, c->out,
				                         c->err, c->errlen);
			} else if (c->tok->nfc) {
				char *norm;
				size_t norm_len;

				if (rl_tok_nfc(gap, gap_len, &norm, &norm_len))
					return rl_tok_err(c->err, c->errlen, c->tok->path,
					                  "encode: NFC failed (out of memory?)");
				rc = encode_piece(c, 1, norm, norm_len);
				free(norm);
			} else {
				rc = encode_piece(c, 1, gap, gap_len);
			}
			if (rc)
				return -1;
		}
		if (at == len)
			break;
		rl_tok_ids_push(c->out, id);
		pos = at + mlen;
	}
	return 0;
}

int rl_tokenizer_encode(const struct rl_tokenizer *tok, const char *text, size_t len,
                        bool add_special, int32_t **ids, size_t *n_ids, char *err, size_t errlen)
{
	struct rl_tok_ids out = {.ok = true};
	struct ctx c = {tok, NULL, &out, err, errlen};
	int rc;

	*ids = NULL;
	*n_ids = 0;
	if (!text && len)
		return rl_tok_err(err, errlen, tok->path, "encode: NULL text");
	c.md = pcre2_match_data_create(1, NULL);
	out.v = malloc(64 * sizeof(*out.v));
	out.cap = 64;
	if (!c.md || !out.v) {
		pcre2_match_data_free(c.md);
		free(out.v);
		return rl_tok_err(err, errlen, tok->path, "encode: out of memory");
	}
	if (add_special)
		for (size_t i = 0; i < tok->n_prefix; i++)
			rl_tok_ids_push(&out, tok->prefix[i]);
	rc = encode_piece(&c, 0, text, len);
	if (add_special)
		for (size_t i = 0; i < tok->n_suffix; i++)
			rl_tok_ids_push(&out, tok->suffix[i]);
	pcre2_match_data_free(c.md);
	if (!rc && !out.ok)
		rc = rl_tok_err(err, errlen, tok->path, "encode: out of memory");
	if (rc) {
		free(out.v);
		return -1;
	}
	*ids = out.v;
	*n_ids = out.n;
	return 0;
}
