#!/bin/sh
# Stock NeMo-RL GRPO configs (tests/configs/nemo-rl: v0.4.0's, and main's
# of 2026-08 in main-2026-08/, kept as published) load with `rlrun config`, differing only by note lines and the
# documented overrides below; what their backend, generation and scheduler
# blocks say lands in slurm-rl's keys; an enabled block slurm-rl lacks is
# still an error.
. "$(dirname "$0")/lib.sh"
nemo=$top_srcdir/tests/configs/nemo-rl
# notes are said by the first task of a launch only: be no later task
unset RL_RANK PMI_RANK OMPI_COMM_WORLD_RANK SLURM_PROCID

# The documented differences: data.dataset_name OpenMathInstruct-2 is a
# Hugging Face dataset, which a config cannot fetch (arithmetic stands in);
# main's data.train also splits a validation set off it
# (split_validation_size), which slurm-rl does not.
cp -r "$nemo" "$WORK/nemo"
over="data.dataset_name=arithmetic"

# only note lines on stderr
only_notes() { # DESCRIPTION
	if grep -qv '^note: ' "$WORK/err"; then
		not_ok "$1: more than notes on stderr:"
		grep -v '^note: ' "$WORK/err" | sed 's/^/  | /' | head -20
	else
		ok "$1"
	fi
}
# value KEY.PATH FILE: the value printed for a dotted key of `rlrun config`
value() {
	awk -v want="$1" '
		/^ *- / || /^ *#/ { next }
		{
			match($0, /^ */); depth = RLENGTH / 2
			key = $1; sub(/:$/, "", key)
			path[depth] = key
			full = path[0]
			for (i = 1; i <= depth; i++) full = full "." path[i]
			if (full == want) { sub(/^ *[^:]*: */, ""); print; exit }
		}' "$2"
}
expect_value() { # FILE KEY WANT
	got=$(value "$2" "$1")
	if [ "$got" = "$3" ]; then ok "$2 = $3"; else not_ok "$2 is '$got', expected '$3'"; fi
}

# ---- grpo_math_1B.yaml: DTensor, vLLM, a torch scheduler list ----
# shellcheck disable=SC2086 # $over is a list of overrides
expect_status 0 "grpo_math_1B.yaml loads" -- "$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over
only_notes "  with only notes"
cp "$WORK/out" "$WORK/1b.yaml"
expect_grep "$WORK/err" '^note: ignored \(switched off\): .*policy\.megatron_cfg.*logger\.wandb' \
	"  the switched-off blocks are named in one note"
expect_grep "$WORK/err" '^note: policy\.dtensor_cfg: mapped .*tensor_parallel_size -> policy\.parallel\.tensor.*; no effect here: .*cpu_offload' \
	"  the DTensor note names what it mapped and what changes nothing"
expect_grep "$WORK/err" '^note: policy\.generation\.backend: vllm' "  the engine note"
expect_value "$WORK/1b.yaml" policy.parallel.tensor 1
expect_value "$WORK/1b.yaml" policy.parallel.context 1
# ${mul:${policy.max_total_sequence_length}, ${policy.train_micro_batch_size}}: 512 x 4
expect_value "$WORK/1b.yaml" policy.sequence_packing.train_mb_tokens 2048
expect_value "$WORK/1b.yaml" policy.sequence_packing.algorithm modified_first_fit_decreasing
expect_value "$WORK/1b.yaml" policy.generation.gpu_memory_utilization 0.6
expect_value "$WORK/1b.yaml" policy.generation.tensor_parallel_size 1
# a relative path names a file beside the config
expect_value "$WORK/1b.yaml" data.prompt_file "$WORK/nemo/examples/prompts/cot.txt"
expect_grep "$WORK/1b.yaml" '^  - name: torch\.optim\.lr_scheduler\.LinearLR$' "  scheduler 1 is LinearLR"
expect_grep "$WORK/1b.yaml" '^    kwargs: \{start_factor: 0\.1, end_factor: 1, total_iters: 50\}$' \
	"  with the file's kwargs"
expect_grep "$WORK/1b.yaml" '^    kwargs: \{factor: 1, total_iters: 10000000000\}$' "  then ConstantLR's"
expect_grep "$WORK/1b.yaml" '^  - milestones: \[50\]$' "  switching at 50"
tail -n +2 "$WORK/1b.yaml" >"$WORK/1b-body.yaml"
expect_status 0 "  its resolved config reads back" -- "$RLRUN" config "$WORK/1b-body.yaml"
tail -n +2 "$WORK/out" >"$WORK/1b-again.yaml"
if cmp -s "$WORK/1b-body.yaml" "$WORK/1b-again.yaml"; then ok "  to the same config"; else
	not_ok "  round trip differs:"
	diff "$WORK/1b-body.yaml" "$WORK/1b-again.yaml" | head
fi

# shellcheck disable=SC2086
expect_status 0 "  as a later task of a launch" -- \
	env SLURM_PROCID=3 "$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over
if [ -s "$WORK/err" ]; then not_ok "  it says no notes: the first task speaks for all"; else
	ok "  it says no notes: the first task speaks for all"
fi

# ---- grpo_math_1B_megatron.yaml: Megatron's sizes, optimizer and scheduler ----
# shellcheck disable=SC2086
expect_status 0 "grpo_math_1B_megatron.yaml loads" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B_megatron.yaml" $over
only_notes "  with only notes"
cp "$WORK/out" "$WORK/meg.yaml"
expect_grep "$WORK/err" '^note: policy\.megatron_cfg: mapped .*tensor_model_parallel_size -> policy\.parallel\.tensor.*; no effect here: .*apply_rope_fusion' \
	"  the Megatron note names what it mapped and what changes nothing"
expect_grep "$WORK/err" '^note: not used with an enabled policy\.megatron_cfg, as in NeMo-RL: policy\.scheduler' \
	"  the inherited torch scheduler is not used, as in NeMo-RL"
expect_value "$WORK/meg.yaml" policy.optimizer.kwargs.lr 5e-06
expect_value "$WORK/meg.yaml" policy.optimizer.kwargs.betas "[0.9, 0.999]"
expect_value "$WORK/meg.yaml" policy.lr_schedule.type constant
expect_value "$WORK/meg.yaml" policy.lr_schedule.warmup_steps 13
expect_value "$WORK/meg.yaml" policy.lr_schedule.warmup_init 5e-07
expect_value "$WORK/meg.yaml" policy.lr_schedule.decay_steps 1000
expect_value "$WORK/meg.yaml" policy.lr_schedule.min_lr 5e-07
expect_value "$WORK/meg.yaml" policy.scheduler null
expect_value "$WORK/meg.yaml" policy.moe.freeze_router true
expect_value "$WORK/meg.yaml" policy.logprob_batch_size 8
# shellcheck disable=SC2086
expect_status 0 "  tensor_model_parallel_size=2 from the command line" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B_megatron.yaml" $over \
	policy.megatron_cfg.tensor_model_parallel_size=2
expect_value "$WORK/out" policy.parallel.tensor 2
# shellcheck disable=SC2086
expect_status 2 "  set differently in policy.parallel too is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B_megatron.yaml" $over \
	policy.megatron_cfg.tensor_model_parallel_size=2 policy.parallel.tensor=4
expect_grep "$WORK/err" 'error: policy\.megatron_cfg\.tensor_model_parallel_size: conflicts with policy\.parallel\.tensor set at <command line>:[0-9]+:1' \
	"  naming both places"
# shellcheck disable=SC2086
expect_status 2 "  an enabled fp8_cfg is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B_megatron.yaml" $over policy.megatron_cfg.fp8_cfg.enabled=true
expect_grep "$WORK/err" ':[0-9]+:[0-9]+: error: policy\.megatron_cfg\.fp8_cfg: not supported yet' \
	"  naming the block at its place"
# shellcheck disable=SC2086
expect_status 2 "  a Megatron key that would change the maths is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B_megatron.yaml" $over \
	policy.megatron_cfg.moe_router_bias_update_rate=0.001
expect_grep "$WORK/err" 'policy\.megatron_cfg\.moe_router_bias_update_rate: not supported yet' "  naming it"

# ---- grpo_math_8B_megatron.yaml: a chain of two defaults ----
# shellcheck disable=SC2086
expect_status 0 "grpo_math_8B_megatron.yaml loads" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_8B_megatron.yaml" $over
only_notes "  with only notes"
cp "$WORK/out" "$WORK/8b.yaml"
expect_value "$WORK/8b.yaml" policy.parallel.pipeline 2
expect_value "$WORK/8b.yaml" policy.parallel.tensor 1
expect_value "$WORK/8b.yaml" policy.optimizer.kwargs.lr 3e-07
expect_value "$WORK/8b.yaml" policy.lr_schedule.warmup_init 3e-08
expect_value "$WORK/8b.yaml" policy.max_total_sequence_length 4096
expect_value "$WORK/8b.yaml" policy.generation.max_new_tokens 4096
expect_value "$WORK/8b.yaml" cluster.gpus_per_node 8

# ---- main's configs of 2026-08: the newer keys ----
main="data.train.dataset_name=arithmetic data.train.split_validation_size=0 ${over#data.dataset_name=arithmetic}"
for f in grpo_math_1B grpo_math_1B_megatron grpo_math_8B_megatron; do
	# shellcheck disable=SC2086
	expect_status 0 "main-2026-08/$f.yaml loads" -- \
		"$RLRUN" config "$WORK/nemo/main-2026-08/$f.yaml" $main
	only_notes "  with only notes"
	cp "$WORK/out" "$WORK/main-$f.yaml"
	cp "$WORK/err" "$WORK/main-$f.err"
done
expect_grep "$WORK/main-grpo_math_1B.err" '^note: data\.default: mapped prompt_file -> data\.prompt_file' \
	"  data.default is read into data.*"
expect_grep "$WORK/main-grpo_math_1B.err" '^note: grpo\.adv_estimator: mapped normalize_rewards' \
	"  the GRPO advantage estimator is read"
expect_grep "$WORK/main-grpo_math_1B.err" '^note: ignored \(switched off\): .*policy\.draft.*logger\.swanlab.*data_plane' \
	"  the newer switched-off blocks are named"
expect_value "$WORK/main-grpo_math_1B.yaml" data.prompt_file "$WORK/nemo/main-2026-08/examples/prompts/cot.txt"
expect_value "$WORK/main-grpo_math_1B.yaml" data.env_name math
expect_value "$WORK/main-grpo_math_1B.yaml" data.dataset_name arithmetic
expect_value "$WORK/main-grpo_math_8B_megatron.yaml" policy.parallel.pipeline 2
expect_value "$WORK/main-grpo_math_8B_megatron.yaml" policy.optimizer.kwargs.lr 3e-07
# shellcheck disable=SC2086
expect_status 2 "  validation sampling unlike training's is an error" -- \
	"$RLRUN" config "$WORK/nemo/main-2026-08/grpo_math_1B.yaml" $main policy.generation.val_temperature=0.5
expect_grep "$WORK/err" 'policy\.generation\.val_temperature: not supported yet: validation samples as training does' \
	"  naming it"

# ---- what stays an error ----
# shellcheck disable=SC2086
expect_status 2 "both backends enabled is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over policy.megatron_cfg.enabled=true
expect_grep "$WORK/err" 'policy\.megatron_cfg: enabled together with policy\.dtensor_cfg' "  naming both"
# shellcheck disable=SC2086
expect_status 2 "logger.wandb_enabled: true is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over logger.wandb_enabled=true
expect_grep "$WORK/err" 'logger\.wandb_enabled: not supported yet' "  naming the switch"
expect_grep "$WORK/err" 'logger\.wandb: not supported yet' "  and the block it switched on"
# DAPO's blocks as NeMo-RL's config writes them: switched on, they load
# (max_response_length is ${policy.max_total_sequence_length} there); one
# without its lengths is an error naming them
# shellcheck disable=SC2086
expect_status 0 "an enabled reward_shaping block loads" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over grpo.reward_shaping.enabled=true \
	grpo.reward_scaling.enabled=true grpo.use_dynamic_sampling=true grpo.batch_multiplier=2
expect_grep "$WORK/out" '^    max_response_length: 512$' "  its max_response_length resolved"
# shellcheck disable=SC2086
expect_status 2 "reward_shaping without max_response_length is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over grpo.reward_shaping.enabled=true \
	grpo.reward_shaping.max_response_length=null
expect_grep "$WORK/err" 'grpo\.reward_shaping\.max_response_length: required by grpo\.reward_shaping\.enabled: true' \
	"  naming the key"
# shellcheck disable=SC2086
expect_status 2 "an unknown torch scheduler is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over \
	'policy.scheduler=[{name: torch.optim.lr_scheduler.ConstantLR, kwargs: {factor: 0.5}}, {name: torch.optim.lr_scheduler.StepLR, kwargs: {step_size: 3}}, {milestones: [4]}]'
expect_grep "$WORK/err" 'error: policy\.scheduler\[1\]: unknown scheduler torch\.optim\.lr_scheduler\.StepLR' \
	"  naming the list item"
# shellcheck disable=SC2086
expect_status 2 "an engine slurm-rl cannot stand in for is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over policy.generation.backend=sglang
expect_grep "$WORK/err" 'policy\.generation\.backend: not supported yet: vllm or megatron' "  naming it"
# shellcheck disable=SC2086
expect_status 2 "an unknown resolver is an error" -- \
	"$RLRUN" config "$WORK/nemo/grpo_math_1B.yaml" $over 'policy.logprob_batch_size=${pow:2,3}'
expect_grep "$WORK/err" 'policy\.logprob_batch_size: unknown resolver pow' "  naming it"

# ---- the trainer runs the schedules: lr of each step in metrics.jsonl ----
# one optimizer step per GRPO step (64 x 16 samples in one global batch);
# values worked by hand from torch's and Megatron's formulas, peak 0.001
lr_of_steps() { sed -nE 's/.*"lr":([-0-9.eE+]+).*/\1/p' "$1" | tr '\n' ' '; }
tiny=$top_srcdir/etc/examples/grpo-tiny.yaml
(cd "$WORK" && "$RLRUN" train "$tiny" grpo.max_num_steps=4 policy.train_global_batch_size=1024 \
	policy.lr_schedule.type=constant policy.lr_schedule.min_lr=0 checkpointing.enabled=false \
	logger.log_dir=torch-lr \
	'policy.scheduler=[{name: torch.optim.lr_scheduler.LinearLR, kwargs: {start_factor: 0.5, total_iters: 2}}, {name: torch.optim.lr_scheduler.ConstantLR, kwargs: {factor: 0.25, total_iters: 100}}, {milestones: [3]}]' \
	>"$WORK/out" 2>"$WORK/err")
# LinearLR 0.5 -> 1 over 2 steps, then ConstantLR's factor 0.25 from step 3
got=$(lr_of_steps "$WORK/torch-lr/metrics.jsonl")
if [ "$got" = "0.0005 0.00075 0.001 0.00025 " ]; then ok "torch schedulers drive the lr: $got"; else
	not_ok "torch schedulers: lr per step '$got', expected 0.0005 0.00075 0.001 0.00025"
	sed 's/^/  | /' "$WORK/err" | head
fi
(cd "$WORK" && "$RLRUN" train "$tiny" grpo.max_num_steps=4 policy.train_global_batch_size=1024 \
	policy.lr_schedule.type=cosine policy.lr_schedule.min_lr=0 policy.lr_schedule.warmup_steps=2 \
	policy.lr_schedule.warmup_init=0.0001 policy.lr_schedule.decay_steps=4 \
	checkpointing.enabled=false logger.log_dir=megatron-lr >"$WORK/out" 2>"$WORK/err")
# Megatron: 0.0001 + 0.0009 k / 2 while k < 2, then 0.0005 (1 + cos(pi (k - 2) / 2))
got=$(lr_of_steps "$WORK/megatron-lr/metrics.jsonl")
if [ "$got" = "0.0001 0.00055 0.001 0.0005 " ]; then ok "Megatron's schedule drives the lr: $got"; else
	not_ok "Megatron's schedule: lr per step '$got', expected 0.0001 0.00055 0.001 0.0005"
	sed 's/^/  | /' "$WORK/err" | head
fi

finish
