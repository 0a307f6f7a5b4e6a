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
# each rank's watchdog ends it with status 3, but mpiexec reports whichever
# status it sees first as the others are torn down: not 0, and not 2 (the
# breach went through and the program said so), is the check
fails() { # DESCRIPTION MODE PATTERN
	timeout --foreground -k 5 120 mpiexec -n 2 "$bin/test_comm" --fenced "$2" \
		>"$WORK/out" 2>"$WORK/err"
	status=$?
	if [ "$status" != 0 ] && [ "$status" != 2 ] && [ "$status" != 124 ]; then ok "$1"; else
		not_ok "$1: exit status $status"
		sed 's/^/  | /' "$WORK/err" | head -10
	fi
	expect_grep "$WORK/err" "$3" "  named: the collective and why"
}
fails "test_comm --fenced device-host: a device collective given host memory fails" device-host \
	"a device sum of host memory failed .*not device memory of this run's backend"
fails "test_comm --fenced host-fenced: a host collective given fenced memory fails" host-fenced \
	"a host sum of device memory failed .*host collective was given device memory"

# A rank stopped (SIGSTOP: alive, silent) inside a collective or before a
# split of the setup (MPI_Comm_split, which blocks the main thread in MPI):
# the watchdog's own thread times the wait, so every other rank names the
# stopped one and the wait it is stuck in, and exits with status 3, within
# the timeout + 10 s. mpiexec then ends the stopped rank.
for where in collective split; do
	t0=$(date +%s)
	timeout --foreground -k 5 60 mpiexec -n 4 "$bin/test_comm" --stop 2 2 "$where" \
		>"$WORK/out" 2>"$WORK/err"
	status=$? took=$(($(date +%s) - t0))
	[ "$status" != 0 ] && [ "$status" != 124 ] && [ "$took" -le 12 ] &&
		ok "rank 2 stopped before a $where: the run ended in $took s (exit $status)" || {
		not_ok "rank 2 stopped before a $where: exit $status after $took s"
		sed 's/^/  | /' "$WORK/err" | head -20
	}
	for r in 0 1 3; do
		expect_grep "$WORK/err" "^rlrun: rank $r: .*rank 2 does not answer" "  rank $r names rank 2"
	done
	if [ "$where" = split ]; then
		expect_grep "$WORK/err" "MPI_Comm_split of group half from world has waited" \
			"  and the split it waits in"
	else
		expect_grep "$WORK/err" "collective #[0-9]+ all_reduce .*: the one the victim never joins" \
			"  and the collective it waits in"
	fi
done
finish
