/* The normalizer (none or NFC) and the pre-tokenizer (Split by regex, then
 * ByteLevel without its own regex) of tokenizer.json: loading, and applying
 * them to a piece of text between added tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uninorm.h>

#include "runtime/tokenizer/internal.h"

static const char *type_of(json_t *obj)
{
	json_t *t = json_object_get(obj, "type");

	return json_is_string(t) ? json_string_value(t) : "(missing)";
}

int rl_tok_load_normalizer(struct rl_tokenizer *tok, json_t *norm, const char *name, char *err,
                           size_t errlen)
{
	const char *type = type_of(norm);

	if (!norm || json_is_null(norm))
		return 0;
	if (strcmp(type, "NFC") == 0) {
		tok->nfc = true;
		return 0;
	}
	if (strcmp(type, "Sequence") == 0) {
		json_t *list = json_object_get(norm, "normalizers");
		char child[256];

		if (!json_is_array(list))
			return rl_tok_err(err, errlen, tok->path,
			                  "%s.normalizers: expected an array", name);
		for (size_t i = 0; i < json_array_size(list); i++) {
			snprintf(child, sizeof(child), "%s.normalizers[%zu]", name, i);
			if (rl_tok_load_normalizer(tok, json_array_get(list, i), child, err,
			                           errlen))
				return -1;
		}
		return 0;
	}
	return rl_tok_err(err, errlen, tok->path,
	                  "%s.type: \"%s\" is not supported (null, NFC, or a Sequence of those)",
	                  name, type);
}

/* add_prefix_space and use_regex default to true in `tokenizers`, so they
 * must be present and false. trim_offsets changes offsets only. */
static int check_byte_level(struct rl_tokenizer *tok, json_t *bl, const char *name, char *err,
                            size_t errlen)
{
	static const char *const keys[] = {"add_prefix_space", "use_regex"};

	for (size_t i = 0; i < 2; i++)
		if (!json_is_false(json_object_get(bl, keys[i])))
			return rl_tok_err(err, errlen, tok->path,
			                  "%s.%s: only false is supported (true or missing changes "
			                  "the pieces)",
			                  name, keys[i]);
	return 0;
}

static int load_split(struct rl_tokenizer *tok, json_t *split, const char *name, char *err,
                      size_t errlen)
{
	json_t *pattern = json_object_get(split, "pattern"), *behavior, *invert;
	json_t *regex = json_object_get(pattern, "Regex");
	char why[256], *pcre;
	int code;
	PCRE2_SIZE at;
	uint32_t min_len;

	if (!json_is_string(regex))
		return rl_tok_err(err, errlen, tok->path,
		                  "%s.pattern: only {\"Regex\": \"...\"} is supported", name);
	behavior = json_object_get(split, "behavior");
	if (!json_is_string(behavior) || strcmp(json_string_value(behavior), "Isolated") != 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "%s.behavior: only \"Isolated\" is supported", name);
	invert = json_object_get(split, "invert");
	if (invert && !json_is_false(invert))
		return rl_tok_err(err, errlen, tok->path, "%s.invert: only false is supported",
		                  name);
	pcre = rl_tok_translate_pattern(json_string_value(regex), why, sizeof(why));
	if (!pcre)
		return rl_tok_err(err, errlen, tok->path, "%s.pattern.Regex: %s", name, why);

	pcre2_code *re =
	    pcre2_compile((PCRE2_SPTR)pcre, PCRE2_ZERO_TERMINATED,
	                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
	free(pcre);
	if (!re) {
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(code, msg, sizeof(msg));
		return rl_tok_err(err, errlen, tok->path, "%s.pattern.Regex: PCRE2: %s", name,
		                  (char *)msg);
	}
	tok->splits[tok->n_splits++] = re;
	/* an empty match would need Oniguruma's exact stepping rules */
	if (pcre2_pattern_info(re, PCRE2_INFO_MINLENGTH, &min_len) != 0 || min_len == 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "%s.pattern.Regex: a pattern that can match nothing is not "
		                  "supported",
		                  name);
	pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter remains if this fails */
	return 0;
}

int rl_tok_load_pre_tokenizer(struct rl_tokenizer *tok, json_t *pre, char *err, size_t errlen)
{
	const char *type = type_of(pre);
	json_t *list;
	size_t n;
	char name[64];

	if (strcmp(type, "ByteLevel") == 0)
		return check_byte_level(tok, pre, "pre_tokenizer", err, errlen);
	if (strcmp(type, "Sequence") != 0)
		return rl_tok_err(
		    err, errlen, tok->path,
		    "pre_tokenizer%s: %s%s%s is not supported (ByteLevel, or a Sequence "
		    "of Split then ByteLevel)",
		    pre && !json_is_null(pre) ? ".type" : "", pre && !json_is_null(pre) ? "\"" : "",
		    pre && !json_is_null(pre) ? type : "null",
		    pre && !json_is_null(pre) ? "\"" : "");
	list = json_object_get(pre, "pretokenizers");
	n = json_array_size(list);
	if (n == 0 || strcmp(type_of(json_array_get(list, n - 1)), "ByteLevel") != 0)
		return rl_tok_err(err, errlen, tok->path,
		                  "pre_tokenizer.pretokenizers: must end with ByteLevel");
	tok->splits = calloc(n, sizeof(*tok->splits));
	if (!tok->splits)
		return rl_tok_err(err, errlen, tok->path, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *p = json_array_get(list, i);

		snprintf(name, sizeof(name), "pre_tokenizer.pretokenizers[%zu]", i);
		if (i + 1 == n)
			return check_byte_level(tok, p, name, err, errlen);
		if (strcmp(type_of(p), "Split") != 0)
			return rl_tok_err(err, errlen, tok->path,
			                  "%s.type: \"%s\" is not supported (only Split before "
			                  "ByteLevel)",
			                  name, type_of(p));
		if (load_split(tok, p, name, err, errlen))
			return -1;
	}
	return 0;
}

static int append(char **buf, size_t *n, size_t *cap, const void *p, size_t len)
{
	if (*n + len > *cap) {
		size_t c = *cap ? *cap : 64;
		char *b;

		while (c < *n + len)
			c *= 2;
		b = realloc(*buf, c);
		if (!b)
			return -1;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *n, p, len);
	*n += len;
	return 0;
}

/* libunistring would turn bytes that are not UTF-8 into U+FFFD, so only the
 * valid runs go through it; bytes that are not UTF-8 are a boundary that
 * nothing composes across. */
int rl_tok_nfc(const char *s, size_t len, char **out, size_t *out_len)
{
	const unsigned char *u = (const unsigned char *)s;
	char *buf = NULL;
	size_t n = 0, cap = 0, run = 0;

	for (size_t i = 0; i <= len;) {
		uint32_t cp = UINT32_MAX;
		size_t k = i < len ? rl_tok_utf8_next(u + i, len - i, &cp) : 0;

		if (cp != UINT32_MAX) {
			i += k;
			continue;
		}
		if (i > run) {
			size_t nlen = 0;
			uint8_t *norm = u8_normalize(UNINORM_NFC, u + run, i - run, NULL, &nlen);

			if (!norm || append(&buf, &n, &cap, norm, nlen)) {
				free(norm);
				free(buf);
				return -1;
			}
			free(norm);
		}
		if (i == len)
			break;
		if (append(&buf, &n, &cap, u + i, k)) {
			free(buf);
			return -1;
		}
		i += k;
		run = i;
	}
	*out = buf;
	*out_len = n;
	return 0;
}

int rl_tok_pre_tokenize(const struct rl_tokenizer *tok, pcre2_match_data *md, size_t k,
                        const char *s, size_t len, struct rl_tok_ids *out, char *err, size_t errlen)
{
	size_t pos = 0, prev = 0;

	if (k == tok->n_splits) {
		rl_tok_bpe(tok, (const unsigned char *)s, len, out);
		return 0;
	}
	while (pos < len) {
		int rc = pcre2_match(tok->splits[k], (PCRE2_SPTR)s, len, pos, 0, md, NULL);

		/* the JIT's stack is small; the interpreter's lives on the heap */
		if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
			rc = pcre2_match(tok->splits[k], (PCRE2_SPTR)s, len, pos, PCRE2_NO_JIT, md,
			                 NULL);
		if (rc == PCRE2_ERROR_NOMATCH)
			break;
		if (rc < 0) {
			PCRE2_UCHAR msg[256];

			pcre2_get_error_message(rc, msg, sizeof(msg));
			return rl_tok_err(err, errlen, tok->path,
			                  "encode: pre_tokenizer split %zu at byte %zu: PCRE2: %s",
			                  k, pos, (char *)msg);
		}
		/* copied out: the next split reuses the match data */
		size_t start = pcre2_get_ovector_pointer(md)[0],
		       end = pcre2_get_ovector_pointer(md)[1];
		if (end <= start || start < pos)
			return rl_tok_err(
			    err, errlen, tok->path,
			    "encode: pre_tokenizer split %zu: empty match at byte %zu", k, pos);
		if (start > prev &&
		    rl_tok_pre_tokenize(tok, md, k + 1, s + prev, start - prev, out, err, errlen))
			return -1;
		if (rl_tok_pre_tokenize(tok, md, k + 1, s + start, end - start, out, err, errlen))
			return -1;
		prev = pos = end;
	}
	if (prev < len)
		return rl_tok_pre_tokenize(tok, md, k + 1, s + prev, len - prev, out, err, errlen);
	return 0;
}
