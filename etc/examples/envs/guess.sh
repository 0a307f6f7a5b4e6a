#!/bin/sh
# The guessing game of rl-env(7), as rlrun's built-in `guess` plays it, in
# POSIX sh alone (no awk, no jq): the secret is the episode's expected
# answer, a digit. A model message (trimmed) that begins with a digit is a
# guess: right ends the episode with reward 1; wrong is told "higher" or
# "lower" (where the secret is). Any other message is told "digit".
#
# It holds any number of episodes at once, one variable per episode. Its
# answers depend only on the episode's start (the secret), so a start that
# carries a history has nothing to rebuild. It reads only the fields it
# needs, from the compact JSON rlrun writes (no spaces between tokens):
# quotes inside strings are escaped there, so "type":"step" and the like
# can only be the message's own keys.
n=0
fail() {
	echo "guess.sh: stdin line $n: $1" >&2
	exit 1
}
answer() { # ID OBSERVATION REWARD DONE
	printf '{"episode":%s,"observation":"%s","reward":%s,"done":%s}\n' "$1" "$2" "$3" "$4"
}
while IFS= read -r line; do
	n=$((n + 1))
	case $line in *[![:space:]]*) ;; *) continue ;; esac
	id=${line#*\"episode\":}
	[ "$id" != "$line" ] || fail "no \"episode\""
	id=${id%%[!0-9]*}
	[ -n "$id" ] || fail "\"episode\" is not a number"
	case $line in
	*'"type":"start"'*)
		secret=${line#*\"expected_answer\":\"}
		secret=${secret%"${secret#?}"}
		case $secret in [0-9]) ;; *) fail "\"expected_answer\" is not a digit" ;; esac
		eval "secret_$id=$secret"
		;;
	*'"type":"step"'*)
		eval "secret=\${secret_$id-}"
		[ -n "$secret" ] || fail "a step for episode $id, which was not started"
		msg=${line#*\"message\":\"}
		[ "$msg" != "$line" ] || fail "a step with no \"message\""
		while :; do # trim: blanks and escaped newlines, tabs, returns
			case $msg in
			' '*) msg=${msg# } ;;
			'\n'* | '\t'* | '\r'*) msg=${msg#??} ;;
			*) break ;;
			esac
		done
		guess=${msg%"${msg#?}"}
		case $guess in
		[0-9])
			if [ "$guess" = "$secret" ]; then
				answer "$id" "" 1.0 true
				unset "secret_$id"
			elif [ "$secret" -gt "$guess" ]; then
				answer "$id" higher 0.0 false
			else
				answer "$id" lower 0.0 false
			fi
			;;
		*) answer "$id" digit 0.0 false ;;
		esac
		;;
	*'"type":"end"'*) unset "secret_$id" ;;
	*) fail "no \"type\" start, step or end" ;;
	esac
done
