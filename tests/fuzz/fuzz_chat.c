/* libFuzzer target for the chat-template engine: any bytes as a template,
 * compiled and rendered over a conversation with a system prompt, thinking,
 * a tool call and a tool result, under small limits (a template is
 * untrusted input: it must end, within its bounds, with text or an error).
 * `make fuzz-chat` builds and runs it from the real templates; not in CI. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/chat/jinja.h"

static const char conversation[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"},"
    " {\"role\": \"user\", \"content\": \"<tool_response>x</tool_response>\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\na\\n</think>\\n\\nb\","
    "  \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5]}}}]},"
    " {\"role\": \"tool\", \"content\": \"r\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false, \"bos_token\": \"<s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static json_t *vars;
	struct rl_jinja_limits lim = RL_JINJA_LIMITS_DEFAULT;
	struct rl_jinja *t;
	char err[512], *out;
	size_t len;

	if (!vars && !(vars = json_loads(conversation, 0, NULL)))
		abort();
	lim.max_steps = 100000, lim.max_output = 1 << 20, lim.max_memory = 16 << 20;
	if (rl_jinja_compile(&t, (const char *)data, size, "fuzz.jinja", err, sizeof err))
		return 0;
	if (!rl_jinja_render(t, vars, 0, &lim, &out, &len, err, sizeof err))
		free(out);
	rl_jinja_free(t);
	return 0;
}
