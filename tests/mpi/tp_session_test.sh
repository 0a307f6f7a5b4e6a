#!/bin/sh
# The multi-turn generation session on real MPI ranks started by mpiexec:
# episodes on a model cut over 2 ranks (tensor parallel, then 2 pipeline
# stages) are the whole model's, and one turn is rl_generate's
# (tests/mpi/test_tp_session.c).
. "$(dirname "$0")/lib.sh"

ranks_pass 2 test_tp_session "$top_builddir/tests/mpi/test_tp_session"
finish
