#!/bin/sh
# rlrun distill end to end on the CPU: a teacher that knows the built-in
# arithmetic task is made first (GRPO with rlrun train, then rlrun ckpt
# export to a Hugging Face directory); a fresh student (another seed)
# distilled from it on its own samples lifts its reward and brings its
# reverse KL to the teacher down. The fenced backend gives the CPU's
# numbers, in fp32 and bf16. A teacher larger than the student runs,
# alone and cut over two tensor-parallel ranks; a teacher with another
# tokenizer, NeMo-RL's top-k KL kinds and a teacher block that does not
# repeat the policy are refused by name; a resume with another teacher is
# refused.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
mpi_asan=${ASAN_OPTIONS:-}:detect_leaks=0
example=$top_srcdir/etc/examples/distill-tiny.yaml
# The sanitizer build checks the teacher's loading, the cut, the refusals
# and the resume (its files and its parsers) with a teacher of 3 steps;
# whether a student learns, and the fenced backend's numbers, are the
# plain build's (tests/check-all.sh).
mk=$top_builddir/Makefile
full=yes t_steps=25
if [ -f "$mk" ] && grep -Eq '^SANITIZE_FLAGS = -' "$mk"; then
	full= t_steps=3
	echo "the sanitizer build: a teacher of 3 steps, no learning or fenced runs"
fi

# ---- the teacher: 25 GRPO steps of the tiny run (reward about 0.6) ----
expect_status 0 "a teacher that knows the task: rlrun train, $t_steps steps" -- \
	"$RLRUN" train grpo.max_num_steps=$t_steps logger.log_dir=teacher-run \
	checkpointing.enabled=true checkpointing.checkpoint_dir=teacher.ck \
	checkpointing.save_period=$t_steps
t_last=$(reward_mean teacher-run/metrics.jsonl $((t_steps > 5 ? t_steps - 4 : 1)) $t_steps)
echo "the teacher's reward over its last 5 steps: $t_last"
expect_status 0 "  exported to a Hugging Face directory" -- \
	"$RLRUN" ckpt export teacher.ck/step_$t_steps --hf teacher

# ---- distillation: the student's reward rises, its KL falls ----
if [ -n "$full" ]; then
	expect_status 0 "rlrun distill the tiny example from that teacher" -- \
		"$RLRUN" distill "$example" teacher.model_name=teacher logger.log_dir=student
	m=student/metrics.jsonl
	steps=$(wc -l <"$m")
	first=$(reward_mean "$m" 1 5)
	last=$(reward_mean "$m" $((steps - 4)) "$steps")
	kl() { # FILE FIRST LAST: mean reverse_kl
		sed -nE "$2,$3s/.*\"reverse_kl\":([-0-9.eE+]+).*/\1/p" "$1" |
			awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n; else print "nan" }'
	}
	kl_first=$(kl "$m" 1 5)
	kl_last=$(kl "$m" $((steps - 4)) "$steps")
	echo "student: $steps steps, reward $first -> $last, reverse KL $kl_first -> $kl_last"
	# The student starts from random weights (reward near 0: an answer is one
	# of ten digits and the end token); a reward of 0.1 over 5 steps of 256
	# samples is 8 standard errors above a chance rate of 0.01. It must end
	# at least 0.15 above its start and at least a third of the teacher's.
	awk -v f="$first" -v l="$last" -v t="$t_last" 'BEGIN { exit !(l >= f + 0.15 && l >= t / 3) }' &&
		ok "  the student learns from the teacher: reward $first -> $last (teacher $t_last)" ||
		not_ok "  the student did not learn: reward $first -> $last (teacher $t_last)"
	awk -v f="$kl_first" -v l="$kl_last" 'BEGIN { exit !(f > 0.5 && l < f / 2) }' &&
		ok "  its reverse KL to the teacher halves at least: $kl_first -> $kl_last" ||
		not_ok "  its reverse KL did not fall: $kl_first -> $kl_last"
	expect_grep "$WORK/out" "^rlrun distill: teacher teacher \\(2 layers, hidden 128\\)" \
		"  the teacher is named on the terminal"

	# ---- the fenced backend (device memory rules, no GPU): the CPU's numbers ----
	# the teacher held and run in device memory as the student is, in fp32 and
	# in bf16 (the teacher rounded as the run's precision says)
	for prec in float32 bfloat16; do
		for fence in 0 1; do
			RL_OPS_FENCED=$fence expect_status 0 "3 $prec steps, fenced $fence" -- \
				"$RLRUN" distill "$example" teacher.model_name=teacher distillation.max_num_steps=3 \
				policy.precision=$prec logger.log_dir="fence-$prec-$fence"
		done
		same_as "  fenced $prec: the CPU's metrics, bit for bit" \
			metrics "fence-$prec-1/metrics.jsonl" "fence-$prec-0/metrics.jsonl" 0
	done
	"$top_builddir/tests/tools/rl_compare" metrics fence-bfloat16-0/metrics.jsonl \
		fence-float32-0/metrics.jsonl 0 >/dev/null 2>&1
	[ $? = 1 ] && ok "  bf16's numbers are not fp32's" || not_ok "  bf16 and fp32 were not found to differ"
fi

# ---- a larger teacher (3 layers, hidden 192) with the same tokenizer ----
mkdir wide && cp teacher/tokenizer.json wide/
if ${PYTHON:-python3} - wide <<'EOF'; then
import json, random, struct, sys
out = sys.argv[1]
H, I, L, V = 192, 384, 3, 46
cfg = json.load(open("teacher/config.json"))
cfg.update(hidden_size=H, intermediate_size=I, num_hidden_layers=L,
           num_attention_heads=6, num_key_value_heads=6, head_dim=32)
json.dump(cfg, open(out + "/config.json", "w"), indent=2)
shapes = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
for l in range(L):
    p = "model.layers.%d." % l
    shapes[p + "input_layernorm.weight"] = [H]
    shapes[p + "post_attention_layernorm.weight"] = [H]
    for w in "qkvo":
        shapes[p + "self_attn.%s_proj.weight" % w] = [H, H]
    shapes[p + "mlp.gate_proj.weight"] = [I, H]
    shapes[p + "mlp.up_proj.weight"] = [I, H]
    shapes[p + "mlp.down_proj.weight"] = [H, I]
rng = random.Random(3)
header, blobs, at = {}, [], 0
for name, shape in shapes.items():
    n = 1
    for d in shape:
        n *= d
    vals = [1.0] * n if name.endswith("norm.weight") else [rng.gauss(0, 0.05) for _ in range(n)]
    blobs.append(struct.pack("<%df" % n, *vals))
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + 4 * n]}
    at += 4 * n
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(out + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
EOF
	expect_status 0 "a larger teacher (3 layers, hidden 192) runs" -- \
		"$RLRUN" distill "$example" teacher.model_name=wide distillation.max_num_steps=2 \
		logger.log_dir=wide-run
	expect_grep "$WORK/out" "^rlrun distill: teacher wide \\(3 layers, hidden 192\\), student builtin:tiny-llama \\(2 layers, hidden 128\\)" \
		"  named with its size beside the student's"
	expect_grep wide-run/metrics.jsonl '"step":2,.*"reverse_kl":[0-9]' "  two steps with a reverse KL"
	expect_status 0 "  and cut over two tensor-parallel ranks with the student" -- \
		timeout --foreground -k 5 300 env ASAN_OPTIONS="$mpi_asan" mpiexec -n 2 \
		"$RLRUN" distill "$example" teacher.model_name=wide distillation.max_num_steps=2 \
		policy.parallel.tensor=2 logger.log_dir=wide-tp2
	first_tp=$(sed -n 's/.*"reverse_kl":\([-0-9.eE+]*\).*/\1/p' wide-tp2/metrics.jsonl | head -1)
	first_one=$(sed -n 's/.*"reverse_kl":\([-0-9.eE+]*\).*/\1/p' wide-run/metrics.jsonl | head -1)
	# the same samples (batch-invariant generation, either layout) scored
	# by the same two models: float sums in another order, 1e-4 apart at most
	awk -v a="$first_tp" -v b="$first_one" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * (1 + (b < 0 ? -b : b))) }' &&
		ok "  step 1's reverse KL under tp2 is the single rank's: $first_tp, $first_one" ||
		not_ok "  step 1's reverse KL under tp2 $first_tp, single rank $first_one"
else
	not_ok "could not write the larger teacher with ${PYTHON:-python3}"
fi

# ---- refusals ----
expect_status 1 "a teacher with another tokenizer is refused" -- \
	"$RLRUN" distill "$example" teacher.model_name="$top_srcdir/tests/fixtures/models/llama" \
	logger.log_dir=bad-tok
expect_grep "$WORK/err" "teacher.model_name: the teacher's tokenizer \\(.*tests/fixtures/models/llama\\) (differs from|has [0-9]+ ids, the) .*student's \\(builtin:tiny-llama\\)" \
	"  naming both tokenizers"
# the same 46 tokens, two of them swapped: the ids mean other tokens
mkdir swapped && cp teacher/config.json teacher/model.safetensors swapped/
${PYTHON:-python3} - <<'EOF2'
import json
t = json.load(open("teacher/tokenizer.json"))
v = t["model"]["vocab"]
v["1"], v["2"] = v["2"], v["1"]
json.dump(t, open("swapped/tokenizer.json", "w"))
EOF2
expect_status 1 "a teacher whose tokenizer swaps two ids is refused" -- \
	"$RLRUN" distill "$example" teacher.model_name=swapped logger.log_dir=bad-swap
expect_grep "$WORK/err" "teacher.model_name: the teacher's tokenizer \\(swapped\\) differs from the student's \\(builtin:tiny-llama\\): id [0-9]+ is \"[12]\" for the student, \"[12]\" for the teacher" \
	"  naming the id and both tokens"
expect_status 2 "loss_fn.kl_type: mixed is refused" -- \
	"$RLRUN" distill "$example" teacher.model_name=teacher loss_fn.kl_type=mixed
expect_grep "$WORK/err" "loss_fn.kl_type: forward and mixed are not implemented" "  as not implemented"
expect_status 2 "loss_fn.zero_outside_topk: true is refused" -- \
	"$RLRUN" distill "$example" teacher.model_name=teacher loss_fn.zero_outside_topk=true
expect_grep "$WORK/err" "loss_fn.zero_outside_topk: true is not implemented" "  as not implemented"
expect_status 2 "distillation.topk_logits_k other than NeMo-RL's 64 is refused" -- \
	"$RLRUN" distill "$example" teacher.model_name=teacher distillation.topk_logits_k=16
expect_grep "$WORK/err" "distillation.topk_logits_k: not supported yet: the teacher's top-k logits are not computed" \
	"  saying why"
expect_status 2 "a distillation config without a teacher is refused" -- \
	"$RLRUN" distill "$example"
expect_grep "$WORK/err" "teacher.model_name: on-policy distillation needs a teacher" "  naming the key"
expect_status 2 "rlrun train refuses a distillation config" -- \
	"$RLRUN" train "$example" teacher.model_name=teacher
expect_grep "$WORK/err" "rlrun distill" "  naming the verb to use"

# NeMo-RL's way of writing the teacher: the policy merged in, its own
# model and parallel sizes over it; sizes other than the policy's are
# refused by name, the policy's own are taken
cat >nemo.yaml <<EOF
defaults: $example
policy: &POLICY_BASE
  model_name: builtin:tiny-llama
  tokenizer:
    name: \${..model_name}
  dtensor_cfg: &DTENSOR_BASE
    enabled: true
    tensor_parallel_size: 1
    context_parallel_size: 1
teacher:
  <<: *POLICY_BASE
  model_name: teacher
  dtensor_cfg:
    <<: *DTENSOR_BASE
    tensor_parallel_size: 4
EOF
expect_status 2 "a teacher block with its own tensor_parallel_size is refused" -- \
	"$RLRUN" distill nemo.yaml
expect_grep "$WORK/err" "teacher.dtensor_cfg.tensor_parallel_size: differs from policy.dtensor_cfg.tensor_parallel_size: the teacher is held with the policy's layout" \
	"  naming both keys"
expect_grep "$WORK/err" "^rlrun distill: 1 error in nemo.yaml" "  and nothing else"
sed 's/tensor_parallel_size: 4/tensor_parallel_size: 1/' nemo.yaml >nemo-ok.yaml
expect_status 0 "the same block repeating the policy's sizes runs, validating" -- \
	"$RLRUN" distill nemo-ok.yaml distillation.max_num_steps=2 distillation.val_period=1 \
	distillation.max_val_samples=16 logger.log_dir=nemo-ok
expect_grep "$WORK/out" "^rlrun distill: teacher teacher " "  with the teacher's own model_name (its tokenizer its own)"
expect_grep nemo-ok/metrics.jsonl '"step":2,.*"val_reward":' "  the student's validation reward logged"
expect_status 2 "asynchronous rollouts are refused" -- \
	"$RLRUN" distill "$example" teacher.model_name=teacher grpo.async_grpo.enabled=true \
	policy.generation.colocated.enabled=false policy.generation.colocated.resources.gpus_per_node=1 \
	loss_fn.use_importance_sampling_correction=true
expect_grep "$WORK/err" "grpo.async_grpo.enabled: asynchronous rollouts are GRPO's" "  naming the key"

# ---- resume: the teacher is the one the run started with ----
ck="checkpointing.enabled=true checkpointing.checkpoint_dir=resume.ck checkpointing.save_period=2"
# shellcheck disable=SC2086
expect_status 0 "two checkpointed steps" -- \
	"$RLRUN" distill "$example" teacher.model_name=teacher distillation.max_num_steps=2 \
	logger.log_dir=resume $ck
# shellcheck disable=SC2086
expect_status 1 "a resume with another teacher is refused" -- \
	"$RLRUN" distill "$example" teacher.model_name=wide distillation.max_num_steps=3 \
	logger.log_dir=resume $ck
expect_grep "$WORK/err" "resume.ck/step_2 was written by a run with another teacher than teacher.model_name gives now" \
	"  naming the checkpoint and the key"
# shellcheck disable=SC2086
expect_status 0 "with its own teacher it resumes" -- \
	"$RLRUN" distill "$example" teacher.model_name=teacher distillation.max_num_steps=3 \
	logger.log_dir=resume $ck
expect_grep "$WORK/out" "resuming from resume.ck/step_2" "  from step 2"

finish
