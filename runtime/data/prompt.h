/* What the model is asked: the problem of an example put into the user's
 * prompt template, after the system prompt.
 *
 * Templates are NeMo-RL's prompt files: Python str.format text in which the
 * problem is the one positional argument. "{}" and "{problem}" (the name our
 * configs use) both stand for the problem, any number of times; "{{" and "}}"
 * are literal braces. Every other field ("{0}", "{answer}", "{:>10}") and a
 * lone "{" or "}" is an error, as is a template with no field at all (the
 * problem would silently vanish from the prompt). Backslashes are not
 * special: cot.txt's "\\boxed{{}}" renders as "\\boxed{}", as in Python.
 *
 * With a chat template (policy.tokenizer.chat_template, the model's own by
 * default) the text is NeMo-RL's math data processor's: the system prompt
 * alone through the template ([system], no generation prompt), then the
 * user's prompt alone through it ([user], add_generation_prompt=True),
 * the two texts one after the other; the template writes the special
 * tokens (Llama 3's <|begin_of_text|>), so the tokenizer adds none.
 * defines: struct rl_prompt, rl_prompt_load, rl_prompt_use_chat_template,
 * rl_prompt_chat_template_applies, rl_prompt_render, rl_prompt_user_text, rl_prompt_free */
#ifndef RL_DATA_PROMPT_H
#define RL_DATA_PROMPT_H

#include <stdbool.h>

#include "runtime/config/config.h"

struct rl_chat_template;
struct json_t;

struct rl_prompt {
	char *template_text;           /* validated */
	char *system_text;             /* NULL when there is none */
	char *source;                  /* where the template came from, for messages */
	struct rl_chat_template *chat; /* NULL: plain text */
	struct json_t *chat_vars;      /* policy.tokenizer.chat_template_kwargs, or NULL */
};

/* The separator between the system prompt and the user's prompt when no
 * chat template applies: the two are joined as plain text with a blank line
 * between them. */
#define RL_PROMPT_SYSTEM_SEPARATOR "\n\n"

/* Fills *p from the config:
 *   template: data.prompt_file (the whole file, read as the user, a path
 *     relative to the working directory) or data.prompt_template; setting both
 *     is an error; neither gives "{}" (the problem as is).
 *   system prompt: data.system_prompt_file or data.system_prompt, at most one;
 *     an empty one is the same as none.
 * One trailing newline ("\n" or "\r\n") of a file is removed, because
 * editors add one that nobody means as part of the prompt (NeMo-RL keeps it).
 * Files must be UTF-8 without NUL bytes. The template is validated here so
 * that a typo fails before any training: errors name the source (the file's
 * path or "data.prompt_template") and the 1-based line:column, e.g.
 *   "prompt.txt:2:7: unknown field {answer} ...".
 * Returns 0, or -1 with the message in err and *p zeroed. */
int rl_prompt_load(struct rl_prompt *p, const struct rl_cfg_data *cfg, char *err, size_t errlen);

/* Sets p's chat template from the config: policy.tokenizer.chat_template
 * "default" takes the tokenizer directory's (policy.tokenizer.name: its
 * chat_template.jinja or tokenizer_config.json's chat_template; none, and
 * prompts stay plain text), null NeMo-RL's passthrough template, a path
 * ending in ".jinja" that file, anything else is the template itself;
 * policy.tokenizer.chat_template_kwargs are more variables for it. The
 * template is tried once on a sample problem, so that a template that
 * cannot render these prompts fails before any training. */
int rl_prompt_use_chat_template(struct rl_prompt *p, const struct rl_config *cfg, char *err,
                                size_t errlen);

/* Whether the run's prompts go through a chat template, and so carry their
 * special tokens: the tokenizer must add none. */
int rl_prompt_chat_template_applies(const struct rl_config *cfg, bool *applies, char *err,
                                    size_t errlen);

/* The text given to the model. Plain: the system prompt,
 * RL_PROMPT_SYSTEM_SEPARATOR, then the template with the problem
 * substituted (just the latter without a system prompt). With a chat
 * template: as the header says. The problem is inserted verbatim: braces
 * in it are not fields. Returns malloc'd text, or NULL with err. */
char *rl_prompt_render(const struct rl_prompt *p, const char *problem, char *err, size_t errlen);

/* The user's turn alone: the template with the problem substituted, no
 * system prompt and no chat template (what a chat template is given as the
 * user's content). malloc'd, or NULL when out of memory. */
char *rl_prompt_user_text(const struct rl_prompt *p, const char *problem);

void rl_prompt_free(struct rl_prompt *p);

#endif
