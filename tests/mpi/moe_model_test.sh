#!/bin/sh
# Expert parallelism in the mixture-of-experts model on real MPI ranks
# started by mpiexec: ep2, ep2 with tp2 (with and without sequence
# parallelism), ep4 and tensor parallelism alone, on 2 and 4 ranks, against
# the whole model over the whole batch (tests/mpi/test_moe_model.c).
. "$(dirname "$0")/lib.sh"

for n in 2 4; do
	ranks_pass "$n" test_moe_model "$top_builddir/tests/mpi/test_moe_model"
done
finish
