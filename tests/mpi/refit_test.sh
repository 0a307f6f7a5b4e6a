#!/bin/sh
# Refit from training ranks to generation ranks (non-colocated generation)
# on 4 real MPI ranks started by mpiexec: every pairing of tensor
# parallelism on the two sides gives the generation ranks their exact cut
# of the training weights (tests/mpi/test_refit.c).
. "$(dirname "$0")/lib.sh"

ranks_pass 4 test_refit "$top_builddir/tests/mpi/test_refit"
finish
