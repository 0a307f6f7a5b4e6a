# The helpers of the tests that submit training jobs to the test Slurm
# (preempt_test.sh, failure_test.sh), sourced after tests/slurm/lib.sh and
# slurm_start. They read, when called: config (the run's YAML), small (its
# KEY=VALUE settings), reward (the digits reward program), work (the
# directory of every run's files) and RLRUN.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck shell=sh disable=SC2154,SC2015
# the srun of a run that trains into $work/NAME and $work/NAME.ck, on
# TASKS tasks (2 unless set), scored by REWARD_CMD (the digits reward
# unless set); CONFIG, SMALL and STEPS_KEY, when set, take the place of
# the GRPO config, its small settings and grpo.max_num_steps
train_cmd() { # NAME STEPS [KEY=VALUE...]
	name=$1 n=$2
	shift 2
	# shellcheck disable=SC2086
	echo "srun --mpi=pmi2 -n ${TASKS:-2} --rl-config='${CONFIG:-$config}' '$RLRUN'" \
		${SMALL:-$small} "${STEPS_KEY:-grpo.max_num_steps}=$n" \
		"'env.digits.command=${REWARD_CMD:-awk -f $reward}'" \
		"logger.log_dir='$work/$name' checkpointing.checkpoint_dir='$work/$name.ck'" "$@"
}

# $work/NAME.sh, a batch script of the run, saying when each start begins
# and how its srun ended. Its environment: JOB_ENV (ENV=VALUE...),
# JOB_FIRST_ENV (ENV=VALUE... of the first start only), and JOB_SLEEP
# seconds to wait before the srun.
job_script() { # NAME STEPS [KEY=VALUE...]
	{
		echo '#!/bin/sh'
		for e in ${JOB_ENV:-}; do echo "export $e"; done
		for e in ${JOB_FIRST_ENV:-}; do
			echo "[ \"\${SLURM_RESTART_COUNT:-0}\" != 0 ] || export $e"
		done
		echo 'echo "job start, restart ${SLURM_RESTART_COUNT:-0}"'
		[ -z "${JOB_SLEEP:-}" ] || echo "sleep $JOB_SLEEP"
		train_cmd "$@"
		echo 'echo "srun exit $?"'
	} >"$work/$1.sh"
}

submit() { # NAME PARTITION [SBATCH OPTIONS...]: prints the job id
	name=$1 part=$2
	shift 2
	sbatch --parsable -p "$part" -n "${TASKS:-2}" --requeue --open-mode=append -o "$work/$name.out" "$@" \
		"$work/$name.sh"
}

field() { # JOBID FIELD: from scontrol show job, empty once the job is gone
	scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# until COMMAND succeeds, up to SECONDS; 1 when it never does
wait_until() { # SECONDS COMMAND...
	n=$(($1 * 10))
	shift
	until "$@"; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.1
	done
}

# the job's START-th start has run its srun to the end (a requeue kills
# the batch script of the start before: it prints no exit)
start_ended() { # NAME START
	starts=$(grep -c '^job start' "$work/$1.out" 2>/dev/null)
	[ "${starts:-0}" -ge "$2" ] &&
		grep -E '^(job start|srun exit)' "$work/$1.out" | tail -1 | grep -q '^srun exit'
}
last_exit() { grep '^srun exit' "$work/$1.out" | tail -1 | cut -d' ' -f3; }
requeued() { [ "$(field "$1" JobState)" = PENDING ] && [ "$(field "$1" Reason)" = BeginTime ]; }
tmp_write() { ls -d "$work/$1.ck"/tmp_step_* >/dev/null 2>&1; }
# the run holds after step STEP (RL_HOLD_AFTER_STEP, rlrun(1)) until the
# signal that stops it: a preemption then comes after that step, however
# fast the machine runs them
held() { grep -q "holding after step $2 " "$work/$1.out" 2>/dev/null; } # NAME STEP
committed() { [ -f "$work/$1.ck/step_$2/manifest.json" ]; }

# the first word of process PID's command line (empty once it is gone:
# 2>/dev/null comes first to silence the < too)
command_of() { tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" | head -1; }
# the pids of the job's rlrun ranks. A rank's reward program, spawned but
# not yet exec'd, is an rlrun process of the job too for a moment: its
# parent is a rank, and it is not one (held and then gone, it once made the
# preemption look done before it came, and the run finished unpreempted).
ranks_of() { # JOBID
	for p in /proc/[0-9]*; do
		# slurmstepd starts tasks through /proc/self/exe: comm says "exe"
		[ "$(command_of "${p#/proc/}")" = "$RLRUN" ] || continue
		parent=$(cut -d' ' -f4 "$p/stat" 2>/dev/null)
		[ -n "$parent" ] && [ "$(command_of "$parent")" != "$RLRUN" ] || continue
		of_this_cluster "${p#/proc/}" || continue
		tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "SLURM_JOB_ID=$1" && echo "${p#/proc/}"
	done
}
# the pid of the job's task RANK (its SLURM_PROCID)
rank_pid() { # JOBID RANK
	for p in $(ranks_of "$1"); do
		tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_PROCID=$2" && echo "$p"
	done
}
# the job's START-th start has printed COUNT progress lines
stepped() { # NAME START COUNT
	k=$(awk -v s="$2" '/^job start/ { n++ } n == s && /^step [0-9]+\// { k++ } END { print k + 0 }' \
		"$work/$1.out" 2>/dev/null)
	[ "${k:-0}" -ge "$3" ]
}
# the state of process PID (T: stopped); empty once it is gone
state_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1; }
# some process of PIDS is no longer stopped, or gone: Slurm sends SIGCONT
# to every process of the step at once
thawed() { # PIDS...
	for p in "$@"; do
		[ "$(state_of "$p")" = T ] || return 0
	done
	return 1
}

# Lets a requeued job start now instead of at its BeginTime (about two
# minutes on). Not in the second its requeue ended: slurmd revokes the
# job's credentials at the requeue, in whole seconds, and refuses a start
# within that second ("Job credential revoked"), which ends the job.
release() { # JOBID
	sleep 1.1
	scontrol update JobId="$1" StartTime=now
}

# after the requeue: lift BeginTime, then wait for the second start to end
resume_and_finish() { # NAME JOBID
	if ! wait_until 60 requeued "$2"; then
		not_ok "$1: job $2 is not requeued (state $(field "$2" JobState), reason $(field "$2" Reason))"
		sed 's/^/  | /' "$work/$1.out" | tail -20
		return 1
	fi
	ok "$1: job $2 requeued itself (pending, reason BeginTime, restarts $(field "$2" Restarts))"
	release "$2"
	wait_until 120 start_ended "$1" 2 || {
		not_ok "$1: the requeued job did not finish"
		sed 's/^/  | /' "$work/$1.out" | tail -20
		return 1
	}
}

weights_sum() { # NAME: one checksum over the latest checkpoint's shards (a run
	# cut short has fewer lines of metrics, which same_end compares too)
	latest=$(cat "$work/$1.ck/latest" 2>/dev/null)
	cat "$work/$1.ck/${latest:-none}"/rank-*.safetensors 2>/dev/null | sha256sum | cut -c1-16
}

# same weights and metrics as the run never stopped (REF, or ref)
same_end() { # NAME [REF]
	[ "$(last_exit "$1")" = 0 ] && ok "$1: the second start ran to the end" ||
		not_ok "$1: the second start's srun exited $(last_exit "$1")"
	expect_grep "$work/$1.out" "resuming from $work/$1.ck/step_[0-9]+ .*SLURM_RESTART_COUNT=1" \
		"$1: the second start resumed from a checkpoint, restart count 1"
	a=$(weights_sum "$1") b=$(weights_sum "${2:-ref}")
	[ -n "$a" ] && [ "$a" = "$b" ] &&
		ok "$1: final weights = the uninterrupted run's (shards' sha256 $a)" ||
		not_ok "$1: final weights differ (sha256 ${a:-none} vs $b)"
	same_as "$1: metrics = the uninterrupted run's, timers aside" \
		metrics "$work/$1/metrics.jsonl" "$work/${2:-ref}/metrics.jsonl" 0
}

