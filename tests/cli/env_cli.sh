#!/bin/sh
# rl-env(7)'s environments on a scripted transcript: `rlrun env calculator`
# and `rlrun env guess`, and the example programs etc/examples/envs/
# (calculator.py skipped without python3), each answer written here by
# hand from the built-in tasks' rules; a start carrying a history is
# answered as if the episode had never stopped. A malformed line stops a
# built-in environment with its line number and status 1. rl-env(7)
# shows the example programs exactly as they are shipped.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
envs=$top_srcdir/etc/examples/envs

# calculator on 47+38 = 85: episode 1 calls the tool, then answers; 2
# answers 86 (one of two characters in place); 3 comes back after a tool
# call (its history) and answers 8 (one of two); 4 is ended unanswered;
# 7 answers "=" before any call (the display shows nothing: 0); 8 comes
# back after a call and answers "=" (its display, rebuilt from its
# history, shows 85)
cat >calc.in <<'END'
{"type":"start","episode":1,"prompt":"47+38=","problem":"47+38","expected_answer":"85","metadata":null,"history":[]}
{"type":"start","episode":2,"prompt":"47+38=","problem":"47+38","expected_answer":"85","metadata":{"k":[1,2]},"history":[]}
{"type":"step","episode":1,"turn":1,"message":"  c\n"}
{"type":"step","episode":2,"turn":1,"message":"86"}
{"type":"step","episode":1,"turn":2,"message":"85"}
{"type":"start","episode":3,"prompt":"47+38=","problem":"47+38","expected_answer":"85","metadata":null,"history":[{"message":"calc","observation":"85"}]}
{"type":"start","episode":4,"prompt":"47+38=","problem":"47+38","expected_answer":"85","metadata":null,"history":[]}
{"type":"end","episode":4}
{"type":"step","episode":3,"turn":2,"message":"8"}
{"type":"start","episode":7,"prompt":"47+38=","problem":"47+38","expected_answer":"85","metadata":null,"history":[]}
{"type":"step","episode":7,"turn":1,"message":"="}
{"type":"start","episode":8,"prompt":"47+38=","problem":"47+38","expected_answer":"85","metadata":null,"history":[{"message":"?","observation":"85"}]}
{"type":"step","episode":8,"turn":2,"message":"=85"}
END
cat >calc.want <<'END'
{"episode":1,"observation":"85","reward":0.0,"done":false}
{"episode":2,"observation":"","reward":0.5,"done":true}
{"episode":1,"observation":"","reward":1.0,"done":true}
{"episode":3,"observation":"","reward":0.5,"done":true}
{"episode":7,"observation":"","reward":0.0,"done":true}
{"episode":8,"observation":"","reward":1.0,"done":true}
END
# guess with secret 7 (episode 5) and secret 2 (episode 6, restarted
# after two wrong guesses)
cat >guess.in <<'END'
{"type":"start","episode":5,"prompt":"guess:","problem":"guess","expected_answer":"7","metadata":null,"history":[]}
{"type":"step","episode":5,"turn":1,"message":"5"}
{"type":"step","episode":5,"turn":2,"message":"no idea"}
{"type":"start","episode":6,"prompt":"guess:","problem":"guess","expected_answer":"2","metadata":null,"history":[{"message":"5","observation":"lower"},{"message":"0","observation":"higher"}]}
{"type":"step","episode":5,"turn":3,"message":"\t9"}
{"type":"step","episode":6,"turn":3,"message":"2!"}
{"type":"step","episode":5,"turn":4,"message":"7"}
END
cat >guess.want <<'END'
{"episode":5,"observation":"higher","reward":0.0,"done":false}
{"episode":5,"observation":"digit","reward":0.0,"done":false}
{"episode":5,"observation":"lower","reward":0.0,"done":false}
{"episode":6,"observation":"","reward":1.0,"done":true}
{"episode":5,"observation":"","reward":1.0,"done":true}
END

same_answers() { # WHAT WANT GOT: the answers as lines, blanks after : and , dropped
	sed 's/": /":/g; s/, "/,"/g' "$3" >"$3.n"
	if cmp -s "$2" "$3.n"; then ok "$1"; else
		not_ok "$1: these answers differ from the rules':"
		diff "$2" "$3.n" | sed 's/^/  | /' | head -20
	fi
}

for game in calculator guess; do
	short=${game%ulator}
	expect_status 0 "rlrun env $game plays a transcript" -- sh -c "'$RLRUN' env $game <$short.in"
	cp "$WORK/out" "$short.builtin"
	same_answers "  with the rules' answers" "$short.want" "$short.builtin"
done

expect_status 0 "guess.sh plays the same transcript" -- sh -c "sh '$envs/guess.sh' <guess.in"
cp "$WORK/out" guess.example
same_answers "  with the rules' answers" guess.want guess.example
if command -v python3 >/dev/null 2>&1; then
	expect_status 0 "calculator.py plays the same transcript" -- \
		sh -c "python3 '$envs/calculator.py' <calc.in"
	cp "$WORK/out" calc.example
	same_answers "  with the rules' answers" calc.want calc.example
else
	echo "skip: python3 is not installed: etc/examples/envs/calculator.py not run"
fi

expect_status 2 "rlrun env with no name is a usage error" -- "$RLRUN" env
expect_status 2 "rlrun env with an unknown name is a usage error" -- "$RLRUN" env chess
printf '%s\n' '{"type":"start","episode":1,"expected_answer":"3","history":[]}' \
	'{"type":"step","episode":1,"message":"1"' >bad.in
expect_status 1 "a line that is not JSON stops a built-in environment" -- \
	sh -c "'$RLRUN' env guess <bad.in"
expect_grep "$WORK/err" '^rlrun env guess: stdin line 2: not JSON' "  naming the line"
printf '%s\n' '{"type":"step","episode":9,"message":"1"}' >bad.in
expect_status 1 "a step for an episode never started stops it" -- \
	sh -c "'$RLRUN' env calculator <bad.in"
expect_grep "$WORK/err" '^rlrun env calculator: stdin line 1: a step for an episode that was not started' \
	"  naming the line and what is wrong"

# rl-env(7) between its BEGIN and END markers, roff escapes undone
for f in calculator.py guess.sh; do
	sed -n "/^\\.\\\\\" BEGIN etc\\/examples\\/envs\\/$f\$/,/^\\.\\\\\" END /p" \
		"$top_srcdir/man/rl-env.7" | sed '1,2d;$d' | sed '$d' |
		sed -e 's/^\\&//' -e 's/\\e/\\/g' >"man.$f"
	if [ -s "man.$f" ] && cmp -s "man.$f" "$envs/$f"; then
		ok "rl-env(7) shows etc/examples/envs/$f as shipped"
	else
		not_ok "rl-env(7) does not show etc/examples/envs/$f as shipped (copy the file between its BEGIN and END markers, each backslash written as roff's e escape, a line that begins with a dot or a quote preceded by the & escape):"
		diff "$envs/$f" "man.$f" | sed 's/^/  | /' | head -10
	fi
done
finish
