#!/bin/sh
# rlrun on several ranks in a real Slurm (srun --mpi=pmi2 --rl-config):
# every layout this release trains (data, tensor, pipeline and context
# parallelism, with and without sequence parallelism) gives the single-rank gradient of the first
# update (RL_GRAD_DUMP, within 1e-5 norm-wise) and the single-rank metrics
# of ten GRPO steps (within 1e-4, timers aside), and so do ten SFT steps
# (rlrun sft: gradient, losses, validation losses); a checkpoint written by
# tp2-dp2 resumes bit-identically in its own layout and to the same
# gradient in tp1-dp4 and pp2-dp2; DAPO's dynamic sampling gives the
# single-rank numbers in tp2-dp2 and beside generation ranks; the layouts it does not
# train yet are refused by name; and a rank killed mid-step makes every
# other rank name it and exit within the collective timeout. DPO (its
# pairs kept together in a micro-batch of one rank) gives the single-rank
# gradient and numbers in dp2, dp3, tp2, pp2 and tp2-dp2. On-policy
# distillation (the teacher cut as the student) gives the single rank's
# numbers in tp2, dp2, pp2 and tp2-dp2.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"
slurm_start

config=$(cd "$top_srcdir/etc/examples" && pwd -P)/grpo-tiny.yaml
work=$(cd "$WORK" && pwd -P)
# The reward is the first response character as a digit (over 10): unlike
# the sums the tiny model cannot do yet, it differs within a group from the
# first step on, so the first update's gradient is not all zero (which any
# code would reproduce) and every step learns something.
reward=$(cd "$top_srcdir/tests/slurm" && pwd -P)/digit_reward.awk
# ten small steps: four optimizer updates each, two micro-batches per rank
small="grpo.max_num_steps=10 grpo.num_prompts_per_step=16 grpo.num_generations_per_prompt=8
policy.train_global_batch_size=32 policy.train_micro_batch_size=8 policy.logprob_batch_size=16"

train() { # NAME NTASKS [KEY=VALUE...]
	name=$1 n=$2
	shift 2
	# shellcheck disable=SC2086
	RL_GRAD_DUMP=$work/$name.grads expect_status 0 "$name: srun --mpi=pmi2 -n $n rlrun $*" -- \
		srun --mpi=pmi2 -n "$n" --rl-config="$config" "$RLRUN" $small data.env_name=digits \
		"env.digits.command=awk -f $reward" logger.log_dir="$work/$name" "$@"
}

train single 1
[ -s "$work/single.grads" ] && [ -s "$work/single/metrics.jsonl" ] ||
	not_ok "the single-rank run left no gradient or no metrics"

tp=policy.parallel.tensor sp=policy.parallel.sequence_parallel=true pp=policy.parallel.pipeline
cp=policy.parallel.context
# dp3 splits batches unevenly; tp4 splits the 46-token vocabulary 12/12/11/11;
# pp2 holds the tied embedding on both stages; cp3 pads most sequences
for layout in "dp2 2" "dp3 3" "dp8 8" "tp2 2 $tp=2" "tp2-sp 2 $tp=2 $sp" "tp4-sp 4 $tp=4 $sp" \
	"tp2-dp2 4 $tp=2" "tp2-dp2-sp 4 $tp=2 $sp" "pp2 2 $pp=2" "tp2-pp2 4 $tp=2 $pp=2" \
	"tp2-pp2-sp 4 $tp=2 $pp=2 $sp" "pp2-dp2 4 $pp=2" "tp2-pp2-dp2 8 $tp=2 $pp=2" \
	"cp2 2 $cp=2" "cp3 3 $cp=3" "cp2-dp2 4 $cp=2" "tp2-cp2 4 $tp=2 $cp=2"; do
	set -- $layout
	name=$1
	train "$@"
	same_as "$name: first update's gradient = single rank's" \
		grads "$work/$name.grads" "$work/single.grads" 1e-5
	same_as "$name: ten steps' metrics = single rank's" \
		metrics "$work/$name/metrics.jsonl" "$work/single/metrics.jsonl" 1e-4
	# batch-invariant kernels in every layout: generation's logprobs are
	# the logprob pass's to the bit at every step; but for tp4-sp, where
	# decode all-reduces four partial sums and the pass reduce-scatters
	# them (sequence parallelism), in another order (two add alike)
	n=$(wc -l <"$work/$name/metrics.jsonl")
	exact=$(grep -c '"token_mult_prob_error":1\.0,"gen_logprob_max_diff":0\.0,' \
		"$work/$name/metrics.jsonl")
	worst=$(grep -o '"gen_logprob_max_diff":[^,]*' "$work/$name/metrics.jsonl" | cut -d: -f2 |
		sort -g | tail -1)
	case $name in
	tp4-sp)
		awk -v w="$worst" 'BEGIN { exit !(w + 0 < 1e-5) }' &&
			ok "  $name: generation logprobs within $worst of the logprob pass's" ||
			not_ok "  $name: generation logprobs differ by $worst"
		;;
	*)
		[ "$exact" -gt 0 ] && [ "$exact" = "$n" ] &&
			ok "  $name: generation logprobs = the logprob pass's at every step" ||
			not_ok "  $name: generation logprobs differ by up to $worst"
		;;
	esac
done

# ---- DAPO: dynamic sampling's rounds are every rank's ----
# With the arithmetic task's own checker (0 or 1) most of the tiny model's
# groups start all wrong and are dropped, so steps take several rounds of
# prompts. Every layout, and generation ranks apart (rounds asked for over
# the bridge), must keep the same groups, take the same data and train as
# one rank does. (The leave-one-out baseline stays on: with DAPO's plain
# group mean, no KL term and a first ratio of 1, the first update's loss is
# a sum of advantages that cancels to rounding, which no relative
# tolerance can compare.)
dapo="grpo.use_dynamic_sampling=true grpo.batch_multiplier=1.5
grpo.dynamic_sampling_max_gen_batches=30 loss_fn.ratio_clip_max=0.28
loss_fn.reference_policy_kl_penalty=0 data.env_name=null"
# shellcheck disable=SC2086
train dapo-single 1 $dapo
rounds=$(grep -c '"dynamic_sampling_num_gen_batches":[2-9]' "$work/dapo-single/metrics.jsonl")
[ "$rounds" -gt 0 ] && ok "  dapo-single: $rounds of its 10 steps took more than one round" ||
	not_ok "  dapo-single: no step took a second round; the layouts below would not test them"
apart="policy.generation.colocated.enabled=false policy.generation.colocated.resources.gpus_per_node=2"
for layout in "dapo-tp2-dp2 4 $tp=2" "dapo-nc-dp2 4 $apart"; do
	# shellcheck disable=SC2086
	set -- $layout
	name=$1
	# shellcheck disable=SC2086
	train "$@" $dapo
	same_as "$name: first update's gradient = dapo-single's" \
		grads "$work/$name.grads" "$work/dapo-single.grads" 1e-5
	same_as "$name: ten steps' metrics (rounds, dropped groups) = dapo-single's" \
		metrics "$work/$name/metrics.jsonl" "$work/dapo-single/metrics.jsonl" 1e-4
done

# activation checkpointing: each layer's forward again before its
# backward, collectives included, in the same order on every rank: the
# same bits as the layout without it
ac=policy.parallel.activation_checkpointing=true
for layout in "tp2-pp2-dp2 8 $tp=2 $pp=2" "tp2-sp 2 $tp=2 $sp" "cp2 2 $cp=2"; do
	set -- $layout
	base=$1 # (train sets name)
	shift
	train "$base-ac" "$@" $ac
	expect_grep "$WORK/out" "activation checkpointing: each layer recomputed" "  says it recomputes"
	same_as "$base-ac: first update's gradient = $base's, bit for bit" \
		grads "$work/$base-ac.grads" "$work/$base.grads" 0
	same_as "$base-ac: ten steps' metrics = $base's, bit for bit" \
		metrics "$work/$base-ac/metrics.jsonl" "$work/$base/metrics.jsonl" 0
done

# bf16: each rank rounds its own cut of the fp32 master weights, which is
# the whole model's rounding cut, so a layout's first update has the
# single rank's gradient as in fp32. One step only: a master weight that a
# later update leaves within float32 rounding of a bf16 tie rounds one way
# in one layout and the other way in another, a jump of 2^-9 no tolerance
# on ten steps would bound.
bf16="policy.precision=bfloat16 grpo.max_num_steps=1"
train single-bf16 1 $bf16
for layout in "tp2-pp2-dp2-bf16 8 $tp=2 $pp=2" "tp2-sp-bf16 2 $tp=2 $sp" "cp2-bf16 2 $cp=2"; do
	set -- $layout
	name=$1
	train "$@" $bf16
	same_as "$name: first update's gradient = single rank's bf16 one" \
		grads "$work/$name.grads" "$work/single-bf16.grads" 1e-5
	same_as "$name: its step's metrics = single rank's bf16 ones" \
		metrics "$work/$name/metrics.jsonl" "$work/single-bf16/metrics.jsonl" 1e-4
done
"$top_builddir/tests/tools/rl_compare" grads "$work/single-bf16.grads" "$work/single.grads" 0 \
	>/dev/null 2>&1
[ $? = 1 ] && ok "the bf16 gradient is not the fp32 one" ||
	not_ok "the bf16 and fp32 gradients were not found to differ"

# ---- SFT (rlrun sft under the plugin: the config's sft block decides) ----
# no generation and no reward: each layout's first update and ten steps,
# their validation losses included, are the single rank's
sft_config=$(cd "$top_srcdir/etc/examples" && pwd -P)/sft-tiny.yaml
sft_small="sft.max_num_steps=10 sft.val_period=5 checkpointing.enabled=false
policy.train_micro_batch_size=8 policy.logprob_batch_size=8"
sft() { # NAME NTASKS [KEY=VALUE...]
	name=$1 n=$2
	shift 2
	# shellcheck disable=SC2086
	RL_GRAD_DUMP=$work/$name.grads expect_status 0 "$name: srun --mpi=pmi2 -n $n rlrun (sft) $*" -- \
		srun --mpi=pmi2 -n "$n" --rl-config="$sft_config" "$RLRUN" $sft_small \
		logger.log_dir="$work/$name" "$@"
}
sft sft-single 1
expect_grep "$work/sft-single/metrics.jsonl" '^\{"step":10,"val_loss":' "sft-single: validation loss at step 10"
for layout in "sft-dp2 2" "sft-tp2 2 $tp=2" "sft-tp2-dp2 4 $tp=2" "sft-pp2 2 $pp=2"; do
	set -- $layout
	name=$1
	sft "$@"
	same_as "$name: first update's gradient = single rank's" \
		grads "$work/$name.grads" "$work/sft-single.grads" 1e-5
	same_as "$name: ten steps' metrics and validation losses = single rank's" \
		metrics "$work/$name/metrics.jsonl" "$work/sft-single/metrics.jsonl" 1e-4
done

# ---- DPO: a pair's two sequences in one micro-batch of one rank ----
# Ten DPO steps (the built-in DPO example) in each layout give the single
# rank's first-update gradient (within 1e-5) and its numbers within 1e-3:
# a pair's rewards are differences of summed logprobs a hundred times
# smaller than the sums, so the layouts' rounding (1e-6 relative in the
# weights after a few updates) reaches them magnified. The reward accuracy
# of the first validation and the first step is left out: there the policy
# is the reference, every margin is 0 up to rounding, and the accuracy
# counts the rounding's signs. dp3 gives ranks 11, 11 and 10 pairs.
dpo_config=$(cd "$top_srcdir/etc/examples" && pwd -P)/dpo-tiny.yaml
dpo_small="dpo.max_num_steps=10 dpo.val_period=5 policy.train_micro_batch_size=4
policy.logprob_batch_size=8"
dpo() { # NAME NTASKS [KEY=VALUE...]
	name=$1 n=$2
	shift 2
	# shellcheck disable=SC2086
	RL_GRAD_DUMP=$work/$name.grads expect_status 0 "$name: srun --mpi=pmi2 -n $n rlrun (dpo) $*" -- \
		srun --mpi=pmi2 -n "$n" --rl-config="$dpo_config" "$RLRUN" $dpo_small \
		logger.log_dir="$work/$name" "$@"
}
without_ties() { sed -E '1,2s/"(val_accuracy|accuracy|val_reward|reward_mean)":[^,}]*,?//g' "$1"; }
dpo dpo-single 1
without_ties "$work/dpo-single/metrics.jsonl" >"$work/dpo-single.jsonl"
for layout in "dpo-dp2 2" "dpo-dp3 3" "dpo-tp2 2 $tp=2" "dpo-pp2 2 $pp=2" "dpo-tp2-dp2 4 $tp=2"; do
	set -- $layout
	name=$1
	dpo "$@"
	same_as "$name: first update's gradient = single rank's" \
		grads "$work/$name.grads" "$work/dpo-single.grads" 1e-5
	without_ties "$work/$name/metrics.jsonl" >"$work/$name.jsonl"
	same_as "$name: ten steps' numbers = single rank's" \
		metrics "$work/$name.jsonl" "$work/dpo-single.jsonl" 1e-3
done

# ---- checkpoints: written by one layout, resumed by others ----
# tp2-dp2 saves step 2 and step 4. Its step_2, resumed by tp2-dp2 again,
# must redo steps 3 and 4 exactly (metrics as written, step_4's shards byte
# for byte); resumed by tp1-dp4 and pp2-dp2 (other cuts of every tensor,
# other distributed-optimizer slices), the first update's gradient must be
# the same-layout resume's and the metrics of steps 3-4 the original's.
ckpt="checkpointing.enabled=true checkpointing.save_period=2 grpo.max_num_steps=4"
# shellcheck disable=SC2086
train ck-tp2-dp2 4 $tp=2 $ckpt checkpointing.checkpoint_dir="$work/ck-tp2-dp2.ck"
sed -n 3,4p "$work/ck-tp2-dp2/metrics.jsonl" >"$work/ck-steps-3-4.jsonl"
for layout in "tp2-dp2 $tp=2" "tp1-dp4" "pp2-dp2 $pp=2"; do
	set -- $layout
	name=re-$1
	shift
	mkdir -p "$work/$name.ck" && cp -r "$work/ck-tp2-dp2.ck/step_2" "$work/$name.ck/"
	# shellcheck disable=SC2086
	train "$name" 4 "$@" $ckpt checkpointing.checkpoint_dir="$work/$name.ck"
	expect_grep "$WORK/out" "resuming from .*$name.ck/step_2 .*tensor 2, pipeline 1, context 1, data 2" \
		"  $name resumes from tp2-dp2's step_2"
	if [ "$name" = re-tp2-dp2 ]; then
		strip() { sed -E 's/,"tokens_per_sec".*//' "$1"; }
		[ "$(strip "$work/$name/metrics.jsonl")" = "$(strip "$work/ck-steps-3-4.jsonl")" ] &&
			ok "  $name: steps 3-4 as the run never stopped wrote them, timers aside" ||
			not_ok "  $name: steps 3-4 differ from the original run's"
		same=yes
		for f in "$work/ck-tp2-dp2.ck/step_4"/rank-*.safetensors; do
			cmp -s "$f" "$work/$name.ck/step_4/${f##*/}" || same=no
		done
		[ $same = yes ] && ok "  $name: step_4's four shards equal the original's, byte for byte" ||
			not_ok "  $name: step_4's shards differ from the original's"
		continue
	fi
	same_as "  $name: first resumed update's gradient = tp2-dp2's" \
		grads "$work/$name.grads" "$work/re-tp2-dp2.grads" 1e-5
	same_as "  $name: steps 3-4 = the original run's" \
		metrics "$work/$name/metrics.jsonl" "$work/ck-steps-3-4.jsonl" 1e-4
done

# ---- on-policy distillation: the teacher cut with the student's layout ----
# A teacher unlike the student (three GRPO steps of it, exported); the same
# ten steps distilled from it (distillation: any key of the block makes the
# config one; its val_period is grpo's) in each layout give the single
# rank's first gradient and metrics, the teacher's logprobs (the loss's
# target) included through reverse_kl.
# shellcheck disable=SC2086
if "$RLRUN" train "$config" $small grpo.max_num_steps=3 logger.log_dir="$work/teacher-run" \
	checkpointing.enabled=true checkpointing.checkpoint_dir="$work/teacher.ck" \
	checkpointing.save_period=3 >"$WORK/teacher.out" 2>&1 &&
	"$RLRUN" ckpt export "$work/teacher.ck/step_3" --hf "$work/teacher" >>"$WORK/teacher.out" 2>&1; then
	distill="distillation.val_period=0 teacher.model_name=$work/teacher"
	# shellcheck disable=SC2086
	train distill-single 1 $distill
	for layout in "distill-tp2 2 $tp=2" "distill-dp2 2" "distill-pp2 2 $pp=2" \
		"distill-tp2-dp2 4 $tp=2"; do
		set -- $layout
		name=$1
		# shellcheck disable=SC2086
		train "$@" $distill
		same_as "$name: first update's gradient = single rank's" \
			grads "$work/$name.grads" "$work/distill-single.grads" 1e-5
		same_as "$name: ten steps' metrics = single rank's" \
			metrics "$work/$name/metrics.jsonl" "$work/distill-single/metrics.jsonl" 1e-4
	done
	grep -q '"reverse_kl":' "$work/distill-single/metrics.jsonl" &&
		ok "  the distillation runs report reverse_kl" ||
		not_ok "  no reverse_kl in the distillation metrics"
else
	not_ok "the teacher for distillation could not be made:"
	sed 's/^/  | /' "$WORK/teacher.out" | tail -20
fi

# ---- what this release does not train yet says so ----
expect_status 1 "context=2 with pipeline=2 is refused" -- \
	srun --mpi=pmi2 -n 4 --rl-config="$config" "$RLRUN" $small \
	logger.log_dir="$work/refused" $cp=2 $pp=2
expect_grep "$WORK/err" "together with pipeline parallelism is not implemented" \
	"  naming what is missing"
expect_status 1 "pipeline=4 (the tiny model has 2 layers) is refused" -- \
	srun --mpi=pmi2 -n 4 --rl-config="$config" "$RLRUN" $small \
	logger.log_dir="$work/refused" $pp=4
expect_grep "$WORK/err" "2 layers .* do not split into 4 stages" "  naming the layers"
n=$(grep -c "do not split" "$WORK/err")
[ "$n" = 1 ] && ok "  once, not once per rank" || not_ok "  $n times"
expect_status 1 "tensor=8 (the tiny model has 4 heads) is refused" -- \
	srun --mpi=pmi2 -n 8 --rl-config="$config" "$RLRUN" $small \
	logger.log_dir="$work/refused" $tp=8
expect_grep "$WORK/err" "does not divide the model's 4 attention heads" "  naming the heads"
n=$(grep -c "does not divide" "$WORK/err")
[ "$n" = 1 ] && ok "  once, not once per rank" || not_ok "  $n times"
# (under srun the plugin refuses this layout before rlrun starts)
expect_status 2 "mpiexec -n 2 rlrun train tensor=4 is refused" -- \
	mpiexec -n 2 "$RLRUN" train "$config" $small logger.log_dir="$work/refused" $tp=4
n=$(grep -c "world size 2 is smaller than tp x cp x pp = 4" "$WORK/err")
[ "$n" = 1 ] && ok "  once, naming the sizes" || {
	not_ok "  $n times:"
	sed 's/^/  | /' "$WORK/err"
}

# ---- srun without --mpi=pmi2: the ranks cannot meet, and say why ----
expect_status 1 "4 tasks without --mpi=pmi2 are refused" -- \
	srun --mpi=none -n 4 --rl-config="$config" "$RLRUN" $small logger.log_dir="$work/nompi"
expect_grep "$WORK/err" "srun --mpi=pmi2" "  with the way to start them"

# ---- a rank killed mid-step: the others name it and end the step ----
timeout=5
# UCX 1.13's cross-memory-attach transport makes a rank that is copying a
# message out of the killed one die of a UCX fatal error (process_vm_readv:
# No such process) before its watchdog can speak: about one run in four
# here. rlrun cannot default UCX_TLS=^cma (with it, CI saw runs hang at
# exit), so this run alone leaves CMA out; the known gap is in the notes
# of issue 6.
# shellcheck disable=SC2086
UCX_TLS=^cma srun --mpi=pmi2 -n 4 --rl-config="$config" "$RLRUN" $small grpo.max_num_steps=100000 \
	cluster.collective_timeout=$timeout logger.log_dir="$work/killed" \
	>"$WORK/killed.out" 2>"$WORK/killed.err" &
srun_pid=$!
victim=
for _ in $(seq 600); do
	if [ -s "$work/killed/metrics.jsonl" ]; then
		for p in /proc/[0-9]*; do
			# slurmstepd starts tasks through /proc/self/exe: comm says "exe"
			[ "$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null | head -1)" = "$RLRUN" ] || continue
			of_this_cluster "${p#/proc/}" || continue
			tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx SLURM_PROCID=2 &&
				victim=${p#/proc/}
		done
		[ -n "$victim" ] && break
	fi
	sleep 0.1
done
if [ -z "$victim" ]; then
	not_ok "the 4-rank run never got going:"
	sed 's/^/  | /' "$WORK/killed.err" | head -20
	kill "$srun_pid" 2>/dev/null
else
	kill -KILL "$victim"
	killed_at=$(date +%s)
	# the step must end by itself; the loop only bounds a failure
	for _ in $(seq 600); do
		kill -0 "$srun_pid" 2>/dev/null || break
		sleep 0.1
	done
	took=$(($(date +%s) - killed_at))
	if kill -0 "$srun_pid" 2>/dev/null; then
		not_ok "the step still runs 60 s after rank 2 was killed"
		kill "$srun_pid"
	else
		# timeout, then at most 1 s of asking around, then exit
		[ "$took" -le $((timeout + 5)) ] && ok "the step ended ${took} s after rank 2 died" ||
			not_ok "the step took ${took} s to end after rank 2 died (timeout $timeout s)"
	fi
	wait "$srun_pid"
	status=$?
	[ "$status" != 0 ] && ok "srun exits non-zero ($status)" || not_ok "srun exits 0"
	# a rank whose MPI reports the loss exits at once, so a rank that
	# asks later may find those gone too: "ranks 1,2,3 do not answer"
	n=$(grep -cE 'ranks? ([0-9]+,)*2(,[0-9]+)* do(es)? not answer' "$WORK/killed.err")
	[ "$n" = 3 ] && ok "every other rank names rank 2 as the one that does not answer" || {
		not_ok "$n of 3 ranks named rank 2:"
		sed 's/^/  | /' "$WORK/killed.err" | head -20
	}
	expect_grep "$WORK/killed.err" 'collective #[0-9]+ [a-z_]+ .* over [a-z-]+ \(ranks ' \
		"  and the collective they were stuck in"
fi
finish
