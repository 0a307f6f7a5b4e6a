#!/bin/sh
# The runtime under the CUDA backend's memory rules, without a GPU: the
# fenced backend (kernels/fenced.c) faults on any host access to backend
# memory and refuses host memory where an op wants backend memory, while
# computing with the CPU ops. So a GRPO run on it must give the CPU run's
# numbers to the bit: through generation, logprobs, training, a checkpoint
# and a resume, in fp32 and in bf16. And policy.backend=cuda where CUDA
# cannot run is an error.
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1

same_numbers() { # RUN REFERENCE WHAT
	if "$top_builddir/tests/tools/rl_compare" metrics "$1" "$2" 0 >"$WORK/compared" 2>&1; then
		ok "$3"
	else
		not_ok "$3:"
		head -5 "$WORK/compared"
	fi
}

ckpt="checkpointing.enabled=true checkpointing.save_period=2"
for prec in float32 bfloat16; do
	for be in cpu fenced; do
		fence=0
		[ "$be" = fenced ] && fence=1
		run=$be-$prec
		# shellcheck disable=SC2086 # $ckpt is two arguments
		RL_OPS_FENCED=$fence expect_status 0 "4 $prec steps on the $be backend, saving every 2" -- \
			"$RLRUN" train $ckpt checkpointing.checkpoint_dir="ck-$run" \
			logger.log_dir="log-$run" grpo.max_num_steps=4 policy.precision=$prec
		cp "log-$run/metrics.jsonl" "first-$run.jsonl"
		# shellcheck disable=SC2086
		RL_OPS_FENCED=$fence expect_status 0 "a resume to step 6 on the $be backend" -- \
			"$RLRUN" train $ckpt checkpointing.checkpoint_dir="ck-$run" \
			logger.log_dir="log-$run" grpo.max_num_steps=6 policy.precision=$prec
	done
	expect_grep "$WORK/out" "^rlrun train: resuming from ck-fenced-$prec/step_4" \
		"the fenced $prec run resumed"
	same_numbers first-fenced-$prec.jsonl first-cpu-$prec.jsonl \
		"the fenced $prec run's first 4 steps are the CPU's, bit for bit"
	same_numbers log-fenced-$prec/metrics.jsonl log-cpu-$prec/metrics.jsonl \
		"after its resume, all 6 $prec steps are the CPU's, bit for bit"
	# the generation engine on device memory: its logprobs are the logprob
	# pass's to the bit at every step, through the resume
	if [ "$(grep -c '"token_mult_prob_error":1\.0,"gen_logprob_max_diff":0\.0,' \
		log-fenced-$prec/metrics.jsonl)" = 6 ]; then
		ok "the fenced $prec run's generation logprobs are exact at all 6 steps"
	else
		not_ok "the fenced $prec run's generation logprobs differ from the logprob pass"
	fi
	if cmp -s ck-fenced-$prec/step_6/rank-00000.safetensors ck-cpu-$prec/step_6/rank-00000.safetensors; then
		ok "the $prec step-6 checkpoints are identical files"
	else
		not_ok "the $prec step-6 checkpoints differ"
	fi
done
expect_grep "$WORK/out" "^rlrun train: backend fenced" "the run names its backend"

# cuda where it cannot run: refused by name, not run on the CPU instead
expect_status 1 "policy.backend=cuda without a usable GPU" -- \
	"$RLRUN" train grpo.max_num_steps=1 policy.backend=cuda logger.log_dir=cuda
expect_grep "$WORK/err" "policy.backend=cuda: " "says why cuda cannot be used"

finish
