#!/bin/sh
# rlrun on several ranks in a real Slurm (srun --mpi=pmi2 --rl-config):
# every layout this release trains gives the single-rank gradient of the
# first update (RL_GRAD_DUMP, within 1e-5 norm-wise) and the single-rank
# metrics of ten GRPO steps (within 1e-4, timers aside); the layouts it
# does not train yet are refused by name; and a rank killed mid-step makes
# every other rank name it and exit within the collective timeout.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"
slurm_start

config=$(cd "$top_srcdir/etc/examples" && pwd -P)/grpo-tiny.yaml
work=$(cd "$WORK" && pwd -P)
compare=$top_builddir/tests/tools/rl_compare
# ten small steps: four optimizer updates each, two micro-batches per rank
small="grpo.max_num_steps=10 grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16"

train() { # NAME NTASKS [KEY=VALUE...]
	name=$1 n=$2
	shift 2
	# shellcheck disable=SC2086
	RL_GRAD_DUMP=$work/$name.grads expect_status 0 "$name: srun --mpi=pmi2 -n $n rlrun $*" -- \
		srun --mpi=pmi2 -n "$n" --rl-config="$config" "$RLRUN" $small \
		logger.log_dir="$work/$name" "$@"
}

train single 1
train single-nokl 1 loss_fn.reference_policy_kl_penalty=0
[ -s "$work/single.grads" ] && [ -s "$work/single/metrics.jsonl" ] ||
	not_ok "the single-rank run left no gradient or no metrics"

# dp3 splits batches unevenly, so its micro-batches hold other rows than
# the single rank's and its logprobs differ in the last bits. The first
# global batch has no advantage anywhere: the single rank's gradient is
# exactly 0, only the KL term's rounding noise (1e-9) is left in dp3's,
# and Adam, which divides by the gradient's size, turns that into a full
# step. Without the KL term both are exactly 0.
for layout in "dp2 2 single" "dp4 4 single" "dp8 8 single" \
	"dp3 3 single-nokl loss_fn.reference_policy_kl_penalty=0"; do
	set -- $layout
	ref=$3
	train "$1" "$2" ${4:-}
	if "$compare" grads "$work/$1.grads" "$work/$ref.grads" 1e-5 >"$WORK/cmp" 2>&1; then
		ok "$1: first update's gradient = single rank's ($(tail -1 "$WORK/cmp"))"
	else
		not_ok "$1: gradient differs:"
		sed 's/^/  | /' "$WORK/cmp" | head -20
	fi
	if "$compare" metrics "$work/$1/metrics.jsonl" "$work/$ref/metrics.jsonl" 1e-4 \
		>"$WORK/cmp" 2>&1; then
		ok "$1: ten steps' metrics = single rank's ($(tail -1 "$WORK/cmp"))"
	else
		not_ok "$1: metrics differ:"
		sed 's/^/  | /' "$WORK/cmp" | head -20
	fi
done

# ---- what this release does not train yet says so ----
for axis in tensor pipeline context; do
	expect_status 1 "policy.parallel.$axis=2 on 2 ranks is refused" -- \
		srun --mpi=pmi2 -n 2 --rl-config="$config" "$RLRUN" $small \
		logger.log_dir="$work/refused" policy.parallel.$axis=2
	expect_grep "$WORK/err" "data parallelism only" "  naming what is missing"
done

# ---- srun without --mpi=pmi2: the ranks cannot meet, and say why ----
expect_status 1 "4 tasks without --mpi=pmi2 are refused" -- \
	srun --mpi=none -n 4 --rl-config="$config" "$RLRUN" $small logger.log_dir="$work/nompi"
expect_grep "$WORK/err" "srun --mpi=pmi2" "  with the way to start them"

# ---- a rank killed mid-step: the others name it and end the step ----
timeout=5
# shellcheck disable=SC2086
srun --mpi=pmi2 -n 4 --rl-config="$config" "$RLRUN" $small grpo.max_num_steps=100000 \
	cluster.collective_timeout=$timeout logger.log_dir="$work/killed" \
	>"$WORK/killed.out" 2>"$WORK/killed.err" &
srun_pid=$!
victim=
for _ in $(seq 600); do
	if [ -s "$work/killed/metrics.jsonl" ]; then
		for p in /proc/[0-9]*; do
			# slurmstepd starts tasks through /proc/self/exe: comm says "exe"
			[ "$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null | head -1)" = "$RLRUN" ] || continue
			tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx SLURM_PROCID=2 &&
				victim=${p#/proc/}
		done
		[ -n "$victim" ] && break
	fi
	sleep 0.1
done
if [ -z "$victim" ]; then
	not_ok "the 4-rank run never got going:"
	sed 's/^/  | /' "$WORK/killed.err" | head -20
	kill "$srun_pid" 2>/dev/null
else
	kill -KILL "$victim"
	killed_at=$(date +%s)
	# the step must end by itself; the loop only bounds a failure
	for _ in $(seq 600); do
		kill -0 "$srun_pid" 2>/dev/null || break
		sleep 0.1
	done
	took=$(($(date +%s) - killed_at))
	if kill -0 "$srun_pid" 2>/dev/null; then
		not_ok "the step still runs 60 s after rank 2 was killed"
		kill "$srun_pid"
	else
		# timeout, then at most 1 s of asking around, then exit
		[ "$took" -le $((timeout + 5)) ] && ok "the step ended ${took} s after rank 2 died" ||
			not_ok "the step took ${took} s to end after rank 2 died (timeout $timeout s)"
	fi
	wait "$srun_pid"
	status=$?
	[ "$status" != 0 ] && ok "srun exits non-zero ($status)" || not_ok "srun exits 0"
	n=$(grep -c 'rank 2 does not answer' "$WORK/killed.err")
	[ "$n" = 3 ] && ok "every other rank names rank 2 as the one that does not answer" || {
		not_ok "$n of 3 ranks named rank 2:"
		sed 's/^/  | /' "$WORK/killed.err" | head -20
	}
	expect_grep "$WORK/killed.err" 'collective #[0-9]+ [a-z_]+ .* over [a-z-]+ \(ranks ' \
		"  and the collective they were stuck in"
fi
finish
