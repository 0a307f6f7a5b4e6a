#!/bin/sh
# rlrun's command line as a user meets it: exit statuses, the resolved
# config, errors with positions, the built-in default.
. "$(dirname "$0")/lib.sh"
tiny=$top_srcdir/etc/examples/grpo-tiny.yaml

expect_status 0 "rlrun --version" -- "$RLRUN" --version
expect_grep "$WORK/out" '^rlrun \(slurm-rl\) [0-9]+\.[0-9]+\.[0-9]+$' "version line"
expect_status 0 "rlrun --help" -- "$RLRUN" --help
expect_grep "$WORK/out" 'config \[CONFIG\]' "help lists config"
expect_status 2 "rlrun without a command is a usage error" -- "$RLRUN"
expect_status 2 "unknown command" -- "$RLRUN" frobnicate

expect_status 2 "rlrun ckpt without a subcommand is a usage error" -- "$RLRUN" ckpt "$tiny"
expect_grep "$WORK/err" "usage: rlrun ckpt list" "  and shows the usage"

expect_status 0 "config with an override" -- "$RLRUN" config "$tiny" grpo.num_prompts_per_step=3
cp "$WORK/out" "$WORK/resolved.yaml"
# the value sits under grpo: (two-space indent, right after the section line)
if awk '/^grpo:$/ {g=1; next} /^[^ ]/ {g=0} g && /^  num_prompts_per_step: 3$/ {found=1} END {exit !found}' "$WORK/resolved.yaml"; then
	ok "override printed under grpo"
else
	not_ok "grpo.num_prompts_per_step: 3 not found under grpo:"
fi
expect_grep "$WORK/resolved.yaml" '^  num_generations_per_prompt: 16$' "file value kept"
expect_grep "$WORK/resolved.yaml" '^  max_num_epochs: 1$' "table default filled in"

# the printed config is itself a valid config that resolves to the same
expect_status 0 "resolved output reads back" -- "$RLRUN" config "$WORK/resolved.yaml"
tail -n +2 "$WORK/out" > "$WORK/again.yaml"
tail -n +2 "$WORK/resolved.yaml" > "$WORK/first.yaml"
if cmp -s "$WORK/first.yaml" "$WORK/again.yaml"; then ok "round trip is exact"; else
	not_ok "round trip differs:"; diff "$WORK/first.yaml" "$WORK/again.yaml" | head
fi

# no CONFIG: the built-in copy of grpo-tiny.yaml
expect_status 0 "built-in default config" -- env -u RL_CONFIG "$RLRUN" config
tail -n +2 "$WORK/out" > "$WORK/builtin.yaml"
expect_status 0 "the example file" -- "$RLRUN" config "$tiny"
tail -n +2 "$WORK/out" > "$WORK/file.yaml"
if cmp -s "$WORK/builtin.yaml" "$WORK/file.yaml"; then ok "built-in default equals etc/examples/grpo-tiny.yaml"; else
	not_ok "built-in default differs from the example file"
fi
expect_status 0 "RL_CONFIG is honoured" -- env RL_CONFIG="$top_srcdir/tests/configs/chain/child.yaml" "$RLRUN" config
expect_grep "$WORK/out" '^  model_name: models/middle$' "RL_CONFIG's file was loaded"

# four kinds of error in one file: four positioned errors, status 2
bad=$top_srcdir/tests/configs/four-errors.yaml
expect_status 2 "bad config exits 2" -- "$RLRUN" config "$bad"
n=$(grep -cE "^[^:]+four-errors\.yaml:[0-9]+:[0-9]+: error: [a-z_.]+: " "$WORK/err")
if [ "$n" = 4 ]; then ok "four FILE:LINE:COL: error: KEY: lines"; else
	not_ok "expected 4 positioned errors, got $n:"; sed 's/^/  | /' "$WORK/err"
fi
expect_grep "$WORK/err" 'four-errors\.yaml:5:3: error: grpo\.num_prompts_per_stepp: unknown key; did you mean grpo\.num_prompts_per_step\?' "unknown key with suggestion"
expect_grep "$WORK/err" 'four-errors\.yaml:6:31: error: grpo\.num_generations_per_prompt: expected an integer' "wrong type"
expect_grep "$WORK/err" 'four-errors\.yaml:10:12: error: policy\.generation\.top_p: 1\.5 is out of range' "out of range"
expect_grep "$WORK/err" 'four-errors\.yaml:12:11: error: policy\.tokenizer\.name: undefined reference \$\{policy\.no_such_key\}' "bad reference"

expect_status 2 "bad override value" -- "$RLRUN" config "$tiny" grpo.seed=-1
expect_grep "$WORK/err" '^<command line>:1:11: error: grpo\.seed: -1 is out of range' "override error points into the argument"
expect_status 2 "missing file" -- "$RLRUN" config "$WORK/none.yaml"
expect_grep "$WORK/err" 'none\.yaml: error: cannot read config: No such file' "missing file named"

expect_status 0 "--schema" -- "$RLRUN" config --schema
expect_grep "$WORK/out" '^grpo\.num_prompts_per_step$' "schema lists keys"
expect_grep "$WORK/out" '^    int in \[1, 16777216\], default 32$' "schema shows type, range and default"
expect_status 2 "--schema with a bad format" -- "$RLRUN" config --schema=html

# The GRPO family's examples (rl-config(5), GRPO FAMILY) resolve to their
# papers' keys, and each trains 3 steps of the tiny run with a finite loss.
family_example() { # NAME PATTERN-OF-ITS-KEYS DESCRIPTION
	ex=$top_srcdir/etc/examples/$1.yaml
	expect_status 0 "$1.yaml loads" -- "$RLRUN" config "$ex"
	tr -s '\n ' '  ' <"$WORK/out" >"$WORK/flat"
	expect_grep "$WORK/flat" "$2" "  $3"
	expect_status 0 "rlrun train $1.yaml runs 3 steps" -- \
		"$RLRUN" train "$ex" grpo.max_num_steps=3 logger.log_dir="$WORK/$1"
	n=$(grep -cE '"loss":-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?,' "$WORK/$1/metrics.jsonl")
	if [ "$n" = 3 ]; then ok "  3 steps, each with a finite loss"; else
		not_ok "  $n of 3 steps with a finite loss:"; sed 's/^/  | /' "$WORK/$1/metrics.jsonl"
	fi
}
family_example gspo-tiny \
	'normalize_rewards: true .*reference_policy_kl_penalty: 0 .*token_level_loss: false sequence_level_importance_ratios: true ' \
	"GSPO: sequence-level ratios, sequence mean, no KL"
family_example dr-grpo-tiny \
	'normalize_rewards: false use_leave_one_out_baseline: false .*reference_policy_kl_penalty: 0 .*token_level_loss: false .*token_sum_normalizer: 2 ' \
	"Dr. GRPO: no std, no leave-one-out, the token sum over the budget 2, no KL"
expect_status 2 "Dr. GRPO's normalizer with the token-level mean is refused" -- \
	"$RLRUN" config "$top_srcdir/etc/examples/dr-grpo-tiny.yaml" loss_fn.token_level_loss=true
expect_grep "$WORK/err" 'dr-grpo-tiny\.yaml:[0-9]+:[0-9]+: error: loss_fn\.token_sum_normalizer: replaces the per-sequence mean; needs loss_fn\.token_level_loss: false' \
	"  at the normalizer's line, naming the key to change"
# the multi-turn examples (rl-config(5), MULTI-TURN; their rules are
# tests/cli/multiturn_config.sh's): their tasks and turns
for mt in calculator guess; do
	expect_status 0 "$mt-tiny.yaml loads" -- "$RLRUN" config "$top_srcdir/etc/examples/$mt-tiny.yaml"
	tr -s '\n ' '  ' <"$WORK/out" >"$WORK/flat"
	expect_grep "$WORK/flat" "max_rollout_turns: [2-9] .*dataset_name: $mt .*env_name: null " \
		"  the $mt task, played with its built-in environment over several turns"
done
# SFT, DPO and distillation have losses of their own: GRPO's loss and
# advantage keys written in their config are named in a note (they are
# harmless, as a config built on a GRPO one carries them), and their
# resolved config leaves them out (so it loads back)
cat >"$WORK/sft-grpo-keys.yaml" <<EOF
defaults: $top_srcdir/etc/examples/sft-tiny.yaml
loss_fn:
  ratio_clip_max: 0.28
grpo:
  normalize_rewards: false
EOF
expect_status 0 "GRPO's loss keys in an SFT config" -- "$RLRUN" config "$WORK/sft-grpo-keys.yaml"
expect_grep "$WORK/err" "^note: ignored: GRPO.s loss and advantage keys, which rlrun sft.s loss does not read: grpo\.normalize_rewards \(.*sft-grpo-keys\.yaml:5:3\), loss_fn\.ratio_clip_max \(.*sft-grpo-keys\.yaml:3:3\)" \
	"  are named in a note, each where it was written"
expect_status 0 "the resolved SFT config" -- "$RLRUN" config "$top_srcdir/etc/examples/sft-tiny.yaml"
grep -qE 'ratio_clip|reference_policy_kl|normalize_rewards' "$WORK/out" && not_ok "  lists GRPO's loss keys" ||
	ok "  lists none of GRPO's loss keys"
finish
