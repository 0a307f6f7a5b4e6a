#!/bin/sh
# Multi-turn configs as rlrun config checks them (rl-config(5), MULTI-TURN):
# the examples load; more than one turn needs an environment that plays
# episodes; an environment needs its program; episodes are GRPO's; what is
# not implemented with them says so, each error at the key's place.
. "$(dirname "$0")/lib.sh"
ex=$top_srcdir/etc/examples
tiny=$ex/grpo-tiny.yaml

for name in calculator guess; do
	expect_status 0 "$name-tiny.yaml loads" -- "$RLRUN" config "$ex/$name-tiny.yaml"
	expect_grep "$WORK/out" "^  dataset_name: $name\$" "  its task"
	expect_grep "$WORK/out" '^  max_rollout_turns: [2-9]$' "  more than one turn"
done

# grpo-tiny's arithmetic has no environment to play episodes with
expect_status 2 "turns without a multi-turn environment" -- \
	"$RLRUN" config "$tiny" grpo.max_rollout_turns=3
expect_grep "$WORK/err" '^<command line>:1:[0-9]+: error: grpo\.max_rollout_turns: more than one turn needs a multi-turn environment: data\.env_name naming an env\.<name> with multi_turn: true and a command, or data\.dataset_name calculator or guess' \
	"  says what would do, at the override"
expect_status 0 "one turn with a built-in multi-turn task" -- \
	"$RLRUN" config "$tiny" data.dataset_name=calculator
expect_status 0 "a reward program with one turn" -- \
	"$RLRUN" config "$tiny" data.dataset_name=calculator data.env_name=exact

# a user's environment, in a file of its own: positions are its lines
cat >"$WORK/env.yaml" <<YAML
defaults: $tiny
grpo:
  max_rollout_turns: 4
data:
  env_name: tools
env:
  tools:
    command: /bin/cat
    multi_turn: true
    turn_timeout: 5
YAML
expect_status 0 "an env.<name> with multi_turn and a command" -- "$RLRUN" config "$WORK/env.yaml"
expect_grep "$WORK/out" '^    multi_turn: true$' "  printed"

cat >"$WORK/nocommand.yaml" <<YAML
defaults: $tiny
grpo:
  max_rollout_turns: 4
data:
  env_name: tools
env:
  tools:
    multi_turn: true
YAML
expect_status 2 "multi_turn without a command" -- "$RLRUN" config "$WORK/nocommand.yaml"
expect_grep "$WORK/err" 'nocommand\.yaml:8:5: error: env\.tools\.multi_turn: an environment needs a command: the program that plays the episodes \(rl-env\(7\)\)' \
	"  at env.tools.multi_turn"

cat >"$WORK/reward.yaml" <<YAML
defaults: $tiny
grpo:
  max_rollout_turns: 2
data:
  env_name: scorer
env:
  scorer:
    command: /bin/cat
YAML
expect_status 2 "turns with a reward program (not multi_turn)" -- "$RLRUN" config "$WORK/reward.yaml"
expect_grep "$WORK/err" 'reward\.yaml:3:3: error: grpo\.max_rollout_turns: more than one turn needs a multi-turn environment' \
	"  at grpo.max_rollout_turns"

# episodes are GRPO's
cat >"$WORK/distill.yaml" <<YAML
defaults: $ex/distill-tiny.yaml
teacher:
  model_name: builtin:tiny-llama
distillation:
  max_rollout_turns: 3
YAML
expect_status 2 "distillation with turns" -- "$RLRUN" config "$WORK/distill.yaml"
expect_grep "$WORK/err" 'distill\.yaml:5:3: error: grpo\.max_rollout_turns: multi-turn episodes are GRPO.s \(rlrun train\)' \
	"  refused at distillation.max_rollout_turns"
cat >"$WORK/distill-env.yaml" <<YAML
defaults: $ex/distill-tiny.yaml
teacher:
  model_name: builtin:tiny-llama
data:
  env_name: tools
env:
  tools:
    command: /bin/cat
    multi_turn: true
YAML
expect_status 2 "distillation with a multi-turn environment" -- "$RLRUN" config "$WORK/distill-env.yaml"
expect_grep "$WORK/err" 'distill-env\.yaml:5:3: error: data\.env_name: names a multi-turn environment: episodes are GRPO.s' \
	"  refused at data.env_name"
expect_status 2 "distillation of a built-in multi-turn task" -- \
	"$RLRUN" config "$ex/distill-tiny.yaml" teacher.model_name=builtin:tiny-llama \
	data.dataset_name=guess
expect_grep "$WORK/err" 'error: data\.dataset_name: names a multi-turn environment: episodes are GRPO.s' \
	"  refused at data.dataset_name"
expect_status 2 "SFT with a multi-turn environment" -- \
	"$RLRUN" config "$ex/sft-tiny.yaml" data.env_name=tools env.tools.command=/bin/cat \
	env.tools.multi_turn=true
expect_grep "$WORK/err" 'error: data\.env_name: names a multi-turn environment: episodes are GRPO.s' \
	"  refused"

# not implemented with episodes
expect_status 2 "expert parallelism with episodes" -- \
	"$RLRUN" config "$ex/calculator-tiny.yaml" policy.parallel.expert=2
expect_grep "$WORK/err" 'error: policy\.parallel\.expert: expert parallelism is not implemented with multi-turn episodes' \
	"  refused clearly"
expect_status 2 "grpo.invalid_tool_call_advantage" -- \
	"$RLRUN" config "$ex/calculator-tiny.yaml" grpo.invalid_tool_call_advantage=-1
expect_grep "$WORK/err" "grpo\.invalid_tool_call_advantage: not supported yet: tool-call validity is the environment's" \
	"  says whose it is"
finish
