#!/bin/sh
# Multi-turn episodes end to end on the CPU (rl-config(5), MULTI-TURN):
# etc/examples/calculator-tiny.yaml, where the model may hand each sum to
# the built-in calculator (`rlrun env calculator`, through the environment
# protocol) and answer from its result, and guess-tiny.yaml, a digit found
# by guesses told higher or lower. A resumed run is the uninterrupted one
# to the bit, the fenced backend is the CPU's to the bit, and both tasks
# learn: their rewards rise clearly, and so does the share of calculator
# episodes that call the tool.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
calc=$top_srcdir/etc/examples/calculator-tiny.yaml
guess=$top_srcdir/etc/examples/guess-tiny.yaml
# a small step: 8 prompts x 4 episodes, one update
small="grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=4
policy.train_global_batch_size=32 policy.train_micro_batch_size=16 policy.logprob_batch_size=32"

# the value of KEY in line N of a metrics file
num() { # FILE N KEY
	sed -n "$2p" "$1" | sed -nE "s/.*\"$3\":([-0-9.eE+]+).*/\1/p"
}

# ---- episodes, as the metrics show them ----
# shellcheck disable=SC2086
expect_status 0 "two calculator steps" -- "$RLRUN" train "$calc" $small grpo.max_num_steps=2 \
	logger.log_dir=two
turns=$(num two/metrics.jsonl 1 avg_turns_per_sample)
awk -v t="$turns" 'BEGIN { exit !(t >= 1 && t <= 2) }' &&
	ok "  episodes of one or two turns (avg_turns_per_sample $turns)" ||
	not_ok "  avg_turns_per_sample '$turns' in $(head -c 400 two/metrics.jsonl)"
failures=$(num two/metrics.jsonl 1 env_failures)
[ "$failures" = 0 ] && ok "  the built-in calculator failed on no episode" ||
	not_ok "  env_failures '$failures'"

# ---- the fenced backend: no host access to the backend's memory ----
# (kernels/fenced.c): every episode and step the CPU run's, to the bit
for be in 0 1; do
	# shellcheck disable=SC2086
	RL_OPS_FENCED=$be expect_status 0 "three calculator steps, RL_OPS_FENCED=$be" -- \
		"$RLRUN" train "$calc" $small grpo.max_num_steps=3 logger.log_dir="fenced-$be"
done
same_as "  the fenced run's metrics = the CPU run's, bit for bit" \
	metrics fenced-1/metrics.jsonl fenced-0/metrics.jsonl 0

# ---- resume: 4 steps, then 2 from the checkpoint of step 2, are 4 in one go ----
strip() { sed -E 's/,"tokens_per_sec".*//' "$@"; }
# a constant LR: the cosine schedule's length is the run's max_num_steps
ck="checkpointing.enabled=true checkpointing.save_period=2 checkpointing.keep_top_k=null
policy.lr_schedule.type=constant"
# shellcheck disable=SC2086
expect_status 0 "four calculator steps in one run" -- "$RLRUN" train "$calc" $small $ck \
	grpo.max_num_steps=4 checkpointing.checkpoint_dir=whole.ck logger.log_dir=whole
# shellcheck disable=SC2086
expect_status 0 "two steps" -- "$RLRUN" train "$calc" $small $ck grpo.max_num_steps=2 \
	checkpointing.checkpoint_dir=cut.ck logger.log_dir=cut
# shellcheck disable=SC2086
expect_status 0 "then two more from its checkpoint" -- "$RLRUN" train "$calc" $small $ck \
	grpo.max_num_steps=4 checkpointing.checkpoint_dir=cut.ck logger.log_dir=cut
expect_grep "$WORK/out" "resuming from cut.ck/step_2 " "  resumes from step 2"
[ "$(strip cut/metrics.jsonl)" = "$(strip whole/metrics.jsonl)" ] &&
	[ "$(wc -l <whole/metrics.jsonl)" = 4 ] &&
	ok "  the resumed run's metrics are the uninterrupted run's, timers aside" || {
	not_ok "  the resumed run differs:"
	diff whole/metrics.jsonl cut/metrics.jsonl | head -6
}
cmp -s whole.ck/step_4/rank-00000.safetensors cut.ck/step_4/rank-00000.safetensors &&
	ok "  and its weights, byte for byte" || not_ok "  its weights differ"

# ---- learning ----
# The sanitizer and CUDA builds leave the runs to the plain build, as
# train_cli.sh does. The bars, with their measurements, are at each run.
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
# mean of KEY over lines FIRST..LAST of a metrics file
mean() { # FILE FIRST LAST KEY
	sed -nE "$2,$3s/.*\"$4\":([-0-9.eE+]+).*/\1/p" "$1" |
		awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n; else print "nan" }'
}
# A >= B, A a number ("nan" of a missing file is none)
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ && a + 0 >= b + 0) }'; }

for seed in $seeds; do
	# calculator-tiny.yaml as it is: the reward and the share of episodes
	# that call the tool (avg_turns_per_sample - 1: a second turn comes
	# only after a call) of the first three steps against the last three's.
	# Measured (seed: reward, avg_turns_per_sample): 42: 0.054 -> 0.980,
	# 1.73 -> 1.989; 7: 0.069 -> 0.975, 1.69 -> 1.986; 1: 0.055 -> 0.983,
	# 1.67 -> 1.991; 3: 0.044 -> 0.965, 1.68 -> 1.987; 20 s a run on 2
	# cores. The bars: reward 0.8 and a rise of 0.6 (the smallest rise was
	# 0.91), avg_turns_per_sample 1.9 and a rise of 0.15 (the smallest 0.26).
	steps=$(sed -nE 's/^  max_num_steps: ([0-9]+)$/\1/p' "$calc")
	t0=$(date +%s)
	expect_status 0 "calculator-tiny.yaml, seed $seed, $steps steps" -- \
		"$RLRUN" train "$calc" grpo.seed="$seed" logger.log_dir="calc-$seed"
	echo "# $(($(date +%s) - t0)) s"
	m=calc-$seed/metrics.jsonl
	r0=$(mean "$m" 1 3 reward_mean) r1=$(mean "$m" $((steps - 2)) "$steps" reward_mean)
	c0=$(mean "$m" 1 3 avg_turns_per_sample) c1=$(mean "$m" $((steps - 2)) "$steps" avg_turns_per_sample)
	echo "# seed $seed: reward $r0 -> $r1; avg_turns_per_sample $c0 -> $c1"
	above "$r1" 0.8 && above "$r1" "$(awk -v r="$r0" 'BEGIN { print r + 0.6 }')" &&
		ok "  the reward rises clearly: $r0 -> $r1 (bar 0.8, and a rise of 0.6)" ||
		not_ok "  the reward: $r0 -> $r1 (bar 0.8, and a rise of 0.6)"
	above "$c1" 1.9 && above "$c1" "$(awk -v c="$c0" 'BEGIN { print c + 0.15 }')" &&
		ok "  more episodes call the calculator: avg_turns_per_sample $c0 -> $c1 (bar 1.9, and a rise of 0.15)" ||
		not_ok "  the share calling the calculator: avg_turns_per_sample $c0 -> $c1 (bar 1.9, and a rise of 0.15)"

	# guess-tiny.yaml as it is. Measured (seed: first three steps -> last
	# three): 42: 0.121 -> 0.473, 7: 0.118 -> 0.423, 1: 0.134 -> 0.550, 3:
	# 0.107 -> 0.512, in 26 s a run on 2 cores. The bar: 0.3 and a rise of
	# 0.2, below the slowest seed's 0.305 rise.
	steps=$(sed -nE 's/^  max_num_steps: ([0-9]+)$/\1/p' "$guess")
	t0=$(date +%s)
	expect_status 0 "guess-tiny.yaml, seed $seed, $steps steps" -- \
		"$RLRUN" train "$guess" grpo.seed="$seed" logger.log_dir="guess-$seed"
	echo "# $(($(date +%s) - t0)) s"
	m=guess-$seed/metrics.jsonl
	r0=$(mean "$m" 1 3 reward_mean) r1=$(mean "$m" $((steps - 2)) "$steps" reward_mean)
	echo "# seed $seed: reward $r0 -> $r1"
	above "$r1" 0.3 && above "$r1" "$(awk -v r="$r0" 'BEGIN { print r + 0.2 }')" &&
		ok "  the guessing game's reward rises: $r0 -> $r1 (bar 0.3, and a rise of 0.2)" ||
		not_ok "  the guessing game's reward: $r0 -> $r1 (bar 0.3, and a rise of 0.2)"
done
finish
