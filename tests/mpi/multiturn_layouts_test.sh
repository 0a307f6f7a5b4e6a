#!/bin/sh
# Multi-turn episodes (etc/examples/calculator-tiny.yaml: the model calls
# a calculator tool, its built-in environment answers) in parallel layouts
# over real MPI ranks: each data-parallel rank plays its share of the
# episodes with its own copies of the environment, tensor-parallel ranks
# play theirs together, and the loss counts the model's tokens of every
# share against the whole step's denominators. So dp2, tp2 and
# non-colocated generation (two training ranks, dp2, and two generation
# ranks that play the episodes) give the single rank's first gradient
# (RL_GRAD_DUMP, 1e-5 norm-wise) and three steps' metrics (1e-4), the
# tolerances tests/mpi/fenced_layouts_test.sh holds every layout to.
# shellcheck disable=SC2015 # ok and not_ok always succeed
. "$(dirname "$0")/lib.sh"

calc=$top_srcdir/etc/examples/calculator-tiny.yaml
small="grpo.max_num_steps=3 grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=4
policy.train_global_batch_size=16 policy.train_micro_batch_size=4 policy.logprob_batch_size=8"

train() { # FENCED NAME NTASKS [KEY=VALUE...]
	fence=$1 name=$2 n=$3
	shift 3
	# shellcheck disable=SC2086
	RL_OPS_FENCED=$fence RL_GRAD_DUMP=$WORK/$name.grads expect_status 0 \
		"$name: mpiexec -n $n rlrun train calculator-tiny.yaml $*" -- \
		timeout --foreground -k 5 300 mpiexec -n "$n" "$RLRUN" train "$calc" $small \
		logger.log_dir="$WORK/$name" "$@"
}

train 0 single 1
grep -q '"avg_turns_per_sample":' "$WORK/single/metrics.jsonl" &&
	ok "  single: its steps are episodes (avg_turns_per_sample)" ||
	not_ok "  single: no episode metrics in $(head -c 300 "$WORK/single/metrics.jsonl")"
apart="policy.generation.colocated.enabled=false policy.generation.colocated.resources.gpus_per_node=2"
for layout in "dp2 0 2" "dp2-fenced 1 2" "tp2 0 2 policy.parallel.tensor=2" \
	"nc-dp2 0 4 $apart"; do
	# shellcheck disable=SC2086
	set -- $layout
	name=$1 fence=$2 n=$3
	shift 3
	train "$fence" "$name" "$n" "$@"
	same_as "  $name: first update's gradient = the single rank's" \
		grads "$WORK/$name.grads" "$WORK/single.grads" 1e-5 model.
	same_as "  $name: three steps' metrics = the single rank's" \
		metrics "$WORK/$name/metrics.jsonl" "$WORK/single/metrics.jsonl" 1e-4
done
finish
