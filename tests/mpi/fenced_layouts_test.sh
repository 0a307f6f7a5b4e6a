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

# ---- the overlap ----
# Megatron's overlap_grad_reduce and overlap_param_gather, with buckets
# of 3000 parameters: the buckets' reduce-scatters start in the last
# micro-batch's backward pass and the weights' all-gathers are waited for
# where the next pass reads them; the same collectives add the same
# numbers, so a run is the run without the overlap, bit for bit, on the
# CPU's MPI and on the staged transport.
for layout in "dp2 2" "tp2-dp2-sp 4 $tp=2 $sp" "pp2-dp2 4 $pp=2"; do
	# shellcheck disable=SC2086
	set -- $layout
	base=$1 n=$2
	shift 2
	for fence in 0 1; do
		for ov in true false; do
			name=overlap-$base-$fence-$ov
			train $fence "$name" "$n" policy.parallel.bucket_size=3000 \
				policy.parallel.overlap_grad_reduce=$ov \
				policy.parallel.overlap_param_gather=$ov "$@"
			cp "$WORK/out" "$WORK/$name.out"
		done
		name=overlap-$base-$fence
		same_as "  $name: the overlapped run's gradient = the run without overlap's" \
			grads "$WORK/$name-true.grads" "$WORK/$name-false.grads" 0
		same_as "  $name: and its metrics" \
			metrics "$WORK/$name-true/metrics.jsonl" "$WORK/$name-false/metrics.jsonl" 0
		early=$(sed -n 's/^rlrun train: \([0-9]*\) of [0-9]* gradient buckets.*/\1/p' \
			"$WORK/$name-true.out")
		[ "${early:-0}" -gt 0 ] &&
			ok "  $name: $early buckets reduce-scattered while layers ran backward" ||
			not_ok "  $name: no bucket was reduced during the backward pass"
	done
done

# ---- a model larger than a rank's memory limit ----
# Non-colocated: 2 training ranks (tp2) and 4 generation ranks, one
# tensor-parallel replica of 4, each of which holds a quarter of the model
# (its weights, and the gradient buffer every model has). The model: 4
# layers with a wide MLP, 201 MB of fp32 weights. Each generation rank runs
# under a limit (RLIMIT_DATA: what it allocates, not the files it maps) of
# what such a rank takes for itself (threads, MPI, OpenBLAS: the largest
# VmData a generation rank of the tiny model's run in the same layout was
# seen at) plus 0.85 of the model: it can hold its quarter, and it could
# not have read the whole model first, as every rank did before it read by
# shard; the control, one replica of one rank, cannot start.
# AddressSanitizer reserves terabytes of shadow memory, which a data limit
# counts: the sanitizer build proves the rest, the other builds this
if nm "$RLRUN" 2>/dev/null | grep -q __asan_init; then
	echo "# the memory limit: skipped under AddressSanitizer"
	finish
	exit
fi
wide=$WORK/wide
expect_status 0 "a wide model, written" -- "$top_builddir/tests/tools/rl_wide_model" \
	"$top_srcdir/tests/fixtures/models/llama" "$wide" 4 65536
model_kb=$(($(wc -c <"$wide/model.safetensors") / 1024))
nc="grpo.max_num_steps=2 grpo.num_prompts_per_step=2 grpo.num_generations_per_prompt=2
policy.train_global_batch_size=4 policy.train_micro_batch_size=1 policy.logprob_batch_size=1
policy.max_total_sequence_length=32 policy.parallel.tensor=2
policy.parallel.activation_checkpointing=true policy.generation.colocated.enabled=false
policy.generation.colocated.resources.gpus_per_node=4 policy.generation.tensor_parallel_size=4"
# shellcheck disable=SC2086
RL_OPS_FENCED=1 timeout -k 5 300 mpiexec -n 6 "$RLRUN" train $nc grpo.max_num_steps=20 \
	logger.log_dir="$WORK/probe" >"$WORK/probe.out" 2>&1 &
probe=$!
own_kb=0
while kill -0 "$probe" 2>/dev/null; do
	# this run's ranks alone: another test's may run beside it (make -j)
	for p in $(pgrep -f "logger.log_dir=$WORK/probe"); do
		rank=$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | sed -n 's/^PMI_RANK=//p')
		[ "${rank:-0}" -ge 2 ] || continue
		kb=$(awk '/^VmData:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
		[ "${kb:-0}" -gt "$own_kb" ] && own_kb=$kb
	done
	sleep 0.1
done
wait "$probe" && [ "$own_kb" -gt 0 ] && ok "a generation rank's own memory: ${own_kb} kB" ||
	not_ok "the probe run failed or its generation ranks were never seen"
limit=$(((own_kb + model_kb * 85 / 100) * 1024))
echo "# model ${model_kb} kB; limit per generation rank ${own_kb} + $((model_kb * 85 / 100)) kB"
limited() { # NAME [KEY=VALUE...]: the 4 generation ranks limited
	name=$1
	shift
	# shellcheck disable=SC2086
	RL_OPS_FENCED=1 timeout --foreground -k 5 300 mpiexec -n 2 "$RLRUN" train $nc \
		policy.model_name="$wide" logger.log_dir="$WORK/$name" "$@" : \
		-n 4 prlimit --data="$limit" "$RLRUN" train $nc policy.model_name="$wide" \
		logger.log_dir="$WORK/$name" "$@" >"$WORK/out" 2>"$WORK/err"
}
limited limited && grep -q '"step":2,' "$WORK/limited/metrics.jsonl" &&
	ok "generation ranks limited below the model generate both steps" || {
	not_ok "the limited run failed:"
	sed 's/^/  | /' "$WORK/err" | grep -v '^  | \[' | head -5
}
limited whole policy.generation.tensor_parallel_size=1
grep -q "cannot allocate" "$WORK/err" &&
	ok "  the control: a generation rank holding the whole model cannot start" || {
	not_ok "  the control did not fail for want of memory:"
	sed 's/^/  | /' "$WORK/err" | grep -v '^  | \[' | head -5
}
finish
