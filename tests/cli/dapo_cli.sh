#!/bin/sh
# DAPO (etc/examples/dapo-tiny.yaml) end to end on the CPU: its keys'
# rules; reward scaling and overlong shaping on a step's rewards, against
# the formulas; dynamic sampling's error after its last round; and the
# learning: on the built-in arithmetic task DAPO reaches the reward GRPO
# reaches, in no more steps, dropping groups on the way.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
dapo=$top_srcdir/etc/examples/dapo-tiny.yaml

# ---- the keys' rules ----
expect_status 2 "batch_multiplier without dynamic sampling" -- \
	"$RLRUN" config grpo.batch_multiplier=2
expect_grep "$WORK/err" "grpo\.batch_multiplier: can only be other than 1 with grpo\.use_dynamic_sampling: true" \
	"  names the key and why"
expect_status 2 "dynamic sampling with asynchronous GRPO" -- \
	"$RLRUN" config "$dapo" grpo.async_grpo.enabled=true \
	loss_fn.use_importance_sampling_correction=true policy.generation.colocated.enabled=false \
	policy.generation.colocated.resources.gpus_per_node=1
expect_grep "$WORK/err" "dapo-tiny\.yaml:[0-9]+:[0-9]+: error: grpo\.use_dynamic_sampling: dynamic sampling is not implemented with grpo\.async_grpo\.enabled: true" \
	"  names the file, the place and the key"
expect_status 2 "dynamic sampling with one generation per prompt" -- \
	"$RLRUN" config "$dapo" grpo.num_generations_per_prompt=1
expect_grep "$WORK/err" "grpo\.use_dynamic_sampling: needs grpo\.num_generations_per_prompt of at least 2" \
	"  says why"
expect_status 2 "reward shaping without its lengths" -- \
	"$RLRUN" config "$dapo" grpo.reward_shaping.enabled=true \
	grpo.reward_shaping.overlong_buffer_length=null grpo.reward_shaping.max_response_length=null
expect_grep "$WORK/err" "grpo\.reward_shaping\.overlong_buffer_length: required by grpo\.reward_shaping\.enabled: true" \
	"  names the buffer"
expect_grep "$WORK/err" "grpo\.reward_shaping\.max_response_length: required" "  and the length"
expect_status 2 "a max_response_length no response reaches" -- \
	"$RLRUN" config "$dapo" grpo.reward_shaping.enabled=true grpo.reward_shaping.max_response_length=3
expect_grep "$WORK/err" "grpo\.reward_shaping\.max_response_length: 3 is more than policy\.generation\.max_new_tokens \(2\)" \
	"  names the limit it passes"
expect_status 2 "a buffer longer than max_response_length" -- \
	"$RLRUN" config "$dapo" grpo.reward_shaping.enabled=true grpo.reward_shaping.overlong_buffer_length=3
expect_grep "$WORK/err" "grpo\.reward_shaping\.overlong_buffer_length: longer than" "  says so"
expect_status 2 "an empty source range" -- \
	"$RLRUN" config "$dapo" grpo.reward_scaling.enabled=true grpo.reward_scaling.source_max=0
expect_grep "$WORK/err" "grpo\.reward_scaling\.source_max: must be greater than grpo\.reward_scaling\.source_min" \
	"  says so"

# ---- scaling and shaping on the first step's rewards ----
# The first step's samples come from the starting weights and the step's
# seed alone, so the same samples are scored in each run; only their
# rewards change. Scaling [0, 1] onto [-1, 1] makes the mean 2 r - 1.
# Shaping with max_response_length 4, overlong_buffer_length 3 and penalty
# 0.5 gives a response of n tokens (1 <= n <= 4, max_new_tokens 4) the
# penalty 0.5 x (1 - n) / 3: no penalty for one token, then a line down to
# 0.5 at four; the mean loses (mean n - 1) / 6. Both by hand, from the
# plain run's numbers (its responses are of several lengths).
one="grpo.max_num_steps=1 grpo.num_prompts_per_step=16 policy.generation.max_new_tokens=4"
num() { sed -nE "1s/.*\"$2\":([-0-9.eE+]+).*/\1/p" "$1/metrics.jsonl"; }
# shellcheck disable=SC2086
expect_status 0 "one step as it is" -- "$RLRUN" train $one logger.log_dir=plain
# shellcheck disable=SC2086
expect_status 0 "one step scaled" -- "$RLRUN" train $one logger.log_dir=scaled \
	grpo.reward_scaling.enabled=true grpo.reward_scaling.target_min=-1
# shellcheck disable=SC2086
expect_status 0 "one step scaled and shaped" -- "$RLRUN" train $one logger.log_dir=shaped \
	grpo.reward_scaling.enabled=true grpo.reward_scaling.target_min=-1 \
	grpo.reward_shaping.enabled=true grpo.reward_shaping.max_response_length=4 \
	grpo.reward_shaping.overlong_buffer_length=3 grpo.reward_shaping.overlong_buffer_penalty=0.5
r=$(num plain reward_mean) n=$(num plain response_tokens_mean)
s=$(num scaled reward_mean) h=$(num shaped reward_mean)
echo "plain reward $r, response $n tokens; scaled $s; scaled and shaped $h"
awk -v n="$n" 'BEGIN { exit !(n > 1 && n < 4) }' && ok "  responses of several lengths (mean $n)" ||
	not_ok "  responses of one length (mean $n): the shaping check below would not see the line"
awk -v r="$r" -v s="$s" 'BEGIN { d = s - (2 * r - 1); exit !(r != "" && d < 1e-8 && d > -1e-8) }' &&
	ok "scaling: reward $s = 2 x $r - 1" || not_ok "scaling: reward $s, not 2 x $r - 1"
awk -v r="$r" -v n="$n" -v h="$h" \
	'BEGIN { d = h - (2 * r - 1 - (n - 1) / 6); exit !(h != "" && d < 1e-8 && d > -1e-8) }' &&
	ok "then shaping: reward $h = 2 x $r - 1 - ($n - 1) / 6" ||
	not_ok "then shaping: reward $h, not 2 x $r - 1 - ($n - 1) / 6"

# ---- overlong filtering ----
# with one new token allowed every response is cut off: filtered, none is
# left in the loss, which is then 0 with a zero gradient; unfiltered, the
# same samples give a loss and a gradient
cut="grpo.max_num_steps=1 grpo.num_prompts_per_step=16 policy.generation.max_new_tokens=1"
for f in true false; do
	# shellcheck disable=SC2086
	expect_status 0 "one step of cut-off responses, overlong_filtering $f" -- \
		"$RLRUN" train "$dapo" $cut grpo.use_dynamic_sampling=false grpo.batch_multiplier=1 \
		grpo.overlong_filtering=$f logger.log_dir="cut-$f"
done
expect_grep cut-true/metrics.jsonl '"loss":0\.0,.*"grad_norm":0\.0,.*"truncated_fraction":1\.0,' \
	"  filtered: every response cut, loss 0, gradient 0"
expect_grep cut-false/metrics.jsonl '"loss":[-0-9.e]*[1-9][-0-9.e]*,.*"grad_norm":[0-9.e-]*[1-9]' \
	"  unfiltered: a loss and a gradient"

# ---- dynamic sampling that cannot fill its step ----
# the tiny model's first step needs three rounds of 96 prompts to find 64
# groups that are not all wrong: with one round allowed, the run stops
expect_status 1 "dynamic sampling out of rounds" -- \
	"$RLRUN" train "$dapo" grpo.dynamic_sampling_max_gen_batches=1 logger.log_dir=short
expect_grep "$WORK/err" "step 1: dynamic sampling found [0-9]+ of the 64 prompt groups it needs .* after grpo\.dynamic_sampling_max_gen_batches=1 rounds of 96 prompts .*raise grpo\.batch_multiplier or grpo\.dynamic_sampling_max_gen_batches" \
	"  names the keys to change"

# ---- the fenced backend: no host access to the backend's memory ----
# (kernels/fenced.c); rounds and all, the CPU run's numbers to the bit
few="grpo.max_num_steps=3 grpo.num_prompts_per_step=16"
for be in 0 1; do
	# shellcheck disable=SC2086
	RL_OPS_FENCED=$be expect_status 0 "three DAPO steps, RL_OPS_FENCED=$be" -- \
		"$RLRUN" train "$dapo" $few logger.log_dir="fenced-$be"
done
grep -q '"dynamic_sampling_num_gen_batches":[2-9]' fenced-0/metrics.jsonl &&
	ok "  a step took more than one round" || not_ok "  no step took a second round"
same_as "  the fenced run's metrics = the CPU run's, bit for bit" \
	metrics fenced-1/metrics.jsonl fenced-0/metrics.jsonl 0

# ---- learning: DAPO against GRPO ----
# The same seed and model, a constant learning rate (so that a run's first
# steps do not depend on its length), GRPO as grpo-tiny.yaml, DAPO as
# dapo-tiny.yaml. The bar: the mean reward of three consecutive steps
# (every sample generated, dropped groups included, so DAPO's is the
# policy's reward as GRPO's is) reaches 0.6. Measured (seed: first step
# at the bar, GRPO / DAPO): 42: 18 / 11, 7: 25 / 11, 1: 15 / 10. So GRPO
# gets 30 steps (5 beyond the slowest seed, 12 beyond seed 42's) and DAPO
# 15 (4 beyond its slowest); DAPO's lead was 5 steps or more on every
# seed, so "no more steps than GRPO" holds with room on another machine,
# whose rounding may move either curve by a step or two. The sanitizer and
# CUDA builds leave the runs to the plain build, as train_cli.sh does.
mk=$top_builddir/Makefile
seeds=${RL_TRAIN_SEEDS-42}
if [ -z "${RL_TRAIN_SEEDS+set}" ] && [ -f "$mk" ] &&
	grep -Eq '^(SANITIZE_FLAGS = -|NVCC = .)' "$mk"; then
	seeds=
fi
if [ -z "$seeds" ]; then
	echo "skipping the learning runs in this build (RL_TRAIN_SEEDS=42 runs them)"
	finish
	exit
fi
seed=${seeds%% *}
const=policy.lr_schedule.type=constant
expect_status 0 "GRPO, seed $seed, 30 steps" -- \
	"$RLRUN" train grpo.seed="$seed" $const grpo.max_num_steps=30 logger.log_dir=grpo
expect_status 0 "DAPO, seed $seed, 15 steps" -- \
	"$RLRUN" train "$dapo" grpo.seed="$seed" $const grpo.max_num_steps=15 logger.log_dir=dapo
expect_grep "$WORK/out" "^step 1/15  reward .*  dynamic sampling: trained on reward [0-9.]+, [0-9]+ rounds?, [0-9]+ groups dropped$" \
	"  its progress line says what dynamic sampling did"
expect_grep "$WORK/out" "^rlrun train: dynamic sampling: groups whose rewards are all equal are dropped; rounds of 96 prompts until 64 are kept, at most 10 a step$" \
	"  and its first lines how it samples"
# the first step whose three-step mean reward reaches the bar (0: none)
reached() { # FILE
	sed -nE 's/.*"reward_mean":([-0-9.eE+]+).*/\1/p' "$1" |
		awk '{ r[NR] = $1 } NR >= 3 && !done && (r[NR] + r[NR - 1] + r[NR - 2]) / 3 >= 0.6 {
			print NR; done = 1 } END { if (!done) print 0 }'
}
g=$(reached grpo/metrics.jsonl) d=$(reached dapo/metrics.jsonl)
echo "three-step mean reward 0.6 first reached: GRPO at step $g, DAPO at step $d"
[ "$g" -gt 0 ] && ok "GRPO reaches 0.6 (step $g of 30)" || not_ok "GRPO never reaches 0.6 in 30 steps"
[ "$d" -gt 0 ] && [ "$d" -le "$g" ] && ok "DAPO reaches it in no more steps (step $d)" ||
	not_ok "DAPO reaches 0.6 at step $d (0: never in 15), GRPO at step $g"
dropped=$(sed -nE 's/.*"dynamic_sampling_num_dropped_groups":([0-9]+).*/\1/p' dapo/metrics.jsonl |
	awk '{ s += $1 } END { print s + 0 }')
[ "$dropped" -gt 0 ] && ok "dynamic sampling dropped $dropped groups of equal rewards" ||
	not_ok "dynamic sampling dropped no group"
# the groups trained on are those with a spread: at the first step, when
# most groups are all wrong, their reward is above the step's
fr=$(num dapo filtered_reward) rm=$(num dapo reward_mean)
awk -v f="$fr" -v r="$rm" 'BEGIN { exit !(f > r) }' &&
	ok "filtered_reward $fr above reward_mean $rm at step 1" ||
	not_ok "filtered_reward $fr not above reward_mean $rm at step 1"
finish
