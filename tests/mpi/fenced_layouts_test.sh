#!/bin/sh
# Every parallel layout on the fenced backend (kernels/fenced.c: device
# memory the host cannot touch) over real MPI ranks: the device path of
# each group (runtime/comm/comm_staged.c, the transport ranks sharing a GPU
# use) carries only fenced memory and the host path only host memory, or
# the collective fails. Each layout gives the single-rank CPU run's first
# gradient (RL_GRAD_DUMP, 1e-5 norm-wise) and metrics (1e-4), the
# tolerances tests/slurm/dist_test.sh holds the CPU layouts to. And a
# model larger than a rank's memory limit trains, each rank reading only
# its slices of the files.
# shellcheck disable=SC2015 # ok and not_ok always succeed
. "$(dirname "$0")/lib.sh"

reward=$(cd "$top_srcdir/tests/slurm" && pwd -P)/digit_reward.awk
moe=$(cd "$top_srcdir/tests/fixtures/models" && pwd -P)/qwen3-moe
small="grpo.max_num_steps=3 grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16"

train() { # FENCED NAME NTASKS [KEY=VALUE...]
	fence=$1 name=$2 n=$3
	shift 3
	# shellcheck disable=SC2086
	RL_OPS_FENCED=$fence RL_GRAD_DUMP=$WORK/$name.grads expect_status 0 \
		"$name: mpiexec -n $n rlrun train $*" -- \
		timeout --foreground -k 5 300 mpiexec -n "$n" "$RLRUN" train $small \
		data.env_name=digits "env.digits.command=awk -f $reward" \
		logger.log_dir="$WORK/$name" "$@"
}

same_as() { # WHAT KIND FILE REFERENCE TOLERANCE
	what=$1
	shift
	if "$top_builddir/tests/tools/rl_compare" "$@" >"$WORK/cmp" 2>&1; then
		ok "$what ($(tail -1 "$WORK/cmp"))"
	else
		not_ok "$what: no, they differ:"
		sed 's/^/  | /' "$WORK/cmp" | head -20
	fi
}

train 0 single 1
# a mixture of experts: against the CPU's ep2 run, bit for bit (ep2 = ep1
# is tests/cli/train_cli.sh's, over one update: here an expert whose
# gradient is the KL term's rounding alone differs across layouts)
train 0 moe-ep2 2 policy.model_name="$moe" policy.parallel.expert=2

tp=policy.parallel.tensor sp=policy.parallel.sequence_parallel=true pp=policy.parallel.pipeline
apart="policy.generation.colocated.enabled=false policy.generation.colocated.resources.gpus_per_node=2"
for layout in "tp2 2 $tp=2" "pp2 2 $pp=2" "dp2 2" "cp2 2 policy.parallel.context=2" \
	"tp2-sp 2 $tp=2 $sp" "tp2-pp2-dp2 8 $tp=2 $pp=2" \
	"ep2 2 policy.parallel.expert=2 policy.model_name=$moe" \
	"nc-dp2-gtp2 4 $apart policy.generation.tensor_parallel_size=2"; do
	# shellcheck disable=SC2086
	set -- $layout
	name=fenced-$1
	shift
	train 1 "$name" "$@"
	expect_grep "$WORK/out" "device collectives over staged" "  $name: its device collectives are staged"
	ref=single grads=1e-5 metrics=1e-4
	case $name in *ep2) ref=moe-ep2 grads=0 metrics=0 ;; esac
	same_as "  $name: first update's gradient = $ref CPU run's" \
		grads "$WORK/$name.grads" "$WORK/$ref.grads" $grads
	same_as "  $name: three steps' metrics = $ref CPU run's" \
		metrics "$WORK/$name/metrics.jsonl" "$WORK/$ref/metrics.jsonl" $metrics
done
expect_grep "$WORK/out" "^rlrun train: node [^:]*: rank 0 fenced" "the run names each rank's device"
finish
