#!/bin/sh
# rlrun dpo end to end on the CPU: the built-in tiny model learns to prefer
# the right sum of two digits over wrong ones from preference pairs the
# test writes (validation pairs reject answers the training pairs never
# show), its reward accuracy on them rising above 0.9; the numbers each
# step reports agree with each other; the SFT term; a run stopped and
# resumed from its checkpoint gives the uninterrupted run's numbers to the
# bit, and so does a run on the fenced backend; and the errors, each
# naming where it is.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
example=$top_srcdir/etc/examples/dpo-tiny.yaml

# a+b= for a, b in 0..4: training pairs reject every wrong answer in
# 0..8, validation pairs the answer a+b+9, which no training pair shows
pairs() { # train|val
	awk -v mode="$1" 'BEGIN { for (a = 0; a <= 4; a++) for (b = 0; b <= 4; b++) { s = a + b
		if (mode == "train") { for (w = 0; w <= 8; w++) if (w != s)
			printf "{\"q\": \"%d+%d=\", \"yes\": \"%d\", \"no\": \"%d\"}\n", a, b, s, w }
		else printf "{\"q\": \"%d+%d=\", \"yes\": \"%d\", \"no\": \"%d\"}\n", a, b, s, s + 9 } }'
}
pairs train >train.jsonl
pairs val >val.jsonl
data="data.train.data_path=$WORK/train.jsonl data.validation.data_path=$WORK/val.jsonl
data.default.prompt_key=q data.default.chosen_key=yes data.default.rejected_key=no"
# shellcheck disable=SC2086
dpo() { "$RLRUN" dpo "$example" $data "$@"; }
num() { # FILE LINE KEY
	sed -n "$2p" "$1" | sed -nE "s/.*\"$3\":([-0-9.eE+]+).*/\1/p"
}

start=$(date +%s)
expect_status 0 "the tiny DPO run (60 steps, validation every 10)" -- dpo logger.log_dir=run
m=run/metrics.jsonl
expect_grep "$WORK/out" "^rlrun dpo: 60 steps of 32 preference pairs \(64 sequences\)" "  says what it trains on"
expect_grep "$WORK/out" "^step 60/60  loss [0-9.]*  accuracy [0-9.]*  margin " "  a progress line per step"
expect_grep "$WORK/out" "^step 60/60  validation loss [0-9.]*, accuracy [0-9.]* " "  and per validation"
expect_grep "$WORK/out" "^rlrun train: validation reward accuracy [0-9.]* at step 60; best" "  and the run's summary"
grep -q '"reward_mean"' "$WORK/run/metrics.jsonl" && not_ok "  a DPO line has a reward_mean" ||
	ok "  no DPO line has GRPO's reward_mean"
# At the start the policy is the reference: every log-ratio is (up to
# rounding) 0, so the loss is log 2 = 0.693147.
v0=$(num "$m" 1 val_loss)
awk -v v="$v0" 'BEGIN { exit !(v > 0.6931 && v < 0.6932) }' &&
	ok "  validation loss at the start is log 2 ($v0)" || not_ok "  validation loss at the start: $v0"
l1=$(num "$m" 2 loss)
awk -v v="$l1" 'BEGIN { exit !(v > 0.6931 && v < 0.6932) }' &&
	ok "  the first step's loss is log 2 ($l1)" || not_ok "  the first step's loss: $l1"
acc=$(num "$m" "\$" val_accuracy)
vl=$(num "$m" "\$" val_loss)
awk -v a="$acc" -v l="$vl" 'BEGIN { exit !(a > 0.9 && l < 0.5) }' &&
	ok "  learns: validation reward accuracy $acc > 0.9, loss $vl" ||
	not_ok "  does not learn: validation accuracy $acc, loss $vl"
# each step: margin = chosen - rejected; loss = preference_loss (sft off)
bad=$(awk '{ n = split($0, kv, ","); delete v
	for (i = 1; i <= n; i++) { split(kv[i], p, ":"); gsub(/[{}"]/, "", p[1]); v[p[1]] = p[2] }
	if (!("accuracy" in v)) next
	d = v["rewards_chosen_mean"] - v["rewards_rejected_mean"] - v["rewards_margin_mean"]
	if (d < 0) d = -d
	e = v["loss"] - v["preference_loss"]; if (e < 0) e = -e
	if (d > 1e-6 * (1 + v["rewards_margin_mean"]) || e > 1e-9 || v["num_valid_samples"] != 32)
		print "step " v["step"] }' "$m")
[ -z "$bad" ] && ok "  every step's margin, loss and accuracy agree" || not_ok "  they disagree at $bad"
echo "learning run: $(($(date +%s) - start)) s"

# the SFT term: the loss is the weighted sum of the two, as NeMo-RL weights them
expect_status 0 "with the SFT term" -- dpo dpo.max_num_steps=3 dpo.val_period=0 dpo.val_at_start=false \
	dpo.sft_loss_weight=0.25 dpo.preference_loss_weight=0.5 logger.log_dir=sft
for line in 1 2 3; do
	l=$(num sft/metrics.jsonl $line loss) p=$(num sft/metrics.jsonl $line preference_loss)
	s=$(num sft/metrics.jsonl $line sft_loss)
	awk -v l="$l" -v p="$p" -v s="$s" 'BEGIN { d = l - 0.5 * p - 0.25 * s; if (d < 0) d = -d
		exit !(s > 0 && d <= 1e-6 * l) }' &&
		ok "  step $line: loss $l = 0.5 x $p + 0.25 x $s" || not_ok "  step $line: loss $l, preference $p, sft $s"
done

# stopped after step 6 and resumed: the uninterrupted run's numbers, the
# data's position included, to the bit
ck="dpo.max_num_epochs=10 dpo.val_period=3 dpo.val_at_start=false checkpointing.enabled=true checkpointing.save_period=3"
# shellcheck disable=SC2086
expect_status 0 "9 steps in one go" -- dpo $ck dpo.max_num_steps=9 checkpointing.checkpoint_dir=whole.ck logger.log_dir=whole
# shellcheck disable=SC2086
expect_status 0 "6 steps, checkpointed" -- dpo $ck dpo.max_num_steps=6 checkpointing.checkpoint_dir=cut.ck logger.log_dir=cut
# shellcheck disable=SC2086
expect_status 0 "resumed to step 9" -- dpo $ck dpo.max_num_steps=9 checkpointing.checkpoint_dir=cut.ck logger.log_dir=cut
expect_grep "$WORK/out" "resuming from cut.ck/step_6 " "  from step 6"
same_as "  the resumed run's metrics are the uninterrupted run's, to the bit" \
	metrics cut/metrics.jsonl whole/metrics.jsonl 0

# the fenced backend (kernels/fenced.c: the CUDA backend's memory rules on
# the CPU ops): the same run to the bit, so no part of DPO reads backend
# memory from the host
# shellcheck disable=SC2086
expect_status 0 "6 steps on the fenced backend" -- env RL_OPS_FENCED=1 "$RLRUN" dpo "$example" $data \
	dpo.max_num_steps=6 dpo.val_period=3 logger.log_dir=fenced
expect_grep "$WORK/out" "^rlrun dpo: .* on fenced," "  on the fenced backend"
expect_status 0 "6 steps on the CPU backend" -- dpo dpo.max_num_steps=6 dpo.val_period=3 logger.log_dir=cpu
same_as "  the fenced run's numbers are the CPU run's, to the bit" \
	metrics fenced/metrics.jsonl cpu/metrics.jsonl 0

# NeMo-RL's own examples/configs/dpo.yaml (main of 2026-08, as published)
# loads with only notes, its HelpSteer3 (a Hugging Face dataset) replaced
# by local pairs, and its values land where the trainer reads them
stock=$top_srcdir/tests/configs/nemo-rl/main-2026-08/dpo.yaml
expect_status 0 "NeMo-RL's dpo.yaml loads" -- "$RLRUN" config "$stock" \
	data.train.dataset_name=BinaryPreferenceDataset data.validation.dataset_name=BinaryPreferenceDataset \
	data.train.data_path="$WORK/train.jsonl" data.validation.data_path="$WORK/val.jsonl"
grep -qv '^note: ' "$WORK/err" && not_ok "  more than notes: $(grep -v '^note: ' "$WORK/err" | head -3)" ||
	ok "  with only notes"
for kv in "  max_num_steps: 150" "  val_period: 25" "  val_at_start: true" "  reference_policy_kl_penalty: 0.05" \
	"  val_batches: 8" "  train_global_batch_size: 128" "  dataset_name: BinaryPreferenceDataset"; do
	grep -qx -- "$kv" "$WORK/out" && ok "  $kv" || not_ok "  no line '$kv'"
done

# errors
# shellcheck disable=SC2086
expect_status 2 "rlrun train refuses a DPO config" -- "$RLRUN" train "$example" $data
expect_grep "$WORK/err" "is a DPO config \\(its dpo: block\\); run it with rlrun dpo" "  naming the verb to use"
expect_status 2 "rlrun dpo refuses a GRPO config" -- "$RLRUN" dpo "$top_srcdir/etc/examples/grpo-tiny.yaml"
expect_grep "$WORK/err" "rlrun train" "  naming the verb to use"
{ pairs train | head -3; echo '{"q": "1+1=", "yes": "2"}'; } >bad.jsonl
expect_status 1 "a pair without its rejected response" -- dpo data.train.data_path="$WORK/bad.jsonl"
expect_grep "$WORK/err" "data.train.path: $WORK/bad.jsonl:4: no field 'no' \(fields: q, yes\)" \
	"  names the file, the line and the field"
expect_status 2 "DPO on a data set of prompts" -- dpo data.default.dataset_name=jsonl
expect_grep "$WORK/err" "data.dataset_name.*DPO trains on preference pairs" "  says what it needs"
expect_status 2 "another preference loss" -- dpo dpo.preference_loss=ipo
expect_grep "$WORK/err" "dpo.preference_loss.*only the DPO preference loss is implemented" "  is not implemented"
expect_status 2 "a negative beta" -- dpo dpo.reference_policy_kl_penalty=-1
expect_grep "$WORK/err" "dpo.reference_policy_kl_penalty" "  names the key"
expect_status 1 "validation without validation pairs" -- "$RLRUN" dpo "$example" \
	data.train.data_path="$WORK/train.jsonl" data.default.prompt_key=q data.default.chosen_key=yes \
	data.default.rejected_key=no data.validation=null
expect_grep "$WORK/err" "dpo.val_period 10, val_at_start true: validation needs validation pairs" "  says what is missing"
# pairs longer than max_total_sequence_length are kept out of the loss
expect_status 0 "pairs too long for the sequence length" -- dpo policy.max_total_sequence_length=5 \
	dpo.max_num_steps=1 dpo.val_at_start=false logger.log_dir=long
[ "$(num long/metrics.jsonl 1 num_valid_samples)" = "0.0" ] && [ "$(num long/metrics.jsonl 1 prompts_truncated)" = 32 ] &&
	ok "  none counts, each is reported" || not_ok "  $(head -c 600 long/metrics.jsonl)"
finish
