#!/bin/sh
# Packs what a GPU machine needs to run the CUDA parity tests and benches of
# a --with-cuda build that was made elsewhere: the test and bench programs,
# and the shared libraries they link that a bare CUDA image lacks (Criterion,
# OpenBLAS and their own needs; the CUDA libraries are the machine's). One
# command there then runs everything: sh DIR/run.sh [OUTDIR]. The files go
# into DIR as one xz archive (OpenBLAS alone is 36 MB, and what travels to
# the GPU machine is limited), which run.sh unpacks beside itself.
#
#   tests/cuda/device-pack.sh BUILDDIR DIR
#
# With this workplace's device tool: pack into .devpack (ignored by git),
# carry it, and run `sh .devpack/run.sh $OUT/logs` there.
set -eu
[ $# = 2 ] || { echo "usage: $0 BUILDDIR DIR" >&2; exit 2; }
build=$1 out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/rl-pack-XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/lib" "$out"

programs=
for p in "$build"/tests/unit/test_cuda_* "$build"/tests/unit/test_rmsnorm \
	"$build"/tests/bench/bench_gemm "$build"/tests/bench/bench_attention \
	"$build"/tests/bench/bench_rmsnorm "$build"/tests/bench/bench_model_gpu; do
	[ -x "$p" ] && [ -f "$p" ] || continue
	case $p in *.o | *.log | *.trs) continue ;; esac
	cp "$p" "$dir/bin/"
	# the device code and symbols stay; DWARF would take most of the room
	strip --strip-debug "$dir/bin/$(basename "$p")"
	programs="$programs $p"
done
[ -n "$programs" ] || { echo "$0: no CUDA test programs under $build" >&2; exit 1; }

# every library the programs resolve here, but the C library's own and the
# CUDA ones, which must match the GPU machine's driver
# shellcheck disable=SC2086 # one word per program
ldd $programs 2>/dev/null | awk '/=> \// { print $3 }' | sort -u | while read -r lib; do
	case $(basename "$lib") in
	libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | \
		libcuda.so* | libcudart.so* | libcublas* | libnccl.so* | libstdc++.so* | libgcc_s.so*) ;;
	*)
		cp -L "$lib" "$dir/lib/"
		strip --strip-unneeded "$dir/lib/$(basename "$lib")"
		;;
	esac
done
cp "$src/tests/bench/"*_torch.py "$dir/bin/" 2>/dev/null || true

cat >"$out/run.sh" <<'RUN'
#!/bin/sh
# Runs every packed CUDA test, then the benches; a summary line per program.
pack=$(cd "$(dirname "$0")" && pwd)
here=/tmp/rl-device-pack
rm -rf "$here" && mkdir -p "$here" && tar -xJf "$pack/pack.tar.xz" -C "$here" || exit 1
out=${1:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CRITERION_VERBOSITY_LEVEL=1 RL_BENCH_TORCH_DIR="$here/bin"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
failed=0
for t in "$here"/bin/test_*; do
	name=$(basename "$t")
	"$t" -j1 >"$out/$name.log" 2>&1
	rc=$?
	echo "$name: exit $rc: $(grep -a 'Synthesis' "$out/$name.log" | tail -1)"
	[ $rc = 0 ] || failed=$((failed + 1))
done
[ "${RL_PACK_BENCH:-1}" = 1 ] && for b in "$here"/bin/bench_*; do
	[ -x "$b" ] || continue
	case $b in *.py) continue ;; esac
	(cd "$here/bin" && "$b") 2>&1 | tee "$out/$(basename "$b").log"
done
echo "$failed test program(s) failed"
[ $failed = 0 ]
RUN
chmod +x "$out/run.sh"
tar -cJf "$out/pack.tar.xz" -C "$dir" bin lib
du -sh "$out"
