#!/bin/sh
# Refit from training ranks to generation ranks (non-colocated generation)
# on 4 real MPI ranks started by mpiexec: every pairing of tensor
# parallelism on the two sides gives the generation ranks their exact cut
# of the training weights (tests/mpi/test_refit.c).
. "$(dirname "$0")/../cli/lib.sh"
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not installed"; exit 77; }
# MPICH's own leak at exit: see comm_test.sh
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export ASAN_OPTIONS

expect_status 0 "mpiexec -n 4 test_refit" -- mpiexec -n 4 "$top_builddir/tests/mpi/test_refit"
expect_grep "$WORK/out" ' 0 failed' "  its checks ran and passed"
finish
