#!/bin/sh
# What only a --with-cuda build can show on a machine without a GPU (CI):
# its rlrun, which links cudart, cuBLASLt and NCCL, trains on the CPU
# backend as one process and as two MPI ranks (tensor parallel, so every
# collective runs), refuses the CUDA backend by name where there is no GPU
# instead of failing somewhere inside it, and the device pack
# (tests/cuda/device-pack.sh) builds from it. The whole suite runs in the
# CPU and sanitizer builds; the CUDA parity programs run beside this one
# and skip with their reason (tests/check-all.sh).
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/../cli/lib.sh"

mk=$top_builddir/Makefile
if ! [ -f "$mk" ] || ! grep -Eq '^NVCC = .' "$mk"; then
	echo "SKIP: not a --with-cuda build"
	exit 77
fi
cd "$WORK" || exit 1
# MPICH's own leak at exit (tests/mpi/lib.sh), for the runs of several ranks
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export ASAN_OPTIONS
small="grpo.max_num_steps=3 grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=64 policy.train_micro_batch_size=16 policy.logprob_batch_size=32"

# shellcheck disable=SC2086
expect_status 0 "the CUDA build's rlrun trains on the CPU backend" -- \
	"$RLRUN" train $small logger.log_dir=one
[ "$(wc -l <one/metrics.jsonl)" = 3 ] && ok "  three steps of metrics" ||
	not_ok "  $(wc -l <one/metrics.jsonl) lines of metrics, not 3"
[ "$(grep -c '"gen_logprob_max_diff":0\.0,' one/metrics.jsonl)" = 3 ] &&
	ok "  generation's logprobs are the logprob pass's at every step" ||
	not_ok "  generation and the logprob pass differ"

if command -v mpiexec >/dev/null; then
	# shellcheck disable=SC2086
	expect_status 0 "and on two MPI ranks, tensor parallel" -- \
		timeout --foreground -k 5 300 mpiexec -n 2 "$RLRUN" train $small \
		policy.parallel.tensor=2 logger.log_dir=two
	same_as "  the same metrics as one rank (1e-4)" metrics two/metrics.jsonl one/metrics.jsonl 1e-4
else
	echo "SKIP: mpiexec not installed: no two-rank run"
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	expect_status 1 "policy.backend=cuda without a GPU is refused" -- \
		"$RLRUN" train grpo.max_num_steps=1 policy.backend=cuda logger.log_dir=gpu
	expect_grep "$WORK/err" "policy.backend=cuda: " "  naming the key, with what CUDA said"
fi

# the pack a GPU machine runs, from this build; fast compression, as only
# its making is checked here
pack=$WORK/pack
if XZ_OPT=-0 "$top_srcdir/tests/cuda/device-pack.sh" "$top_builddir" "$pack" >"$WORK/pack.log" 2>&1; then
	ok "the device pack builds"
	listing=$(tar -tJf "$pack/pack.tar.xz")
	for f in bin/rlrun bin/test_cuda_linear bin/test_comm lib/ucx; do
		echo "$listing" | grep -q "^$f" && ok "  it holds $f" || not_ok "  it lacks $f"
	done
	[ -s "$pack/run.sh" ] && sh -n "$pack/run.sh" && ok "  with its run.sh" ||
		not_ok "  its run.sh is missing or not sh"
else
	not_ok "the device pack does not build:"
	sed 's/^/  | /' "$WORK/pack.log" | tail -20
fi
finish
