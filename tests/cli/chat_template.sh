#!/bin/sh
# rlrun tokenize --chat: a conversation through a model's real chat template
# (Qwen3 with enable_thinking, Llama 3.2 with its date) equals transformers'
# apply_chat_template text byte for byte, and its ids equal `tokenizers`'
# (tests/fixtures/make_chat_fixtures.py wrote both); errors name the place.
. "$(dirname "$0")/lib.sh"

fix=$top_srcdir/tests/fixtures/chat_templates/cli
models=$top_srcdir/tests/fixtures/models
# strftime_now's date: the fixtures were written at this time
SOURCE_DATE_EPOCH=1764158400 TZ=UTC
export SOURCE_DATE_EPOCH TZ

for pair in qwen3:qwen2 llama32:llama; do
	name=${pair%%:*} model=${pair#*:}
	dir=$WORK/$name
	mkdir -p "$dir"
	cp "$models/$model/tokenizer.json" "$dir/"
	cp "$fix/$name.tokenizer_config.json" "$dir/tokenizer_config.json"

	expect_status 0 "$name: --text-only" -- "$RLRUN" tokenize --model "$dir" \
		--chat "$fix/$name.chat.json" --add-generation-prompt --text-only
	if cmp -s "$WORK/out" "$fix/$name.expected.txt"; then
		ok "$name: the text is transformers' to the byte"
	else
		not_ok "$name: the text differs from transformers':"
		diff "$WORK/out" "$fix/$name.expected.txt" | head -20
	fi

	expect_status 0 "$name: text and ids" -- "$RLRUN" tokenize --model "$dir" \
		--chat "$fix/$name.chat.json" --add-generation-prompt
	if [ "$(tail -n 1 "$WORK/out")" = "$(cat "$fix/$name.expected.ids")" ]; then
		ok "$name: the ids are tokenizers' (special tokens as single ids)"
	else
		not_ok "$name: ids $(tail -n 1 "$WORK/out"), expected $(cat "$fix/$name.expected.ids")"
	fi
	# the ids follow the text and one newline
	lines=$(($(wc -l <"$fix/$name.expected.txt") + 2))
	[ "$(wc -l <"$WORK/out")" = "$lines" ] && ok "$name: text, newline, ids" ||
		not_ok "$name: $(wc -l <"$WORK/out") lines, expected $lines"
done

# the chat.json's own add_generation_prompt, and chat_template.jinja over
# the config's template
dir=$WORK/qwen3
printf '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}' \
	>"$WORK/agp.json"
expect_status 0 "add_generation_prompt from the file" -- "$RLRUN" tokenize --model "$dir" \
	--chat "$WORK/agp.json" --text-only
printf '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n' >"$WORK/want"
cmp -s "$WORK/out" "$WORK/want" && ok "the file's add_generation_prompt is honoured" ||
	not_ok "the file's add_generation_prompt: got [$(cat "$WORK/out")]"
printf '{%% for m in messages %%}[{{ m.role }}]{%% endfor %%}' >"$dir/chat_template.jinja"
expect_status 0 "chat_template.jinja" -- "$RLRUN" tokenize --model "$dir" --chat "$WORK/agp.json" --text-only
[ "$(cat "$WORK/out")" = "[user]" ] && ok "chat_template.jinja is read over tokenizer_config.json's" ||
	not_ok "chat_template.jinja: got [$(cat "$WORK/out")]"

# errors: the template's place, the file, what is missing
printf '{%% for m in messages %%}\n  {{ m.content | wordwrap }}{%% endfor %%}' >"$dir/chat_template.jinja"
expect_status 1 "a filter the subset lacks" -- "$RLRUN" tokenize --model "$dir" --chat "$WORK/agp.json" --text-only
expect_grep "$WORK/err" "chat_template.jinja:2:18: the filter 'wordwrap' is not supported" \
	"the error names the file, line, column and filter"
[ ! -s "$WORK/out" ] && ok "nothing is printed on error" || not_ok "output on error: $(cat "$WORK/out")"
printf '{{ raise_exception("no system role here") }}' >"$dir/chat_template.jinja"
expect_status 1 "raise_exception" -- "$RLRUN" tokenize --model "$dir" --chat "$WORK/agp.json"
expect_grep "$WORK/err" "chat_template.jinja:1:4: the template raised an error: no system role here" \
	"raise_exception's message and place"
rm "$dir/chat_template.jinja"
printf '{"messages": {"role": "user"}}' >"$WORK/bad.json"
expect_status 1 "messages not a list" -- "$RLRUN" tokenize --model "$dir" --chat "$WORK/bad.json"
expect_grep "$WORK/err" "bad.json: expected \{\"messages\": \[" "the file is named"
expect_status 1 "a model without a template" -- "$RLRUN" tokenize --model "$models/qwen2" --chat "$WORK/agp.json"
expect_grep "$WORK/err" "has no chat template" "a missing template says so"
# a training run's prompts are the template's text and its tokens, with no
# second <|begin_of_text|>: each sample holds the prompt's ids (as counted
# by tokenize --chat, checked against tokenizers' above) and its response
model=$WORK/llama-model
cp -r "$models/llama" "$model"
cp "$fix/llama32.tokenizer_config.json" "$model/tokenizer_config.json"
printf '{"problem": "What is 2+2?", "expected_answer": "4"}\n' >"$WORK/d.jsonl"
printf '{"messages": [{"role": "user", "content": "What is 2+2?"}]}' >"$WORK/c.json"
expect_status 0 "the prompt's ids" -- "$RLRUN" tokenize --model "$model" --chat "$WORK/c.json" \
	--add-generation-prompt
prompt_ids=$(tail -n 1 "$WORK/out" | tr ',' '\n' | wc -l)
(cd "$WORK" && "$RLRUN" train policy.model_name="$model" grpo.max_num_steps=1 \
	grpo.num_prompts_per_step=1 grpo.num_generations_per_prompt=2 \
	policy.train_global_batch_size=2 policy.train_micro_batch_size=2 \
	policy.generation.max_new_tokens=4 policy.max_total_sequence_length=256 \
	data.dataset_name=jsonl data.train.path=d.jsonl logger.log_dir=run) >"$WORK/out" 2>"$WORK/err" &&
	ok "a run over the template" || { not_ok "a run over the template"; sed 's/^/  | /' "$WORK/err" | head; }
expect_grep "$WORK/out" "prompts through the chat template of $model/tokenizer_config.json" \
	"the run says which template its prompts go through"
tokens=$(sed -n 's/.*"tokens":\([0-9]*\).*/\1/p' "$WORK/run/metrics.jsonl")
resp=$(sed -n 's/.*"response_tokens_mean":\([0-9.]*\).*/\1/p' "$WORK/run/metrics.jsonl")
want=$(awk -v p="$prompt_ids" -v r="$resp" 'BEGIN { printf "%d", 2 * (p + r) }')
[ "$tokens" = "$want" ] && ok "2 samples of $prompt_ids prompt ids and their responses: $tokens tokens" ||
	not_ok "the step's tokens: $tokens, expected 2 x ($prompt_ids + $resp) = $want"

# policy.tokenizer.chat_template_kwargs: a mapping, printed back as one
printf 'data:\n  dataset_name: arithmetic\npolicy:\n  model_name: builtin:tiny-llama\n  tokenizer:\n    chat_template_kwargs: {enable_thinking: false, tag: "7"}\n' >"$WORK/kw.yaml"
expect_status 0 "chat_template_kwargs" -- "$RLRUN" config "$WORK/kw.yaml"
expect_grep "$WORK/out" "^    chat_template_kwargs: \{enable_thinking: false, tag: ['\"]7['\"]\}$" \
	"the mapping is printed back as a mapping, the quoted 7 a string"
cp "$WORK/out" "$WORK/kw2.yaml"
expect_status 0 "the printed config reads back" -- "$RLRUN" config "$WORK/kw2.yaml"
if [ "$(sed 1d "$WORK/out")" = "$(sed 1d "$WORK/kw2.yaml")" ]; then ok "and prints the same"; else
	not_ok "it prints differently"
fi
expect_status 2 "chat_template_kwargs not a mapping" -- "$RLRUN" config "$WORK/kw.yaml" \
	policy.tokenizer.chat_template_kwargs=7
expect_grep "$WORK/err" "policy.tokenizer.chat_template_kwargs: expected a mapping or null, got 7" \
	"the error names the key"
expect_status 2 "--text-only without --chat" -- "$RLRUN" tokenize --model "$dir" --text hi --text-only
finish
