#!/bin/sh
# spank_rl.so in a real Slurm (munged, slurmctld and slurmd of our own on
# 127.0.0.1): srun and sbatch with and without --rl-config, bad configs
# refused before anything runs, and each task's RL_* environment against
# `rlrun plan` (once rlrun has it). Skipped where no cluster can run.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"
slurm_start

config=$(cd "$top_srcdir/etc/examples" && pwd -P)/grpo-tiny.yaml
work=$(cd "$WORK" && pwd -P)
out=$WORK/out
err=$WORK/err

# the values of one variable, one per task, from `srun -l env` output
task_values() { # NAME
	sed -nE "s/^ *[0-9]+: $1=//p" "$out" | sort -n | tr '\n' ' '
}

# ---- the option is there, and costs nothing to jobs without it ----
expect_status 0 "srun --help" -- srun --help
expect_grep "$out" '--rl-config=FILE' "srun --help lists --rl-config"

expect_status 0 "srun -n 4 env without --rl-config" -- srun -n 4 -l env
got=$(task_values SLURM_PROCID)
[ "$got" = "0 1 2 3 " ] && ok "4 tasks ran" || not_ok "tasks by SLURM_PROCID: '$got', expected 0 1 2 3"
if grep -qE '^ *[0-9]+: RL_' "$out"; then
	not_ok "RL_* variables without --rl-config:"
	grep -E '^ *[0-9]+: RL_' "$out" | sed 's/^/  | /'
else ok "no RL_* variable without --rl-config"; fi

# ---- a good config: every task gets it, and its place in the layout ----
expect_status 0 "srun -n 4 --rl-config=grpo-tiny.yaml env" -- srun -n 4 -l --rl-config="$config" env
cp "$out" "$WORK/good.out"
got=$(task_values SLURM_PROCID)
[ "$got" = "0 1 2 3 " ] && ok "4 tasks ran with --rl-config" || not_ok "tasks by SLURM_PROCID: '$got'"
n=$(grep -cxE " *[0-9]+: RL_CONFIG=$config" "$out")
[ "$n" = 4 ] && ok "every task has RL_CONFIG=$config" || {
	not_ok "$n of 4 tasks have RL_CONFIG=$config:"
	grep -E 'RL_CONFIG' "$out" | sed 's/^/  | /'
}

if "$RLRUN" plan --help >/dev/null 2>&1; then
	seen=
	for t in 0 1 2 3; do
		sed -nE "s/^ *$t: (RL_)/\1/p" "$WORK/good.out" | sort >"$WORK/task$t"
		r=$(sed -n 's/^RL_RANK=//p' "$WORK/task$t")
		case $r in
		'' | *[!0-9]*)
			not_ok "task $t: RL_RANK is '$r'"
			continue
			;;
		esac
		seen="$seen$r "
		if ! "$RLRUN" plan "$config" --nodes 1 --tasks-per-node 4 --env "$r" >"$WORK/plan" 2>"$err"; then
			not_ok "rlrun plan $config --nodes 1 --tasks-per-node 4 --env $r failed:"
			sed 's/^/  | /' "$err" | head -10
			continue
		fi
		grep '^RL_' "$WORK/plan" | sort >"$WORK/plan$r"
		if cmp -s "$WORK/task$t" "$WORK/plan$r"; then
			ok "rank $r: RL_* as rlrun plan says ($(wc -l <"$WORK/plan$r") variables)"
		else
			not_ok "rank $r: RL_* differ from rlrun plan (- plan, + task):"
			diff "$WORK/plan$r" "$WORK/task$t" | grep '^[<>]' | sed 's/^</  | -/; s/^>/  | +/'
		fi
	done
	seen=$(echo "$seen" | tr ' ' '\n' | sort -n | tr '\n' ' ')
	[ "$seen" = " 0 1 2 3 " ] && ok "RL_RANK 0..3, once each" || not_ok "RL_RANK values:$seen"
else
	echo "SKIP: RL_* of each task against rlrun plan: rlrun plan not available"
fi

# ---- bad configs fail srun before any task runs ----
# refused by srun itself: no step daemon was started to say anything
refused_locally() { # WHAT
	if grep -q slurmstepd "$err"; then
		not_ok "$1 reached the node instead of being refused by srun:"
		grep slurmstepd "$err" | sed 's/^/  | /' | head -5
	else ok "$1 refused by srun, before any step started"; fi
}
# the tiny config with one misspelt key, at a known line and column
printf 'defaults: %s\ngrpo:\n  num_prompts_per_stepp: 3\n' "$config" >"$WORK/bad.yaml"
expect_status 1 "srun --rl-config=bad.yaml fails" -- srun --rl-config="$WORK/bad.yaml" sh -c "touch $WORK/ran"
expect_grep "$err" 'bad\.yaml:3:3: .*grpo\.num_prompts_per_stepp' "the error names bad.yaml:3:3 and the key"
expect_grep "$err" 'did you mean grpo\.num_prompts_per_step\b' "the error suggests the right key"
[ -e "$WORK/ran" ] && not_ok "a task ran with a bad config" || ok "no task ran with a bad config"
refused_locally "a bad config"

expect_status 1 "srun --rl-config=missing.yaml fails" -- srun --rl-config="$WORK/missing.yaml" sh -c "touch $WORK/ran"
expect_grep "$err" 'missing\.yaml' "the error names the missing file"
[ -e "$WORK/ran" ] && not_ok "a task ran with a missing config" || ok "no task ran with a missing config"
refused_locally "a missing config"

# ---- a relative path is made absolute where srun runs ----
cp "$config" "$WORK/rel.yaml"
expect_status 0 "srun --rl-config=rel.yaml from its directory" -- \
	sh -c "cd '$WORK' && exec srun --rl-config=rel.yaml env"
expect_grep "$out" "^RL_CONFIG=$work/rel\.yaml\$" "RL_CONFIG is the absolute path"

# ---- KEY=VALUE after rlrun: checked with the config at submission ----
expect_status 1 "an invalid override after rlrun fails srun" -- \
	srun --rl-config="$WORK/rel.yaml" "$RLRUN" config grpo.num_prompts_per_stepp=3
expect_grep "$err" 'spank_rl: .*grpo\.num_prompts_per_stepp: unknown key' "srun's plugin reports the override"
[ -s "$out" ] && not_ok "rlrun ran with an invalid override" || ok "rlrun did not run with an invalid override"
refused_locally "an invalid override"
expect_status 0 "a valid override after rlrun" -- \
	srun --rl-config="$WORK/rel.yaml" "$RLRUN" config grpo.num_prompts_per_step=3
expect_grep "$out" "^# .* from $work/rel\.yaml" "rlrun in the task reads RL_CONFIG"
expect_grep "$out" '^  num_prompts_per_step: 3$' "rlrun in the task applies the override"

# ---- a layout the model cannot take: refused by srun, once, with the numbers ----
expect_status 1 "pipeline=4 on the tiny model's 2 layers fails srun" -- \
	srun -n 4 --rl-config="$WORK/rel.yaml" "$RLRUN" config policy.parallel.pipeline=4
expect_grep "$err" "spank_rl: .*policy\.parallel\.pipeline=4: the model.s 2 layers \(builtin:tiny-llama\) do not split into 4 stages" \
	"the plugin names the key, the value and the model's layers"
n=$(grep -c "do not split" "$err")
[ "$n" = 1 ] && ok "  said once" || not_ok "  said $n times"
[ -s "$out" ] && not_ok "rlrun ran with a layout the model cannot take" || ok "rlrun did not run"
refused_locally "a layout the model cannot take"

# ---- a missing model or dataset: refused on the node, as the user, before any task runs ----
printf 'defaults: %s\npolicy:\n  model_name: %s/no-model\n' "$config" "$work" >"$WORK/nomodel.yaml"
expect_status 1 "a missing model directory fails the step" -- \
	srun -n 2 --rl-config="$WORK/nomodel.yaml" sh -c "touch $WORK/ran"
expect_grep "$err" "spank_rl: .*policy\.model_name: $work/no-model/config\.json: No such file or directory" \
	"the error names the key and the path"
n=$(grep -c "^spank_rl: .*no-model/config.json" "$err")
[ "$n" = 1 ] && ok "  said once (the node's first task)" || {
	not_ok "  said $n times:"
	sed 's/^/  | /' "$err" | head -10
}
[ -e "$WORK/ran" ] && not_ok "a task ran without its model" || ok "no task ran without its model"
printf 'defaults: %s\ndata:\n  dataset_name: jsonl\n  train:\n    path: %s/no-train.jsonl\n' \
	"$config" "$work" >"$WORK/nodata.yaml"
expect_status 1 "a missing dataset fails the step" -- \
	srun -n 2 --rl-config="$WORK/nodata.yaml" sh -c "touch $WORK/ran"
expect_grep "$err" "spank_rl: .*data\.train\.path: $work/no-train\.jsonl: No such file or directory" \
	"the error names the key and the path"
[ -e "$WORK/ran" ] && not_ok "a task ran without its data" || ok "no task ran without its data"

# ---- sbatch: the batch script and the srun steps inside get the config ----
# shellcheck disable=SC2016 # $RL_CONFIG is the batch script's
expect_status 0 "sbatch --wait --rl-config with srun inside" -- \
	sbatch --wait -n 2 -o "$WORK/job.out" --rl-config="$config" \
	--wrap 'echo "batch: RL_CONFIG=$RL_CONFIG"; srun -l env'
expect_grep "$WORK/job.out" "^batch: RL_CONFIG=$config\$" "the batch script has RL_CONFIG"
n=$(grep -cxE " *[0-9]+: RL_CONFIG=$config" "$WORK/job.out")
[ "$n" = 2 ] && ok "both tasks of the srun inside the batch job have RL_CONFIG" || {
	not_ok "$n of 2 tasks in the batch job have RL_CONFIG=$config:"
	sed 's/^/  | /' "$WORK/job.out" | grep -E 'RL_|error' | head -10
}

expect_status 1 "sbatch --rl-config=bad.yaml fails" -- \
	sbatch --rl-config="$WORK/bad.yaml" --wrap "touch $WORK/ran"
expect_grep "$err" 'bad\.yaml:3:3: .*grpo\.num_prompts_per_stepp' "sbatch's error names bad.yaml:3:3 and the key"
grep -q 'Submitted' "$out" && not_ok "sbatch submitted a job with a bad config" ||
	ok "sbatch submitted no job with a bad config"

slurm_stop
finish
