#!/bin/sh
# What a run logs besides metrics.jsonl, on the CPU: TensorBoard event
# files whose records decode (framing and CRCs checked) and hold every
# number of metrics.jsonl under the tags rlrun(1) documents (TENSORBOARD),
# read by TensorBoard's own EventAccumulator too where python's tensorboard
# is installed; a resumed run's own file; the GPU monitor's note on the
# CPU backend; the step lines and the end-of-run summary.
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
DUMP=$top_builddir/tests/tools/rl_tb_dump
tiny="grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=4 grpo.val_period=2
grpo.max_val_samples=8 logger.tensorboard_enabled=true"
# the first run at the built-in run's own sizes, whose reward moves
first="grpo.val_period=2 grpo.max_val_samples=8 logger.tensorboard_enabled=true"

# "KEY TAG" per row of rlrun(1)'s table, from the page itself
sed -n '/^\.SH TENSORBOARD/,/^\.SH /p' "$top_srcdir/man/rlrun.1" |
	sed -n '/^\.ft CR/,/^\.ft$/p' | sed '1,2d;$d' >"$WORK/table"
[ "$(wc -l <"$WORK/table")" -gt 10 ] && ok "rlrun(1) maps $(wc -l <"$WORK/table") keys to tags" ||
	not_ok "no key-to-tag table under TENSORBOARD in rlrun(1)"

# "STEP TAG VALUE" for every number of a metrics.jsonl, tags as rlrun(1) says
expected() { # METRICS_JSONL
	tr -d '{}' <"$1" | awk -F, -v table="$WORK/table" '
		BEGIN { while ((getline l < table) > 0) { split(l, f, " "); tag[f[1]] = f[2] } }
		{
			step = ""
			for (i = 1; i <= NF; i++) {
				split($i, kv, ":"); k = kv[1]; gsub("\"", "", k)
				if (k == "step") step = kv[2]
			}
			for (i = 1; i <= NF; i++) {
				split($i, kv, ":"); k = kv[1]; gsub("\"", "", k)
				if (k == "step" || kv[2] == "null") continue
				if (k in tag) t = tag[k]
				else if (k ~ /^node\./) t = "ray/" k
				else t = "train/" k
				print step, t, kv[2]
			}
		}' | sort
}

# both "STEP TAG VALUE" lists hold the same scalars, values equal to a
# float's precision (TensorBoard keeps 32 bits)
same_scalars() { # EXPECTED GOT DESCRIPTION
	n=$(wc -l <"$1")
	if [ "$n" -gt 0 ] && [ "$(cut -d' ' -f1,2 "$1")" = "$(cut -d' ' -f1,2 "$2")" ] &&
		paste -d' ' "$1" "$2" | awk '{ d = $3 - $6; if (d < 0) d = -d; a = $3 < 0 ? -$3 : $3
			if (d > 1e-6 * (a > 1 ? a : 1)) { print "  " $0; bad = 1 } } END { exit bad }'; then
		ok "$3 ($n scalars)"
	else
		not_ok "$3:"
		diff "$1" "$2" | head -10 | sed 's/^/  | /'
	fi
}

# ---- a run with TensorBoard on ----
# shellcheck disable=SC2086
expect_status 0 "a run with logger.tensorboard_enabled" -- \
	"$RLRUN" train grpo.max_num_steps=3 logger.log_dir=tb checkpointing.enabled=false $first
cp "$WORK/out" run.log
set -- tb/tensorboard/events.out.tfevents.*
[ $# = 1 ] && [ -f "$1" ] && ok "one event file in <logger.log_dir>/tensorboard, as NeMo-RL: ${1##*/}" ||
	not_ok "event files in tb/tensorboard: $*"
expect_grep run.log "^rlrun train: TensorBoard event file tb/tensorboard/events" \
	"  the run says where"
if "$DUMP" "$1" >dump 2>dump.err; then ok "  every record's length, CRCs and Event decode"; else
	not_ok "  a bad record: $(cat dump.err)"
fi
expected tb/metrics.jsonl >want
sort dump >got
same_scalars want got "  every number of metrics.jsonl, under rlrun(1)'s tags"
expect_grep got "^1 train/reward " "  reward_mean is NeMo-RL's train/reward"
expect_grep got "^2 validation/accuracy " "  val_reward is validation/accuracy"
expect_grep got "^3 timing/train/total_step_time " "  the timers are timing/train/*"
tb_py=${PYTHON:-python3}
if "$tb_py" -c 'import tensorboard' 2>/dev/null; then
	if "$tb_py" "$top_srcdir/tests/fixtures/make_tensorboard_fixture.py" check tb/tensorboard \
		tb/metrics.jsonl >acc 2>&1; then
		ok "  TensorBoard's EventAccumulator reads them all: $(tail -1 acc)"
	else
		not_ok "  TensorBoard's EventAccumulator:"
		sed 's/^/  | /' acc | tail -10
	fi
else
	echo "  (python's tensorboard not importable: EventAccumulator check skipped)"
fi

# ---- the step lines and the summary ----
expect_grep run.log '^step 2/3  reward [0-9.]+ ±[0-9.]+  loss [-+][0-9.]+  kl [0-9.]+  grad norm [0-9.e+-]+  lr [0-9.e+-]+  response [0-9]+ tok, [0-9]+% cut  reward failures 0$' \
	"the step line: reward, loss, kl, grad norm, lr, response length, cut share, reward failures"
expect_grep run.log '^    gen [0-9.]+s .* \| [0-9.]+ s/step, [0-9]+ tok/s, ETA [0-9]+:[0-9]{2}$' \
	"  and a second line with the times"
expect_grep run.log '^rlrun train: 3 steps \(1 to 3\) in [0-9]+:[0-9]{2}:[0-9]{2}, [0-9.]+ s/step, [0-9]+ tok/s$' \
	"the summary: steps, time, tokens/s"
r1=$(sed -nE '1s/.*"reward_mean":([-0-9.eE+]+).*/\1/p' tb/metrics.jsonl)
r3=$(sed -nE '3s/.*"reward_mean":([-0-9.eE+]+).*/\1/p' tb/metrics.jsonl)
best=$(sed -nE 's/.*"step":([0-9]+),"reward_mean":([-0-9.eE+]+).*/\2 \1/p' tb/metrics.jsonl |
	sort -g -k1,1 -k2,2nr | tail -1)
want=$(printf 'rlrun train: reward %.3f at step 1, %.3f at step 3; best %.3f at step %s' \
	"$r1" "$r3" "${best% *}" "${best#* }")
expect_grep run.log "^$want\$" "  the first, final and best reward, from metrics.jsonl ($want)"
expect_grep run.log '^rlrun train: validation reward [0-9.]+ at step 2; best [0-9.]+ at step 2$' \
	"  the validation reward"
expect_grep run.log '^rlrun train: metrics in tb/metrics.jsonl \(plots: rlrun plot tb\)$' \
	"  where the metrics and plots are"
expect_grep run.log '^rlrun train: TensorBoard files in tb/tensorboard ' "  and the TensorBoard files"

# ---- resumed: a new file that drops the redone steps ----
ck="checkpointing.enabled=true checkpointing.checkpoint_dir=ck checkpointing.save_period=1"
# shellcheck disable=SC2086
expect_status 0 "2 steps with checkpoints" -- \
	"$RLRUN" train grpo.max_num_steps=2 logger.log_dir=rs $ck $tiny \
	logger.tensorboard.log_dir=rs-tb
expect_grep "$WORK/out" "^rlrun train: 2 steps \(1 to 2\)" "  (a summary of 2 steps)"
expect_grep "$WORK/out" "^rlrun train: checkpoints in ck \(rlrun ckpt list ck\)$" \
	"  the summary says where the checkpoints are"
# the first run's file: the names sort by time, then by pid, so two runs
# in one second may sort either way
first=$(echo rs-tb/events.out.tfevents.*)
# shellcheck disable=SC2086
expect_status 0 "resumed to step 3" -- \
	"$RLRUN" train grpo.max_num_steps=3 logger.log_dir=rs $ck $tiny logger.tensorboard.log_dir=rs-tb
set -- rs-tb/events.out.tfevents.*
[ $# = 2 ] && ok "  the resumed run writes a file of its own (logger.tensorboard.log_dir)" ||
	not_ok "  event files: $*"
second=$1
[ "$second" = "$first" ] && second=$2
"$DUMP" "$second" >dump2 && [ "$(head -1 dump2)" = "purge 3" ] &&
	ok "  which starts by telling TensorBoard to drop steps from 3 on" ||
	not_ok "  the resumed file starts with: $(head -1 dump2)"
expect_grep "$WORK/out" "^rlrun train: 1 step \(3 to 3\)" "  one step: \"1 step\", not \"1 steps\""
expect_status 0 "rlrun ckpt list" -- "$RLRUN" ckpt list ck
expect_grep "$WORK/out" "^step_3 .* 1 rank: tp1 pp1 cp1 dp1 " "  a one-rank checkpoint: \"1 rank\", not \"1 ranks\""
"$DUMP" "$@" | grep -v purge | sort >got
expected rs/metrics.jsonl >want
same_scalars want got "  the two files hold every number of the resumed metrics.jsonl"

# ---- the GPU monitor on the CPU backend ----
# shellcheck disable=SC2086
expect_status 0 "logger.monitor_gpus on the CPU backend: the run goes on" -- \
	"$RLRUN" train grpo.max_num_steps=1 logger.log_dir=gpu checkpointing.enabled=false \
	logger.monitor_gpus=true logger.gpu_monitoring.collection_interval=0.5 $tiny
expect_grep "$WORK/out" "^rlrun train: 1 step of 8 prompts x 4 samples, 1 optimizer update per step;" \
	"  a one-step run says \"1 step\""
expect_grep "$WORK/out" "^rlrun train: note: logger.monitor_gpus: nothing to monitor: the run computes on the cpu backend, not on a GPU; the run goes on without GPU readings$" \
	"  with one note saying why there is nothing to do"
[ "$(grep -c 'monitor_gpus' "$WORK/out")" = 1 ] && ok "  only one" ||
	not_ok "  $(grep -c monitor_gpus "$WORK/out") notes"
! grep -q '"node\.' gpu/metrics.jsonl && ok "  and no GPU keys in metrics.jsonl" ||
	not_ok "  GPU keys in metrics.jsonl on the CPU"
# the readings are gathered from every training rank each step: with
# none to give, two ranks still meet in it, and the first speaks once
if command -v mpiexec >/dev/null 2>&1; then
	expect_status 0 "logger.monitor_gpus on two CPU ranks" -- \
		timeout --foreground -k 5 300 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
		mpiexec -n 2 "$RLRUN" train grpo.max_num_steps=2 grpo.num_prompts_per_step=8 \
		policy.train_global_batch_size=64 policy.train_micro_batch_size=16 \
		logger.log_dir=gpu2 checkpointing.enabled=false logger.monitor_gpus=true \
		logger.tensorboard_enabled=true
	[ "$(grep -c 'monitor_gpus' "$WORK/out")" = 1 ] && [ "$(wc -l <gpu2/metrics.jsonl)" = 2 ] &&
		ok "  both steps logged, one note" ||
		not_ok "  $(grep -c monitor_gpus "$WORK/out") notes, $(wc -l <gpu2/metrics.jsonl) steps"
	set -- gpu2/tensorboard/events.out.tfevents.*
	[ $# = 1 ] && ok "  one event file, the first rank's" || not_ok "  event files: $*"
fi

# ---- DAPO's metrics: NeMo-RL's tags, as rlrun(1)'s table says ----
expect_status 0 "two DAPO steps with TensorBoard on" -- \
	"$RLRUN" train "$top_srcdir/etc/examples/dapo-tiny.yaml" grpo.max_num_steps=2 \
	grpo.num_prompts_per_step=16 logger.log_dir=dapo logger.tensorboard_enabled=true
set -- dapo/tensorboard/events.out.tfevents.*
"$DUMP" "$1" | sort >dapo.got
expected dapo/metrics.jsonl >dapo.want
same_scalars dapo.want dapo.got "  every number of its metrics.jsonl, under rlrun(1)'s tags"
for tag in train/filtered_reward train/dynamic_sampling_num_gen_batches \
	train/dynamic_sampling_num_discarded_valid_samples train/dynamic_sampling_num_dropped_groups; do
	expect_grep dapo.got "^1 $tag " "  $tag"
done
finish
