#!/bin/sh
# Expert parallelism in the mixture-of-experts model on real MPI ranks
# started by mpiexec: ep2, ep2 with tp2 (with and without sequence
# parallelism), ep4 and tensor parallelism alone, on 2 and 4 ranks, against
# the whole model over the whole batch (tests/mpi/test_moe_model.c).
. "$(dirname "$0")/../cli/lib.sh"
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not installed"; exit 77; }
# MPICH's own leak at exit: see comm_test.sh
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export ASAN_OPTIONS

for n in 2 4; do
	expect_status 0 "mpiexec -n $n test_moe_model" -- \
		timeout --foreground -k 5 600 mpiexec -n "$n" "$top_builddir/tests/mpi/test_moe_model"
	expect_grep "$WORK/out" ' 0 failed' "  its checks ran and passed"
done
finish
