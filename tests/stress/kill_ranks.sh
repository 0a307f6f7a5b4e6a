#!/bin/sh
# kill_ranks.sh: kills (SIGKILL) or stops (SIGSTOP) a random rank of a
# training run at a random moment, again and again, and holds every
# surviving rank to the watchdog's promise (rlrun(1), WATCHDOG): each one
# names the lost rank and exits within cluster.collective_timeout + 10 s.
# Not in make check (a full run takes an hour or more); CI keeps a few of
# these cases in tests/slurm/dist_test.sh.
#
#   tests/stress/kill_ranks.sh [-n TRIALS] [-l mpiexec|srun] [-u default|ci]
#                              [-t TIMEOUT] [-s SEED] [-a "KILL STOP"]
#                              [-L "tp2 pp2 dp2 ep2"] [-f 0|1] [-c 0|1] [-o DIR]
#
#   -n  trials (200); layouts and actions are taken in turn, the rank, the
#       moment and whether it lands in the setup at random (seeded by -s)
#   -l  the launcher: srun on a throwaway test Slurm (needs root; the
#       default where it can run), or mpiexec (MPICH's hydra: it ends
#       every rank itself once one dies, so a KILL there shows hydra's
#       report, not ours; STOP shows ours)
#   -u  UCX settings: default (MPICH's and UCX's own), or ci (UCX_TLS=^cma,
#       as tests/slurm/dist_test.sh runs)
#   -t  cluster.collective_timeout in seconds (5)
#   -L  the layouts: tp2 (tp2 x dp2 on 4 ranks), pp2 (pp2 x dp2), dp2 (2
#       ranks), dp4 (4 ranks), ep2 (the MoE fixture, ep2 on 4 ranks)
#   -f  1: the fenced backend (RL_OPS_FENCED=1), whose device collectives
#       take the staged transport; 0: the CPU's MPI (default)
#   -c  0: no checkpoints (and so no stop signals caught); 1 (default): a
#       checkpoint every step
#   -o  where to keep the failed trials' logs (a temporary directory)
#
# Each trial: launch, wait for the first step (or, one trial in eight, a
# moment of the setup), wait no more (one trial in four) or a random 0-3 s,
# hit one rank, then watch the others. With checkpoints every step, a hit
# lands inside a checkpoint write as often as anywhere else; pp2 has
# pipeline sends and receives, ep2 the experts' all-to-all, every layout
# generation and its collectives.
# A trial passes when every survivor exited by the deadline and said which
# rank does not answer, the victim among them, and the launcher ended too
# (a stopped rank does not hold the job). A failed trial keeps its
# logs, with gdb backtraces of every rank still alive at the deadline.
# Ends with "N of N trials ended in time with the right rank named".
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$(cd "$here/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
export top_srcdir top_builddir
RLRUN=$(cd "$top_builddir" && pwd)/rlrun
[ -x "$RLRUN" ] || {
	echo "kill_ranks.sh: $RLRUN not built (set top_builddir)" >&2
	exit 2
}

trials=200 launcher= ucx=default timeout=5 seed=$$ actions="KILL STOP"
layouts="tp2 pp2 dp2 ep2" fenced=0 keep= ckpt=1
while getopts n:l:u:t:s:a:L:f:c:o: opt; do
	case $opt in
	n) trials=$OPTARG ;;
	l) launcher=$OPTARG ;;
	u) ucx=$OPTARG ;;
	t) timeout=$OPTARG ;;
	s) seed=$OPTARG ;;
	a) actions=$OPTARG ;;
	L) layouts=$OPTARG ;;
	f) fenced=$OPTARG ;;
	c) ckpt=$OPTARG ;;
	o) keep=$OPTARG ;;
	*)
		sed -n '9,11p' "$0" >&2
		exit 2
		;;
	esac
done
if [ -z "$launcher" ]; then
	launcher=mpiexec
	[ "$(id -u)" = 0 ] && command -v slurmd >/dev/null && launcher=srun
fi
case $ucx in
default) ;;
ci) UCX_TLS=^cma && export UCX_TLS ;;
*)
	echo "kill_ranks.sh: -u default or ci" >&2
	exit 2
	;;
esac
[ -n "$keep" ] || keep=$(mktemp -d /tmp/rl-stress-XXXXXX)
mkdir -p "$keep"
keep=$(cd "$keep" && pwd -P)
work=$(mktemp -d /tmp/rl-stress-run-XXXXXX)
deadline=$((timeout + 10))

cleanup() {
	[ -n "${run_pid:-}" ] && kill -KILL "$run_pid" 2>/dev/null
	for p in ${ranks:-}; do kill -KILL "$p" 2>/dev/null; done
	[ -n "${cluster:-}" ] && "$top_srcdir/tests/slurm/cluster.sh" stop "$cluster" && rm -rf "$cluster"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$launcher" = srun ]; then
	PATH=$PATH:/usr/sbin:/sbin
	for v in $(env | sed -nE 's/^((RL|SLURM|SBATCH|SALLOC|SRUN)_[A-Za-z0-9_]*)=.*/\1/p'); do
		unset "$v"
	done
	cluster=$(mktemp -d /tmp/rl-slurm-XXXXXX)
	exports=$(CLUSTER_CPUS=8 "$top_srcdir/tests/slurm/cluster.sh" start "$cluster") || exit 1
	eval "$exports"
fi

reward=$top_srcdir/tests/slurm/digit_reward.awk
moe=$top_srcdir/tests/fixtures/models/qwen3-moe
small="grpo.max_num_steps=100000 grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
data.env_name=digits checkpointing.save_period=1 checkpointing.keep_top_k=1
cluster.collective_timeout=$timeout checkpointing.enabled=$([ "$ckpt" = 1 ] && echo true || echo false)"

# the ranks and settings of a layout
layout() { # NAME
	case $1 in
	tp2) echo "4 policy.parallel.tensor=2" ;;
	pp2) echo "4 policy.parallel.pipeline=2" ;;
	dp2) echo "2" ;;
	dp4) echo "4" ;;
	ep2) echo "4 policy.parallel.expert=2 policy.model_name=$moe grpo.num_prompts_per_step=4" ;;
	*) return 1 ;;
	esac
}

# drawn: a number in [0, N) from awk's seeded generator, the next one at
# each call (not in a subshell: the count must stay)
draws=0
draw() { # N
	draws=$((draws + 1))
	drawn=$(awk -v s="$seed" -v k="$draws" -v n="$1" \
		'BEGIN { srand(s); for (i = 0; i < k; i++) r = rand(); print int(r * n) }')
}
now() { date +%s.%N; }

command_of() { tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" | head -1; }
env_of() { tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | sed -n "s/^$2=//p"; }
# the trial's rank processes as "PID:RANK" (not their reward programs,
# which are rlrun children of a rank for a moment), told by the tag
# RL_STRESS_TRIAL=PID.TRIAL (this script's pid): several may run at once
find_ranks() {
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$(command_of "$pid")" = "$RLRUN" ] || continue
		parent=$(cut -d' ' -f4 "$p/stat" 2>/dev/null)
		[ -n "$parent" ] && [ "$(command_of "$parent")" != "$RLRUN" ] || continue
		[ "$(env_of "$pid" RL_STRESS_TRIAL)" = "$$.$trial" ] || continue
		r=$(env_of "$pid" PMI_RANK)
		[ -n "$r" ] || r=$(env_of "$pid" SLURM_PROCID)
		echo "$pid:$r"
	done
}
alive() { # PID: exists and is not a zombie
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -n "$state" ] && [ "$state" != Z ]
}

passed=0 failed=0
set -- $layouts
n_layouts=$#
set -- $actions
n_actions=$#
trial=0
while [ "$trial" -lt "$trials" ]; do
	trial=$((trial + 1))
	# shellcheck disable=SC2086
	set -- $layouts
	i=$(((trial - 1) % n_layouts + 1))
	eval "name=\${$i}"
	# shellcheck disable=SC2086
	set -- $actions
	i=$(((trial - 1) / n_layouts % n_actions + 1))
	eval "action=\${$i}"
	# shellcheck disable=SC2046
	set -- $(layout "$name")
	n=$1
	shift
	dir=$work/t$trial
	mkdir -p "$dir"
	draw 8
	in_setup=$((drawn == 0))
	# one in four right after the step (as tests/slurm/dist_test.sh hits)
	draw 4000
	extra_ms=$((drawn < 1000 ? 0 : drawn - 1000))
	draw "$n"
	victim=$drawn
	if [ "$launcher" = srun ]; then
		set -- timeout -k 5 300 srun --mpi=pmi2 -n "$n" -o "$dir/out" -e "$dir/err" "$RLRUN" train "$@"
	else
		set -- timeout -k 5 300 mpiexec -n "$n" "$RLRUN" train "$@"
	fi
	# shellcheck disable=SC2086
	RL_STRESS_TRIAL=$$.$trial RL_OPS_FENCED=$fenced "$@" $small \
		"env.digits.command=awk -f $reward" logger.log_dir="$dir/log" \
		checkpointing.checkpoint_dir="$dir/ck" >"$dir/launcher.out" 2>"$dir/launcher.err" &
	run_pid=$!
	started=$(now)
	ranks=
	# the moment: the setup (the ranks exist), or a step's metrics plus
	# the extra wait (the metrics are polled alone: a look at every
	# process takes longer than a step)
	for _ in $(seq 1200); do
		found=$(find_ranks)
		if [ "$(echo "$found" | grep -c :)" = "$n" ]; then
			ranks=$found
			break
		fi
		kill -0 "$run_pid" 2>/dev/null || break
		sleep 0.05
	done
	for _ in $(seq 3000); do
		[ "$in_setup" = 1 ] || [ -s "$dir/log/metrics.jsonl" ] && break
		kill -0 "$run_pid" 2>/dev/null || break
		sleep 0.02
	done
	sleep "$(awk -v m="$extra_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
	vpid=$(echo "$ranks" | tr ' ' '\n' | sed -n "s/^\([0-9]*\):$victim\$/\1/p")
	if [ -z "$vpid" ] || ! alive "$vpid"; then
		echo "trial $trial ($name, $action rank $victim): the run was not going; skipped"
		sed 's/^/  | /' "$dir"/launcher.err "$dir"/err 2>/dev/null | tail -5
		kill -KILL "$run_pid" 2>/dev/null
		wait "$run_pid" 2>/dev/null
		trial=$((trial - 1))
		draws=$((draws + 7))
		sleep 1
		continue
	fi
	kill -"$action" "$vpid"
	hit=$(now)
	phase=setup
	[ -s "$dir/log/metrics.jsonl" ] && phase="step $(($(wc -l <"$dir/log/metrics.jsonl") + 1))"
	# wait for the survivors, up to the deadline and a little more to
	# tell a late exit from a hang
	late= took=
	while :; do
		left=
		for pr in $ranks; do
			p=${pr%%:*}
			[ "$p" = "$vpid" ] && continue
			alive "$p" && left="$left $pr"
		done
		t=$(awk -v a="$hit" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
		[ -z "$left" ] && {
			took=$t
			break
		}
		if awk -v t="$t" -v d="$deadline" 'BEGIN { exit !(t > d + 5) }'; then
			late=$left
			break
		fi
		sleep 0.1
	done
	errs="$dir/launcher.err"
	[ -f "$dir/err" ] && errs="$errs $dir/err"
	why=
	if [ -n "$late" ]; then
		why="still running $deadline s after the hit:$late"
		for pr in $late; do
			p=${pr%%:*}
			{
				echo "=== rank ${pr#*:} (pid $p)"
				gdb -p "$p" -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^(#|Thread)'
			} >>"$dir/backtraces.txt"
		done
	elif awk -v t="$took" -v d="$deadline" 'BEGIN { exit !(t > d) }'; then
		why="the survivors took $took s (deadline $deadline s)"
	elif [ "$launcher" = mpiexec ] && [ "$action" = KILL ] &&
		grep -q "PID $vpid RUNNING AT .*" "$dir/launcher.out" &&
		grep -q "EXIT CODE: 9" "$dir/launcher.out"; then
		: # hydra ended every rank at once and named the killed one itself
	else
		for pr in $ranks; do
			r=${pr#*:}
			[ "$r" = "$victim" ] && continue
			# shellcheck disable=SC2086
			grep -hqE "^rlrun: rank $r: .*ranks? ([0-9]+,)*$victim(,[0-9]+)* do(es)? not answer" $errs &&
				continue
			# before MPI_Init returns no rank can ask another: a survivor
			# says it waited there, and the launcher names the task
			# shellcheck disable=SC2086
			grep -hqE "^rlrun: rank $r: MPI_Init_thread .* has waited" $errs &&
				grep -hqE "task $victim: (Killed|Stopped)" $errs && continue
			why="${why}rank $r did not name rank $victim; "
		done
	fi
	# the job itself ends too: a stopped rank must not hold it (under srun
	# the survivors end the step; hydra ends its ranks itself)
	if [ -z "$why" ]; then
		for _ in $(seq 100); do
			kill -0 "$run_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$run_pid" 2>/dev/null && why="the launcher still runs 10 s after the survivors ended"
	fi
	for p in $ranks; do kill -KILL "${p%%:*}" 2>/dev/null; done
	kill -KILL "$run_pid" 2>/dev/null
	wait "$run_pid" 2>/dev/null
	ranks= run_pid=
	if [ -z "$why" ]; then
		passed=$((passed + 1))
		echo "trial $trial: $name, $action rank $victim in $phase: ended after $took s, named"
		rm -rf "$dir"
	else
		failed=$((failed + 1))
		echo "trial $trial: $name, $action rank $victim in $phase: FAILED: $why"
		# shellcheck disable=SC2086
		grep -h '^rlrun: rank' $errs | sed 's/^/  | /' | head -12
		cp -r "$dir" "$keep/t$trial"
	fi
	# a stopped rank's step may linger in slurmstepd for a moment
	[ "$launcher" = srun ] && sleep 1
done
echo "$passed of $trials trials ended in time with the right rank named ($failed failed;" \
	"launcher $launcher, UCX $ucx, timeout $timeout s, fenced $fenced, checkpoints $ckpt, seed $seed)"
[ "$failed" = 0 ] && rm -rf "$keep"
[ "$failed" = 0 ]
