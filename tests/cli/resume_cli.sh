#!/bin/sh
# checkpointing.resume with checkpoints present but none loadable: auto
# stops with an error naming the directory and why each was refused (a
# run requeued over a damaged checkpoint must not silently start again
# from step 1), at this start and the next; auto_or_fresh starts at step 1
# and says so.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
small="grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
checkpointing.enabled=true checkpointing.save_period=2 checkpointing.checkpoint_dir=run.ck"
# shellcheck disable=SC2086
train() { "$RLRUN" train $small "$@"; }

expect_status 0 "two steps, checkpointed" -- train grpo.max_num_steps=2 logger.log_dir=first
[ -d run.ck/step_2 ] && ok "  step_2 is written" || not_ok "  no step_2: $(ls run.ck)"
# one byte changed inside the weights: the manifest's checksum no longer matches
printf 'X' | dd of=run.ck/step_2/rank-00000.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null

expect_status 1 "resume: auto over a damaged checkpoint stops" -- \
	train grpo.max_num_steps=4 logger.log_dir=auto
expect_grep "$WORK/err" "checkpointing.resume is auto, but no checkpoint in run.ck loads \\(step_2: run.ck/step_2/rank-00000.safetensors: xxh3 [0-9a-f]+, the manifest says [0-9a-f]+, now rejected_step_2\\)" \
	"  naming the directory, the checkpoint and why it was refused"
expect_grep "$WORK/err" "set checkpointing.resume: auto_or_fresh to start afresh" "  and how to start afresh"
[ ! -s auto/metrics.jsonl ] && ok "  no step was trained" || not_ok "  it trained: $(head -c 200 auto/metrics.jsonl)"

expect_status 1 "started again, it still stops" -- train grpo.max_num_steps=4 logger.log_dir=auto
expect_grep "$WORK/err" "no checkpoint in run.ck loads \\(1 set aside by an earlier start \\(rejected_step_2\\)\\)" \
	"  naming the one an earlier start set aside"

expect_status 0 "resume: auto_or_fresh starts afresh" -- \
	train grpo.max_num_steps=2 logger.log_dir=fresh checkpointing.resume=auto_or_fresh
expect_grep "$WORK/out" "note: no checkpoint in run.ck loads .*checkpointing.resume is auto_or_fresh: starting afresh at step 1" \
	"  with a note"
[ "$(sed -n 's/^{"step":\([0-9]*\),.*/\1/p' fresh/metrics.jsonl | tr '\n' ' ')" = "1 2 " ] &&
	ok "  at step 1" || not_ok "  steps logged: $(cut -c1-12 fresh/metrics.jsonl)"
[ -d run.ck/step_2 ] && ok "  and checkpoints again" || not_ok "  no step_2: $(ls run.ck)"

expect_status 0 "resume: auto with a loadable checkpoint resumes" -- \
	train grpo.max_num_steps=3 logger.log_dir=fresh
expect_grep "$WORK/out" "resuming from run.ck/step_2 " "  from it"

# two ranks: they agree, one message and a plain exit
mpi_asan=${ASAN_OPTIONS:-}:detect_leaks=0
# shellcheck disable=SC2086
train2() {
	timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" mpiexec -n 2 \
		"$RLRUN" train $small policy.parallel.tensor=2 checkpointing.checkpoint_dir=two.ck "$@"
}
expect_status 0 "two ranks, two steps, checkpointed" -- train2 grpo.max_num_steps=2 logger.log_dir=two
printf 'X' | dd of=two.ck/step_2/rank-00001.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null
expect_status 1 "two ranks, resume: auto over a damaged checkpoint stops" -- \
	train2 grpo.max_num_steps=4 logger.log_dir=two-auto
[ "$(grep -c "checkpointing.resume is auto, but no checkpoint in two.ck loads" "$WORK/err")" = 1 ] &&
	ok "  with one message" || not_ok "  messages: $(grep -c "resume is auto" "$WORK/err")"
expect_grep "$WORK/err" "two.ck/step_2/rank-00001.safetensors: xxh3 " "  naming the damaged file"
! grep -q "abort" "$WORK/err" && ok "  and no abort" || not_ok "  aborted: $(grep abort "$WORK/err" | head -3)"

finish
