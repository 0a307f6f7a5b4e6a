/* Ids back to text as `tokenizers`' ByteLevel decoder does it: each token's
 * characters map back to bytes (a token with a character outside the map,
 * such as an added token written in plain text, contributes its UTF-8 bytes
 * unchanged), the bytes of all tokens are joined, and the result is made
 * valid UTF-8 by replacing each maximal ill-formed subpart with U+FFFD, the
 * rule of Rust's String::from_utf8_lossy and Python's errors="replace". */
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer/internal.h"

size_t rl_tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char b = s[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
	uint32_t c;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xc2 && b <= 0xdf) {
		need = 1;
		c = b & 0x1f;
	} else if (b >= 0xe0 && b <= 0xef) {
		need = 2;
		c = b & 0x0f;
		lo = b == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
		hi = b == 0xed ? 0x9f : 0xbf; /* no surrogates */
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 3;
		c = b & 0x07;
		lo = b == 0xf0 ? 0x90 : 0x80;
		hi = b == 0xf4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
	} else {
		*cp = UINT32_MAX;
		return 1;
	}
	for (size_t i = 1; i <= need; i++) {
		unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xbf;

		if (i >= n || s[i] < lo_i || s[i] > hi_i) {
			*cp = UINT32_MAX;
			return i;
		}
		c = c << 6 | (s[i] & 0x3f);
	}
	*cp = c;
	return need + 1;
}

struct bytes {
	char *v;
	size_t n, cap;
};

static int put(struct bytes *b, const void *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *v;

		while (cap < b->n + n + 1)
			cap *= 2;
		v = realloc(b->v, cap);
		if (!v)
			return -1;
		b->v = v;
		b->cap = cap;
	}
	memcpy(b->v + b->n, p, n);
	b->n += n;
	return 0;
}

/* One token's bytes: through the byte map when every character is in it. */
static int token_bytes(struct bytes *out, const char *tok, size_t len)
{
	const unsigned char *s = (const unsigned char *)tok;
	size_t start = out->n;

	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = rl_tok_utf8_next(s + i, len - i, &cp);
		int b = cp == UINT32_MAX ? -1 : rl_tok_char_to_byte(cp);

		if (b < 0) {
			out->n = start;
			return put(out, tok, len);
		}
		unsigned char c = (unsigned char)b;
		if (put(out, &c, 1))
			return -1;
		i += k;
	}
	return 0;
}

static int lossy_utf8(const struct bytes *in, struct bytes *out)
{
	static const unsigned char fffd[3] = {0xef, 0xbf, 0xbd};
	const unsigned char *s = (const unsigned char *)in->v;

	for (size_t i = 0; i < in->n;) {
		uint32_t cp;
		size_t k = rl_tok_utf8_next(s + i, in->n - i, &cp);

		if (cp == UINT32_MAX ? put(out, fffd, 3) : put(out, s + i, k))
			return -1;
		i += k;
	}
	if (put(out, "", 0))
		return -1;
	out->v[out->n] = 0;
	return 0;
}

int rl_tokenizer_decode(const struct rl_tokenizer *tok, const int32_t *ids, size_t n,
                        bool skip_special, char **text, size_t *len, char *err, size_t errlen)
{
	struct bytes raw = {0}, out = {0};

	*text = NULL;
	*len = 0;
	for (size_t i = 0; i < n; i++) {
		int32_t id = ids[i];

		if (id < 0 || id >= tok->n_ids || !tok->tokens[id]) {
			free(raw.v);
			return rl_tok_err(err, errlen, tok->path,
			                  "decode: id %d (position %zu) is not in the vocabulary",
			                  id, i);
		}
		if (skip_special && (tok->flags[id] & RL_TOK_SPECIAL))
			continue;
		if (token_bytes(&raw, tok->tokens[id], tok->token_len[id]))
			goto oom;
	}
	if (lossy_utf8(&raw, &out))
		goto oom;
	free(raw.v);
	*text = out.v;
	*len = out.n;
	return 0;
oom:
	free(raw.v);
	free(out.v);
	return rl_tok_err(err, errlen, tok->path, "decode: out of memory");
}
