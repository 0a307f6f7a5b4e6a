/* What the tokenizer's files share: the loaded tables, the loaders of each
 * part of tokenizer.json, and the steps of encoding.
 * defines: struct rl_tokenizer, struct rl_tok_added, struct rl_tok_ids,
 * rl_tok_ids_push, rl_tok_err, rl_tok_add_id, rl_tok_vocab_*, rl_tok_merges_*,
 * rl_tok_load_model, rl_tok_load_normalizer, rl_tok_load_pre_tokenizer,
 * rl_tok_translate_pattern, rl_tok_nfc, rl_tok_pre_tokenize, rl_tok_bpe,
 * rl_tok_byte_to_char, rl_tok_char_to_byte, rl_tok_utf8_next */
#ifndef RL_TOKENIZER_INTERNAL_H
#define RL_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/tokenizer/tokenizer.h"

enum { RL_TOK_ADDED = 1, RL_TOK_SPECIAL = 2 };

struct rl_tok_added {
	char *content; /* as in the file; tokens[id] may point here */
	char *match;   /* the content, NFC'd for normalized tokens: what the text is searched for */
	size_t len;
	int32_t id;
	bool normalized;
};

/* Open addressing, power-of-two sizes, linear probing. */
struct rl_tok_vocab {
	int32_t *slots; /* ids, -1 = empty; keys are the ids' token strings */
	size_t mask;
};

struct rl_tok_merge {
	uint64_t key; /* left id << 32 | right id */
	int32_t rank; /* -1 = empty slot */
	int32_t new_id;
};

struct rl_tok_merges {
	struct rl_tok_merge *slots;
	size_t mask;
};

struct rl_tokenizer {
	char *path;

	/* every id, model and added: its string and flags; NULL where no token */
	int32_t n_ids;
	char **tokens;
	uint32_t *token_len;
	uint8_t *flags;
	char *arena; /* the model vocabulary's strings */

	/* model: BPE */
	struct rl_tok_vocab vocab;
	size_t vocab_count;
	struct rl_tok_merges merges;
	int32_t byte_ids[256]; /* the single-character token of each byte, -1 if none */
	bool ignore_merges;
	int32_t unk_id; /* -1 = none: characters outside the vocabulary are dropped */
	bool fuse_unk;

	/* added tokens, in the file's order; a search list per kind, sorted by
	 * first byte, longer first, with per-byte starts */
	struct rl_tok_added *added;
	size_t n_added;
	size_t *order[2]; /* [0]: matched in the raw text, [1]: after normalization */
	size_t start[2][257];

	bool nfc;
	pcre2_code **splits;
	size_t n_splits;

	/* post-processor, single sequence: prefix $A suffix */
	int32_t *prefix, *suffix;
	size_t n_prefix, n_suffix;
};

/* A growing id array; ok goes false on allocation failure. */
struct rl_tok_ids {
	int32_t *v;
	size_t n, cap;
	bool ok;
};

void rl_tok_ids_push(struct rl_tok_ids *ids, int32_t id);

/* Formats "PATH: MSG" into err; returns -1. */
int rl_tok_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records id's string (not copied), growing the id tables. */
int rl_tok_add_id(struct rl_tokenizer *tok, int32_t id, char *s, size_t len);
int rl_tok_vocab_init(struct rl_tok_vocab *v, size_t n);
/* The ids' strings come from tok->tokens. Returns the id already there on a clash, else -1. */
int32_t rl_tok_vocab_insert(const struct rl_tokenizer *tok, int32_t id);
int32_t rl_tok_vocab_find(const struct rl_tokenizer *tok, const char *s, size_t len);
int rl_tok_merges_init(struct rl_tok_merges *m, size_t n);
void rl_tok_merges_put(struct rl_tok_merges *m, int32_t a, int32_t b, int32_t rank, int32_t new_id);
const struct rl_tok_merge *rl_tok_merges_find(const struct rl_tok_merges *m, int32_t a, int32_t b);

/* Each takes the object at JSON path NAME; fills tok. */
/* n_added_listed: the length of added_tokens, which bounds the vocabulary's ids
 * with its entries. */
int rl_tok_load_model(struct rl_tokenizer *tok, json_t *model, size_t n_added_listed, char *err,
                      size_t errlen);
int rl_tok_load_normalizer(struct rl_tokenizer *tok, json_t *norm, const char *name, char *err,
                           size_t errlen);
int rl_tok_load_pre_tokenizer(struct rl_tokenizer *tok, json_t *pre, char *err, size_t errlen);

/* Oniguruma pattern (what `tokenizers` compiles) -> PCRE2 pattern with the
 * same meaning; malloc'd. */
char *rl_tok_translate_pattern(const char *onig, char *why, size_t whylen);

/* NFC of valid UTF-8 runs; bytes that are not UTF-8 pass unchanged. *out malloc'd. */
int rl_tok_nfc(const char *s, size_t len, char **out, size_t *out_len);

/* Splits s by splits[k] (Isolated), recursing to k + 1, then BPE. */
int rl_tok_pre_tokenize(const struct rl_tokenizer *tok, pcre2_match_data *md, size_t k,
                        const char *s, size_t len, struct rl_tok_ids *out, char *err,
                        size_t errlen);

/* One pre-token's bytes to ids. */
void rl_tok_bpe(const struct rl_tokenizer *tok, const unsigned char *s, size_t len,
                struct rl_tok_ids *out);

/* GPT-2's byte-to-unicode map: the code point standing for byte b. */
uint32_t rl_tok_byte_to_char(unsigned char b);
/* Inverse; -1 for code points that stand for no byte. */
int rl_tok_char_to_byte(uint32_t cp);

/* Length of the UTF-8 sequence at s (n > 0 bytes left) and its code point,
 * or, for bytes that are not UTF-8, the length of the maximal ill-formed
 * subpart (at least 1) and *cp = UINT32_MAX. */
size_t rl_tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

#endif
