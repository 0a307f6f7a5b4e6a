#!/bin/sh
# Multi-turn GRPO end to end (rollout/episodes.h): `rlrun train` plays each
# sample as an episode with an environment program whose rules the test
# knows (the observation "ab" and reward 0.5 after turn 1; done at turn 2,
# reward 1 when the model's message there begins with a letter a to m,
# else 0), so every metric below is worked out from its log; tensor,
# pipeline and data parallelism and non-colocated generation give the
# single rank's numbers (1e-4, the tolerance tests/mpi/fenced_layouts_test.sh
# holds every layout's metrics to), the group's first rank alone talking to
# the environment; an environment that fails on every episode stops the
# run; the built-in calculator task runs through `rlrun env calculator`.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
mpi_asan=${ASAN_OPTIONS:-}:detect_leaks=0

# the rules above; each step is logged as "EPISODE TURN REWARD" (one line
# per answer); CRASH=1 exits at the first step
cat >steps.sh <<'SH'
#!/bin/sh
while IFS= read -r line; do
	case $line in
	*'"type":"step"'* | *'"type": "step"'*)
		[ "${CRASH:-0}" = 1 ] && { echo "steps.sh: told to crash" >&2; exit 3; }
		ep=$(printf '%s\n' "$line" | sed -n 's/.*"episode": *\([0-9]*\).*/\1/p')
		turn=$(printf '%s\n' "$line" | sed -n 's/.*"turn": *\([0-9]*\).*/\1/p')
		first=$(printf '%s\n' "$line" | sed -n 's/.*"message": *"\(.\).*/\1/p')
		if [ "$turn" -ge 2 ]; then
			case $first in [a-m]) r=1 ;; *) r=0 ;; esac
			echo "$ep $turn $r" >>"$LOG"
			printf '{"episode":%s,"observation":"","reward":%s,"done":true}\n' "$ep" "$r"
		else
			echo "$ep $turn 0.5" >>"$LOG"
			printf '{"episode":%s,"observation":"ab","reward":0.5,"done":false}\n' "$ep"
		fi ;;
	esac
done
SH
chmod +x steps.sh

# 2 steps of 4 prompts x 4 episodes, at most 3 turns of 4 tokens
run() { # NAME RANKS [KEY=VALUE...]
	name=$1 ranks=$2
	shift 2
	rm -f "$name.log"
	timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" LOG="$WORK/$name.log" \
		mpiexec -n "$ranks" "$RLRUN" train grpo.max_num_steps=2 grpo.num_prompts_per_step=4 \
		grpo.num_generations_per_prompt=4 grpo.max_rollout_turns=3 grpo.val_period=0 \
		policy.max_total_sequence_length=40 policy.generation.max_new_tokens=4 \
		policy.train_global_batch_size=16 policy.train_micro_batch_size=8 \
		data.env_name=steps env.steps.command="exec $WORK/steps.sh" env.steps.multi_turn=true \
		logger.log_dir="$name" "$@"
}
count() { wc -l <"$1" | tr -d ' '; } # FILE

expect_status 0 "GRPO on episodes with an environment program, one rank" -- run one 1
# every episode: two turns, "ab" (two tokens of the built-in tokenizer)
# once; its reward the sum of its turns' in the log
want=$(awk '{ s += $3 } END { printf "%.4f\n", s / 32 }' one.log)
got=$(reward_mean one/metrics.jsonl 1 2)
[ "$got" = "$want" ] && ok "  the mean reward is the environment's rewards summed per episode ($want)" ||
	not_ok "  the mean reward is $got, the environment's give $want"
for key in '"avg_turns_per_sample":2.0,' '"max_turns_per_sample":2,' \
	'"natural_termination_rate":1.0,' '"max_turns_reached_rate":0.0,' \
	'"truncated_fraction":0.0,' '"mean_env_tokens_per_sample":2.0,' '"env_failures":0,'; do
	[ "$(grep -c -- "$key" one/metrics.jsonl)" = 2 ] && ok "  both steps: $key" ||
		not_ok "  not $key in: $(head -c 600 one/metrics.jsonl)"
done
# the observations were not generated: over the model's own tokens,
# generation and the logprob pass agree bit for bit
grep -q '"token_mult_prob_error":1\.0,"gen_logprob_max_diff":0\.0,' one/metrics.jsonl &&
	ok "  the model's tokens' generation logprobs are the logprob pass's" ||
	not_ok "  they differ: $(grep -o '"gen_logprob_max_diff":[^,]*' one/metrics.jsonl)"
[ "$(count one.log)" = 64 ] && ok "  the environment answered 2 steps x 16 episodes x 2 turns" ||
	not_ok "  the environment answered $(count one.log) turns, not 64"

expect_status 0 "the same on two ranks, tensor parallel" -- run tp2 2 policy.parallel.tensor=2
same_as "  its metrics are the single rank's (1e-4)" metrics tp2/metrics.jsonl one/metrics.jsonl 1e-4
[ "$(count tp2.log)" = 64 ] && ok "  the group's first rank alone talked to the environment" ||
	not_ok "  the environment answered $(count tp2.log) turns, not 64"
expect_status 0 "the same on two ranks, pipeline parallel" -- run pp2 2 policy.parallel.pipeline=2
same_as "  its metrics are the single rank's (1e-4)" metrics pp2/metrics.jsonl one/metrics.jsonl 1e-4
[ "$(count pp2.log)" = 64 ] && ok "  the first stage alone talked to the environment" ||
	not_ok "  the environment answered $(count pp2.log) turns, not 64"
expect_status 0 "the same on two ranks, data parallel" -- run dp2 2
same_as "  its metrics are the single rank's (1e-4)" metrics dp2/metrics.jsonl one/metrics.jsonl 1e-4
[ "$(count dp2.log)" = 64 ] && ok "  each rank played its share" ||
	not_ok "  the environment answered $(count dp2.log) turns, not 64"

expect_status 0 "the same non-colocated: two training ranks, two generation ranks play" -- \
	run nc 4 policy.generation.colocated.enabled=false \
	policy.generation.colocated.resources.gpus_per_node=2
same_as "  its metrics are the single rank's (1e-4)" metrics nc/metrics.jsonl one/metrics.jsonl 1e-4
[ "$(count nc.log)" = 64 ] && ok "  the generation ranks played every episode once" ||
	not_ok "  the environment answered $(count nc.log) turns, not 64"

expect_status 1 "an environment that fails on every episode stops the run" -- \
	env CRASH=1 "$RLRUN" train grpo.max_num_steps=2 grpo.num_prompts_per_step=4 \
	grpo.num_generations_per_prompt=4 logger.log_dir=crash data.env_name=steps \
	env.steps.command="exec $WORK/steps.sh" env.steps.multi_turn=true
expect_grep "$WORK/err" "the environment steps \\('exec $WORK/steps.sh'\\) failed on every one of the 16 episodes \\(16 crashed, 0 timed out, 0 bad output\\): stopping rather than training on reward 0" \
	"  naming the environment, its command and what happened"
[ ! -s crash/metrics.jsonl ] && ok "  no step was trained" || not_ok "  it trained"
# non-colocated, the failures are the generation ranks': their counts and
# the first failure's text reach training rank 0 in the episodes' reports
export CRASH=1
expect_status 1 "the same non-colocated: the generation ranks' failures stop the run" -- \
	run nccrash 4 policy.generation.colocated.enabled=false \
	policy.generation.colocated.resources.gpus_per_node=2
unset CRASH
expect_grep "$WORK/err" "rank 0: the environment steps \\('exec $WORK/steps.sh'\\) failed on every one of the 16 episodes \\(16 crashed, 0 timed out, 0 bad output\\): stopping rather than training on reward 0; the first: episode [0-9]+ turn 1: copy [0-9]+ exited with status 3: steps.sh: told to crash" \
	"  with the replicas' counts and their first failure"
[ ! -s nccrash/metrics.jsonl ] && ok "  no step was trained" || not_ok "  it trained"

# refused by the config's rules (exit 2), or at setup (exit 1) without them
timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" mpiexec -n 2 "$RLRUN" train \
	logger.log_dir=ep data.env_name=steps env.steps.command="exec $WORK/steps.sh" \
	env.steps.multi_turn=true policy.parallel.expert=2 \
	policy.model_name="$top_srcdir/tests/fixtures/models/qwen3-moe" >out 2>err
got=$?
[ "$got" = 1 ] || [ "$got" = 2 ] && ok "multi-turn with expert parallelism is refused" ||
	not_ok "multi-turn with expert parallelism: exit status $got"
expect_grep err "policy.parallel.expert: .*(multi-turn episodes|with multi-turn)" "  naming the key"

expect_status 0 "the built-in calculator task, through rlrun env calculator" -- "$RLRUN" train \
	data.dataset_name=calculator grpo.max_num_steps=2 grpo.max_rollout_turns=2 \
	logger.log_dir=calculator
expect_grep calculator/metrics.jsonl '"avg_turns_per_sample":[12]' "  its steps played episodes"

finish
