/* A Jinja subset, enough for the chat templates of Hugging Face models
 * (Llama 3.x, Qwen2.5, Qwen3 and the like), rendering as transformers'
 * apply_chat_template does: its environment (trim_blocks, lstrip_blocks,
 * loop controls, {% generation %}), its tojson, raise_exception,
 * strftime_now and namespace. A template is untrusted input: its parsing
 * and rendering are bounded (nesting, steps, memory, output), and whatever
 * it uses that the subset lacks is an error naming the place, never a
 * silently different text. Errors read "NAME:LINE:COLUMN: what".
 * defines: struct rl_jinja, struct rl_jinja_limits, rl_jinja_compile,
 * rl_jinja_render, rl_jinja_free, RL_JINJA_LIMITS_DEFAULT */
#ifndef RL_CHAT_JINJA_H
#define RL_CHAT_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct rl_jinja; /* a compiled template */

struct rl_jinja_limits {
	size_t max_output;  /* bytes of rendered text */
	size_t max_memory;  /* bytes of values made while rendering */
	int max_depth;      /* nested evaluation */
	uint64_t max_steps; /* statements, loop iterations and expression nodes */
};
#define RL_JINJA_LIMITS_DEFAULT                                                                    \
	{                                                                                          \
		.max_output = 16u << 20, .max_memory = 256u << 20, .max_depth = 256,               \
		.max_steps = 20000000                                                              \
	}

/* Compiles len bytes of template text; name is what messages call it (the
 * file's path). Returns 0, or -1 with the message in err. */
int rl_jinja_compile(struct rl_jinja **out, const char *text, size_t len, const char *name,
                     char *err, size_t errlen);

/* Renders with the variables of the JSON object vars (messages,
 * add_generation_prompt, bos_token, ...); now is the time strftime_now
 * formats (seconds since the epoch, shown in local time). *out is malloc'd
 * and NUL-terminated, *len excludes the NUL. Returns 0 or -1 with err. */
int rl_jinja_render(const struct rl_jinja *t, const json_t *vars, int64_t now,
                    const struct rl_jinja_limits *limits, char **out, size_t *len, char *err,
                    size_t errlen);

void rl_jinja_free(struct rl_jinja *t);

#endif
