# Shared by the tests that run on a real Slurm: the check helpers of
# tests/cli/lib.sh, plus a throwaway cluster (tests/slurm/cluster.sh) that is
# stopped however the test ends: pass, failure, error or signal.
#
#   slurm_start    skip (exit 77) where no cluster can run, else start one
#                  and export SLURM_CONF
#   slurm_stop     stop it now (also done on exit)
. "$(dirname "$0")/../cli/lib.sh"
PATH=$PATH:/usr/sbin:/sbin
CLUSTER_SH=$top_srcdir/tests/slurm/cluster.sh
CLUSTER=

skip() {
	echo "SKIP: $*"
	exit 77
}

# Where a cluster cannot run, the test is skipped, not failed.
slurm_require() {
	[ "$(id -u)" = 0 ] || skip "needs root to run slurmd (it starts jobs as their user)"
	for c in munged munge slurmctld slurmd srun sbatch sinfo; do
		command -v "$c" >/dev/null || skip "$c not installed (tests/deps-debian.sh installs it)"
	done
	so=$top_builddir/spank_rl.so
	[ -f "$so" ] || skip "$so not built"
	# slurmstepd is not built with ASan: it cannot load a plugin that is
	if nm -D "$so" 2>/dev/null | grep -qE '__(asan|ubsan|tsan)_' ||
		readelf -d "$so" 2>/dev/null | grep -qE 'NEEDED.*lib(asan|ubsan|tsan)'; then
		skip "spank_rl.so is built with sanitizers, which slurmstepd cannot load"
	fi
}

slurm_stop() {
	[ -n "$CLUSTER" ] || return 0
	"$CLUSTER_SH" stop "$CLUSTER" || true
	rm -rf "$CLUSTER"
	CLUSTER=
}

# On a failure the daemons' logs go to the test's log before they are gone.
slurm_cleanup() {
	status=$1
	if [ -n "$CLUSTER" ] && [ "$status" != 0 ] && [ "$status" != 77 ]; then
		for f in "$CLUSTER"/log/slurmctld.log "$CLUSTER"/log/slurmd.log; do
			[ -s "$f" ] && { echo "--- $f (last 20 lines)"; tail -n 20 "$f"; }
		done
	fi
	slurm_stop
	rm -rf "$WORK"
}

# The outer world's Slurm and RL variables (make check inside a job, a
# user's RL_CONFIG) would leak into every srun of the throwaway cluster.
slurm_clean_env() {
	for v in $(env | sed -nE 's/^((RL|SLURM|SBATCH|SALLOC|SRUN)_[A-Za-z0-9_]*)=.*/\1/p'); do
		unset "$v"
	done
}

slurm_start() {
	slurm_require
	slurm_clean_env
	# a short path under /tmp: munged wants every directory above its
	# socket searchable, and socket paths are short
	CLUSTER=$(mktemp -d /tmp/rl-slurm-XXXXXX)
	exports=$("$CLUSTER_SH" start "$CLUSTER") || {
		not_ok "the test cluster did not start"
		finish
		exit 1
	}
	eval "$exports"
}

# Process PID is a task of this test's cluster. make check runs two Slurm
# tests at once, each its own cluster, and both clusters number their jobs
# from 1: a job id or a task rank alone can name the other test's process
# (dist_test.sh once killed preempt_test.sh's rank 2 instead of its own).
# Every task inherits the SLURM_CONF of its srun or sbatch.
of_this_cluster() { # PID
	tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF"
}


# A job that hangs fails its check instead of hanging make check (exit
# status 124). --foreground: Ctrl-C still reaches srun at once.
srun() { timeout --foreground -k 5 60 srun "$@"; }
sbatch() { timeout --foreground -k 5 60 sbatch "$@"; }

trap 'slurm_cleanup $?' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
