#!/bin/sh
# The plugin's decisions (spank/step.c, with the config, topology and plan
# code it calls) run inside slurmstepd, where a leak or a stray read is paid
# by every step: their unit tests must be valgrind-clean. Criterion re-runs
# itself for each test, so every process gets its own log; any line in any
# log is an error (-q keeps clean logs empty).
. "$(dirname "$0")/lib.sh"
bin=$top_builddir/tests/unit/test_spank_step
command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind not installed (apt-get install valgrind)"; exit 77; }
[ -x "$bin" ] || { not_ok "$bin not built"; finish; exit 1; }
if nm "$bin" 2>/dev/null | grep -q __asan_init; then
	echo "SKIP: an AddressSanitizer build cannot run under valgrind (the plain build runs this)"
	exit 77
fi
mkdir -p "$WORK/vg"
top_srcdir=$top_srcdir valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
	--trace-children=yes --log-file="$WORK/vg/log.%p" "$bin" --jobs 1 >"$WORK/out" 2>&1
status=$?
if [ "$status" = 0 ] && grep -q 'Failing: 0 | Crashing: 0' "$WORK/out"; then
	ok "test_spank_step passes under valgrind ($(grep -o 'Tested: [0-9]*' "$WORK/out"))"
else
	not_ok "test_spank_step under valgrind: exit $status"
	tail -20 "$WORK/out" | sed 's/^/  | /'
fi
logs=$(find "$WORK/vg" -type f -size +0 | head -5)
if [ -z "$logs" ]; then ok "no memory error or leak in $(ls "$WORK/vg" | wc -l) processes"; else
	not_ok "valgrind reports:"
	cat $logs | head -40 | sed 's/^/  | /'
fi
finish
