#!/bin/sh
# rlrun train end to end on the CPU: the built-in tiny run learns its task
# from scratch with any seed, a seed reproduces its metrics, a reward
# program that crashes does not stop a run, datasets and their errors.
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
# MPICH's own leak at exit (see tests/mpi/lib.sh), for the runs of several ranks
mpi_asan=${ASAN_OPTIONS:-}:detect_leaks=0


# The issue's bar: first 5 steps at most 0.3, last 5 at least 0.9, for the
# default seed and another one. The learning is the same in every build, so
# the sanitizer and CUDA builds (slower, or checking other things) run the
# whole suite but leave the two full runs to the plain build;
# RL_TRAIN_SEEDS chooses explicitly.
mk=$top_builddir/Makefile
if [ -z "${RL_TRAIN_SEEDS+set}" ] && [ -f "$mk" ] &&
	grep -Eq '^(SANITIZE_FLAGS = -|NVCC = .)' "$mk"; then
	RL_TRAIN_SEEDS=
	echo "skipping the full tiny runs in this build (RL_TRAIN_SEEDS sets them)"
fi
for seed in ${RL_TRAIN_SEEDS-42 7}; do
	expect_status 0 "the built-in tiny run, seed $seed" -- \
		"$RLRUN" train grpo.seed="$seed" logger.log_dir="run-$seed"
	m=run-$seed/metrics.jsonl
	steps=$(wc -l <"$m")
	first=$(reward_mean "$m" 1 5)
	last=$(reward_mean "$m" $((steps - 4)) "$steps")
	echo "seed $seed: $steps steps, reward of the first 5 $first, of the last 5 $last"
	if awk -v f="$first" -v l="$last" 'BEGIN { exit !(f <= 0.3 && l >= 0.9) }'; then
		ok "seed $seed learns: first 5 steps $first <= 0.3, last 5 $last >= 0.9"
	else
		not_ok "seed $seed does not learn: first 5 steps $first, last 5 $last"
	fi
	expect_grep "$WORK/out" "^step $steps/$steps  reward" "a progress line per step"
done

# bf16 (the issue's bar: reward 0.9 reached by step 100), seed 42, with the
# plain build's full runs. The tiny model learns a little slower in bf16 than
# in fp32 (last 10 steps 0.87 against 0.97 for seed 42, 0.99 against 0.94 for
# seed 7), so its bar is any step at 0.9 and the last ten at 0.8.
if [ -n "${RL_TRAIN_SEEDS-42 7}" ]; then
	expect_status 0 "the built-in tiny run in bf16" -- \
		"$RLRUN" train policy.precision=bfloat16 logger.log_dir=run-bf16
	expect_grep "$WORK/out" "^rlrun train: precision bfloat16 \(the passes read the weights rounded to bf16" \
		"  says it computes in bf16"
	m=run-bf16/metrics.jsonl
	steps=$(wc -l <"$m")
	first=$(reward_mean "$m" 1 5)
	last=$(reward_mean "$m" $((steps - 9)) "$steps")
	best=$(sed -n 's/.*"reward_mean":\([0-9.e+-]*\).*/\1/p' "$m" | sort -g | tail -1)
	echo "bf16: $steps steps, first 5 $first, last 10 $last, best step $best"
	if awk -v f="$first" -v l="$last" -v b="$best" \
		'BEGIN { exit !(f <= 0.3 && l >= 0.8 && b >= 0.9) }'; then
		ok "bf16 learns: first 5 steps $first <= 0.3, best step $best >= 0.9, last 10 $last >= 0.8"
	else
		not_ok "bf16 does not learn: first 5 steps $first, best step $best, last 10 $last"
	fi
fi

# the same seed writes the same metrics, timers aside
strip_timers() {
	sed -E 's/,"tokens_per_sec".*//' "$1"
}
for run in a b; do
	expect_status 0 "short run $run" -- "$RLRUN" train grpo.max_num_steps=3 logger.log_dir="same-$run"
done
if [ "$(strip_timers same-a/metrics.jsonl)" = "$(strip_timers same-b/metrics.jsonl)" ]; then
	ok "two runs of one seed write identical metrics except the timers"
else
	not_ok "two runs of one seed differ:"
	diff same-a/metrics.jsonl same-b/metrics.jsonl | head -6
fi
expect_grep same-a/metrics.jsonl '"step":3,.*"total_step_time":.*"generation":.*"reward_calculation":.*"policy_and_reference_logprobs":.*"policy_training":.*"refit":.*"checkpointing":' \
	"metrics carry NeMo-RL's timers"
# batch-invariant kernels (policy.generation.batch_invariant, the default):
# generation reports the logprob pass's logprobs to the bit at every step
if [ "$(grep -c '"token_mult_prob_error":1\.0,"gen_logprob_max_diff":0\.0,' same-a/metrics.jsonl)" = 3 ]; then
	ok "generation and training logprobs are equal at every step (error 1, max diff 0)"
else
	not_ok "generation and training logprobs differ:"
	grep -o '"token_mult_prob_error":[^,]*,"gen_logprob_max_diff":[^,]*' same-a/metrics.jsonl
fi
# and a sample's tokens do not depend on how many run at once (the
# continuous batching's slots) or on prefix sharing: the whole run is the same
expect_status 0 "short run with 7 generation slots" -- \
	"$RLRUN" train grpo.max_num_steps=3 logger.log_dir=same-7 policy.generation_batch_size=7
if [ "$(strip_timers same-7/metrics.jsonl)" = "$(strip_timers same-a/metrics.jsonl)" ]; then
	ok "  the same metrics as with 32 slots, timers aside"
else
	not_ok "  7 slots generate otherwise than 32:"
	diff same-a/metrics.jsonl same-7/metrics.jsonl | head -6
fi
# The first step's line carries this rank's memory by kind, counted by the
# allocator (kernels/memory_use.h). Against the model's config (tied
# embeddings counted once) and fp32 AdamW's arithmetic: 4 bytes a parameter
# of weights (with the small RoPE table), of the reference policy and of
# gradients, 8 of moments. bf16 today keeps an fp32 copy of the rounded
# weights beside the fp32 master, 8 bytes of weights (issue 41's layout
# brings it to 2), and its reference policy in bf16, 2.
cfg=$top_srcdir/etc/models/tiny-llama/config.json
cfg_num() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$cfg"; }
d=$(cfg_num hidden_size) i=$(cfg_num intermediate_size) L=$(cfg_num num_hidden_layers)
V=$(cfg_num vocab_size) h=$(cfg_num num_attention_heads) kv=$(cfg_num num_key_value_heads)
hd=$(cfg_num head_dim)
params=$((V * d + L * (2 * d * h * hd + 2 * d * kv * hd + 3 * d * i + 2 * d) + d))
mem() { sed -n 1p "$1" | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"; }
check_memory() { # METRICS WEIGHT_BYTES REFERENCE_BYTES (a parameter)
	w=$(mem "$1" mem_weights_bytes)
	if [ "$(mem "$1" num_params)" = "$params" ] &&
		[ "$(mem "$1" mem_grads_bytes)" = $((4 * params)) ] &&
		[ "$(mem "$1" mem_optimizer_bytes)" = $((8 * params)) ] &&
		[ "$(mem "$1" mem_reference_bytes)" = $(($3 * params)) ] &&
		[ -n "$w" ] && [ "$w" -ge $(($2 * params)) ] && [ "$w" -le $(($2 * params + 4096)) ] &&
		[ "$(mem "$1" mem_activations_bytes)" -gt 0 ] && [ "$(mem "$1" mem_kv_cache_bytes)" -gt 0 ]; then
		ok "  step 1's memory: $params parameters, $2 + 4 + 8 + $3 bytes each, activations and KV cache"
	else
		not_ok "  step 1's memory is not the config's $params parameters at $2 + 4 + 8 + $3 bytes:"
		sed -n 1p "$1" | grep -o '"num_params".*'
	fi
	[ "$(sed -n '2,$p' "$1" | grep -c num_params)" = 0 ] &&
		ok "  later lines do not repeat it" || not_ok "  a later line repeats the memory"
}
check_memory same-a/metrics.jsonl 4 4
expect_grep "$WORK/out" "^rlrun train: memory of rank 0 after setup \\(0\\.33M parameters\\): weights 1\\.3 MiB \\(4\\.00 B/param\\), grads 1\\.3 MiB \\(4\\.00 B/param\\), optimizer 2\\.5 MiB \\(8\\.00 B/param\\), reference 1\\.3 MiB \\(4\\.00 B/param\\)" \
	"  printed at the start"
expect_status 0 "short run in bf16" -- \
	"$RLRUN" train grpo.max_num_steps=1 policy.precision=bfloat16 logger.log_dir=mem-bf16
check_memory mem-bf16/metrics.jsonl 8 2

# nor on the threads (the first step's samples: the training pass after
# them sums in OpenBLAS's thread-dependent order)
samples() { sed -n 1p "$1" | grep -o '"reward_mean":[^,]*,"reward_std":[^,]*\|"token_mult_prob_error":[^,]*,"gen_logprob_max_diff":[^,]*'; }
# (the tests run on one thread, tests/cli/lib.sh: three here, on any machine)
expect_status 0 "a step on three threads" -- env OMP_NUM_THREADS=3 \
	"$RLRUN" train grpo.max_num_steps=1 logger.log_dir=same-3t
if [ -n "$(samples same-a/metrics.jsonl)" ] &&
	[ "$(samples same-3t/metrics.jsonl)" = "$(samples same-a/metrics.jsonl)" ]; then
	ok "  the same samples as on one thread"
else
	not_ok "  three threads sample otherwise: $(samples same-3t/metrics.jsonl)"
fi
# a rerun into the same log directory keeps the earlier record
expect_status 0 "a rerun into the same log dir" -- "$RLRUN" train grpo.max_num_steps=1 logger.log_dir=same-a
expect_grep "$WORK/out" "kept as same-a/metrics.1.jsonl" "says where the earlier metrics went"
[ "$(wc -l <same-a/metrics.1.jsonl)" = 3 ] && ok "the earlier metrics are intact" ||
	not_ok "the earlier metrics were changed"

# an external reward program that crashes on some samples: scored 0, counted
cat >reward.sh <<'SH'
#!/bin/sh
# reward 1 for responses that start with a digit; die on the fifth sample
n=0
while IFS= read -r line; do
	n=$((n + 1))
	[ "$n" = 5 ] && kill -SEGV $$
	case "$line" in *'"response":"'[0-9]*) echo 1 ;; *) echo 0 ;; esac
done
SH
chmod +x reward.sh
expect_status 0 "a run whose reward program crashes" -- "$RLRUN" train grpo.max_num_steps=2 \
	logger.log_dir=crash env.digits.command="exec $WORK/reward.sh" data.env_name=digits
expect_grep crash/metrics.jsonl '"step":2,.*"reward_failures":[1-9]' "the crashes are counted"
expect_grep "$WORK/err" "reward command: sample [0-9]+: killed by signal" "and reported"

# every sample is scored once in the run: the ranks of a model replica
# (tensor, pipeline, context) split their data-parallel share. Scored on
# each, a sample that a program fails on one rank only would get two
# rewards, and the replica's ranks would train on different advantages.
cat >count.sh <<SH
#!/bin/sh
while IFS= read -r line; do
	echo "\${PMI_RANK:-0}" >>"$WORK/scored.log"
	echo 1
done
SH
chmod +x count.sh
scored_once() { # NAME RANKS WHAT [KEY=VALUE...]
	name=$1 ranks=$2 what=$3
	shift 3
	rm -f scored.log
	expect_status 0 "$what: one step with a reward program" -- \
		timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" mpiexec -n "$ranks" \
		"$RLRUN" train grpo.max_num_steps=1 grpo.num_prompts_per_step=8 \
		policy.train_global_batch_size=64 policy.train_micro_batch_size=16 \
		logger.log_dir="$name" data.env_name=digits env.digits.command="exec $WORK/count.sh" \
		"$@"
	per_rank=$(sort -n scored.log | uniq -c | awk '{ printf "%s%d", (NR > 1 ? " " : ""), $1 }')
	want=$(awk -v r="$ranks" 'BEGIN { for (i = 0; i < r; i++) printf "%s%d", i ? " " : "", 128 / r }')
	[ "$per_rank" = "$want" ] && ok "  its 128 samples scored once, $want by each rank" ||
		not_ok "  samples scored per rank: ${per_rank:-none}, not $want"
	# each rank's slice of the vocabulary folded and combined as the
	# logprob pass does it: the same bits in every layout
	grep -q '"token_mult_prob_error":1\.0,"gen_logprob_max_diff":0\.0,' "$name/metrics.jsonl" &&
		ok "  its generation logprobs are the logprob pass's, bit for bit" ||
		not_ok "  generation and logprob pass differ: $(grep -o '"gen_logprob_max_diff":[^,]*' "$name/metrics.jsonl")"
}
scored_once scored-tp2 2 "tensor parallel 2" policy.parallel.tensor=2
scored_once scored-pp2 2 "pipeline parallel 2" policy.parallel.pipeline=2
scored_once scored-tp2-dp2 4 "tensor parallel 2, data parallel 2" policy.parallel.tensor=2

# a JSONL dataset with the math reward
cat >train.jsonl <<'J'
{"problem": "1+1=", "expected_answer": "2"}
{"problem": "2+2=", "expected_answer": 4}
{"problem": "3+1=", "expected_answer": "4"}
J
expect_status 0 "a JSONL dataset with the math reward" -- "$RLRUN" train grpo.max_num_steps=2 \
	grpo.num_prompts_per_step=2 grpo.num_generations_per_prompt=4 policy.train_global_batch_size=8 \
	policy.train_micro_batch_size=4 data.dataset_name=jsonl data.train.path=train.jsonl \
	logger.log_dir=jsonl
expect_grep "$WORK/out" "data jsonl, reward math" "names its data and reward"
expect_grep "$WORK/out" "the data ran out after 1 epoch" "stops when the epochs run out"
printf '{"problem": "1+1=", "expected_answer": "2"}\n{"problem": "oops"\n' >bad.jsonl
expect_status 1 "a malformed JSONL line" -- "$RLRUN" train data.dataset_name=jsonl \
	data.train.path=bad.jsonl grpo.num_prompts_per_step=1 logger.log_dir=bad
expect_grep "$WORK/err" "bad.jsonl:2" "names the file and line"

# what this release cannot do is refused by name
expect_status 2 "float16 (no loss scaling) is refused" -- "$RLRUN" train policy.precision=float16
expect_grep "$WORK/err" "policy.precision" "with the key"
expect_status 2 "an unknown reward" -- "$RLRUN" train data.env_name=nope
expect_grep "$WORK/err" "data.env_name" "names the key"

# the run's picture
if command -v gnuplot >/dev/null 2>&1; then
	expect_status 0 "rlrun plot of a run" -- "$RLRUN" plot same-b -o run.png
	[ "$(head -c 4 run.png | od -An -c | tr -d ' ')" = "211PNG" ] && ok "a PNG" || not_ok "not a PNG"
fi
# a mixture of experts (the transformers fixture, Qwen3-MoE) trains: its
# decode through the KV cache and its logprob pass route alike and run the
# same batch-invariant kernels, experts' included, so the generation and
# training log-probabilities are equal
expect_status 0 "a Qwen3-MoE model trains" -- "$RLRUN" train grpo.max_num_steps=2 \
	policy.model_name="$top_srcdir/tests/fixtures/models/qwen3-moe" logger.log_dir=moe
expect_grep "$WORK/out" "Qwen3MoeForCausalLM" "  names the family"
expect_grep moe/metrics.jsonl '"step":2,.*"token_mult_prob_error":1\.0,"gen_logprob_max_diff":0\.0,' \
	"  generation and training logprobs are equal"

# policy.moe.freeze_router: the routers keep their starting weights, bit
# for bit, through updates with weight decay (which would shrink a router
# that only gets no gradient), on one rank and on two (the distributed
# optimizer); the other weights train, and without the key the routers do
moe=$top_srcdir/tests/fixtures/models/qwen3-moe
compare=$top_builddir/tests/tools/rl_compare
moe_run() { # NAME LAUNCHER... -- [KEY=VALUE...]
	name=$1
	shift
	launcher=
	while [ "$1" != -- ]; do
		launcher="$launcher $1"
		shift
	done
	shift
	# shellcheck disable=SC2086
	expect_status 0 "Qwen3-MoE trains: $name" -- $launcher "$RLRUN" train grpo.max_num_steps=2 \
		policy.model_name="$moe" policy.optimizer.kwargs.weight_decay=0.1 logger.log_dir="$name" \
		checkpointing.enabled=true checkpointing.checkpoint_dir="$name.ck" "$@"
	expect_status 0 "  exported to Hugging Face files" -- \
		"$RLRUN" ckpt export "$name.ck/step_2" --hf "$name.hf"
}
# same RUN REFERENCE PART: yes when RUN's tensors named *PART* equal the
# reference's bit for bit, no when they differ, and neither (with the
# reason on stderr) when they could not be compared (rl_compare exits 2):
# a run that wrote nothing must not pass as "trained"
same() {
	"$compare" grads "$1" "$2" 0 "$3" >/dev/null 2>"$WORK/compare.err"
	case $? in
	0) echo yes ;;
	1) echo no ;;
	*) sed 's/^/  | /' "$WORK/compare.err" >&2 ;;
	esac
}
moe_run frozen -- policy.moe.freeze_router=true
moe_run frozen-dp2 env ASAN_OPTIONS="$mpi_asan" mpiexec -n 2 -- policy.moe.freeze_router=true
moe_run free --
start=$moe/model.safetensors
for name in frozen frozen-dp2; do
	[ "$(same "$name.hf/model.safetensors" "$start" mlp.gate.weight)" = yes ] &&
		ok "  $name: the routers are the starting model's, bit for bit" ||
		not_ok "  $name: the frozen routers changed"
	[ "$(same "$name.hf/model.safetensors" "$start" q_proj)" = no ] &&
		ok "  $name: the attention trained" || not_ok "  $name: the attention did not train"
done
[ "$(same free.hf/model.safetensors "$start" mlp.gate.weight)" = no ] &&
	ok "  free: the routers trained" || not_ok "  free: the routers did not train"
expect_status 1 "policy.moe.freeze_router on a model without experts is refused" -- \
	"$RLRUN" train grpo.max_num_steps=1 policy.moe.freeze_router=true logger.log_dir=refused
expect_grep "$WORK/err" "policy.moe.freeze_router: builtin:.* is not a mixture of experts" \
	"  naming the key"
# policy.moe.aux_loss_coef replaces config.json's router_aux_loss_coef:
# at 0 the routers get another gradient than at its 0.05
moe_run aux0 -- policy.moe.aux_loss_coef=0
[ "$(same aux0.hf/model.safetensors free.hf/model.safetensors mlp.gate.weight)" = no ] &&
	ok "  aux_loss_coef=0: the routers train otherwise" ||
	not_ok "  aux_loss_coef=0 changed nothing"
# metrics.jsonl's moe_aux_loss is the load-balancing term of the objective,
# coefficient included: with one update per step, the first step's (on the
# starting weights either way) doubles with the coefficient, and it is 0
# at 0 (ep2 = ep1 below covers it across layouts)
aux_step() { # COEF: step 1's moe_aux_loss
	"$RLRUN" train grpo.max_num_steps=1 grpo.num_prompts_per_step=8 \
		grpo.num_generations_per_prompt=4 policy.train_global_batch_size=32 \
		policy.train_micro_batch_size=8 policy.model_name="$moe" \
		policy.moe.aux_loss_coef="$1" logger.log_dir="aux-$1" >/dev/null 2>&1 &&
		sed -nE 's/.*"moe_aux_loss":([-0-9.eE+]+).*/\1/p' "aux-$1/metrics.jsonl"
}
a1=$(aux_step 0.05) a2=$(aux_step 0.1)
awk -v a="$a1" -v b="$a2" 'BEGIN { exit !(a > 0 && b > 0 && (b - 2 * a) ^ 2 <= (1e-6 * b) ^ 2) }' &&
	ok "moe_aux_loss: $a1 at coefficient 0.05, $a2 at 0.1" ||
	not_ok "moe_aux_loss: '$a1' at coefficient 0.05, '$a2' at 0.1: not twice"
grep -q '"moe_aux_loss":0\.0,' aux0/metrics.jsonl && ok "  0 at coefficient 0" ||
	not_ok "  not 0 at coefficient 0"
[ -s same-b/metrics.jsonl ] && ! grep -q '"moe_aux_loss"' same-b/metrics.jsonl &&
	ok "  (a dense model reports none)" || not_ok "  a dense model reports moe_aux_loss"
# expert parallelism (2 ranks, ep2: each holds half the experts; the
# others' tokens reach them by all-to-all): the first step equals the
# dense-expert dp2 run (its grad_norm covers every gradient, the experts'
# included), and so do the weights after it; a checkpoint of the spread
# experts and their moments resumes exactly, and loads into the other
# layout.
# What two layouts share is one optimizer update from the same weights:
# the same sums in another order, equal to float32 rounding (1e-7 of a
# term, a few 1e-6 after the model's chains of them; 1e-5 bounds it). A
# second update starts from weights that Adam made of those rounded
# gradients, and Adam moves a parameter by about lr * g / (|g| + eps)
# whatever the size of g: a gradient that is 0 in one layout and a
# rounding of 1e-9 in the other (the KL term's, where the reference and
# the policy group an expert's tokens differently and so differ in their
# last bits) moves the LM head by lr / 10 in one and not at all in the
# other. So a step compared across layouts is one update (a global batch
# of the whole step's samples); steps after it are compared within one
# layout, where they are exact.
one_update="policy.train_global_batch_size=1024"
ep_run() { # NAME EP STEPS [KEY=VALUE...]
	name=$1 ep=$2 n=$3
	shift 3
	expect_status 0 "Qwen3-MoE on 2 ranks, expert parallel $ep: $name" -- \
		timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" RL_GRAD_DUMP="$name.grads" \
		mpiexec -n 2 "$RLRUN" train \
		grpo.max_num_steps="$n" \
		policy.model_name="$moe" policy.parallel.expert="$ep" logger.log_dir="$name" \
		checkpointing.enabled=true checkpointing.checkpoint_dir="$name.ck" "$@"
}
ep_run ep1 1 1 $one_update
ep_run ep2 2 1 $one_update
expect_status 0 "  ep2's first step = ep1's (1e-5)" -- \
	"$compare" metrics ep2/metrics.jsonl ep1/metrics.jsonl 1e-5
# RL_GRAD_DUMP gathers every expert from the rank that holds it: ep1's
# dump (whose every rank holds them all) is the reference, tensor by tensor
expect_status 0 "  ep2's first gradient = ep1's, each of the 48 experts' included (1e-5)" -- \
	"$compare" grads ep2.grads ep1.grads 1e-5
expect_status 0 "  exported" -- "$RLRUN" ckpt export ep1.ck/step_1 --hf ep1.hf
expect_status 0 "  exported" -- "$RLRUN" ckpt export ep2.ck/step_1 --hf ep2.hf
expect_status 0 "  ep2's weights after it = ep1's (1e-4)" -- \
	"$compare" grads ep2.hf/model.safetensors ep1.hf/model.safetensors 1e-4
# activation checkpointing recomputes each layer, its exchanges included,
# before the layer's backward: the same bits
ac=policy.parallel.activation_checkpointing=true
ep_run ep2-ac 2 1 $one_update $ac
expect_grep "$WORK/out" "activation checkpointing: each layer recomputed" "  says it recomputes"
expect_status 0 "  ep2 with activation checkpointing: the same metrics, bit for bit" -- \
	"$compare" metrics ep2-ac/metrics.jsonl ep2/metrics.jsonl 0
expect_status 0 "  and the same gradient" -- "$compare" grads ep2-ac.grads ep2.grads 0
ep_run ep2-full 2 4 checkpointing.save_period=2
mkdir -p ep2-re.ck ep1-re.ck && cp -r ep2-full.ck/step_2 ep2-re.ck/ && cp -r ep2-full.ck/step_2 ep1-re.ck/
ep_run ep2-re 2 4 checkpointing.save_period=2
strip() { sed -E 's/,"tokens_per_sec".*//' "$@"; }
[ "$(strip ep2-re/metrics.jsonl)" = "$(sed -n 3,4p ep2-full/metrics.jsonl | strip)" ] &&
	ok "  ep2 resumed at step 2: steps 3-4 as the run that never stopped wrote them" ||
	not_ok "  ep2 resumed at step 2: steps 3-4 differ"
ep_run ep1-re 1 4 checkpointing.save_period=2
expect_grep "$WORK/out" "resuming from (.*/)?ep1-re.ck/step_2 " "  ep2's checkpoint loads into ep1"
# expert parallelism beside pipeline parallelism (4 ranks: pp2 x dp2, ep2
# over each stage's data-parallel ranks), with one update of 3 samples of
# one sequence per micro-batch, so that one data-parallel rank has 2
# micro-batches and the other 1 and an idle pass in the 1F1B schedule: the
# first step and its gradient, every expert's included, are those of ep1
# on one stage (dp2), and a checkpoint resumes exactly
uneven="grpo.num_prompts_per_step=1 grpo.num_generations_per_prompt=3
policy.train_global_batch_size=3 policy.train_micro_batch_size=1 policy.logprob_batch_size=1"
ep_pp_run() { # NAME STEPS [KEY=VALUE...]
	name=$1 n=$2
	shift 2
	# shellcheck disable=SC2086
	expect_status 0 "Qwen3-MoE on 4 ranks, expert parallel 2 beside pipeline 2: $name" -- \
		timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" RL_GRAD_DUMP="$name.grads" \
		mpiexec -n 4 "$RLRUN" train grpo.max_num_steps="$n" policy.model_name="$moe" \
		policy.parallel.expert=2 policy.parallel.pipeline=2 logger.log_dir="$name" \
		checkpointing.enabled=true checkpointing.checkpoint_dir="$name.ck" $uneven "$@"
}
# shellcheck disable=SC2086
ep_run ep1-uneven 1 1 $uneven
ep_pp_run ep2pp2 1
expect_status 0 "  its first step = ep1's (1e-5)" -- \
	"$compare" metrics ep2pp2/metrics.jsonl ep1-uneven/metrics.jsonl 1e-5
expect_status 0 "  its first gradient = ep1's, every expert's included (1e-5)" -- \
	"$compare" grads ep2pp2.grads ep1-uneven.grads 1e-5
# the rank with one micro-batch recomputes its idle pass's exchanges too
ep_pp_run ep2pp2-ac 1 $ac
expect_status 0 "  ep2pp2 with activation checkpointing: the same metrics, bit for bit" -- \
	"$compare" metrics ep2pp2-ac/metrics.jsonl ep2pp2/metrics.jsonl 0
expect_status 0 "  and the same gradient" -- "$compare" grads ep2pp2-ac.grads ep2pp2.grads 0
ep_pp_run ep2pp2-full 2 checkpointing.save_period=1
mkdir -p ep2pp2-re.ck && cp -r ep2pp2-full.ck/step_1 ep2pp2-re.ck/
ep_pp_run ep2pp2-re 2 checkpointing.save_period=1
[ "$(strip ep2pp2-re/metrics.jsonl)" = "$(sed -n 2p ep2pp2-full/metrics.jsonl | strip)" ] &&
	ok "  resumed at step 1: step 2 as the run that never stopped wrote it" ||
	not_ok "  resumed at step 1: step 2 differs"
finish
