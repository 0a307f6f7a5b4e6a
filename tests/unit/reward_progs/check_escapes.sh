#!/bin/sh
# Rewards 1 when the line carries the JSON escapes that test_reward_command.c
# put into items 0 and 1, else 0. Quoted pattern characters match literally.
while IFS= read -r line; do
	r=1
	case $line in
	'{"index":0,'*)
		case $line in *'"prompt":"say \"hi\""'*) ;; *) r=0 ;; esac
		case $line in *'"problem":null'*) ;; *) r=0 ;; esac
		case $line in *'"response":"a\\b\nc é\t/"'*) ;; *) r=0 ;; esac
		case $line in *'"expected_answer":"ctrl \u0001"'*) ;; *) r=0 ;; esac
		;;
	'{"index":1,'*)
		case $line in *'"response":"bad '"$(printf '\357\277\275')"' byte"'*) ;; *) r=0 ;; esac
		case $line in *'"expected_answer":null}') ;; *) r=0 ;; esac
		;;
	*) r=0 ;;
	esac
	echo $r
done
