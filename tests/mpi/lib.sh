# The MPI tests' shell side: tests/cli/lib.sh, a skip without mpiexec, and
# one way to run a test program on real ranks.
. "$(dirname "$0")/../cli/lib.sh"
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not installed"; exit 77; }
# Under the sanitizer build: MPICH 4.0.2 with UCX leaks 1016 bytes in 9
# allocations made by a module it unloads before exit (a bare MPI_Init and
# MPI_Finalize does the same); no suppression can name an unloaded module,
# so leak checking is off for these ranks. ASan's other checks and UBSan
# stay on.
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export ASAN_OPTIONS

# ranks_pass N DESCRIPTION PROGRAM [ARG...]: PROGRAM on N ranks, 600 s at
# most (a rank left out of a collective hangs the others), exits 0 and
# reports its checks with none failed
ranks_pass() {
	n=$1 desc=$2
	shift 2
	expect_status 0 "mpiexec -n $n $desc" -- timeout --foreground -k 5 600 mpiexec -n "$n" "$@"
	expect_grep "$WORK/out" ' 0 failed' "  its checks ran and passed"
}
