#!/bin/sh
# The comm layer on real MPI ranks started by mpiexec: every collective over
# the world and over each group of several layouts (tests/mpi/test_comm.c
# checks the values in closed form and the members against the layout's
# tables), then the NCCL backend where one is built (it skips without a GPU).
. "$(dirname "$0")/../cli/lib.sh"
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not installed"; exit 77; }
bin=$top_builddir/tests/mpi
# Under the sanitizer build: MPICH 4.0.2 with UCX leaks 1016 bytes in 9
# allocations made by a module it unloads before exit (a bare MPI_Init and
# MPI_Finalize does the same); no suppression can name an unloaded module,
# so leak checking is off for these ranks. ASan's other checks and UBSan
# stay on.
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export ASAN_OPTIONS

for case in "1 1 1 1" "2 1 1 1" "4 2 1 2" "8 2 2 1" "8 1 2 2" "8 2 2 2"; do
	set -- $case
	n=$1
	shift
	expect_status 0 "mpiexec -n $n test_comm tp=$1 pp=$2 cp=$3" -- \
		mpiexec -n "$n" "$bin/test_comm" "$@"
	expect_grep "$WORK/out" ' 0 failed' "  its checks ran and passed"
done

if [ -x "$bin/comm_nccl_check" ]; then
	mpiexec -n 1 "$bin/comm_nccl_check" >"$WORK/out" 2>&1
	case $? in
	0) ok "NCCL backend, world size 1" ;;
	77) echo "skip: NCCL backend: $(cat "$WORK/out")" ;;
	*) not_ok "NCCL backend, world size 1:"; sed 's/^/  | /' "$WORK/out" | head -20 ;;
	esac
fi
finish
