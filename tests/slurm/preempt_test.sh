#!/bin/sh
# Preemption on a real Slurm (PreemptType=preempt/partition_prio,
# PreemptMode=REQUEUE): a GRPO job in the low partition is preempted by a
# job in the high one; it saves a checkpoint within the grace time,
# requeues itself, resumes when the test lifts the requeue's BeginTime, and
# ends with the same weights (its final shards, byte for byte) and the same
# metrics (timers aside) as a run never stopped: preempted after a random
# step, synchronous, in bf16, asynchronous (the rollout in flight saved
# with the checkpoint), DAPO's dynamic sampling (several rounds of
# prompts a step), multi-turn episodes (colocated, and asynchronous with
# the episodes generated ahead saved), DPO (the preference data's position saved), SFT
# (rlrun sft: its place in the data saved) and on-policy distillation (the
# teacher loaded again and checked); landing inside the reward program;
# landing inside a checkpoint write; and with a grace time too short for a
# save, where the newest checkpoint is kept and the log says how many steps
# will be redone.
# Where the step matters, the run holds after it until the signal comes
# (RL_HOLD_AFTER_STEP), so that no part races the machine's speed.
# Then the job's end time stops a run ahead of the limit (anchored at the
# job's start, not rlrun's), and a rank killed inside a save leaves the
# previous checkpoint loadable and the partial one ignored.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

host=$(uname -n)
host=${host%%.*}
# the node has 8 CPUs: a high job of 8 tasks needs the low job's 2. A
# preemption the scheduler could not make when the high job came (a job
# before still completing) is tried again at its next periodic pass: every
# 5 s here, not Slurm's 60.
cat >"$WORK/preempt.conf" <<EOF
SchedulerParameters=sched_interval=5
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=low Nodes=$host PriorityTier=1 PreemptMode=REQUEUE GraceTime=60 State=UP
PartitionName=short Nodes=$host PriorityTier=1 PreemptMode=REQUEUE GraceTime=8 State=UP
PartitionName=high Nodes=$host PriorityTier=10 PreemptMode=OFF State=UP
EOF
CLUSTER_CONF_EXTRA=$WORK/preempt.conf
export CLUSTER_CONF_EXTRA
slurm_start

config=$(cd "$top_srcdir/etc/examples" && pwd -P)/grpo-tiny.yaml
work=$(cd "$WORK" && pwd -P)
reward=$(cd "$top_srcdir/tests/slurm" && pwd -P)/digit_reward.awk
# A preemption comes after a random step of 2..21 (the first start holds
# there until it comes): 24 steps leave at least three after every resume
# (the inwrite and short cases below count on steps 20 and 22 too).
steps=24
# small steps (a quarter of a second on two ranks), a checkpoint every 5,
# two ranks cutting every tensor (tp2)
small="grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
policy.parallel.tensor=2 data.env_name=digits checkpointing.enabled=true
checkpointing.save_period=5"

. "$top_srcdir/tests/slurm/jobs.sh"

# The high job takes the whole node: the scheduler preempts the low one
# within seconds (CI once saw more than 60).
preempt() {
	sbatch --parsable -p high -n 8 -o /dev/null --wrap 'sleep 1' >/dev/null ||
		not_ok "the high-priority job was not accepted"
}

# Meanwhile the ranks are held still (SIGSTOP), so the signal lands where
# the test wants it: in the step they were stopped in. Slurm sends SIGCONT
# before the preemption's SIGTERM: that the ranks run again is how the
# test sees the preemption come. CI once waited 90 s while the job had
# been preempted and had ended: one process of the list stayed stopped.
# Which one, the log now says; it is let go.
preempt_frozen() { # JOBID
	pids=$(ranks_of "$1")
	[ -n "$pids" ] || not_ok "job $1 has no rlrun processes to hold"
	# shellcheck disable=SC2086
	kill -STOP $pids
	preempt
	# shellcheck disable=SC2086
	if ! wait_until 90 thawed $pids; then
		not_ok "job $1 was not preempted within 90 s"
		kill -CONT $pids 2>/dev/null
		return
	fi
	sleep 1
	for p in $pids; do
		[ "$(state_of "$p")" = T ] || continue
		echo "# pid $p still stopped after job $1's preemption: parent" \
			"$(cut -d' ' -f4 "/proc/$p/stat" 2>/dev/null), $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")"
		kill -CONT "$p" 2>/dev/null
	done
}

# ---- the run never stopped ----
job_script ref $steps
id=$(submit ref low) && wait_until 120 start_ended ref 1 && [ "$(last_exit ref)" = 0 ] &&
	ok "the uninterrupted run: $steps steps" || {
	not_ok "the uninterrupted run did not finish"
	sed 's/^/  | /' "$work/ref.out" | tail -20
}

# the stop's lines, for the log
show() { # NAME
	grep -E "stopping after|still being written|committed|not saving|redone|requeued|resuming" \
		"$work/$1.out" | sed 's/^/# /'
}

# A run preempted after a random step, requeued and resumed; 1 when it did
# not get that far (the failure is reported). $id: its job. The first
# start holds after that step until the preemption's signal.
preempted_at_random() { # NAME [KEY=VALUE...]
	name=$1
	k=$(($(od -An -N2 -tu2 /dev/urandom) % ${RANDOM_STEPS:-20} + 2))
	echo "# $name: the job is preempted once step $k is done"
	JOB_FIRST_ENV=RL_HOLD_AFTER_STEP=$k job_script "$@"
	id=$(submit "$name" low)
	if ! wait_until 60 held "$name" "$k"; then
		not_ok "$name: step $k never came"
		return 1
	fi
	preempt
	resume_and_finish "$name" "$id" || return 1
	show "$name"
}

# ---- preempted at a random step ----
if preempted_at_random random $steps; then
	expect_grep "$work/random.out" "SIGTERM: stopping after step [0-9]+ of $steps \(job $id ends in [0-9]+ s\)" \
		"random: SIGTERM seen, with the grace time left"
	expect_grep "$work/random.out" "requeued job $id: it resumes from step_[0-9]+" \
		"random: a checkpoint, then the requeue"
	same_end random
fi

# ---- a bf16 run preempted at a random step ----
# the checkpoint holds the fp32 master weights, from which the second start
# rounds the bf16 ones again
bf16=policy.precision=bfloat16
job_script bref $steps $bf16
id=$(submit bref low) && wait_until 120 start_ended bref 1 && [ "$(last_exit bref)" = 0 ] &&
	ok "the uninterrupted bf16 run: $steps steps" || {
	not_ok "the uninterrupted bf16 run did not finish"
	sed 's/^/  | /' "$work/bref.out" | tail -20
}
if preempted_at_random brandom $steps $bf16; then
	same_end brandom bref
fi

# ---- SFT preempted at a random step ----
# rlrun sft's checkpoint holds its place in the data (epoch and position,
# as GRPO's): the resumed run takes the examples the uninterrupted one took
# and ends with its weights and metrics, validation losses included
CONFIG=$(cd "$top_srcdir/etc/examples" && pwd -P)/sft-tiny.yaml
SMALL="policy.train_global_batch_size=16 policy.train_micro_batch_size=8
policy.parallel.tensor=2 checkpointing.enabled=true checkpointing.save_period=5
checkpointing.keep_top_k=null sft.val_period=10 sft.val_at_start=false"
STEPS_KEY=sft.max_num_steps
job_script sref $steps
id=$(submit sref low) && wait_until 120 start_ended sref 1 && [ "$(last_exit sref)" = 0 ] &&
	ok "the uninterrupted SFT run: $steps steps" || {
	not_ok "the uninterrupted SFT run did not finish"
	sed 's/^/  | /' "$work/sref.out" | tail -20
}
if preempted_at_random srandom $steps; then
	expect_grep "$work/srandom.out" "requeued job $id: it resumes from step_[0-9]+" \
		"srandom: a checkpoint, then the requeue"
	same_end srandom sref
fi
unset CONFIG SMALL STEPS_KEY

# ---- on-policy distillation preempted at a random step ----
# the same job distilling from a teacher (three GRPO steps of the tiny
# model, exported): the teacher is loaded again at the second start, its
# hash checked against the checkpoint's, and the run ends as the
# uninterrupted one, weights and metrics (tref and trandom: DAPO's case
# below has dref and drandom)
# shellcheck disable=SC2086
if "$RLRUN" train "$config" $small policy.parallel.tensor=1 grpo.max_num_steps=3 \
	env.digits.command="awk -f $reward" logger.log_dir="$work/teacher-run" \
	checkpointing.checkpoint_dir="$work/teacher.ck" checkpointing.save_period=3 \
	>"$WORK/teacher.out" 2>&1 &&
	"$RLRUN" ckpt export "$work/teacher.ck/step_3" --hf "$work/teacher" >>"$WORK/teacher.out" 2>&1; then
	distill="distillation.val_period=0 teacher.model_name='$work/teacher'"
	# shellcheck disable=SC2086
	job_script tref $steps $distill
	id=$(submit tref low) && wait_until 120 start_ended tref 1 && [ "$(last_exit tref)" = 0 ] &&
		ok "the uninterrupted distillation run: $steps steps" || {
		not_ok "the uninterrupted distillation run did not finish"
		sed 's/^/  | /' "$work/tref.out" | tail -20
	}
	grep -q '"reverse_kl":' "$work/tref/metrics.jsonl" &&
		ok "  it distills (its metrics have reverse_kl)" || not_ok "  no reverse_kl in its metrics"
	# shellcheck disable=SC2086
	if preempted_at_random trandom $steps $distill; then
		same_end trandom tref
	fi
else
	not_ok "the teacher for distillation could not be made:"
	sed 's/^/  | /' "$WORK/teacher.out" | tail -20
fi

# ---- asynchronous GRPO preempted at a random step ----
# 2 training + 2 generation tasks; each step ends with the next rollout
# generated by older weights, which the checkpoint holds as its rollout
# buffer: the requeued run ends as the uninterrupted asynchronous run.
# The first start holds after step k until the preemption: $steps steps, as
# the others (2 + 2 ranks of 32 prompts are the test's dearest run).
async="policy.generation.colocated.enabled=false
policy.generation.colocated.resources.gpus_per_node=2 grpo.async_grpo.enabled=true
loss_fn.use_importance_sampling_correction=true grpo.num_prompts_per_step=32"
export TASKS=4
# shellcheck disable=SC2086
job_script aref $steps $async
id=$(submit aref low) && wait_until 180 start_ended aref 1 && [ "$(last_exit aref)" = 0 ] &&
	ok "the uninterrupted asynchronous run: $steps steps on 2 + 2 tasks" || {
	not_ok "the uninterrupted asynchronous run did not finish"
	sed 's/^/  | /' "$work/aref.out" | tail -20
}
# shellcheck disable=SC2086
if preempted_at_random arandom $steps $async; then
	expect_grep "$work/arandom.out" "step [0-9]+ trains on the rollout in flight that .*rollout_buffer.bin holds" \
		"arandom: the second start trains on the saved rollout in flight"
	same_end arandom aref
fi
unset TASKS

# ---- DAPO preempted at a random step ----
# dynamic sampling takes rounds of prompts until a step has its groups:
# the checkpoint's data position is after every round of its step, and
# each round's seed depends on the step and the round alone, so the
# resumed run takes the same rounds. The arithmetic task's own checker
# (0 or 1) leaves most of the tiny model's groups all wrong: steps take
# two rounds or more.
dapo="grpo.use_dynamic_sampling=true grpo.batch_multiplier=1.5
grpo.dynamic_sampling_max_gen_batches=30 loss_fn.ratio_clip_max=0.28
loss_fn.reference_policy_kl_penalty=0 data.env_name=null"
# shellcheck disable=SC2086
job_script dref 20 $dapo
id=$(submit dref low) && wait_until 120 start_ended dref 1 && [ "$(last_exit dref)" = 0 ] &&
	ok "the uninterrupted DAPO run: 20 steps" || {
	not_ok "the uninterrupted DAPO run did not finish"
	sed 's/^/  | /' "$work/dref.out" | tail -20
}
rounds=$(grep -c '"dynamic_sampling_num_gen_batches":[2-9]' "$work/dref/metrics.jsonl")
[ "$rounds" -gt 0 ] && ok "  dref: $rounds of its steps took more than one round" ||
	not_ok "  dref: no step took a second round"
# shellcheck disable=SC2086
if RANDOM_STEPS=16 preempted_at_random drandom 20 $dapo; then
	same_end drandom dref
fi
unset RANDOM_STEPS

# ---- multi-turn episodes preempted at a random step ----
# calculator-tiny.yaml's episodes (the model's message, the built-in
# calculator's answer, the model's next message) on tp2, colocated: an
# episode draws its tokens from the step's seed, and the environment
# answers a transcript the same way, so the second start plays the steps
# after its checkpoint as the uninterrupted run did. Then asynchronous on
# 2 + 2 tasks: the episodes generated ahead are saved in the checkpoint's
# replay buffer with their loss masks, turns and rewards, and the second
# start trains on them. (train_cmd's env.digits is defined and unused.)
CONFIG=$(cd "$top_srcdir/etc/examples" && pwd -P)/calculator-tiny.yaml
SMALL="grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
policy.parallel.tensor=2 checkpointing.enabled=true checkpointing.save_period=5"
job_script mref $steps
id=$(submit mref low) && wait_until 180 start_ended mref 1 && [ "$(last_exit mref)" = 0 ] &&
	ok "the uninterrupted multi-turn run: $steps steps" || {
	not_ok "the uninterrupted multi-turn run did not finish"
	sed 's/^/  | /' "$work/mref.out" | tail -20
}
grep -q '"avg_turns_per_sample":' "$work/mref/metrics.jsonl" &&
	ok "  mref: its samples are episodes" || not_ok "  mref: no episode metrics"
if preempted_at_random mrandom $steps; then
	same_end mrandom mref
fi
export TASKS=4
# shellcheck disable=SC2086
job_script maref $steps $async
id=$(submit maref low) && wait_until 180 start_ended maref 1 && [ "$(last_exit maref)" = 0 ] &&
	ok "the uninterrupted asynchronous multi-turn run: $steps steps on 2 + 2 tasks" || {
	not_ok "the uninterrupted asynchronous multi-turn run did not finish"
	sed 's/^/  | /' "$work/maref.out" | tail -20
}
# shellcheck disable=SC2086
if preempted_at_random marandom $steps $async; then
	expect_grep "$work/marandom.out" "step [0-9]+ trains on the rollout in flight that .*rollout_buffer.bin holds" \
		"marandom: the second start trains on the saved episodes in flight"
	same_end marandom maref
fi
unset TASKS CONFIG SMALL

# ---- DPO preempted at a random step ----
# preference pairs from a data set walked in shuffled epochs ($steps steps
# are four epochs of six): the checkpoint holds the data's position, and the
# second start takes the same pairs and ends as the uninterrupted DPO run.
# (STEPS_KEY: the steps are the example's dpo.max_num_steps.)
grpo_config=$config grpo_small=$small
config=$(cd "$top_srcdir/etc/examples" && pwd -P)/dpo-tiny.yaml
small="policy.parallel.tensor=2 policy.train_micro_batch_size=4 dpo.val_period=10
checkpointing.enabled=true checkpointing.save_period=5"
STEPS_KEY=dpo.max_num_steps
job_script dporef $steps
id=$(submit dporef low) && wait_until 120 start_ended dporef 1 && [ "$(last_exit dporef)" = 0 ] &&
	ok "the uninterrupted DPO run: $steps steps" || {
	not_ok "the uninterrupted DPO run did not finish"
	sed 's/^/  | /' "$work/dporef.out" | tail -20
}
if preempted_at_random dporandom $steps; then
	same_end dporandom dporef
fi
unset STEPS_KEY
config=$grpo_config small=$grpo_small

# ---- preempted while the reward program scores ----
# Slurm's SIGTERM reaches every process of the step, a copy of the reward
# program too. The first copy takes the hold file the test dropped before
# the job started, says so and waits for the signal, which kills it: a
# fresh copy scores its sample again (it is no crash, which would score
# 0), and the run ends as the uninterrupted one. The copy waits as sleep
# itself: CI saw the signal end a shell's sleep child while the shell
# went on to score.
cat >"$work/held_reward.sh" <<EOF
#!/bin/sh
if rm "$work/inreward.hold" 2>/dev/null; then
	: >"$work/inreward.scoring"
	exec sleep 50
fi
exec awk -f '$reward'
EOF
scoring() { [ -e "$work/inreward.scoring" ]; }
REWARD_CMD="exec sh $work/held_reward.sh" job_script inreward $steps
: >"$work/inreward.hold"
id=$(submit inreward low)
if wait_until 60 scoring; then
	preempt
	if resume_and_finish inreward "$id"; then
		show inreward
		expect_grep "$work/inreward.out" \
			"reward command: sample [0-9]+: killed by signal 15, which stops the job: scored again" \
			"inreward: the copy the preemption killed scored its sample again"
		same_end inreward
	fi
else
	not_ok "inreward: no copy of the reward program took the hold"
fi

# ---- preempted while a checkpoint is being written ----
# each write waits 8 s between this rank's shard and the commit; the ranks
# are held still as soon as step_10's write has begun. The steps after it
# go on meanwhile, and a fast machine would reach step 20, whose save
# waits for step_10's, before they are held: the run holds after step 11.
JOB_ENV=RL_CKPT_WRITE_DELAY=8 JOB_FIRST_ENV=RL_HOLD_AFTER_STEP=11 \
	job_script inwrite $steps checkpointing.save_period=10
id=$(submit inwrite low)
if wait_until 60 tmp_write inwrite; then
	preempt_frozen "$id"
	if resume_and_finish inwrite "$id"; then
		show inwrite
		expect_grep "$work/inwrite.out" "checkpoint step_10 is still being written" \
			"inwrite: the stop came while step_10 was being written"
		# step_10 first, then the stop's own checkpoint
		saves=$(sed -n '/stopping after/,/requeued/p' "$work/inwrite.out" |
			sed -n 's/.*\/step_\([0-9]*\) committed/\1/p' | tr '\n' ' ')
		stop=$(sed -n 's/.*stopping after step \([0-9]*\) .*/\1/p' "$work/inwrite.out")
		want="10 $stop "
		[ "$stop" != 10 ] || want="10 " # stopped at step 10's own boundary
		[ "$saves" = "$want" ] &&
			ok "inwrite: step_10 committed, then step_$stop, then the requeue" ||
			not_ok "inwrite: committed after the stop: ${saves:-none} (stopped after $stop)"
		same_end inwrite
	fi
else
	not_ok "inwrite: no checkpoint write was seen in progress"
fi

# ---- a grace time too short for a save ----
# The partition gives 8 s. A write takes 5 s here, and the last one's
# time, with a margin, says a save would not end in time: the run holds
# after step 22 (step_10 committed, as step_20's save waited for it, and
# step_20 begun), so step_20 is the newest, and the steps after it are
# redone.
JOB_ENV=RL_CKPT_WRITE_DELAY=5 JOB_FIRST_ENV=RL_HOLD_AFTER_STEP=22 \
	job_script short $steps checkpointing.save_period=10
id=$(submit short short)
if wait_until 60 held short 22; then
	preempt
	if resume_and_finish short "$id"; then
		show short
		expect_grep "$work/short.out" "not saving step 2[2-9]: the last checkpoint took [0-9.]+ s and [0-8] s are left" \
			"short: no save begun that would not end"
		expect_grep "$work/short.out" "[2-9] steps will be redone, from step_20" \
			"short: the log says how many steps will be redone"
		expect_grep "$work/short.out" "resuming from $work/short.ck/step_20 " \
			"short: the second start resumes from step_20"
		same_end short
	fi
else
	not_ok "short: the run never held after step 22"
fi

# ---- the job's end time ----
# One minute of time limit, 20 s of it gone before rlrun starts: the run
# must stop from Slurm's end time, counted from the job's start. Counted
# from its own start, it would run into Slurm's kill (TIMEOUT, no requeue).
# The reward program takes 20 ms a sample (a second a step): the run waits
# out the minute on it instead of training hundreds of steps on the CPUs
# the other tests need.
{
	echo '{ system("sleep 0.02") }'
	cat "$reward"
} >"$work/slow_reward.awk"
REWARD_CMD="awk -f $work/slow_reward.awk" JOB_SLEEP=20 \
	job_script walltime 100000 checkpointing.save_period=50
id=$(submit walltime low --time=1)
if wait_until 100 requeued "$id"; then
	show walltime
	ok "walltime: job $id requeued itself before its time limit (restarts $(field "$id" Restarts))"
	expect_grep "$work/walltime.out" "job $id ends in [0-9]+ s, too soon for another step .*: stopping after step [0-9]+ of 100000" \
		"walltime: it stopped for the job's end time"
	stop=$(sed -n 's/.*too soon.*stopping after step \([0-9]*\) .*/\1/p' "$work/walltime.out")
	committed walltime "${stop:-none}" && ok "walltime: step_$stop is committed" ||
		not_ok "walltime: no checkpoint of the step it stopped after"
else
	not_ok "walltime: job $id was not requeued (state $(field "$id" JobState))"
	sed 's/^/  | /' "$work/walltime.out" | tail -20
fi
scancel "$id" 2>/dev/null

# ---- a rank killed inside a save ----
# step_5 is committed; step_10's shards are written and the commit waits:
# a rank killed now leaves tmp_step_10, which the next start ignores and
# removes, resuming from step_5 to the same end.
# UCX's cross-memory-attach transport can kill the other rank with a fatal
# error instead of letting it report the loss (dist_test.sh says more).
shards_10() { committed killed 5 && [ -f "$work/killed.ck/tmp_step_10/rank-00001.safetensors" ]; }
cmd=$(train_cmd killed $steps cluster.collective_timeout=5)
env RL_CKPT_WRITE_DELAY=4 UCX_TLS=^cma timeout 120 sh -c "$cmd" >"$work/killed.out" 2>&1 &
srun_pid=$!
if wait_until 60 shards_10; then
	# the job is the newest one running
	victim=$(ranks_of "$(squeue -h -t R -o %i | sort -n | tail -1)" | tail -1)
	[ -n "$victim" ] && kill -KILL "$victim"
	wait "$srun_pid"
	status=$?
	[ "$status" != 0 ] && ok "killed: a rank killed inside step_10's save fails the step ($status)" ||
		not_ok "killed: the step exited 0"
	expect_status 0 "killed: rlrun ckpt list still works" -- "$RLRUN" ckpt list "$work/killed.ck"
	expect_grep "$WORK/out" "^step_5 .* latest" "killed: it lists step_5 as the latest"
	expect_grep "$WORK/out" "^tmp_step_10 +left by a crash: never loaded" \
		"killed: and the partial tmp_step_10 as a crash's leftover"
	timeout 120 sh -c "$cmd" >>"$work/killed.out" 2>&1 && ok "killed: the next start ran to the end" ||
		not_ok "killed: the next start failed"
	expect_grep "$work/killed.out" "resuming from $work/killed.ck/step_5 " \
		"killed: it resumed from step_5"
	[ -d "$work/killed.ck/tmp_step_10" ] && not_ok "killed: tmp_step_10 is still there" ||
		ok "killed: the partial tmp_step_10 was removed"
	a=$(weights_sum killed) b=$(weights_sum ref)
	[ -n "$a" ] && [ "$a" = "$b" ] && ok "killed: final weights = the uninterrupted run's" ||
		not_ok "killed: final weights differ (sha256 ${a:-none} vs $b)"
	same_as "killed: metrics = the uninterrupted run's, timers aside" \
		metrics "$work/killed/metrics.jsonl" "$work/ref/metrics.jsonl" 0
else
	not_ok "killed: step_10's shards never appeared"
	kill "$srun_pid" 2>/dev/null
fi
finish
