#!/bin/sh
# rlrun forward / generate / tokenize against what PyTorch, transformers and
# tokenizers produced for the fixture models (tests/fixtures/fixture_models.py).
. "$(dirname "$0")/lib.sh"

models=$top_srcdir/tests/fixtures/models
llama=$models/llama

# "key":[[a,b,...],...] -> the first inner list, from the fixture's JSON
first_list() { # FILE KEY
	tr -d ' \n' <"$1" | sed -E "s/.*\"$2\":\[\[([0-9,]*)\].*/\1/"
}
greedy_field() { # FILE FIELD: that field of the first greedy generation
	tr -d ' \n' <"$1" | sed -E "s/.*\"greedy\":\[\{\"prompt\":\[([0-9,]*)\],\"output\":\[([0-9,]*)\].*/\\$2/"
}

# ---- forward: raw little-endian fp32 logits of the first fixture sequence
seq0=$(first_list "$models/llama.ref.json" sequences)
expect_status 0 "forward --out" -- "$RLRUN" forward --model "$llama" --ids "$seq0" --out "$WORK/logits.f32"
if [ "$(wc -c <"$WORK/logits.f32")" = "$(wc -c <"$models/llama.seq0.logits.f32")" ]; then
	ok "forward wrote [17 x 512] floats"
else
	not_ok "forward wrote $(wc -c <"$WORK/logits.f32") bytes"
fi
od -An -v -f -w4 "$WORK/logits.f32" >"$WORK/got.txt"
od -An -v -f -w4 "$models/llama.seq0.logits.f32" >"$WORK/want.txt"
if paste "$WORK/got.txt" "$WORK/want.txt" | awk '
	{ d = $1 - $2; if (d < 0) d = -d; if (d > md) md = d; a = $2 < 0 ? -$2 : $2; if (a > mr) mr = a }
	END { printf "max |diff| %g, max |ref| %g\n", md, mr; exit !(NR > 0 && md <= 1e-4 * mr) }'; then
	ok "forward logits match PyTorch within 1e-4 of the largest"
else
	not_ok "forward logits differ from PyTorch"
fi
expect_status 0 "forward without --out" -- "$RLRUN" forward --model "$llama" --ids "$seq0"
expect_grep "$WORK/out" '^forward: 17 tokens x 512 vocabulary$' "forward summary"

# ---- generate: greedy equals transformers' generate()
prompt=$(greedy_field "$models/llama.ref.json" 1)
want_ids=$(greedy_field "$models/llama.ref.json" 2)
expect_status 0 "generate greedy" -- "$RLRUN" generate --model "$llama" --ids "$prompt" \
	--temperature 0 --max-new-tokens 12 --print-ids
expect_grep "$WORK/out" "^ids: $want_ids\$" "greedy tokens equal transformers' ($want_ids)"
expect_grep "$WORK/err" "12 tokens, stopped by max_tokens" "stop reason"

# sampling is reproducible per seed, and the seed matters
"$RLRUN" generate --model "$llama" --ids "$prompt" --seed 7 --top-k 50 --top-p 0.9 --print-ids >"$WORK/s1" 2>/dev/null
"$RLRUN" generate --model "$llama" --ids "$prompt" --seed 7 --top-k 50 --top-p 0.9 --print-ids >"$WORK/s2" 2>/dev/null
"$RLRUN" generate --model "$llama" --ids "$prompt" --seed 8 --top-k 50 --top-p 0.9 --print-ids >"$WORK/s3" 2>/dev/null
if cmp -s "$WORK/s1" "$WORK/s2" && ! cmp -s "$WORK/s1" "$WORK/s3"; then
	ok "sampling: same seed same tokens, other seed other tokens"
else
	not_ok "sampling is not reproducible per seed"
fi
expect_status 0 "generate from a text prompt" -- "$RLRUN" generate --model "$llama" \
	--prompt "Hello" --max-new-tokens 5 --temperature 0.7 --seed 1

# ---- tokenize: ids equal tokenizers' (template token included), and back
for m in llama qwen2; do
	text=$(sed -n 1p "$models/$m.tokenize.txt")
	ids=$(sed -n 2p "$models/$m.tokenize.txt")
	expect_status 0 "tokenize ($m)" -- "$RLRUN" tokenize --model "$models/$m" --text "$text"
	expect_grep "$WORK/out" "^$ids\$" "$m: ids equal tokenizers'"
	expect_status 0 "decode ($m)" -- "$RLRUN" tokenize --model "$models/$m" --decode "$ids" --no-special
	if [ "$(cat "$WORK/out")" = "$text" ]; then ok "$m: decode gives the text back"; else
		not_ok "$m: decode gave '$(cat "$WORK/out")'"
	fi
done

# ---- bad input: a clear message and the right exit status
expect_status 2 "forward without --ids" -- "$RLRUN" forward --model "$llama"
expect_status 2 "forward with a bad id list" -- "$RLRUN" forward --model "$llama" --ids 1,x,3
expect_grep "$WORK/err" "--ids: '1,x,3' is not a comma-separated list" "names the option"
expect_status 1 "forward with an id outside the vocabulary" -- "$RLRUN" forward --model "$llama" --ids 1,512
expect_grep "$WORK/err" "outside the vocabulary" "says why"
expect_status 1 "forward on a directory without a model" -- "$RLRUN" forward --model "$WORK" --ids 1
expect_grep "$WORK/err" "config.json" "names the missing file"
expect_status 2 "generate with both --prompt and --ids" -- "$RLRUN" generate --model "$llama" --prompt a --ids 1
expect_status 2 "generate with a bad temperature" -- "$RLRUN" generate --model "$llama" --ids 1 --temperature -1
expect_grep "$WORK/err" "--temperature" "names the option"
expect_status 1 "decode of an unknown id" -- "$RLRUN" tokenize --model "$llama" --decode 99999

finish
