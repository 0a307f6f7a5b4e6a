#!/bin/sh
# A reward program that cannot run fails loudly: a missing or
# non-executable one is refused before the model loads, one that fails on
# every sample of a step stops the run (every rank alike) with its
# traceback shown once, instead of training on reward 0.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
mpi_asan=${ASAN_OPTIONS:-}:detect_leaks=0
# the model does not exist: a refusal that names the reward program came
# before the model was looked for
nomodel=policy.model_name=$WORK/no-such-model
count() { grep -c -- "$2" "$1"; } # FILE TEXT

expect_status 1 "a missing reward program is refused" -- "$RLRUN" train "$nomodel" \
	logger.log_dir=missing env.judge.command="$WORK/judge.py --strict" data.env_name=judge
expect_grep "$WORK/err" "env.judge.command '$WORK/judge.py --strict' cannot run: $WORK/judge.py: no such file" \
	"  naming the key, the command and what is wrong, before the model loads"

printf '#!/bin/sh\necho 1\n' >judge.sh
chmod 644 judge.sh
expect_status 1 "a reward program that is not executable is refused" -- "$RLRUN" train "$nomodel" \
	logger.log_dir=noexec env.judge.command="$WORK/judge.sh" data.env_name=judge
expect_grep "$WORK/err" "env.judge.command '$WORK/judge.sh' cannot run: $WORK/judge.sh is not executable \\(chmod \\+x it" \
	"  saying how to fix it"

expect_status 1 "a reward program not in PATH is refused" -- "$RLRUN" train "$nomodel" \
	logger.log_dir=nopath env.judge.command="no-such-judge-xyz --fast" data.env_name=judge
expect_grep "$WORK/err" "cannot run: no-such-judge-xyz: not found in PATH" "  saying where it looked"

expect_status 1 "a script its interpreter cannot find is refused" -- "$RLRUN" train "$nomodel" \
	logger.log_dir=noscript env.judge.command="python3 -u $WORK/judge.py" data.env_name=judge
expect_grep "$WORK/err" "cannot run: $WORK/judge.py: no such file \\(the script python3 is to run\\)" \
	"  naming the script"

# a Python program with a bug, as far as what it prints goes
cat >crash.sh <<'SH'
#!/bin/sh
IFS= read -r line
cat >&2 <<'TB'
Traceback (most recent call last):
  File "judge.py", line 7, in <module>
ZeroDivisionError: division by zero
TB
exit 1
SH
chmod +x crash.sh
expect_status 1 "a reward program that crashes on every sample stops the run" -- \
	"$RLRUN" train grpo.max_num_steps=2 grpo.num_prompts_per_step=8 logger.log_dir=crash \
	env.judge.command="$WORK/crash.sh" data.env_name=judge
expect_grep "$WORK/err" "env.judge.command '$WORK/crash.sh' failed on every one of the 128 samples \\(128 crashed, 0 timed out, 0 not a number\\): stopping rather than training on reward 0; the first: sample [0-9]+: exited with status 1: ZeroDivisionError: division by zero" \
	"  naming the key, the command and what happened"
[ "$(count "$WORK/err" "Traceback (most recent call last)")" = 1 ] &&
	ok "  its traceback is shown once" ||
	not_ok "  its traceback is shown $(count "$WORK/err" "Traceback (most recent call last)") times"
[ ! -s crash/metrics.jsonl ] && ok "  no step was trained" || not_ok "  it trained: $(head -c 200 crash/metrics.jsonl)"

expect_status 1 "the same on two ranks: they stop together" -- \
	timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" mpiexec -n 2 \
	"$RLRUN" train grpo.max_num_steps=2 grpo.num_prompts_per_step=8 policy.parallel.tensor=2 \
	policy.train_global_batch_size=64 policy.train_micro_batch_size=16 logger.log_dir=crash2 \
	env.judge.command="$WORK/crash.sh" data.env_name=judge
[ "$(count "$WORK/err" "failed on every one of the 128 samples")" = 1 ] &&
	ok "  with one message" || not_ok "  with $(count "$WORK/err" "failed on every one") messages"
! grep -q "abort" "$WORK/err" && ok "  and no abort" || not_ok "  aborted: $(grep abort "$WORK/err" | head -3)"

# a program that fails now and then does not stop the run (train_cli.sh
# checks that its failures are counted)
cat >some.sh <<'SH'
#!/bin/sh
while IFS= read -r line; do
	case "$line" in *'"index":3,'*) exit 1 ;; esac
	echo 1
done
SH
chmod +x some.sh
expect_status 0 "a reward program that fails on one sample only" -- \
	"$RLRUN" train grpo.max_num_steps=1 grpo.num_prompts_per_step=8 logger.log_dir=some \
	env.judge.command="$WORK/some.sh" data.env_name=judge
expect_grep some/metrics.jsonl '"reward_failures":1[,}]' "  trains, its failure counted"

finish
