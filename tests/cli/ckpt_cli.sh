#!/bin/sh
# Checkpoints of one process: periodic saves and keep_top_k; a run killed
# mid-way resumes from its newest checkpoint and ends with the same
# weights (byte for byte) and metrics (timers aside) as a run never
# stopped, and so does a run stopped by checkpointing.signal; a damaged checkpoint is never loaded (an older one is); what a
# crash leaves is removed; a checkpoint of other weights or another model
# is refused; rlrun ckpt list, verify and export.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
small="grpo.max_num_steps=6 grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
checkpointing.enabled=true checkpointing.save_period=2 checkpointing.keep_top_k=2"
strip_timers() { sed -E 's/,"tokens_per_sec".*//' "$1"; }
# until FILE has a line matching PATTERN, for up to a minute
wait_line() { # FILE PATTERN
	i=0
	# every 20 ms: a step of the small run takes about 100
	while ! grep -q "$2" "$1" && [ $i -lt 3000 ]; do
		sleep 0.02
		i=$((i + 1))
	done
}

# shellcheck disable=SC2086
train() { # NAME [KEY=VALUE...]: checkpoints in NAME.ck, metrics in NAME/
	name=$1
	shift
	"$RLRUN" train $small checkpointing.checkpoint_dir="$name.ck" logger.log_dir="$name" "$@"
}

# ---- the run never stopped ----
expect_status 0 "six steps, a checkpoint every two" -- train full
expect_grep "$WORK/out" "checkpoint full.ck/step_6 committed" "  commits the last step"
[ -d full.ck/step_4 ] && [ -d full.ck/step_6 ] && [ ! -e full.ck/step_2 ] &&
	ok "  keep_top_k=2 keeps step_4 and step_6" || not_ok "  kept: $(ls full.ck)"
[ "$(cat full.ck/latest)" = step_6 ] && ok "  latest names step_6" ||
	not_ok "  latest: $(cat full.ck/latest)"
expect_status 0 "rlrun ckpt list" -- "$RLRUN" ckpt list full.ck
expect_grep "$WORK/out" "^step_6 .* latest$" "  marks the latest"
expect_status 0 "rlrun ckpt verify" -- "$RLRUN" ckpt verify full.ck/step_6
expect_grep "$WORK/out" "every checksum matches; 20 tensors" "  checks every tensor"

# ---- killed during step 5, resumed from step_4 ----
(
	# rlrun itself in the background ($! of a shell function would be a
	# subshell, and killing that would leave rlrun running)
	# shellcheck disable=SC2086
	"$RLRUN" train $small checkpointing.checkpoint_dir=killed.ck logger.log_dir=killed \
		>killed.log 2>&1 &
	pid=$!
	# Once step 5 is done, the run is held (SIGSTOP) and let go 20 ms at a
	# time until step_4 is committed: its files are written behind the
	# steps, so on a busy disk the commit comes after step 5, and a step
	# takes a tenth of a second, so waiting for the commit's line while the
	# run goes on could let it finish. Then it dies between the commits of
	# step_4 and step_6, whatever the disk.
	wait_line killed.log "^step 5/6"
	kill -STOP $pid
	i=0
	while [ ! -d killed.ck/step_4 ] && [ $i -lt 3000 ]; do
		kill -CONT $pid
		sleep 0.02
		kill -STOP $pid
		i=$((i + 1))
	done
	kill -9 $pid
	wait $pid
)
[ -d killed.ck/step_4 ] && [ ! -d killed.ck/step_6 ] &&
	ok "the killed run has step_4 and not step_6" || not_ok "killed run left: $(ls killed.ck)"
expect_status 0 "the killed run, started again" -- train killed
expect_grep "$WORK/out" "resuming from killed.ck/step_4 \\(step 4, 16 optimizer updates" \
	"  resumes from step_4"
if [ "$(strip_timers full/metrics.jsonl)" = "$(strip_timers killed/metrics.jsonl)" ]; then
	ok "  its metrics.jsonl equals the uninterrupted run's, timers aside"
else
	not_ok "  metrics differ:"
	diff full/metrics.jsonl killed/metrics.jsonl | head -6
fi
cmp full.ck/step_6/rank-00000.safetensors killed.ck/step_6/rank-00000.safetensors &&
	ok "  its step_6 weights and moments equal the uninterrupted run's, byte for byte" ||
	not_ok "  step_6 differs"
expect_status 0 "started once more after the last step" -- train killed
expect_grep "$WORK/out" "nothing left to do" "  has nothing left to do"

# ---- stopped by checkpointing.signal during step 3, resumed ----
# (outside Slurm: a make check inside a job must not requeue that job)
(
	# shellcheck disable=SC2086
	env -u SLURM_JOB_ID "$RLRUN" train $small checkpointing.checkpoint_dir=signal.ck \
		logger.log_dir=signal checkpointing.signal=SIGUSR2 >signal.log 2>&1 &
	pid=$!
	wait_line signal.log "^step 2/6"
	kill -USR2 $pid
	wait $pid
	echo "exit $?" >>signal.log
)
expect_grep signal.log "^exit 4$" "SIGUSR2 (checkpointing.signal) stops the run with exit status 4"
stop=$(sed -n 's/^rlrun train: SIGUSR2: stopping after step \([0-9]*\) of 6$/\1/p' signal.log)
[ -n "$stop" ] && ok "  after finishing its step ($stop)" || not_ok "  no stop line in signal.log"
expect_grep signal.log "checkpoint signal.ck/step_$stop committed" "  with a checkpoint of step $stop"
expect_grep signal.log "not a Slurm job, nothing to requeue: the same command resumes from step_$stop" \
	"  and says how to resume"
expect_status 0 "the stopped run, started again" -- train signal
expect_grep "$WORK/out" "resuming from signal.ck/step_$stop " "  resumes from step_$stop"
[ "$(strip_timers full/metrics.jsonl)" = "$(strip_timers signal/metrics.jsonl)" ] &&
	ok "  its metrics.jsonl equals the uninterrupted run's, timers aside" ||
	not_ok "  metrics differ: $(diff full/metrics.jsonl signal/metrics.jsonl | head -4)"
cmp full.ck/step_6/rank-00000.safetensors signal.ck/step_6/rank-00000.safetensors &&
	ok "  its step_6 equals the uninterrupted run's, byte for byte" || not_ok "  step_6 differs"

# ---- a damaged newest checkpoint is never loaded ----
cp -r full.ck damaged.ck
printf 'X' | dd of=damaged.ck/step_6/rank-00000.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null
expect_status 1 "rlrun ckpt verify finds the damage" -- "$RLRUN" ckpt verify damaged.ck/step_6
expect_grep "$WORK/err" "rank-00000.safetensors: xxh3 " "  naming the file"
mkdir damaged.ck/tmp_step_8 damaged.ck/removing_step_0
echo step_8 >damaged.ck/latest.tmp
cp full.ck/step_6/run_state.json damaged.ck/tmp_step_8/
mkdir damaged.ck/step_9
cp -r full/ damaged/
expect_status 0 "a run whose newest checkpoint is damaged" -- train damaged
expect_grep "$WORK/out" "damaged.ck/step_6 failed verification and is kept as .*rejected_step_6; trying an older" \
	"  says so"
expect_grep "$WORK/out" "resuming from damaged.ck/step_4" "  and resumes from step_4"
[ -d damaged.ck/rejected_step_6 ] && ok "  the damaged one is kept aside as rejected_step_6" ||
	not_ok "  no rejected_step_6: $(ls damaged.ck)"
cmp full.ck/step_6/rank-00000.safetensors damaged.ck/step_6/rank-00000.safetensors &&
	ok "  and writes step_6 again, equal to the uninterrupted run's" ||
	not_ok "  the new step_6 differs"
[ ! -e damaged.ck/tmp_step_8 ] && [ ! -e damaged.ck/removing_step_0 ] &&
	[ ! -e damaged.ck/latest.tmp ] &&
	ok "  the leftovers of a crash are removed" || not_ok "  left: $(ls damaged.ck)"
[ -d damaged.ck/step_9 ] && ok "  a step_9 without a manifest is neither loaded nor removed" ||
	not_ok "  step_9 was removed"
if [ "$(strip_timers full/metrics.jsonl)" = "$(strip_timers damaged/metrics.jsonl)" ]; then
	ok "  the metrics of steps 5 and 6 are logged once, as before"
else
	not_ok "  metrics differ:"
	diff full/metrics.jsonl damaged/metrics.jsonl | head -6
fi

# ---- checkpoints that are not this run's ----
expect_status 1 "other starting weights (another seed) are refused" -- \
	train full grpo.seed=7
expect_grep "$WORK/err" "started from other weights than policy.model_name" "  saying why"
expect_status 1 "another model is refused" -- train full \
	policy.model_name="$top_srcdir/tests/fixtures/models/llama"
expect_grep "$WORK/err" "was written for another model" "  saying why"
expect_status 1 "resume=must without a checkpoint" -- train nothing checkpointing.resume=must
expect_grep "$WORK/err" "holds no complete checkpoint" "  says so"
expect_status 1 "resume=never over a run's checkpoints" -- train full checkpointing.resume=never
expect_grep "$WORK/err" "checkpointing.resume is never, but full.ck holds checkpoints" \
	"  is refused rather than mixing two runs"

# ---- export ----
expect_status 0 "rlrun ckpt export --hf" -- "$RLRUN" ckpt export full.ck/step_6 --hf hf-full
expect_status 0 "  the export of the resumed run's step_6" -- \
	"$RLRUN" ckpt export killed.ck/step_6 --hf hf-killed
cmp hf-full/model.safetensors hf-killed/model.safetensors &&
	ok "  both are the same model.safetensors" || not_ok "  the exports differ"
expect_status 0 "  rlrun forward reads the export" -- "$RLRUN" forward --model hf-full --ids 1,2,3
expect_status 1 "export into another model is refused" -- \
	"$RLRUN" ckpt export full.ck/step_6 --hf hf-bad --model "$top_srcdir/tests/fixtures/models/llama"
expect_grep "$WORK/err" "is not the model of full.ck/step_6" "  naming both"
expect_status 2 "export without --hf is a usage error" -- "$RLRUN" ckpt export full.ck/step_6

# ---- bf16: the checkpoints keep the fp32 master weights ----
bf16=policy.precision=bfloat16
expect_status 0 "six bf16 steps" -- train bf16-full $bf16
[ "$(strip_timers full/metrics.jsonl)" != "$(strip_timers bf16-full/metrics.jsonl)" ] &&
	ok "  compute other numbers than the fp32 run" || not_ok "  bf16 changed nothing"
(
	# shellcheck disable=SC2086
	"$RLRUN" train $small $bf16 checkpointing.checkpoint_dir=bf16-killed.ck \
		logger.log_dir=bf16-killed >bf16-killed.log 2>&1 &
	pid=$!
	wait_line bf16-killed.log "^step 5/6"
	kill -9 $pid
	wait $pid
)
expect_status 0 "the bf16 run killed in step 5, started again" -- train bf16-killed $bf16
expect_grep "$WORK/out" "resuming from bf16-killed.ck/step_4 " "  resumes from step_4"
[ "$(strip_timers bf16-full/metrics.jsonl)" = "$(strip_timers bf16-killed/metrics.jsonl)" ] &&
	ok "  its metrics.jsonl equals the uninterrupted bf16 run's, timers aside" ||
	not_ok "  metrics differ: $(diff bf16-full/metrics.jsonl bf16-killed/metrics.jsonl | head -4)"
cmp bf16-full.ck/step_6/rank-00000.safetensors bf16-killed.ck/step_6/rank-00000.safetensors &&
	ok "  its step_6 equals the uninterrupted run's, byte for byte" || not_ok "  step_6 differs"
expect_status 0 "rlrun ckpt export of a bf16 run" -- \
	"$RLRUN" ckpt export bf16-full.ck/step_6 --hf hf-bf16
expect_grep "$WORK/out" "(builtin:tiny-llama, BF16)" "  says it writes bf16"
header() { head -c 4096 "$1" | tr -d '\000'; }
header hf-bf16/model.safetensors | grep -q '"dtype":"BF16"' &&
	! header hf-bf16/model.safetensors | grep -q '"dtype":"F32"' &&
	ok "  every tensor is BF16" || not_ok "  not all BF16: $(header hf-bf16/model.safetensors | head -c 300)"
grep -q '"torch_dtype": "bfloat16"' hf-bf16/config.json &&
	ok "  config.json says bfloat16" || not_ok "  config.json: $(grep dtype hf-bf16/config.json)"
header hf-full/model.safetensors | grep -q '"dtype":"BF16"' &&
	not_ok "  the fp32 run's export has BF16 tensors" || ok "  the fp32 run's export stays F32"
"$RLRUN" forward --model hf-bf16 --ids 1,2,3 >fwd-export.txt 2>&1 &&
	"$RLRUN" forward --model hf-full --ids 1,2,3 >fwd-full.txt 2>&1 &&
	ok "  rlrun forward reads the bf16 export" || not_ok "  rlrun forward on the bf16 export failed"
finish
