/* A model's chat template and how a conversation goes through it, as
 * transformers' apply_chat_template does: the template sees messages,
 * tools (null unless given), documents (null), add_generation_prompt, the
 * tokenizer's special tokens (bos_token, eos_token, unk_token, pad_token
 * from tokenizer_config.json) and any extra variables (enable_thinking).
 * defines: struct rl_chat_template, rl_chat_template_load_model,
 * rl_chat_template_from_text, rl_chat_template_apply, rl_chat_template_free,
 * rl_chat_template_source, rl_chat_template_special, rl_chat_now, RL_CHAT_PASSTHROUGH */
#ifndef RL_CHAT_CHAT_TEMPLATE_H
#define RL_CHAT_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct rl_chat_template; /* opaque */

/* NeMo-RL's passthrough template (policy.tokenizer.chat_template: null):
 * the messages' contents, one after the other. */
#define RL_CHAT_PASSTHROUGH "{% for message in messages %}{{ message['content'] }}{% endfor %}"

/* The template of the model (or tokenizer) in directory dir: the file
 * chat_template.jinja when there is one (transformers reads it over the
 * config's), else tokenizer_config.json's "chat_template" (a string, or a
 * list of {"name", "template"} of which "default" is taken). *out is NULL
 * (and 0 returned) when the model has none. Errors name the file and key. */
int rl_chat_template_load_model(struct rl_chat_template **out, const char *dir, char *err,
                                size_t errlen);

/* A template given as text; origin names it in messages. The special
 * tokens are read from dir's tokenizer_config.json when dir is not NULL
 * and it has one. */
int rl_chat_template_from_text(struct rl_chat_template **out, const char *text, const char *origin,
                               const char *dir, char *err, size_t errlen);

/* Renders messages (a JSON array of {"role", "content", ...}) with the
 * variables of extra (a JSON object or NULL; "tools" and "documents" among
 * them are the template's tools and documents). *out is malloc'd and
 * NUL-terminated. */
int rl_chat_template_apply(const struct rl_chat_template *t, const json_t *messages,
                           const json_t *extra, bool add_generation_prompt, char **out, size_t *len,
                           char *err, size_t errlen);

/* Where the template came from ("DIR/tokenizer_config.json", a path, ...) */
const char *rl_chat_template_source(const struct rl_chat_template *t);

/* The text of special token NAME ("bos_token", "eos_token", ...) as the
 * template sees it, from tokenizer_config.json; NULL when it has none. */
const char *rl_chat_template_special(const struct rl_chat_template *t, const char *name);

void rl_chat_template_free(struct rl_chat_template *t);

/* The time strftime_now shows: SOURCE_DATE_EPOCH when set (reproducible
 * renders, as reproducible builds use it), else now. */
int64_t rl_chat_now(void);

#endif
