#!/bin/sh
# Tensor and pipeline parallelism in the model on real MPI ranks started by
# mpiexec: the cut model over 2 and 4 ranks against the whole one
# (log-probabilities, logits, gathered gradients, KV-cache prefill and
# decode), and 2 and 4 uneven pipeline stages through 1F1B
# (tests/mpi/test_tp_model.c); and a rank's cut read from the files part
# by part against the whole model loaded and cut.
. "$(dirname "$0")/lib.sh"

# the fixtures whose files a cut is read from, part by part
RL_FIXTURES=$top_srcdir/tests/fixtures/models
export RL_FIXTURES
for n in 2 4; do
	ranks_pass "$n" test_tp_model "$top_builddir/tests/mpi/test_tp_model"
done
finish
