#!/bin/sh
# The whole test suite, as CI runs it, in three builds under build/<name>,
# out of the source tree:
#   cpu       -Werror: every test (make -j check)
#   sanitize  AddressSanitizer + UBSan: every unit program and fuzz-corpus
#             replay, and the shell tests that reach parsers, checkpoints,
#             the wire, comm and the plugin; what it leaves out is listed
#             below with the reason
#   cuda      --with-cuda, where nvcc is present: every .cu compiled and
#             linked, the CUDA parity programs (they skip with the reason
#             where there is no GPU), and tests/cuda/cuda_build_test.sh
#             (its rlrun on the CPU backend, one process and two MPI
#             ranks, and the device pack built)
# Ends with "N passed, N failed, N skipped" (test cases, not programs), the
# total time and the 15 slowest tests with their seconds.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
t0=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 2)
# an in-tree ./configure (README command 1 is out of tree) blocks VPATH builds
[ -f config.status ] && make distclean >/dev/null
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi

# What the sanitizer build leaves out, and why. Each runs in the CPU build.
sanitize_leaves_out() {
	cat <<'EOF'
tests/slurm/spank_test.sh         slurmstepd is not built with ASan: it cannot load a plugin that is (the plugin's code runs under ASan in tests/unit/test_spank_step and under valgrind in tests/cli/spank_glue_valgrind.sh)
tests/slurm/dist_test.sh          the same: every Slurm test needs the plugin in slurmstepd
tests/slurm/preempt_test.sh       the same
tests/slurm/noncolocated_test.sh  the same
tests/slurm/failure_test.sh       the same
tests/cli/man_pages.sh            runs no C: groff over the pages, the same in every build
tests/cli/layers.sh               reads the sources' includes and the objects' symbols, not their behaviour
tests/cli/spank_glue_valgrind.sh  valgrind cannot run a program built with ASan (the glue's unit test runs under ASan)
tests/cli/plot_cli.sh             gnuplot draws metrics.jsonl; the JSON reader it shares with the others runs under ASan in tests/cli/logger_cli.sh
tests/cli/fenced_cli.sh           the fenced backend's own checks of memory are what it tests; its device path runs under ASan in tests/mpi/fenced_layouts_test.sh
tests/cuda/cuda_build_test.sh     the CUDA build's own
EOF
}

# configure and make build/NAME; the log's tail on a failure
build() { # NAME CONFIGURE-ARGS...
	name=$1
	shift
	echo "=== build/$name: configure $*"
	b0=$(date +%s)
	mkdir -p "build/$name"
	(cd "build/$name" && "$top/configure" --enable-werror "$@" >configure.log 2>&1) || {
		tail -20 "build/$name/configure.log"
		return 1
	}
	(cd "build/$name" && make -j"$jobs" >make.log 2>&1) || {
		tail -40 "build/$name/make.log"
		return 1
	}
	echo "build/$name: built in $(($(date +%s) - b0)) s"
}

pass=0 fail=0 skip=0
# make check in build/NAME, of TESTS ("all", or a list), and its counts
check() { # NAME TESTS
	name=$1 tests=$2
	status=0
	b0=$(date +%s)
	if [ "$tests" = all ]; then
		(cd "build/$name" && make -j"$jobs" check) || status=$?
	else
		(cd "build/$name" && make -j"$jobs" check TESTS="$tests") || status=$?
	fi
	echo "build/$name: tested in $(($(date +%s) - b0)) s"
	log="build/$name/test-suite.log"
	# count test cases, not programs: Criterion's synthesis and skip lines,
	# and the shell tests' "N passed, N failed" (exit 77: skipped whole)
	logs=$(find "build/$name/tests" -name '*.log' ! -name 'test-suite.log' 2>/dev/null)
	# shellcheck disable=SC2086
	grep -h '^\[SKIP\]\|^SKIP:' $logs | sed 's/^/  skipped: /' || true
	# shellcheck disable=SC2086
	counts=$(awk '
		/^\[====\] Synthesis:/ { for (i = 1; i <= NF; i++) {
			if ($i == "Passing:") p += $(i + 1)
			if ($i == "Failing:" || $i == "Crashing:") f += $(i + 1) } }
		/^\[SKIP\]/ || /^SKIP:/ { s++ }
		/^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3 }
		END { print p + 0, f + 0, s + 0 }' $logs)
	set -- $counts
	echo "build/$name: $1 passed, $2 failed, $3 skipped"
	pass=$((pass + $1)) fail=$((fail + $2)) skip=$((skip + $3))
	grep -q '^# \(FAIL\|ERROR\): *[1-9]' "$log" && fail=$((fail + 1))
	[ "$status" = 0 ] || cat "$log"
	return "$status"
}

# The sanitizer build's tests: every test of the build but those above.
sanitize_tests() {
	out=$(sanitize_leaves_out | awk '{ print $1 }')
	for t in $(make -s -C build/sanitize print-tests); do
		echo "$out" | grep -qxF "$t" || printf '%s ' "$t"
	done
}

rc=0
{ build cpu && check cpu all; } || rc=1
if build sanitize --enable-sanitizers; then
	check sanitize "$(sanitize_tests)" || rc=1
	echo "build/sanitize left out, each run by build/cpu:"
	sanitize_leaves_out | sed 's/^/  /'
else
	rc=1
fi
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
	# the benches too: the device pack carries them
	if build cuda --with-cuda="$(dirname "$(dirname "$nvcc")")" &&
		(cd build/cuda && make -j"$jobs" tests/bench/bench_gemm tests/bench/bench_attention \
			tests/bench/bench_rmsnorm tests/bench/bench_model_gpu \
			tests/bench/bench_decode_gpu >>make.log 2>&1); then
		check cuda "$(make -s -C build/cuda print-cuda-tests)" || rc=1
	else
		tail -20 build/cuda/make.log
		rc=1
	fi
else
	echo "=== build/cuda: skipped, no nvcc on this machine"
fi
echo "$pass passed, $fail failed, $skip skipped"
t=$(($(date +%s) - t0))
echo "tests/check-all.sh: $((t / 60)) min $((t % 60)) s in all; the 15 slowest tests:"
for f in $(find build/cpu build/sanitize build/cuda -path '*/tests/*' -name '*.time' 2>/dev/null); do
	printf '%8s s  %s\n' "$(cat "$f")" "$(echo "${f%.time}" | sed 's|^build/\([^/]*\)/|\1: |')"
done | sort -rn | head -15
exit $rc
