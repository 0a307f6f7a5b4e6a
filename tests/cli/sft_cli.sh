#!/bin/sh
# rlrun sft end to end on the CPU: the built-in tiny model learns sums of
# two numbers from a data set this test writes (the validation sums never
# trained on), its validation loss falls, and the checkpoint, exported and
# asked with greedy generation, answers the sums it was taught; a chat
# data set trains too; a resumed run is the uninterrupted one to the bit;
# the config prints and reads back as SFT; bad input fails by name.
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
EX=$top_srcdir/etc/examples/sft-tiny.yaml

# the data: every a+b of a, b < 20, the answer its value; the sums with
# (a * 11 + b * 17) mod 13 = 5 (31 of them, scattered) are the validation set
mkdir data
awk 'BEGIN {
	for (a = 0; a < 20; a++)
		for (b = 0; b < 20; b++) {
			f = (a * 11 + b * 17) % 13 == 5 ? "data/val.jsonl" : "data/train.jsonl"
			printf "{\"q\": \"%d+%d=\", \"a\": %d}\n", a, b, a + b > f
		}
}'
set -- data.train.path="$WORK/data/train.jsonl" data.validation.path="$WORK/data/val.jsonl" \
	data.input_key=q data.output_key=a checkpointing.checkpoint_dir="$WORK/ckpt" \
	logger.log_dir="$WORK/logs"

# --- learning: the validation loss falls to under a quarter of its start,
# and the exported checkpoint answers the taught sums greedily -----------
# (keep_top_k 1 ranked by the highest validation loss: the one checkpoint
# it keeps besides the newest is an early one, not the newest's neighbour)
expect_status 0 "rlrun sft learns the sums" -- "$RLRUN" sft "$EX" "$@" \
	checkpointing.keep_top_k=1 checkpointing.higher_is_better=true
m=logs/metrics.jsonl
val() { sed -n "s/^{\"step\":$1,\"val_loss\":\([0-9.e+-]*\),.*/\1/p" "$m"; }
v0=$(val 0) v_end=$(val 300)
echo "validation loss: step 0 $v0, step 300 $v_end"
if awk -v a="$v0" -v b="$v_end" 'BEGIN { exit !(a > 2 && b < a / 4) }'; then
	ok "validation loss falls clearly: $v0 at step 0, $v_end at step 300"
else
	not_ok "validation loss does not fall: $v0 at step 0, $v_end at step 300"
fi
expect_grep "$WORK/out" "^step 300/300  loss [0-9.]+  grad norm .*  lr .*tokens, [0-9]+ in the loss" \
	"a progress line per step with the loss and the tokens it counted"
expect_grep "$m" '^\{"step":1,"loss":[0-9.e+-]+,"grad_norm":[0-9.e+-]+,"lr":0.001,"global_valid_toks":[0-9]+,"tokens":[0-9]+,"tokens_per_sec":.*"data_processing":.*"policy_training":' \
	"metrics.jsonl: loss, grad norm, lr, tokens and timers per step"
if strings logs/tensorboard/events.out.tfevents.* | grep -q 'validation/val_loss' &&
	strings logs/tensorboard/events.out.tfevents.* | grep -q 'train/loss'; then
	ok "TensorBoard has NeMo-RL's tags validation/val_loss and train/loss"
else
	not_ok "TensorBoard lacks validation/val_loss or train/loss"
fi
# checkpointing.metric_name val:val_loss (NeMo-RL's spelling), keep_top_k
# 1, here higher is better: the saved step of the highest validation loss
# stays, and the newest
want=$(for st in 100 200 300; do echo "$(val $st) $st"; done | sort -gr | head -1 | cut -d' ' -f2 |
	{ cat; echo 300; } | sort -un | sed 's/^/step_/' | tr '\n' ' ')
got=$(cd ckpt && ls -d step_* | sort -t_ -k2 -n | tr '\n' ' ')
[ "$got" = "$want" ] && [ "$got" != "step_300 " ] && ok "keep_top_k by val:val_loss keeps $got" ||
	not_ok "keep_top_k by val:val_loss keeps $got, expected $want"
if command -v gnuplot >/dev/null 2>&1; then
	expect_status 0 "rlrun plot of the SFT run" -- "$RLRUN" plot logs -o sft.png
	[ -s sft.png ] && ok "  draws its loss" || not_ok "  wrote no PNG"
	COLUMNS=100 LINES=30 "$RLRUN" plot logs >plot.txt 2>&1
	expect_grep plot.txt "loss per step" "  the terminal plot is the loss's"
	expect_grep plot.txt "data_processing" "  and SFT's timers"
fi
expect_status 0 "the last checkpoint exports" -- "$RLRUN" ckpt export ckpt/step_300 --hf hf
right=0 asked=0
for q in 0+1 3+4 12+7 19+19 5+15 9+9 11+2 7+13 16+4 2+17 14+14 8+6; do
	grep -q "\"q\": \"$q=\"" data/train.jsonl || continue
	want=$(echo "$q" | awk -F+ '{ print $1 + $2 }')
	got=$("$RLRUN" generate --model hf --prompt "$q=" --temperature 0 --max-new-tokens 4 2>/dev/null | tail -1)
	asked=$((asked + 1))
	[ "$got" = "$want" ] && right=$((right + 1))
	echo "  $q= -> $got (want $want)"
done
if [ "$asked" -ge 8 ] && [ $((right * 10)) -ge $((asked * 8)) ]; then
	ok "greedy generation from the checkpoint answers $right of $asked taught sums"
else
	not_ok "greedy generation answers only $right of $asked taught sums"
fi

# --- resume: 4 steps, then 4 more from the checkpoint, are 8 in one go ----
strip_timers() { sed -E 's/,"(tokens_per_sec|validation)".*//' "$1"; }
short="sft.max_num_steps=8 sft.val_period=4 checkpointing.save_period=4 checkpointing.keep_top_k=null"
expect_status 0 "8 steps in one run" -- "$RLRUN" sft "$EX" "$@" $short \
	checkpointing.checkpoint_dir="$WORK/c1" logger.log_dir="$WORK/l1"
expect_status 0 "4 steps" -- "$RLRUN" sft "$EX" "$@" $short sft.max_num_steps=4 \
	checkpointing.checkpoint_dir="$WORK/c2" logger.log_dir="$WORK/l2"
expect_status 0 "then 4 more from its checkpoint" -- "$RLRUN" sft "$EX" "$@" $short \
	checkpointing.checkpoint_dir="$WORK/c2" logger.log_dir="$WORK/l2"
expect_grep "$WORK/out" "resuming from .*step_4 \(step 4, 4 optimizer updates" "  resumes from step 4"
if [ "$(strip_timers l1/metrics.jsonl)" = "$(strip_timers l2/metrics.jsonl)" ] &&
	[ "$(wc -l <l1/metrics.jsonl)" = 9 ]; then
	ok "the resumed run's metrics are the uninterrupted run's, timers aside"
else
	not_ok "the resumed run differs:"
	diff l1/metrics.jsonl l2/metrics.jsonl | head -6
fi

# --- the fenced backend (no host access to the backend's memory): the
# same bits as the CPU backend ---
expect_status 0 "8 steps on the fenced backend" -- env RL_OPS_FENCED=1 "$RLRUN" sft "$EX" "$@" \
	$short checkpointing.enabled=false logger.log_dir="$WORK/lf"
expect_grep "$WORK/out" "on fenced" "  says it runs fenced"
if [ "$(strip_timers lf/metrics.jsonl)" = "$(strip_timers l1/metrics.jsonl)" ]; then
	ok "the fenced run's metrics are the CPU run's, bit for bit"
else
	not_ok "the fenced run differs from the CPU run:"
	diff lf/metrics.jsonl l1/metrics.jsonl | head -6
fi

# --- a chat data set: the loss on the assistant turns of a conversation ---
awk 'BEGIN {
	for (a = 0; a < 10; a++)
		printf "{\"messages\": [{\"role\": \"user\", \"content\": \"%d+1=\"}, {\"role\": \"assistant\", \"content\": \"%d\"}, {\"role\": \"user\", \"content\": \"%d+2=\"}, {\"role\": \"assistant\", \"content\": \"%d\"}]}\n", a, a + 1, a, a + 2
}' >data/chat.jsonl
expect_status 0 "a chat data set (openai_format) trains" -- "$RLRUN" sft "$EX" \
	data.dataset_name=openai_format data.train.path="$WORK/data/chat.jsonl" \
	data.validation.path="$WORK/data/chat.jsonl" policy.train_global_batch_size=5 \
	policy.train_micro_batch_size=5 \
	sft.max_num_steps=40 sft.val_period=40 checkpointing.enabled=false logger.log_dir="$WORK/lc"
# per conversation the loss counts "a+1" and "a+2" with the EOS: 10 of the
# first five conversations' tokens when a < 9, 11 with a = 9 (two-digit 10, 11)
expect_grep lc/metrics.jsonl '^\{"step":1,.*"global_valid_toks":(1[0-9]|[2-9][0-9]),' \
	"the loss counts the assistant turns only"
v0=$(sed -n 's/^{"step":0,"val_loss":\([0-9.e+-]*\),.*/\1/p' lc/metrics.jsonl)
v1=$(sed -n 's/^{"step":40,"val_loss":\([0-9.e+-]*\),.*/\1/p' lc/metrics.jsonl)
if awk -v a="$v0" -v b="$v1" 'BEGIN { exit !(b < a / 2) }'; then
	ok "its validation loss falls: $v0 to $v1"
else
	not_ok "the chat run's validation loss does not fall: $v0 to $v1"
fi

# --- the config: rlrun config prints an SFT config that reads back as one --
expect_status 0 "rlrun config of the SFT example" -- "$RLRUN" config "$EX"
cp "$WORK/out" printed.yaml
expect_grep printed.yaml '^sft:' "the printed config has the sft block"
if grep -q '^dpo:\|^distillation:' printed.yaml; then
	not_ok "the printed SFT config has another algorithm's block"
else
	ok "the printed SFT config has no other algorithm's block"
fi
expect_status 0 "the printed config reads back" -- "$RLRUN" config printed.yaml
if [ "$(sed 1d printed.yaml)" = "$(sed 1d "$WORK/out")" ]; then
	ok "printing the printed config gives it again (round trip)"
else
	not_ok "the round trip differs:"
	diff printed.yaml "$WORK/out" | head -6
fi
expect_status 2 "a GRPO verb refuses the printed SFT config" -- "$RLRUN" train printed.yaml
expect_grep "$WORK/err" 'rlrun sft' "  and names rlrun sft"
expect_status 0 "rlrun config of the GRPO example" -- "$RLRUN" config "$top_srcdir/etc/examples/grpo-tiny.yaml"
if grep -q '^sft:' "$WORK/out"; then
	not_ok "a GRPO config prints an sft block (it would read back as SFT)"
else
	ok "a GRPO config prints no sft block"
fi
expect_status 0 "rlrun config --schema" -- "$RLRUN" config --schema
for k in sft.val_batches sft.val_global_batch_size sft.val_micro_batch_size sft.val_at_end \
	sft.only_unmask_final sft.train_on_inputs data.add_bos data.add_eos \
	data.add_generation_prompt data.chat_key; do
	expect_grep "$WORK/out" "^$k\$" "the schema lists $k"
done

# NeMo-RL's data layout with its SFT processor reads as this run's data
cat >nemo.yaml <<EOF2
sft:
  max_num_steps: 2
  val_period: 0
policy:
  model_name: builtin:tiny-llama
  train_global_batch_size: 4
  train_micro_batch_size: 4
  max_total_sequence_length: 16
data:
  train:
    data_path: $WORK/data/train.jsonl
  default:
    dataset_name: jsonl
    input_key: q
    output_key: a
    processor: sft_processor
EOF2
expect_status 0 "NeMo-RL's data layout with processor sft_processor" -- "$RLRUN" config nemo.yaml
expect_grep "$WORK/out" "^    path: $WORK/data/train.jsonl" "  maps data_path"
sed 's/^sft:/grpo:/' nemo.yaml >nemo-grpo.yaml
expect_status 2 "sft_processor in a GRPO config" -- "$RLRUN" config nemo-grpo.yaml
expect_grep "$WORK/err" "processor: sft_processor makes SFT's examples" "  is refused"

# --- errors ---------------------------------------------------------------
printf '{"q": "1+1=", "a": 2}\n{"q": "2+2=", "a": 4\n' >data/bad.jsonl
expect_status 1 "a bad JSONL line" -- "$RLRUN" sft "$EX" "$@" data.train.path="$WORK/data/bad.jsonl"
expect_grep "$WORK/err" "data.train.path: .*bad.jsonl:2: not valid JSON" "  is named with file:line"
printf '{"q": "1+1="}\n' >data/noanswer.jsonl
expect_status 1 "an example without its answer" -- "$RLRUN" sft "$EX" "$@" \
	data.train.path="$WORK/data/noanswer.jsonl"
expect_grep "$WORK/err" "noanswer.jsonl:1: no field 'a'" "  is named with file:line and the key"
printf '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": 3}]}\n' >data/badchat.jsonl
expect_status 1 "a chat line whose content is not text" -- "$RLRUN" sft "$EX" \
	data.dataset_name=openai_format data.train.path="$WORK/data/badchat.jsonl" \
	data.validation.path=null sft.val_period=0 checkpointing.enabled=false
expect_grep "$WORK/err" "badchat.jsonl:1: messages\[1\].content is an integer, expected a string" \
	"  is named with file:line and the message"
expect_status 2 "SFT without a training set" -- "$RLRUN" sft "$EX" data.train.path=null
expect_grep "$WORK/err" "data.train.path.*required" "  names data.train.path"
expect_status 2 "SFT on a built-in task" -- "$RLRUN" sft "$EX" data.dataset_name=arithmetic
expect_grep "$WORK/err" "data.dataset_name.*SFT trains on examples" "  says what SFT takes"
expect_status 2 "SFT with generation ranks of their own" -- "$RLRUN" sft "$EX" \
	policy.generation.colocated.enabled=false \
	policy.generation.colocated.resources.gpus_per_node=1
expect_grep "$WORK/err" "policy.generation.colocated.enabled.*SFT generates nothing" "  is refused"
expect_status 2 "validation without a validation set" -- "$RLRUN" sft "$EX" data.validation.path=null
expect_grep "$WORK/err" "sft.val_period.*data.validation.path" "  names both keys"
expect_status 2 "a chat data set in a GRPO config" -- "$RLRUN" train \
	"$top_srcdir/etc/examples/grpo-tiny.yaml" data.dataset_name=openai_format \
	data.train.path="$WORK/data/chat.jsonl"
expect_grep "$WORK/err" "data.dataset_name.*openai_format .* is SFT's data" "  is refused"
expect_status 2 "rlrun sft of a GRPO config" -- "$RLRUN" sft "$top_srcdir/etc/examples/grpo-tiny.yaml"
expect_grep "$WORK/err" "rlrun train" "  names the verb for it"
expect_status 2 "an unknown sft key" -- "$RLRUN" sft "$EX" sft.val_batch=3
expect_grep "$WORK/err" "sft.val_batch" "  is named"

finish
