# Shared by the shell tests: where things are, and check helpers that say
# what was expected. Run by `make check` with top_srcdir/top_builddir set.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
RLRUN=$top_builddir/rlrun
# make -j check runs as many tests at once as there are cores, so each
# test's processes take one thread (OpenMP's, and OpenBLAS's through it), as
# a rank bound to one core would: left to the default, every process of
# every test woke a thread per core for each small op and the machine spent
# a third of its time switching between them. One thread also makes the
# numbers the same on every machine, whatever its cores (OpenBLAS sums in
# an order that depends on its threads); train_cli.sh samples a step on
# three threads and on one, and the kernels' threaded paths are
# unit-tested with their thread counts set.
OMP_NUM_THREADS=1
export OMP_NUM_THREADS
failures=0
checks=0
WORK=$(mktemp -d /tmp/rl-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

ok() { checks=$((checks + 1)); echo "ok: $*"; }
not_ok() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }

# expect_status WANT DESCRIPTION -- COMMAND...: runs COMMAND, output in $WORK/out, $WORK/err
expect_status() {
	want=$1 desc=$2
	shift 3
	"$@" >"$WORK/out" 2>"$WORK/err"
	got=$?
	if [ "$got" = "$want" ]; then ok "$desc"; else
		not_ok "$desc: exit status $got, expected $want"
		sed 's/^/  | /' "$WORK/err" | head -20
	fi
}

expect_grep() { # FILE PATTERN DESCRIPTION
	if grep -qE -- "$2" "$1"; then ok "$3"; else
		not_ok "$3: no line matches /$2/ in:"
		sed 's/^/  | /' "$1" | head -20
	fi
}

# rl_compare KIND FILE REFERENCE TOLERANCE (tests/tools), reported as WHAT
same_as() { # WHAT KIND FILE REFERENCE TOLERANCE
	what=$1
	shift
	if "$top_builddir/tests/tools/rl_compare" "$@" >"$WORK/cmp" 2>&1; then
		ok "$what ($(tail -1 "$WORK/cmp"))"
	else
		not_ok "$what: no, they differ:"
		sed 's/^/  | /' "$WORK/cmp" | head -20
	fi
}

finish() {
	echo "$((checks - failures)) passed, $failures failed"
	[ "$failures" = 0 ]
}

# mean of reward_mean over lines FIRST..LAST of a metrics.jsonl
reward_mean() { # FILE FIRST LAST
	sed -nE "$2,$3s/.*\"reward_mean\":([-0-9.eE+]+).*/\1/p" "$1" |
		awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n; else print "nan" }'
}
