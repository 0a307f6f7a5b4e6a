#!/bin/sh
# rlrun plan on the fixture topologies (and the real ones in
# ../shared/topologies when present): TP groups inside NVLink domains, each
# GPU with the InfiniBand NIC behind its own PCIe switch, the auto planner,
# and the errors. What is expected comes from the fixtures' descriptions
# (tests/fixtures/make_topologies.py), not from rlrun's output.
. "$(dirname "$0")/lib.sh"
T=$top_srcdir/tests/topologies
SHARED=$top_srcdir/../shared/topologies
cd "$WORK" || exit 1

expect_status 0 "plan --help" -- "$RLRUN" plan --help
expect_grep "$WORK/out" '--env RANK' "plan --help names --env"

# the task table: rank node local tp cp ep dp pp gpu bus nvl nic numa cpus
tasks() { sed -n '/^tasks:/,$p' "$WORK/out" | awk 'NR > 2'; }

# DGX fixture: 8 H100 in one NVSwitch domain, GPU i behind the same switch
# as mlx5_i, GPUs 0-3 on socket (NUMA) 0
expect_status 0 "plan: DGX fixture, TP 2, 8 tasks" -- "$RLRUN" plan policy.backend=cuda \
	policy.parallel.tensor=2 --topology "$T/dgx-8gpu-2socket.xml" --tasks-per-node 8
bad=$(tasks | awk '$1 < 8 && ($12 != "mlx5_" $1 || $13 != ($1 < 4 ? 0 : 1)) { print }')
[ -z "$bad" ] && ok "DGX: each GPU pairs with the NIC on its own switch, socket-local" ||
	not_ok "DGX: wrong NIC or NUMA for: $bad"
expect_grep "$WORK/out" '^  tp  4 groups of 2: \[0,1\] \[2,3\] \[4,5\] \[6,7\]$' "DGX: TP groups [0,1] ..."
expect_grep "$WORK/out" '^  dp  2 groups of 4: \[0,2,4,6\] \[1,3,5,7\]$' "DGX: DP groups [0,2,4,6] [1,3,5,7]"

# two NVLink quads: a TP group of 4 must not straddle them
expect_status 0 "plan: two NVLink domains, TP 4" -- "$RLRUN" plan policy.backend=cuda \
	policy.parallel.tensor=4 policy.train_global_batch_size=128 \
	--topology "$T/8gpu-two-nvlink-domains.xml" --tasks-per-node 8
split=$(tasks | awk '{ d = $11; g = int($1 / 4); if ((g in dom) && dom[g] != d) print g; dom[g] = d }')
[ -z "$split" ] && ok "TP groups of 4 each inside one NVLink domain" ||
	not_ok "TP groups split across domains: $split"
# (a model of 32 heads: the built-in tiny model's 4 do not split 8 ways)
expect_status 0 "plan: two NVLink domains, TP 8" -- "$RLRUN" plan policy.backend=cuda \
	policy.parallel.tensor=8 policy.train_global_batch_size=64 \
	policy.model_name="$top_srcdir/etc/models/llama3.1-8b-instruct" \
	--topology "$T/8gpu-two-nvlink-domains.xml" --tasks-per-node 8
expect_grep "$WORK/err" 'warning: TP 8 does not fit in one NVLink domain' "TP 8 over two quads warns"

# --env: the environment of one task, as the plugin sets it
expect_status 0 "plan --env 5 on the DGX fixture" -- "$RLRUN" plan policy.backend=cuda \
	policy.parallel.tensor=2 --topology "$T/dgx-8gpu-2socket.xml" --nodes 2 \
	--tasks-per-node 8 --env 13
for want in RL_RANK=13 RL_LOCAL_RANK=5 RL_NODE_RANK=1 RL_TP_RANK=1 RL_DP_RANK=6 RL_DP_SIZE=8 \
	CUDA_VISIBLE_DEVICES=5 NCCL_IB_HCA==mlx5_5 RL_CPUS=20-23,52-55; do
	expect_grep "$WORK/out" "^$want\$" "--env 13: $want"
done
notvar=$(grep -vc '^[A-Z_]*=' "$WORK/out")
[ "$notvar" = 0 ] && ok "--env prints only NAME=VALUE lines" || not_ok "--env printed $notvar other lines"
expect_status 2 "--env past the last rank" -- "$RLRUN" plan --tasks-per-node 2 --env 2
expect_status 0 "--step-gpus 4,5: Slurm's GPUs" -- "$RLRUN" plan policy.backend=cuda \
	--topology "$T/dgx-8gpu-2socket.xml" --tasks-per-node 2 --step-gpus 4,5 \
	policy.train_global_batch_size=128 --env 1
expect_grep "$WORK/out" '^NCCL_IB_HCA==mlx5_5$' "--step-gpus 4,5: task 1 on GPU 5 with mlx5_5"
expect_status 1 "--step-gpus names a GPU the node lacks" -- "$RLRUN" plan policy.backend=cuda \
	--topology "$T/dgx-8gpu-2socket.xml" --tasks-per-node 1 --step-gpus 8
expect_grep "$WORK/err" 'SLURM_STEP_GPUS: GPU 8, but this node has 8 GPUs' "the message counts the GPUs"

# the auto planner, on the 8B shape of Llama 3 and on a 70B that cannot fit
mk_model() { # DIR LAYERS HIDDEN INTER HEADS KV
	mkdir -p "$1"
	cat >"$1/config.json" <<JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
 "hidden_size": $3, "intermediate_size": $4, "num_hidden_layers": $2,
 "num_attention_heads": $5, "num_key_value_heads": $6, "rms_norm_eps": 1e-5,
 "rope_theta": 500000.0, "max_position_embeddings": 8192, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "bos_token_id": 128000, "eos_token_id": 128001}
JSON
}
mk_model llama8b 32 4096 14336 32 8
mk_model llama70b 80 8192 28672 64 8
big="policy.backend=cuda policy.parallel=auto policy.precision=bfloat16 policy.max_total_sequence_length=4096 policy.train_global_batch_size=512 policy.train_micro_batch_size=1 policy.generation.max_new_tokens=2048 data.max_input_seq_length=2048"
expect_status 0 "auto: 8B on the DGX fixture" -- "$RLRUN" plan $big policy.model_name=llama8b \
	--topology "$T/dgx-8gpu-2socket.xml"
expect_grep "$WORK/out" '^auto: tp=[0-9]+ pp=[0-9]+ cp=[0-9]+ dp=[0-9]+: .* GiB of 80.0 GiB per GPU' "auto explains its choice"
expect_grep "$WORK/out" '^memory per GPU \(estimate\): ' "auto prints the memory estimate"
expect_status 1 "auto: 70B on one node does not fit" -- "$RLRUN" plan $big policy.model_name=llama70b \
	--topology "$T/dgx-8gpu-2socket.xml"
expect_grep "$WORK/err" 'GiB' "the refusal gives the memory it needs"
expect_status 1 "auto: an unknown GPU is an error, not a guess" -- "$RLRUN" plan $big \
	policy.model_name=llama8b --topology "$T/cpu-only.xml" --tasks-per-node 1 policy.backend=cuda

# --explain: the time model part by part, on NeMo-RL's Qwen3-30B-A3B run
# (etc/examples; the model's config.json from etc/models); the parts, each
# printed to the hundredth, add up to the total
EX=$top_srcdir/etc/examples
qwen="policy.model_name=$top_srcdir/etc/models/qwen3-30b-a3b"
expect_status 0 "plan without --explain: no breakdown" -- "$RLRUN" plan "$EX/grpo-qwen3-30ba3b-8n8g.yaml" \
	"$qwen" --topology "$T/dgx-8gpu-2socket.xml"
if grep -q 'explain' "$WORK/out"; then not_ok "the plain plan printed the breakdown"; else
	ok "the plain plan prints no breakdown"; fi
expect_grep "$WORK/out" '^step time \(estimate\): .*, EP [0-9.]+$' "the estimate line names the experts' traffic"
expect_status 0 "plan --explain: Qwen3-30B-A3B, 8 nodes, tp=2 ep=8" -- "$RLRUN" plan \
	"$EX/grpo-qwen3-30ba3b-8n8g.yaml" "$qwen" --topology "$T/dgx-8gpu-2socket.xml" --explain
expect_grep "$WORK/out" '^step time \(explain\): tp=2 pp=1 cp=1 ep=8 dp=32 on 8 x 8 GPUs, 2048 samples of 4096 tokens' \
	"--explain: the layout and the step's size"
for part in generation compute tp-comm ep-comm pp-bubble dp-comm refit total; do
	expect_grep "$WORK/out" "^  $part +[0-9]+\.[0-9]{2} s" "--explain: a $part line"
done
expect_grep "$WORK/out" '^  ep-comm .* all-to-alls .* over ep=8 at 450 GB/s \(NVLink\)' "--explain: EP inside a node, on NVLink"
expect_grep "$WORK/out" '^  compute .* at 40% MFU of 989 TFLOPS on 64 GPUs' "--explain: compute names its MFU and peak"
expect_grep "$WORK/out" '^  memory per GPU: [0-9.]+ GiB of 80\.0 GiB' "--explain: the memory per GPU"
sums=$(awk '$1 ~ /^(generation|compute|tp-comm|ep-comm|pp-bubble|dp-comm|refit)$/ && $3 == "s" { s += $2; n++ }
	$1 == "total" && $3 == "s" { t = $2 }
	END { d = s - t; if (d < 0) d = -d; printf "%d %s %.2f %.2f\n", n, (n == 7 && t > 0 && d <= 0.035) ? "ok" : "bad", s, t }' "$WORK/out")
case $sums in
"7 ok "*) ok "--explain: the 7 parts add up to the total ($sums)" ;;
*) not_ok "--explain: parts and total disagree (parts, ok?, sum, total: $sums)" ;;
esac
expect_status 2 "--explain with --env" -- "$RLRUN" plan "$EX/grpo-qwen3-30ba3b-8n8g.yaml" "$qwen" \
	--topology "$T/dgx-8gpu-2socket.xml" --explain --env 0
expect_status 1 "--explain without an estimate (the CPU backend)" -- "$RLRUN" plan \
	"$EX/grpo-qwen3-30ba3b-8n8g.yaml" "$qwen" policy.backend=cpu --topology "$T/dgx-8gpu-2socket.xml" \
	--explain
expect_grep "$WORK/err" '--explain: no estimate: the step runs on the CPU' "the refusal says why"

# errors
expect_status 1 "a missing topology file" -- "$RLRUN" plan --topology "$WORK/none.xml"
expect_grep "$WORK/err" 'none.xml' "the message names the file"
expect_status 1 "a world the layout does not divide" -- "$RLRUN" plan policy.parallel.tensor=3 \
	--tasks-per-node 4
expect_grep "$WORK/err" 'world size 4 is not divisible by tp x cp x pp = 3' "it says which product"
expect_status 2 "a bad option" -- "$RLRUN" plan --nodes zero

# ---- a layout the model cannot take is refused, with the model's number ----
# The numbers are the models' published config.json values (the fixtures
# copy them): tiny-llama 4 heads and 2 layers, Qwen2.5-0.5B 14 heads,
# Qwen3-0.6B 8 KV heads, Llama-3.2-1B 16 layers, Qwen3-30B-A3B 128 experts.
H=$top_srcdir/tests/fixtures/hf_configs
refused() { # DESCRIPTION PATTERN -- ARGS...: rlrun plan ARGS fails, and says PATTERN
	d=$1 p=$2
	shift 3
	expect_status 1 "refused: $d" -- "$RLRUN" plan "$@"
	expect_grep "$WORK/err" "$p" "  naming the key, the value and the model's number"
}
refused "tensor=8 on the built-in model's 4 heads" \
	'^rlrun plan: policy\.parallel\.tensor=8 does not divide the model.s 4 attention heads \(builtin:tiny-llama\)$' \
	-- policy.parallel.tensor=8 --tasks-per-node 8
refused "tensor=4 on Qwen2.5-0.5B's 14 heads" \
	"policy\.parallel\.tensor=4 does not divide the model.s 14 attention heads \($H/qwen2\.5-0\.5b/config\.json\)" \
	-- policy.model_name="$H/qwen2.5-0.5b" policy.parallel.tensor=4 --tasks-per-node 4
expect_status 0 "tensor=2 on Qwen2.5-0.5B: 7 heads and 1 KV head each" -- "$RLRUN" plan \
	policy.model_name="$H/qwen2.5-0.5b" policy.parallel.tensor=2 --tasks-per-node 4
refused "tensor=16 on Qwen3-0.6B's 8 KV heads (16 heads would split)" \
	"tensor=16 does not divide the model.s 8 key/value heads \($H/qwen3-0\.6b/config\.json\)" \
	-- policy.model_name="$H/qwen3-0.6b" policy.parallel.tensor=16 --tasks-per-node 16
# a model made here for the one number under test
mk_shape() { # DIR HEADS KV INTER VOCAB
	mkdir -p "$1"
	cat >"$1/config.json" <<JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": $5,
 "hidden_size": 64, "intermediate_size": $4, "num_hidden_layers": 2,
 "num_attention_heads": $2, "num_key_value_heads": $3, "rms_norm_eps": 1e-5,
 "rope_theta": 10000.0, "max_position_embeddings": 64, "tie_word_embeddings": false,
 "torch_dtype": "float32", "eos_token_id": 1}
JSON
}
mk_shape inter100 8 8 100 512
refused "tensor=8 on an MLP of 100" "tensor=8 does not divide the model.s MLP intermediate size 100" \
	-- policy.model_name=inter100 policy.parallel.tensor=8 --tasks-per-node 8
expect_status 0 "tensor=4 on an MLP of 100 (25 each)" -- "$RLRUN" plan policy.model_name=inter100 \
	policy.parallel.tensor=4 --tasks-per-node 4
mk_shape vocab6 8 8 64 6
refused "tensor=8 on a vocabulary of 6" "tensor=8 is more than the model.s 6 vocabulary entries" \
	-- policy.model_name=vocab6 policy.parallel.tensor=8 --tasks-per-node 8
expect_status 0 "tensor=4 on a vocabulary of 6 (rows 2 2 1 1)" -- "$RLRUN" plan \
	policy.model_name=vocab6 policy.parallel.tensor=4 --tasks-per-node 4
refused "pipeline=4 on the built-in model's 2 layers" \
	"policy\.parallel\.pipeline=4: the model.s 2 layers \(builtin:tiny-llama\) do not split into 4 stages" \
	-- policy.parallel.pipeline=4 --tasks-per-node 4
refused "pipeline=3 on Llama-3.2-1B's 16 layers" \
	"pipeline=3: the model.s 16 layers \($H/llama-3\.2-1b/config\.json\) do not split into 3 stages" \
	-- policy.model_name="$H/llama-3.2-1b" policy.parallel.pipeline=3 --tasks-per-node 3
expect_status 0 "pipeline=3 on 16 layers with a first stage of 4 (then 6 and 6)" -- "$RLRUN" plan \
	policy.model_name="$H/llama-3.2-1b" policy.parallel.pipeline=3 \
	policy.parallel.num_layers_in_first_pipeline_stage=4 --tasks-per-node 3
refused "pipeline=3 on 16 layers with a first stage of 5 (11 over 2)" \
	"16 layers .* do not split into 3 stages as the first and the last are set" \
	-- policy.model_name="$H/llama-3.2-1b" policy.parallel.pipeline=3 \
	policy.parallel.num_layers_in_first_pipeline_stage=5 --tasks-per-node 3
refused "expert=3 on Qwen3-30B-A3B's 128 experts" \
	"policy\.parallel\.expert=3 does not divide the model.s 128 experts \($H/qwen3-30b-a3b/config\.json\)" \
	-- policy.model_name="$H/qwen3-30b-a3b" policy.parallel.expert=3 --tasks-per-node 3
expect_status 0 "expert=4 on Qwen3-30B-A3B (32 experts each)" -- "$RLRUN" plan \
	policy.model_name="$H/qwen3-30b-a3b" policy.parallel.expert=4 --tasks-per-node 4
refused "expert=2 on a dense model" "expert=2, but the model \(.*llama-3\.2-1b/config\.json\) has no experts" \
	-- policy.model_name="$H/llama-3.2-1b" policy.parallel.expert=2 --tasks-per-node 2
refused "context=2 with a mixture of experts" "context=2: context parallelism with a mixture of experts" \
	-- policy.model_name="$H/qwen3-30b-a3b" policy.parallel.context=2 --tasks-per-node 2
refused "context=2 with pipeline=2" "context parallelism together with pipeline parallelism is not implemented" \
	-- policy.parallel.context=2 policy.parallel.pipeline=2 --tasks-per-node 4
refused "generation tensor_parallel_size=8 on 4 heads" \
	"policy\.generation\.tensor_parallel_size=8 does not divide the model.s 4 attention heads" \
	-- policy.generation.colocated.enabled=false \
	policy.generation.colocated.resources.gpus_per_node=8 \
	policy.generation.tensor_parallel_size=8 --tasks-per-node 16
expect_status 0 "a model that is not there yet: planned, with a warning" -- "$RLRUN" plan \
	policy.model_name="$WORK/not-downloaded" --tasks-per-node 2
expect_grep "$WORK/err" "warning: policy\.model_name: $WORK/not-downloaded/config\.json: .*the layout is not checked" \
	"  the warning names the key and the file"
expect_status 0 "a dataset that is not there: planned, with a warning" -- "$RLRUN" plan \
	data.dataset_name=jsonl data.train.path="$WORK/none.jsonl" --tasks-per-node 2
expect_grep "$WORK/err" "warning: data\.train\.path: $WORK/none\.jsonl: No such file or directory" \
	"  the warning names the key and the file"

# rlrun train applies the same rule before its ranks meet: one line, from
# rank 0, exit status 2 (the fixture Llama-tied-rope3 has 1 KV head);
# MPICH leaks at exit (tests/mpi/lib.sh)
if command -v mpiexec >/dev/null 2>&1; then
	expect_status 2 "mpiexec -n 2 rlrun train, tensor=2 on 1 KV head, is refused" -- \
		env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
		mpiexec -n 2 "$RLRUN" train policy.model_name="$top_srcdir/tests/fixtures/models/llama-tied-rope3" \
		policy.parallel.tensor=2 logger.log_dir="$WORK/refused"
	n=$(grep -c "^rlrun train: policy\.parallel\.tensor=2 does not divide the model.s 1 key/value head (" "$WORK/err")
	[ "$n" = 1 ] && ok "  once, naming the model's 1 key/value head" || not_ok "  $n times: $(head -3 "$WORK/err")"
else
	echo "SKIP: mpiexec not found: rlrun train's refusal not checked"
fi

# real machines, when the shared folder exists
if [ -f "$SHARED/nvidiaDGX2.xml" ]; then
	expect_status 0 "plan: real DGX-2, TP 8 on 16 V100" -- "$RLRUN" plan policy.backend=cuda \
		policy.parallel.tensor=8 policy.train_global_batch_size=128 \
		policy.model_name="$top_srcdir/etc/models/llama3.1-8b-instruct" \
		--topology "$SHARED/nvidiaDGX2.xml" --tasks-per-node 16
	n=$(tasks | awk '$11 == "nvl0"' | wc -l)
	[ "$n" = 16 ] && ok "DGX-2: all 16 GPUs in the one NVSwitch domain" || not_ok "DGX-2: $n of 16 in nvl0"
	expect_status 0 "plan: real 2-socket node with mlx5_0" -- "$RLRUN" plan policy.backend=cuda \
		--topology "$SHARED/32em64t-2n8c2t-pci-wholeio.xml" --tasks-per-node 1 --step-gpus 2 --env 0
	expect_grep "$WORK/out" '^NCCL_IB_HCA==mlx5_0$' "32em64t: its GPU on socket 1 pairs with mlx5_0"
else
	echo "SKIP: $SHARED not found: real topologies not checked"
fi
finish
