#!/bin/sh
# The GRPO family's losses (rl-config(5), GRPO FAMILY) in parallel layouts
# over real MPI ranks. GSPO's ratio belongs to a whole sequence and
# Dr. GRPO divides by a constant and the step's sequence count; both take
# their denominators from the whole global batch, so data parallelism
# (each rank half the sequences) and tensor parallelism give the single
# rank's first gradient (RL_GRAD_DUMP, 1e-5 norm-wise) and three steps'
# metrics (1e-4), the tolerances tests/mpi/fenced_layouts_test.sh holds
# every layout to; dp2 on the fenced backend too.
# shellcheck disable=SC2015 # ok and not_ok always succeed
. "$(dirname "$0")/lib.sh"

small="grpo.max_num_steps=3 grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16"

train() { # EXAMPLE FENCED NAME NTASKS [KEY=VALUE...]
	example=$1 file=$top_srcdir/etc/examples/$1.yaml fence=$2 name=$3 n=$4
	shift 4
	# shellcheck disable=SC2086
	RL_OPS_FENCED=$fence RL_GRAD_DUMP=$WORK/$name.grads expect_status 0 \
		"$name: mpiexec -n $n rlrun train $example.yaml $*" -- \
		timeout --foreground -k 5 300 mpiexec -n "$n" "$RLRUN" train "$file" $small \
		logger.log_dir="$WORK/$name" "$@"
}

for ex in gspo-tiny dr-grpo-tiny; do
	train $ex 0 $ex-single 1
	for layout in "dp2 0 2" "dp2-fenced 1 2" "tp2 0 2 policy.parallel.tensor=2"; do
		# shellcheck disable=SC2086
		set -- $layout
		name=$ex-$1 fence=$2 n=$3
		shift 3
		train $ex "$fence" "$name" "$n" "$@"
		# the parameters' gradients only: the dump's "loss" of a first
		# update without KL is sum_i -A_i over groups whose advantages sum
		# to 0, rounding left over, with no relative precision (the
		# metrics compare it absolutely below 0.01)
		same_as "  $name: first update's gradient = the single rank's" \
			grads "$WORK/$name.grads" "$WORK/$ex-single.grads" 1e-5 model.
		same_as "  $name: three steps' metrics = the single rank's" \
			metrics "$WORK/$name/metrics.jsonl" "$WORK/$ex-single/metrics.jsonl" 1e-4
	done
done
finish
