#!/bin/sh
# Packs what a GPU machine needs to check a --with-cuda build that was made
# elsewhere, in one call: the CUDA parity tests, rlrun (the tiny GRPO on the
# GPU in fp32 and in bf16, beside the same run on the machine's CPUs), the
# benches; and the shared libraries they link that a bare CUDA image lacks
# (Criterion, OpenBLAS, MPICH, UCX and UCX's modules, jansson, hwloc...; the
# CUDA libraries are the machine's, found there). The files go into DIR as
# one xz archive (OpenBLAS alone is 36 MB, and what travels to the GPU
# machine is limited) beside run.sh, which unpacks it and runs everything:
#
#   tests/cuda/device-pack.sh BUILDDIR DIR        (here, after `make check
#       TESTS=` and `make tests/bench/bench_gemm ...` in a --with-cuda build)
#   sh DIR/run.sh OUTDIR                           (there)
#
# run.sh writes every log under OUTDIR/logs and OUTDIR/logs.tgz after each
# stage, so a run cut short by its time limit still brings back what it
# did; OUTDIR/logs/summary.txt has a line per check. Stages: the parity
# tests (four at a time, T_TEST seconds each), the GRPO runs (GRPO_STEPS
# steps, T_GRPO seconds each), the algorithms' examples on the CPU and the
# GPU (ALGO_STEPS steps, T_ALGO seconds each), multi-turn episodes (the
# calculator example on the CPUs and the GPU, MULTITURN_STEPS steps,
# T_MULTITURN seconds each; RL_PACK_DEVICE=cpu swaps the GPU's side to the
# CPU backend, to check the stage without a GPU), the several-rank checks on the one GPU
# (T_RANKS seconds each, T_GRPO_RANKS for the GRPO runs; RL_PACK_RANKS=0
# skips them: NCCL at world size 1, NCCL with a NCCL_HOSTID per rank, every layout with its ranks sharing the GPU
# against the single GPU rank, SFT, DPO and distillation in tp2 and dp2
# against theirs, the tiny GRPO in dp2 and tp2; MPICH's
# mpiexec travels with the pack), multi-turn episodes in tp2, pp2, dp2,
# tp2-dp2 and non-colocated dp2 against their single GPU rank, then
# bench_gemm, bench_attention and bench_model_gpu
# (RL_BENCH_PRECISION=bfloat16). RL_PACK_BENCH=0 skips the benches.
# RL_PACK_STAGES="tests grpo algorithms multiturn ranks multiturn-ranks
# bench" (all by default) names the stages to run.
#
# With this workplace's device tool: pack into .devpack (ignored by git),
# carry it, and run `sh .devpack/run.sh $OUT` there.
set -eu
[ $# = 2 ] || { echo "usage: $0 BUILDDIR DIR" >&2; exit 2; }
build=$1 out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/rl-pack-XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/lib/ucx" "$out"

programs=
for p in "$build"/tests/unit/test_cuda_* "$build"/tests/unit/test_rmsnorm \
	"$build"/tests/bench/bench_gemm "$build"/tests/bench/bench_attention \
	"$build"/tests/bench/bench_rmsnorm "$build"/tests/bench/bench_model_gpu \
	"$build"/tests/bench/bench_decode_gpu "$build"/rlrun "$build"/tests/mpi/comm_nccl_check \
	"$build"/tests/mpi/test_comm "$build"/tests/tools/rl_compare \
	"$(command -v mpiexec.hydra || true)" "$(command -v hydra_pmi_proxy || true)"; do
	[ -x "$p" ] && [ -f "$p" ] || continue
	case $p in *.o | *.log | *.trs) continue ;; esac
	cp "$p" "$dir/bin/"
	# the device code and symbols stay; DWARF would take most of the room
	strip --strip-debug "$dir/bin/$(basename "$p")"
	programs="$programs $p"
done
[ -n "$programs" ] || { echo "$0: no CUDA test programs under $build" >&2; exit 1; }
[ -f "$dir/bin/rlrun" ] || echo "$0: warning: no rlrun under $build: no GRPO runs" >&2

# every library the programs resolve here, but the C library's own and the
# CUDA ones, which must match the GPU machine's driver
# shellcheck disable=SC2086 # one word per program
libs=$(ldd $programs 2>/dev/null | awk '/=> \// { print $3 }' | sort -u)
for lib in $libs; do
	case $(basename "$lib") in
	libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libresolv.so* | \
		libcuda.so* | libcudart.so* | libcublas* | libnccl.so* | libstdc++.so* | libgcc_s.so*) ;;
	*)
		cp -L "$lib" "$dir/lib/"
		strip --strip-unneeded "$dir/lib/$(basename "$lib")"
		;;
	esac
done
# UCX (under MPICH) loads its transports from a directory beside libucp:
# without them MPI_Init fails on the bare image
for lib in $libs; do
	case $(basename "$lib") in libucp.so*)
		for m in "$(dirname "$lib")"/ucx/*.so.0; do
			[ -f "$m" ] || continue
			# the CUDA transports would pull in a CUDA runtime of this machine's
			case $(basename "$m") in *cuda* | *gdr*) continue ;; esac
			cp -L "$m" "$dir/lib/ucx/"
		done
		;;
	esac
done
cp "$src/tests/bench/"*_torch.py "$dir/bin/" 2>/dev/null || true
# what the several-rank checks read: the digit reward, a mixture of experts
cp "$src/tests/slurm/digit_reward.awk" "$dir/bin/"
mkdir -p "$dir/models" && cp -r "$src/tests/fixtures/models/qwen3-moe" "$dir/models/"
# the algorithms' example configs and what they read beside them
cp -r "$src/etc/examples" "$dir/examples"

cat >"$out/run.sh" <<'RUN'
#!/bin/sh
# Runs the packed checks on a GPU machine; see tests/cuda/device-pack.sh.
pack=$(cd "$(dirname "$0")" && pwd)
here=/tmp/rl-device-pack
rm -rf "$here" && mkdir -p "$here" && tar -xJf "$pack/pack.tar.xz" -C "$here" || exit 1
out=${1:-$here/out}
logs=$out/logs
mkdir -p "$logs"
t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$logs/summary.txt"; }
save() { tar -czf "$out/logs.tgz" -C "$out" logs 2>/dev/null || true; }
# the machine's CUDA libraries, wherever its image keeps them
extra=$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' -o -name 'libcublasLt.so.1[23]' \
	-o -name 'libcudart.so.1[23]' 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:$extra${LD_LIBRARY_PATH:-}"
export UCX_MODULE_DIR=$here/lib/ucx CRITERION_VERBOSITY_LEVEL=1 RL_BENCH_TORCH_DIR=$here/bin
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader |
	tee -a "$logs/summary.txt"
for p in "$here"/bin/*; do
	case $p in *.py) continue ;; esac
	ldd "$p" | grep -i "not found" | sed "s|^|$(basename "$p"): |"
done | tee -a "$logs/summary.txt"

cd "$here/bin" || exit 1
# RL_PACK_STAGES names the stages to run (all by default): a second call
# on the same lease can run one stage again without the others
stage() {
	case " ${RL_PACK_STAGES:-tests grpo algorithms multiturn ranks multiturn-ranks bench} " in
	*" $1 "*) return 0 ;;
	esac
	return 1
}
failed=0
if stage tests; then
	say "parity tests"
	# shellcheck disable=SC2016
	ls test_* | grep -v '^test_comm$' | xargs -P 4 -I{} sh -c 'timeout '"${T_TEST:-150}"' ./{} -j1 >"$1/{}.log" 2>&1;
		echo "{}: exit $?: $(grep -a Synthesis "$1/{}.log" | tail -1)"' sh "$logs" |
		tee "$logs/tests.txt" | tee -a "$logs/summary.txt"
	failed=$(grep -vc ': exit 0:' "$logs/tests.txt")
	say "$failed test program(s) failed"
	save
fi

# The built-in tiny GRPO: on the CPUs (the reference), on the GPU in fp32
# and in bf16. Their first step is on the same weights and samples, so the
# fp32 GPU run's first line must be the CPU's to rounding; later steps
# drift by sampling. The bar: reward 0.9 reached by the last step.
grpo() { # NAME KEY=VALUE...
	name=$1
	shift
	rm -rf "/tmp/rl-grpo/$name"
	mkdir -p /tmp/rl-grpo
	(cd /tmp/rl-grpo && timeout "${T_GRPO:-150}" "$here/bin/rlrun" train \
		grpo.max_num_steps="${GRPO_STEPS:-100}" logger.log_dir="/tmp/rl-grpo/$name" "$@" \
		>"$logs/grpo_$name.log" 2>&1)
	rc=$?
	m=/tmp/rl-grpo/$name/metrics.jsonl
	cp "$m" "$logs/grpo_${name}_metrics.jsonl" 2>/dev/null
	say "grpo $name: exit $rc; $(awk -F'"reward_mean":' 'NF > 1 { split($2, a, ","); r = a[1] + 0;
		n++; if (n == 1) f = r; if (r > b) b = r; l[n] = r }
		END { s = 0; k = 0; for (i = n; i > n - 10 && i > 0; i--) { s += l[i]; k++ }
		if (n) printf "%d steps, first %.4f, best %.4f, last 10 %.4f", n, f, b, s / k }' "$m" 2>/dev/null)"
	save
}
if stage grpo && [ -x "$here/bin/rlrun" ]; then
	say "grpo"
	grpo cpu-fp32 policy.backend=cpu policy.precision=float32
	grpo gpu-fp32 policy.backend=cuda policy.precision=float32 logger.monitor_gpus=true \
		logger.gpu_monitoring.collection_interval=1
	grpo gpu-bf16 policy.backend=cuda policy.precision=bfloat16
	grpo cpu-bf16 policy.backend=cpu policy.precision=bfloat16
	for p in fp32 bf16; do
		a=$(head -1 "$logs/grpo_gpu-${p}_metrics.jsonl" 2>/dev/null | sed -E 's/"tokens_per_sec".*//')
		b=$(head -1 "$logs/grpo_cpu-${p}_metrics.jsonl" 2>/dev/null | sed -E 's/"tokens_per_sec".*//')
		say "grpo $p step 1, gpu: $a"
		say "grpo $p step 1, cpu: $b"
	done
	# logger.monitor_gpus (NVML, loaded at run time): the GPU run's steps
	# carry the GPU's memory in use, more than nothing, and its total
	g=$logs/grpo_gpu-fp32_metrics.jsonl
	mem=$(grep -o '"node\.[0-9]*\.gpu\.[0-9]*\.mem_gb":[-0-9.eE+]*' "$g" 2>/dev/null | tail -1)
	total=$(grep -o '"node\.[0-9]*\.gpu\.[0-9]*\.mem_total_gb":[-0-9.eE+]*' "$g" 2>/dev/null |
		tail -1)
	util=$(grep -o '"node\.[0-9]*\.gpu\.[0-9]*\.util":[-0-9.eE+]*' "$g" 2>/dev/null | tail -1)
	if [ -n "$mem" ] && [ -n "$total" ] &&
		awk -v m="${mem##*:}" -v t="${total##*:}" 'BEGIN { exit !(m > 0 && t >= m) }'; then
		say "grpo gpu-fp32: logger.monitor_gpus: ok: last step $mem $total $util"
	else
		say "grpo gpu-fp32: logger.monitor_gpus: FAIL: no GPU memory metric > 0 in metrics.jsonl" \
			"($(grep -m1 'monitor_gpus' "$logs/grpo_gpu-fp32.log" 2>/dev/null))"
	fi
	# issue 27's bar: generation's logprobs are the trainer's to the bit
	for n in gpu-fp32 gpu-bf16; do
		say "grpo $n: gen_logprob_max_diff over the steps: $(grep -o '"gen_logprob_max_diff":[^,}]*' \
			"$logs/grpo_${n}_metrics.jsonl" 2>/dev/null | cut -d: -f2 | sort -gu | tr '\n' ' ')"
	done
fi

# The algorithms beside plain GRPO (issue 30), each from its example config:
# on the CPUs and on the GPU in fp32, ALGO_STEPS steps. Their first step is
# on the same weights and data, so the GPU's first metrics line must be the
# CPU's to rounding (rl_compare, 1e-3: fp32 sums in another order over a
# step); the last line says whether the GPU run learned as the CPU's did.
algo() { # EXAMPLE BACKEND
	ex=$1 be=$2 name=${1%.yaml}-$2
	# the run-control keys live in the algorithm's own block (sft:, dpo:...)
	case $ex in
	sft*) verb=sft block=sft ;;
	dpo*) verb=dpo block=dpo ;;
	distill*) verb=distill block=distillation ;;
	*) verb=train block=grpo ;;
	esac
	# distillation's teacher: the tiny GRPO run's, made once on the CPU
	# (see distill-tiny.yaml's comment)
	teacher=
	[ "$verb" = distill ] && teacher=teacher.model_name=/tmp/rl-algo/teacher
	rm -rf "/tmp/rl-algo/$name"
	mkdir -p /tmp/rl-algo
	(cd /tmp/rl-algo && timeout "${T_ALGO:-150}" "$here/bin/rlrun" "$verb" "$here/examples/$ex" \
		"$block.max_num_steps=${ALGO_STEPS:-20}" logger.log_dir="/tmp/rl-algo/$name" \
		checkpointing.enabled=false policy.backend="$be" policy.precision=float32 $teacher \
		>"$logs/algo_$name.log" 2>&1)
	rc=$?
	cp "/tmp/rl-algo/$name/metrics.jsonl" "$logs/algo_${name}_metrics.jsonl" 2>/dev/null
	say "$verb $ex on $be: exit $rc; last: $(tail -1 "/tmp/rl-algo/$name/metrics.jsonl" 2>/dev/null |
		grep -oE '"(reward_mean|loss|val_loss|accuracy|reverse_kl)":[^,}]*' | tr '\n' ' ')"
	save
}
if stage algorithms && [ -x "$here/bin/rlrun" ] && [ -d "$here/examples" ]; then
	say "algorithms"
	if [ -f "$here/examples/distill-tiny.yaml" ]; then
		rm -rf /tmp/rl-algo/teacher /tmp/rl-algo/teacher.ck && mkdir -p /tmp/rl-algo
		(cd /tmp/rl-algo && timeout "${T_ALGO:-150}" "$here/bin/rlrun" train "$here/examples/grpo-tiny.yaml" \
			grpo.max_num_steps=25 policy.backend=cpu logger.log_dir=/tmp/rl-algo/teacher-run \
			checkpointing.enabled=true checkpointing.checkpoint_dir=/tmp/rl-algo/teacher.ck \
			checkpointing.save_period=25 && "$here/bin/rlrun" ckpt export \
			/tmp/rl-algo/teacher.ck/step_25 --hf /tmp/rl-algo/teacher) >"$logs/algo_teacher.log" 2>&1
		say "distillation's teacher (25 GRPO steps on the CPU, exported): exit $?"
	fi
	for ex in dapo-tiny.yaml gspo-tiny.yaml dr-grpo-tiny.yaml sft-tiny.yaml dpo-tiny.yaml \
		distill-tiny.yaml; do
		[ -f "$here/examples/$ex" ] || { say "$ex: not in the pack"; continue; }
		algo "$ex" cpu
		algo "$ex" cuda
		n=${ex%.yaml}
		# SFT's and DPO's first line is their validation before step 1
		k=1
		case $n in sft* | dpo*) k=2 ;; esac
		head -$k "/tmp/rl-algo/$n-cpu/metrics.jsonl" >/tmp/rl-algo/$n-cpu.1 2>/dev/null
		head -$k "/tmp/rl-algo/$n-cuda/metrics.jsonl" >/tmp/rl-algo/$n-cuda.1 2>/dev/null
		if [ -s "/tmp/rl-algo/$n-cuda.1" ] && [ -s "/tmp/rl-algo/$n-cpu.1" ]; then
			say "  $n step 1, cuda vs cpu: $(./rl_compare metrics /tmp/rl-algo/$n-cuda.1 \
				/tmp/rl-algo/$n-cpu.1 1e-3 2>&1 | tail -1)"
		else
			say "  $n step 1, cuda vs cpu: FAIL: a run wrote no step"
		fi
	done
fi

# Multi-turn episodes (issue 31): calculator-tiny.yaml, the model calling
# the built-in calculator (`rlrun env calculator`, the pack's own rlrun,
# through the environment protocol) with the loss on the model's tokens,
# on the CPUs and on the GPU in fp32, MULTITURN_STEPS steps. The first
# step is on the same weights, prompts and Philox keys, so the GPU's first
# metrics line must be the CPU's to 1e-3 (rl_compare: fp32 sums in another
# order; an episode whose sampled token flipped would move it more). The
# last line says whether the GPU run learned as the CPU's did.
# RL_PACK_DEVICE=cpu runs the "GPU" side on the CPU backend: how the stage
# itself is checked on a machine without a GPU (both sides then agree to
# the bit).
multiturn() { # BACKEND NAME
	be=$1 name=multiturn-$2
	rm -rf "/tmp/rl-multiturn/$name"
	mkdir -p /tmp/rl-multiturn
	(cd /tmp/rl-multiturn && timeout "${T_MULTITURN:-300}" "$here/bin/rlrun" train \
		"$here/examples/calculator-tiny.yaml" grpo.max_num_steps="${MULTITURN_STEPS:-20}" \
		logger.log_dir="/tmp/rl-multiturn/$name" checkpointing.enabled=false \
		policy.backend="$be" policy.precision=float32 >"$logs/$name.log" 2>&1)
	rc=$?
	cp "/tmp/rl-multiturn/$name/metrics.jsonl" "$logs/${name}_metrics.jsonl" 2>/dev/null
	say "multiturn $2 ($be): exit $rc; last: $(tail -1 "/tmp/rl-multiturn/$name/metrics.jsonl" \
		2>/dev/null | grep -oE '"(reward_mean|avg_turns_per_sample|loss)":[^,}]*' | tr '\n' ' ')"
	save
}
if stage multiturn && [ -x "$here/bin/rlrun" ] && [ -f "$here/examples/calculator-tiny.yaml" ]; then
	say "multiturn"
	multiturn cpu cpu
	multiturn "${RL_PACK_DEVICE:-cuda}" gpu
	head -1 /tmp/rl-multiturn/multiturn-cpu/metrics.jsonl >/tmp/rl-multiturn/cpu.1 2>/dev/null
	head -1 /tmp/rl-multiturn/multiturn-gpu/metrics.jsonl >/tmp/rl-multiturn/gpu.1 2>/dev/null
	if [ -s /tmp/rl-multiturn/gpu.1 ] && [ -s /tmp/rl-multiturn/cpu.1 ]; then
		say "  multiturn step 1, ${RL_PACK_DEVICE:-cuda} vs cpu: $(./rl_compare metrics \
			/tmp/rl-multiturn/gpu.1 /tmp/rl-multiturn/cpu.1 1e-3 2>&1 | tail -1)"
	else
		say "  multiturn step 1, ${RL_PACK_DEVICE:-cuda} vs cpu: FAIL: a run wrote no step"
	fi
fi

# ---- several ranks on the one GPU ----
# mpiexec from the pack (MPICH's hydra and its proxy, in bin/); every rank
# opens GPU 0. The layouts of tests/mpi/fenced_layouts_test.sh, their
# ranks sharing the GPU (the staged transport, chosen by bus id), against
# the single GPU rank: the first update's gradient (RL_GRAD_DUMP, 1e-5)
# and three steps' metrics (1e-4), as the CPU layouts are held.
ranks() { # NAME N KEY=VALUE...: rlrun on N ranks of the GPU, its log kept
	# (rlrun's verb: $ranks_verb, train when unset)
	name=$1 n=$2
	shift 2
	rm -rf "/tmp/rl-ranks/$name"
	mkdir -p /tmp/rl-ranks
	(cd /tmp/rl-ranks && RL_GRAD_DUMP=/tmp/rl-ranks/$name.grads timeout "${t_ranks:-${T_RANKS:-120}}" \
		"$here/bin/mpiexec.hydra" -n "$n" "$here/bin/rlrun" "${ranks_verb:-train}" policy.backend=cuda \
		policy.precision=float32 logger.log_dir="/tmp/rl-ranks/$name" "$@" \
		>"$logs/ranks_$name.log" 2>&1)
	rc=$?
	cp "/tmp/rl-ranks/$name/metrics.jsonl" "$logs/ranks_${name}_metrics.jsonl" 2>/dev/null
	say "ranks $name ($n): exit $rc; $(grep -m1 'device collectives over' \
		"$logs/ranks_$name.log" | sed 's/^rlrun train: //')"
	save
	return $rc
}
compare() { # NAME REFERENCE
	g=$(./rl_compare grads "/tmp/rl-ranks/$1.grads" "/tmp/rl-ranks/$2.grads" 1e-5 2>&1 | tail -1)
	m=$(./rl_compare metrics "/tmp/rl-ranks/$1/metrics.jsonl" "/tmp/rl-ranks/$2/metrics.jsonl" \
		1e-4 2>&1 | tail -1)
	say "  $1 vs $2: grads: $g; metrics: $m"
}
export PATH="$here/bin:$PATH" HYDRA_LAUNCHER=fork
tp=policy.parallel.tensor pp=policy.parallel.pipeline sp=policy.parallel.sequence_parallel=true
apart="policy.generation.colocated.enabled=false policy.generation.colocated.resources.gpus_per_node=2"
if stage ranks && [ "${RL_PACK_RANKS:-1}" = 1 ] && [ -x mpiexec.hydra ] && [ -x rlrun ]; then
	say "several ranks"
	timeout 60 ./mpiexec.hydra -n 1 ./comm_nccl_check >"$logs/comm_nccl_check.log" 2>&1
	say "NCCL at world size 1 (comm_nccl_check): exit $? (0 ran, 77 skipped)"
	timeout 60 ./mpiexec.hydra -n 2 ./test_comm --staged 2 1 1 >"$logs/test_comm_staged.log" 2>&1
	say "test_comm --staged on 2 ranks: exit $?"
	save
	d="grpo.max_num_steps=3 grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16
data.env_name=digits"
	r="env.digits.command=awk -f $here/bin/digit_reward.awk"
	moe="policy.model_name=$here/models/qwen3-moe"
	# shellcheck disable=SC2086
	{
		ranks single 1 $d "$r"
		# NCCL itself on one GPU: each rank its own NCCL_HOSTID (set by rlrun
		# when RL_COMM_TRANSPORT=nccl and the ranks share a GPU)
		export RL_COMM_TRANSPORT=nccl NCCL_DEBUG=INFO
		ranks nccl-hostid-tp2 2 $d "$r" $tp=2 && compare nccl-hostid-tp2 single
		unset RL_COMM_TRANSPORT NCCL_DEBUG
		grep -E "NCCL (WARN|INFO) (Init|comm|Channel|Using|NET)" "$logs/ranks_nccl-hostid-tp2.log" |
			head -20 >>"$logs/summary.txt"
		for l in "tp2 2 $tp=2" "pp2 2 $pp=2" "dp2 2" "cp2 2 policy.parallel.context=2" \
			"tp2-sp 2 $tp=2 $sp" "tp2-pp2-dp2 8 $tp=2 $pp=2" \
			"nc-dp2-gtp2 4 $apart policy.generation.tensor_parallel_size=2"; do
			set -- $l
			name=$1 n=$2
			shift 2
			ranks "$name" "$n" $d "$r" "$@" && compare "$name" single
		done
		# a mixture of experts: ep2 against the dense-expert dp2, one step
		# of one update on the built-in data (tests/cli/train_cli.sh's
		# comparison: with the digit reward the first gradient is the KL
		# term's rounding alone in some experts)
		one="grpo.max_num_steps=1 policy.train_global_batch_size=1024"
		ranks moe-ep2 2 $one $moe policy.parallel.expert=2
		ranks moe-dp2 2 $one $moe
		compare moe-ep2 moe-dp2
		# SFT, DPO and distillation (issue 30) in tp2 and dp2 against their
		# single GPU rank, three steps of each example. DPO's first step's
		# accuracy counts the signs of rounding (every margin is 0 there:
		# the policy is its reference), so it is left out of that line.
		for a in "sft sft-tiny.yaml sft" "dpo dpo-tiny.yaml dpo" \
			"distill distill-tiny.yaml distillation"; do
			set -- $a
			ranks_verb=$1 ex=$here/examples/$2 three="$3.max_num_steps=3 checkpointing.enabled=false"
			[ -f "$ex" ] || continue
			[ "$ranks_verb" = distill ] && three="$three teacher.model_name=/tmp/rl-algo/teacher"
			ranks "$ranks_verb-single" 1 "$ex" $three
			for l in "tp2 2 $tp=2" "dp2 2"; do
				set -- $l
				name=$ranks_verb-$1 n=$2
				shift 2
				ranks "$name" "$n" "$ex" $three "$@" || continue
				if [ "$ranks_verb" = dpo ]; then
					for f in "$name" dpo-single; do
						sed -E '1,2s/"(val_accuracy|accuracy)":[^,}]*,?//g' \
							"/tmp/rl-ranks/$f/metrics.jsonl" >"/tmp/rl-ranks/$f.noties"
						cp "/tmp/rl-ranks/$f.noties" "/tmp/rl-ranks/$f/metrics.jsonl"
					done
				fi
				compare "$name" "$ranks_verb-single"
			done
		done
		ranks_verb=
		# the tiny GRPO on the GPU in dp2 and tp2, as the single rank learns
		for l in "dp2 2" "tp2 2 $tp=2"; do
			set -- $l
			name=grpo-$1 n=$2
			shift 2
			# tp2's 100 steps took 130 s on an H200 (staged transport)
			t_ranks=${T_GRPO_RANKS:-240}
			ranks "$name" "$n" grpo.max_num_steps="${GRPO_STEPS:-100}" "$@"
			t_ranks=
			say "  $name rewards: $(awk -F'"reward_mean":' 'NF > 1 { split($2, a, ","); r = a[1] + 0;
				n++; l[n] = r } END { s = 0; k = 0; for (i = n; i > n - 10 && i > 0; i--) {
				s += l[i]; k++ } if (n) printf "%d steps, last 10 %.4f", n, s / k }' \
				"/tmp/rl-ranks/$name/metrics.jsonl" 2>/dev/null) (one rank: grpo gpu-fp32 above)"
		done
	}
fi

# Multi-turn episodes (issue 31) on ranks sharing the GPU, as
# tests/mpi/multiturn_layouts_test.sh holds them on the CPUs: tensor and
# pipeline groups play their episodes together (their first rank talks to
# the environment), data-parallel ranks each their share, generation ranks
# apart from the trainers play them and send the samples with their loss
# masks; each gives the single GPU rank's first gradient (1e-5) and three
# steps' metrics (1e-4).
if stage multiturn-ranks && [ "${RL_PACK_RANKS:-1}" = 1 ] && [ -x mpiexec.hydra ] && [ -x rlrun ] &&
	[ -f "$here/examples/calculator-tiny.yaml" ]; then
	say "multi-turn episodes on several ranks"
	mt="$here/examples/calculator-tiny.yaml grpo.max_num_steps=3 grpo.num_prompts_per_step=8
grpo.num_generations_per_prompt=4 policy.train_global_batch_size=16 policy.train_micro_batch_size=4
policy.logprob_batch_size=8 checkpointing.enabled=false"
	# shellcheck disable=SC2086
	{
		ranks mt-single 1 $mt
		for l in "tp2 2 $tp=2" "pp2 2 $pp=2" "dp2 2" "tp2-dp2 4 $tp=2" "nc-dp2 4 $apart"; do
			set -- $l
			name=mt-$1 n=$2
			shift 2
			ranks "$name" "$n" $mt "$@" && compare "$name" mt-single
		done
	}
fi

if stage bench && [ "${RL_PACK_BENCH:-1}" = 1 ]; then
	for b in bench_gemm bench_attention bench_rmsnorm bench_model_gpu bench_decode_gpu; do
		[ -x "$b" ] || continue
		timeout "${T_BENCH:-240}" ./"$b" >"$logs/$b.log" 2>&1
		say "$b: exit $?"
		save
	done
	# decode with the fastest GEMMs, to price batch invariance
	if [ -x bench_model_gpu ]; then
		RL_BENCH_INVARIANT=0 timeout "${T_BENCH:-240}" ./bench_model_gpu \
			>"$logs/bench_model_gpu_fast.log" 2>&1
		say "bench_model_gpu RL_BENCH_INVARIANT=0: exit $?"
		save
	fi
fi
say "done: $failed test program(s) failed"
save
[ "$failed" = 0 ]
RUN
chmod +x "$out/run.sh"
tar -cJf "$out/pack.tar.xz" -C "$dir" bin lib models examples
du -sh "$out"
