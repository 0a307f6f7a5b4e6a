#!/bin/sh
# The comm layer on real MPI ranks started by mpiexec: every collective over
# the world and over each group of several layouts (tests/mpi/test_comm.c
# checks the values in closed form and the members against the layout's
# tables), then the NCCL backend where one is built (it skips without a GPU).
. "$(dirname "$0")/lib.sh"
bin=$top_builddir/tests/mpi

for case in "1 1 1 1" "2 1 1 1" "4 2 1 2" "8 2 2 1" "8 1 2 2" "8 2 2 2"; do
	set -- $case
	n=$1
	shift
	ranks_pass "$n" "test_comm tp=$1 pp=$2 cp=$3" "$bin/test_comm" "$@"
done

# the staged transport (ranks sharing a GPU, the fenced backend): every
# collective through each group's device face, held to the same values
for case in "2 2 1 1" "8 2 2 2"; do
	set -- $case
	n=$1
	shift
	ranks_pass "$n" "test_comm --staged tp=$1 pp=$2 cp=$3" "$bin/test_comm" --staged "$@"
done

# the device/host separation, enforced with the fenced backend's memory
ranks_pass 2 "test_comm --fenced ok: device sums of fenced memory" "$bin/test_comm" --fenced ok
expect_status 3 "test_comm --fenced device-host: a device collective given host memory fails" -- \
	timeout --foreground -k 5 120 mpiexec -n 2 "$bin/test_comm" --fenced device-host
expect_grep "$WORK/err" "a device sum of host memory failed .*not device memory of this run's backend" \
	"  named: the collective and why"
expect_status 3 "test_comm --fenced host-fenced: a host collective given fenced memory fails" -- \
	timeout --foreground -k 5 120 mpiexec -n 2 "$bin/test_comm" --fenced host-fenced
expect_grep "$WORK/err" "a host sum of device memory failed .*host collective was given device memory" \
	"  named: the collective and why"

if [ -x "$bin/comm_nccl_check" ]; then
	mpiexec -n 1 "$bin/comm_nccl_check" >"$WORK/out" 2>&1
	case $? in
	0) ok "NCCL backend, world size 1" ;;
	77) echo "skip: NCCL backend: $(cat "$WORK/out")" ;;
	*) not_ok "NCCL backend, world size 1:"; sed 's/^/  | /' "$WORK/out" | head -20 ;;
	esac
fi
finish
