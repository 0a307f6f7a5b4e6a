#!/bin/sh
# A job heals itself on a real Slurm: a rank SIGKILLed in the middle of a
# 2-rank GRPO job is named by the other, whose watchdog records the failure
# in the checkpoint directory and requeues the job (checkpointing.
# requeue_on_failure), adding the lost rank's node to its excluded nodes
# (exclude_failed_nodes); the requeued job resumes from the newest
# checkpoint and ends with the weights and metrics (timers aside) of a run
# never stopped. A job whose rank dies on every start stops after
# checkpointing.max_failure_restarts failures with their history, and its
# step ends (no rank of it left behind). And a stopped (SIGSTOP) rank of a
# step that cannot be requeued is ended with its step, instead of holding
# the allocation.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

host=$(uname -n)
host=${host%%.*}
# a requeued job's next start is picked up within 5 s of its release
cat >"$WORK/sched.conf" <<EOF
SchedulerParameters=sched_interval=5
EOF
CLUSTER_CONF_EXTRA=$WORK/sched.conf
export CLUSTER_CONF_EXTRA
slurm_start

config=$(cd "$top_srcdir/etc/examples" && pwd -P)/grpo-tiny.yaml
work=$(cd "$WORK" && pwd -P)
reward=$(cd "$top_srcdir/tests/slurm" && pwd -P)/digit_reward.awk
steps=20
small="grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
policy.parallel.tensor=2 data.env_name=digits checkpointing.enabled=true
checkpointing.save_period=2 cluster.collective_timeout=5"
. "$top_srcdir/tests/slurm/jobs.sh"

# ---- the run never stopped ----
job_script ref $steps
id=$(submit ref debug) && wait_until 120 start_ended ref 1 && [ "$(last_exit ref)" = 0 ] &&
	ok "the uninterrupted run: $steps steps" || {
	not_ok "the uninterrupted run did not finish"
	sed 's/^/  | /' "$work/ref.out" | tail -20
}

# ---- a rank killed mid-run: requeued, resumed, the same end ----
job_script lost $steps checkpointing.exclude_failed_nodes=true
id=$(submit lost debug)
if wait_until 60 stepped lost 1 4; then
	expect_grep "$work/lost.out" "on a failure .* the job is requeued and resumes from the newest checkpoint: 0 of 3 failures used" \
		"lost: the run says what a failure will do"
	victim=$(rank_pid "$id" 1)
	[ -n "$victim" ] && kill -KILL "$victim"
	if wait_until 30 requeued "$id"; then
		ok "lost: job $id requeued itself after its rank 1 was killed (restarts $(field "$id" Restarts))"
		expect_grep "$work/lost.out" "^rlrun: rank 0: .*rank 1 does not answer" \
			"lost: rank 0 names rank 1 as the one that does not answer"
		expect_grep "$work/lost.out" "^rlrun: rank 0: requeued job $id after failure 1 of at most 3: it resumes from step_[0-9]+" \
			"lost: and says it requeued the job, and from where it resumes"
		record=$work/lost.ck/failures/job_$id.start_0.json
		[ -f "$record" ] && grep -q '"lost_ranks": \[' "$record" && grep -A2 '"lost_ranks"' "$record" | grep -qw 1 &&
			ok "lost: the failure is recorded in the checkpoint directory, rank 1 lost" ||
			not_ok "lost: no record of the failure naming rank 1 in $record"
		# Slurm lets the owner change a pending job's excluded nodes;
		# this cluster has one node, so the test lets it back
		exc=$(field "$id" ExcNodeList)
		[ "$exc" = "$host" ] && ok "lost: the lost rank's node is excluded (ExcNodeList=$exc)" ||
			not_ok "lost: ExcNodeList is '$exc', not $host"
		scontrol update JobId="$id" ExcNodeList= ||
			not_ok "lost: ExcNodeList could not be cleared"
		release "$id"
		if wait_until 120 start_ended lost 2; then
			expect_grep "$work/lost.out" "^rlrun train: .* 1 of 3 failures used" \
				"lost: the second start counts the failure"
			same_end lost
		else
			not_ok "lost: the requeued job did not finish"
			sed 's/^/  | /' "$work/lost.out" | tail -20
			scontrol -o show job "$id" | tr ' ' '\n' | sed 's/^/  | /'
			grep "JobId=$id\b" "$CLUSTER/log/slurmctld.log" | sed 's/^/  | /' | tail -30
		fi
	else
		not_ok "lost: job $id was not requeued (state $(field "$id" JobState))"
		sed 's/^/  | /' "$work/lost.out" | tail -20
	fi
else
	not_ok "lost: the job never got going"
	sed 's/^/  | /' "$work/lost.out" | tail -20
fi
scancel "$id" 2>/dev/null

# ---- a rank that dies on every start: stopped after max_failure_restarts ----
# (steps enough never to end: each start is killed after two of them)
job_script doomed 100000 checkpointing.max_failure_restarts=2
id=$(submit doomed debug)
for start in 1 2 3; do
	if ! wait_until 60 stepped doomed "$start" 2; then
		not_ok "doomed: start $start never got going"
		sed 's/^/  | /' "$work/doomed.out" | tail -20
		break
	fi
	victim=$(rank_pid "$id" 1)
	[ -n "$victim" ] && kill -KILL "$victim"
	[ "$start" = 3 ] && break
	if wait_until 30 requeued "$id"; then
		ok "doomed: failure $start requeued the job"
		release "$id"
	else
		not_ok "doomed: failure $start did not requeue the job (state $(field "$id" JobState))"
		break
	fi
done
if wait_until 30 start_ended doomed 3; then
	ok "doomed: the third start ended"
	[ "$(field "$id" Restarts)" = 2 ] && ! requeued "$id" &&
		ok "doomed: and the job was not requeued again (2 restarts)" ||
		not_ok "doomed: state $(field "$id" JobState), restarts $(field "$id" Restarts)"
	expect_grep "$work/doomed.out" "^rlrun: rank 0: job $id failed 3 times \(checkpointing.max_failure_restarts 2\): not requeued again" \
		"doomed: it says why it stops"
	n=$(grep -cE "^rlrun: rank 0:   start [0-2], [0-9T:Z-]+: rank 1 did not answer; " "$work/doomed.out")
	[ "$n" = 3 ] && ok "doomed: with the history of its 3 failures" ||
		not_ok "doomed: $n lines of history, not 3"
	expect_grep "$work/doomed.out" "^rlrun: rank 0: ending job step $id\.0" \
		"doomed: and ends its step"
	[ "$(last_exit doomed)" != 0 ] && ok "doomed: its srun exits non-zero ($(last_exit doomed))" ||
		not_ok "doomed: its srun exits 0"
else
	not_ok "doomed: the third start did not end"
	sed 's/^/  | /' "$work/doomed.out" | tail -20
fi
scancel "$id" 2>/dev/null

# ---- a stopped rank of a step that cannot be requeued ----
# srun, not sbatch: nothing to requeue. Rank 1 is stopped (SIGSTOP) and
# never ends by itself; rank 0 names it and ends the step, so srun
# returns instead of waiting for it until the job's time limit.
cmd=$(train_cmd stopped 100000)
timeout 120 sh -c "$cmd" >"$work/stopped.out" 2>&1 &
srun_pid=$!
if wait_until 60 stepped stopped 0 3; then
	jobid=$(squeue -h -t R -o %i | sort -n | tail -1)
	victim=$(rank_pid "$jobid" 1)
	[ -n "$victim" ] && kill -STOP "$victim"
	stopped_at=$(date +%s)
	for _ in $(seq 300); do
		kill -0 "$srun_pid" 2>/dev/null || break
		sleep 0.1
	done
	took=$(($(date +%s) - stopped_at))
	if kill -0 "$srun_pid" 2>/dev/null; then
		not_ok "stopped: srun still waits 30 s after rank 1 was stopped"
		kill -CONT "$victim" 2>/dev/null
		kill "$srun_pid"
	else
		[ "$took" -le 15 ] && ok "stopped: srun returned ${took} s after rank 1 was stopped" ||
			not_ok "stopped: srun took ${took} s to return (timeout 5 s)"
	fi
	wait "$srun_pid"
	expect_grep "$work/stopped.out" "rlrun: rank 0: .*rank 1 does not answer" \
		"stopped: rank 0 names rank 1"
	expect_grep "$work/stopped.out" "on a failure the job step ends \(not requeued: the job cannot be requeued\)" \
		"stopped: the run said a failure ends its step"
	expect_grep "$work/stopped.out" "rlrun: rank 0: ending job step $jobid\.0" \
		"stopped: and rank 0 ended it"
	s=$(state_of "$victim")
	[ -n "$s" ] && [ "$s" != Z ] && not_ok "stopped: rank 1 ($victim) is still there" ||
		ok "stopped: rank 1 is gone with its step"
else
	not_ok "stopped: the run never got going"
	kill "$srun_pid" 2>/dev/null
fi
finish
