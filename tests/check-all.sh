#!/bin/sh
# The whole test suite, as CI runs it: the CPU build with -Werror, the same
# under AddressSanitizer + UBSan, and the CUDA build (compiled and linked;
# its GPU tests skip with the reason where no GPU is present). Each build
# lives in build/<name>, out of the source tree. Ends with one line:
# "N passed, N failed, N skipped".
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)
# an in-tree ./configure (README command 1 is out of tree) blocks VPATH builds
[ -f config.status ] && make distclean >/dev/null
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi

pass=0 fail=0 skip=0
run_build() { # NAME CONFIGURE-ARGS...
	name=$1
	shift
	echo "=== build/$name: configure $*"
	mkdir -p "build/$name"
	status=0
	(cd "build/$name" && "$top/configure" --enable-werror "$@" >configure.log 2>&1) || {
		tail -20 "build/$name/configure.log"
		return 1
	}
	(cd "build/$name" && make -j"$jobs" >make.log 2>&1) || {
		tail -40 "build/$name/make.log"
		return 1
	}
	(cd "build/$name" && make -j"$jobs" check) || status=$?
	log="build/$name/test-suite.log"
	# count test cases, not programs: Criterion's synthesis and skip lines,
	# and the shell tests' "N passed, N failed" (exit 77: skipped whole)
	logs=$(ls build/"$name"/tests/unit/*.log build/"$name"/tests/cli/*.log build/"$name"/tests/slurm/*.log 2>/dev/null)
	grep -h '^\[SKIP\]\|^SKIP:' $logs | sed 's/^/  skipped: /' || true
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

rc=0
run_build cpu || rc=1
run_build sanitize --enable-sanitizers || rc=1
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
	run_build cuda --with-cuda="$(dirname "$(dirname "$nvcc")")" || rc=1
else
	echo "=== build/cuda: skipped, no nvcc on this machine"
fi
echo "$pass passed, $fail failed, $skip skipped"
exit $rc
