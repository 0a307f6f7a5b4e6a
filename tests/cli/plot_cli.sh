#!/bin/sh
# rlrun plot: what it hands gnuplot (through a stand-in gnuplot that keeps its
# script), the PNG and terminal plots the real one draws, and every way a
# metrics.jsonl or the command line can be wrong.
. "$(dirname "$0")/lib.sh"

sample=$top_srcdir/tests/cli/data/metrics-sample.jsonl
run=$WORK/run
mkdir -p "$run" "$WORK/fakebin" "$WORK/nobin"
cp "$sample" "$run/metrics.jsonl"

# a gnuplot that keeps its script in $PLOT_SCRIPT, or fails with $PLOT_FAIL
cat >"$WORK/fakebin/gnuplot" <<'EOF'
#!/bin/sh
if [ -n "${PLOT_FAIL:-}" ]; then echo "fake gnuplot: $PLOT_FAIL" >&2; exit 3; fi
cat >"$PLOT_SCRIPT"
EOF
chmod +x "$WORK/fakebin/gnuplot"
fake() { env PATH="$WORK/fakebin:$PATH" PLOT_SCRIPT="$WORK/script.gp" "$@"; }

# one data block of the script as "STEP VALUE..." lines
block() { # NAME
	awk -v name="$1" '$0 == "$" name " << EOD" {on=1; next} $0 == "EOD" {on=0} on && !/^#/' \
		"$WORK/script.gp"
}

# ---- the data handed to gnuplot: the fixture's steps 7 and 8 come twice
# (a run resumed from step 6); the later lines win, and the order is by step
expect_status 0 "plot with a stand-in gnuplot" -- fake "$RLRUN" plot "$run"
steps=$(block data | awk '{printf "%s%s", (NR > 1 ? " " : ""), $1}')
if [ "$steps" = "1 2 3 4 5 6 7 8 9 10 11 12" ]; then ok "each step once, in order"; else
	not_ok "steps handed to gnuplot: $steps"
fi
# step reward_mean reward_std total generation reward_calc logprobs training refit ckpt
expect_grep "$WORK/script.gp" '^7 0\.3 0\.1 7 3 0\.25 0\.5 1 2 0$' "step 7 from the resumed run"
expect_grep "$WORK/script.gp" '^8 0\.33 0\.1 4 2 0\.25 0\.5 1 0\.125 0$' \
	"step 8 from the resumed run"
expect_grep "$WORK/script.gp" '^6 0\.26 0\.09 5\.5 2 0\.25 0\.5 1 0\.125 1\.5$' \
	"step 6 with its checkpointing time"
expect_grep "$WORK/script.gp" '^1 0\.1 0\.05 4 2 0\.25 0\.5 1 0\.125 0$' \
	"an absent timer is 0"
vals=$(block val | tr '\n' ' ')
if [ "$vals" = "5 0.2 10 0.38 " ]; then ok "val_reward of steps 5 and 10 only"; else
	not_ok "val_reward points: $vals (step 7's was overwritten by the resumed run)"
fi
expect_grep "$WORK/script.gp" "^set terminal dumb feed size 100,30$" "100x30 by default"
COLUMNS=132 LINES=40 fake "$RLRUN" plot "$run" >/dev/null 2>&1
expect_grep "$WORK/script.gp" "^set terminal dumb feed size 132,40$" "size from COLUMNS, LINES"

# rlrun train writes a NaN as null: a gap in the reward, a timer of 0
mkdir -p "$WORK/null"
sed '4s/"reward_mean": 0.19, "reward_std": 0.08/"reward_mean": null, "reward_std": null/
5s/"generation": 2.0/"generation": null/' "$sample" >"$WORK/null/metrics.jsonl"
expect_status 0 "null values" -- fake "$RLRUN" plot "$WORK/null"
expect_grep "$WORK/script.gp" '^4 nan 0 4 2 0\.25 0\.5 1 0\.125 0$' "null reward_mean is NaN"
expect_grep "$WORK/script.gp" '^5 0\.22 0\.08 6 0 0\.25 0\.5 1 0\.125 0$' "null timer is 0"

# a line being written while we read is not an error
mkdir -p "$WORK/partial"
cp "$sample" "$WORK/partial/metrics.jsonl"
printf '{"step": 13, "reward_me' >>"$WORK/partial/metrics.jsonl"
expect_status 0 "a last line without its newline" -- fake "$RLRUN" plot "$WORK/partial"
if [ "$(block data | wc -l)" = 12 ]; then ok "the partial line is left out"; else
	not_ok "$(block data | wc -l) steps handed to gnuplot, expected 12"
fi

# ---- gnuplot missing or failing
expect_status 1 "gnuplot not on PATH" -- env PATH="$WORK/nobin" "$RLRUN" plot "$run"
expect_grep "$WORK/err" '^rlrun plot: gnuplot not found on PATH \(Debian: apt-get install gnuplot-nox\)$' \
	"says how to get it"
printf 'old' >"$WORK/keep.png"
expect_status 1 "gnuplot failing" -- fake env PLOT_FAIL=boom "$RLRUN" plot "$run" -o "$WORK/keep.png"
expect_grep "$WORK/err" '^fake gnuplot: boom$' "gnuplot's stderr passes through"
expect_grep "$WORK/err" 'gnuplot failed \(exit status 3\)' "says gnuplot failed"
left=$(find "$WORK" -name 'keep.png.*')
if [ "$(cat "$WORK/keep.png")" = old ] && [ -z "$left" ]; then
	ok "an earlier PNG is kept, no temporary left"
else
	not_ok "keep.png changed or a temporary is left: $left"
fi

# ---- bad input: the file and the line
mkdir -p "$WORK/bad" "$WORK/nometrics"
sed '3s/"reward_mean": 0.15/"reward_mean": oops/' "$sample" >"$WORK/bad/metrics.jsonl"
expect_status 1 "a line that is not JSON" -- fake "$RLRUN" plot "$WORK/bad"
expect_grep "$WORK/err" "bad/metrics\.jsonl:3:[0-9]+: not JSON" "names file:line:column"
sed '4s/"reward_mean": 0.19/"reward_mean": "0.19"/' "$sample" >"$WORK/bad/metrics.jsonl"
expect_status 1 "a string for a number" -- fake "$RLRUN" plot "$WORK/bad"
expect_grep "$WORK/err" 'bad/metrics\.jsonl:4: "reward_mean" is a string, not a number' \
	"names the line and the key"
sed '12s/"step": 9, //' "$sample" >"$WORK/bad/metrics.jsonl"
expect_status 1 "a line without a step" -- fake "$RLRUN" plot "$WORK/bad"
expect_grep "$WORK/err" 'bad/metrics\.jsonl:12: missing "step"' "names the line"
printf '[1, 2]\n' >"$WORK/bad/metrics.jsonl"
expect_status 1 "a line that is no object" -- fake "$RLRUN" plot "$WORK/bad"
expect_grep "$WORK/err" 'bad/metrics\.jsonl:1: an array, not a JSON object' "says what it is"
: >"$WORK/bad/metrics.jsonl"
expect_status 1 "an empty metrics.jsonl" -- fake "$RLRUN" plot "$WORK/bad"
expect_grep "$WORK/err" 'bad/metrics\.jsonl: no steps yet' "says so"
expect_status 1 "a directory without metrics.jsonl" -- fake "$RLRUN" plot "$WORK/nometrics"
expect_grep "$WORK/err" "$WORK/nometrics/metrics\.jsonl: No such file" "names the path"
expect_status 1 "a missing directory" -- fake "$RLRUN" plot "$WORK/nosuch"
expect_grep "$WORK/err" "$WORK/nosuch: No such file" "names the path"
expect_status 2 "-o with another extension" -- fake "$RLRUN" plot "$run" -o "$WORK/x.jpg"
expect_grep "$WORK/err" "x\.jpg: only PNG is written" "says why"
if [ -e "$WORK/x.jpg" ]; then not_ok "x.jpg was written"; else ok "nothing written"; fi
expect_status 2 "no LOG_DIR" -- "$RLRUN" plot
expect_status 0 "plot --help" -- "$RLRUN" plot --help
expect_grep "$WORK/out" '^usage: rlrun plot LOG_DIR \[-o FILE\.png\]$' "usage line"

# ---- the real gnuplot
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "skip: gnuplot is not installed (apt-get install gnuplot-nox)"
	finish
	exit $?
fi
expect_status 0 "PNG" -- "$RLRUN" plot "$run" -o "$WORK/run.png"
expect_grep "$WORK/err" "wrote .*/run\.png \(12 steps\)" "says what it wrote"
magic=$(head -c 8 "$WORK/run.png" | od -An -tx1 | tr -d ' \n')
if [ "$magic" = 89504e470d0a1a0a ]; then ok "PNG signature"; else not_ok "first bytes $magic"; fi
# IHDR: width and height, big-endian, at byte 16
dims=$(od -An -j16 -N8 -tu1 "$WORK/run.png" | tr -s ' \n' ' ')
if [ "$dims" = " 0 0 4 176 0 0 3 132 " ]; then ok "1200x900"; else not_ok "IHDR size bytes:$dims"; fi
size=$(wc -c <"$WORK/run.png")
if [ "$size" -gt 10000 ] && [ "$size" -lt 2000000 ]; then ok "PNG of $size bytes"; else
	not_ok "PNG of $size bytes"
fi
if [ -s "$WORK/err" ] && ! grep -qv '^rlrun plot: wrote' "$WORK/err"; then
	ok "gnuplot had nothing to complain about"
else
	not_ok "gnuplot warned:"
	sed 's/^/  | /' "$WORK/err" | head -20
fi

expect_status 0 "plot in the terminal" -- env COLUMNS=90 LINES=30 "$RLRUN" plot "$run"
expect_grep "$WORK/out" "reward per step" "reward title"
expect_grep "$WORK/out" "step time breakdown" "step time title"
expect_grep "$WORK/out" "val_reward" "val_reward in the legend"
expect_grep "$WORK/out" "policy_and_reference_logprobs" "timers in the legend"
expect_grep "$WORK/out" "^ +step +$" "step axis label"
# gnuplot starts each plot with a form feed
width=$(tr -d '\f' <"$WORK/out" | awk '{ if (length($0) > w) w = length($0) } END { print w }')
if [ "$width" = 90 ]; then ok "90 columns wide"; else not_ok "$width columns wide, expected 90"; fi
if [ -s "$WORK/err" ]; then not_ok "stderr is not empty:"; sed 's/^/  | /' "$WORK/err"; else
	ok "no warnings"
fi

expect_status 0 "null values, real gnuplot" -- "$RLRUN" plot "$WORK/null" -o "$WORK/null.png"
if grep -qv '^rlrun plot: wrote' "$WORK/err"; then not_ok "gnuplot warned:"; sed 's/^/  | /' "$WORK/err"; else
	ok "no warnings"
fi

# one step: no empty ranges for gnuplot to warn about
mkdir -p "$WORK/one"
head -n 1 "$sample" >"$WORK/one/metrics.jsonl"
expect_status 0 "a single step" -- "$RLRUN" plot "$WORK/one"
if [ -s "$WORK/err" ]; then not_ok "stderr is not empty:"; sed 's/^/  | /' "$WORK/err"; else
	ok "no warnings"
fi

finish
