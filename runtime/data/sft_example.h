/* An SFT example as the model takes it: its text cut into turns as
 * NeMo-RL's sft_processor cuts them, each turn tokenized on its own, and
 * which tokens the loss counts.
 *
 * A problem-and-answer example (data.input_key / output_key) is two turns:
 * the prompt, rendered as GRPO renders its prompts (rl_prompt_render: the
 * system prompt, the prompt template, the chat template with the
 * generation prompt), and the answer: as is without a chat template, with
 * one the text the template writes for an assistant turn holding it (the
 * render of [user, assistant] past the render of [user] with the
 * generation prompt). A conversation (rl_example.messages) is NeMo-RL's
 * get_formatted_message_log: the prompt template applied to the first
 * user message, then message i's turn is the render of messages[0..i]
 * past the first character where it differs from the render of
 * messages[0..i-1], with the generation prompt after user and tool
 * messages when data.add_generation_prompt; without a chat template the
 * passthrough one (the contents one after the other).
 *
 * add_bos puts the BOS token before the first turn unless it starts with
 * it; add_eos puts the EOS text after the last turn unless it already ends
 * with it (before trailing newlines, as Qwen's templates write
 * "<|im_end|>\n"). The turns are tokenized without special tokens. The
 * loss counts the assistant turns (only_unmask_final: the last turn
 * only; train_on_inputs: every token but the first, which nothing
 * predicts). An example of max_len tokens or more is NeMo-RL's overlong
 * one: every turn cut to its first min(4, max_len / turns) tokens and the
 * whole example out of the loss (overlong).
 * defines: struct rl_sft_format, struct rl_sft_tokens, rl_sft_encode, rl_sft_tokens_free */
#ifndef RL_DATA_SFT_EXAMPLE_H
#define RL_DATA_SFT_EXAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/data/dataset.h"
#include "runtime/data/prompt.h"
#include "runtime/tokenizer/tokenizer.h"

struct rl_chat_template;

struct rl_sft_format {
	const struct rl_prompt *prompt;
	/* a conversation's template: prompt->chat, or the passthrough one */
	const struct rl_chat_template *chat;
	const struct rl_tokenizer *tok;
	int32_t bos_id, eos_id; /* -1: the model has none */
	bool add_bos, add_eos, add_generation_prompt, only_unmask_final, train_on_inputs;
	int64_t max_len;
};

struct rl_sft_tokens {
	int32_t *ids;
	uint8_t *mask; /* mask[i]: token i is a target the loss counts */
	int len;
	bool overlong;
};

/* Returns 0 and fills *out (free it with rl_sft_tokens_free), or -1 with
 * the message in err. */
int rl_sft_encode(const struct rl_sft_format *f, const struct rl_example *ex,
                  struct rl_sft_tokens *out, char *err, size_t errlen);
void rl_sft_tokens_free(struct rl_sft_tokens *t);

#endif
