#!/bin/sh
# Tensor and pipeline parallelism in the model on real MPI ranks started by
# mpiexec: the cut model over 2 and 4 ranks against the whole one
# (log-probabilities, logits, gathered gradients, KV-cache prefill and
# decode), and 2 and 4 uneven pipeline stages through 1F1B
# (tests/mpi/test_tp_model.c).
. "$(dirname "$0")/../cli/lib.sh"
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not installed"; exit 77; }
# MPICH's own leak at exit: see comm_test.sh
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export ASAN_OPTIONS

for n in 2 4; do
	expect_status 0 "mpiexec -n $n test_tp_model" -- \
		mpiexec -n "$n" "$top_builddir/tests/mpi/test_tp_model"
	expect_grep "$WORK/out" ' 0 failed' "  its checks ran and passed"
done
finish
