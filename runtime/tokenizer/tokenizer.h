/* Hugging Face tokenizer.json, byte-level BPE as Llama 3 and Qwen2/3 ship it:
 * added (special) tokens split out first, the normalizer (none or NFC), the
 * pre-tokenizer regex through PCRE2 with Unicode properties, the byte-to-
 * unicode map, merges by rank, the post-processor's template, and decoding
 * back to UTF-8. Encoding equals `tokenizers`' encode() id for id.
 * defines: struct rl_tokenizer, rl_tokenizer_load, rl_tokenizer_load_json,
 * rl_tokenizer_free,
 * rl_tokenizer_encode, rl_tokenizer_decode, rl_tokenizer_vocab_size,
 * rl_tokenizer_token_to_id, rl_tokenizer_id_to_token */
#ifndef RL_TOKENIZER_TOKENIZER_H
#define RL_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_tokenizer; /* opaque */

/* PATH is a tokenizer.json or a directory holding one. Returns -1 with a
 * message naming the file and the JSON path of the problem. */
int rl_tokenizer_load(struct rl_tokenizer **out, const char *path, char *err, size_t errlen);
/* The same from the text of a tokenizer.json; origin names it in messages. */
int rl_tokenizer_load_json(struct rl_tokenizer **out, const char *json, size_t len,
                           const char *origin, char *err, size_t errlen);
void rl_tokenizer_free(struct rl_tokenizer *tok);

/* Encodes len bytes of text (any bytes: invalid UTF-8 is encoded byte by byte
 * rather than refused). add_special applies the post-processor's template
 * (Llama 3's <|begin_of_text|>). *ids is malloc'd; the caller frees it. */
int rl_tokenizer_encode(const struct rl_tokenizer *tok, const char *text, size_t len,
                        bool add_special, int32_t **ids, size_t *n_ids, char *err, size_t errlen);
/* Decodes to UTF-8, replacing invalid sequences with U+FFFD as transformers
 * does; skip_special drops special added tokens. *text is malloc'd and
 * NUL-terminated; *len excludes the NUL. Ids outside the vocabulary are an
 * error. */
int rl_tokenizer_decode(const struct rl_tokenizer *tok, const int32_t *ids, size_t n,
                        bool skip_special, char **text, size_t *len, char *err, size_t errlen);

/* One more than the largest id, added tokens included. */
int rl_tokenizer_vocab_size(const struct rl_tokenizer *tok);
/* -1 when the token is unknown. */
int32_t rl_tokenizer_token_to_id(const struct rl_tokenizer *tok, const char *token);
/* The token's string as stored (byte-level alphabet), NULL if id is unknown. */
const char *rl_tokenizer_id_to_token(const struct rl_tokenizer *tok, int32_t id);

#endif
