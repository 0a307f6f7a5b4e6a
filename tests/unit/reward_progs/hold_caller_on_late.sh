#!/bin/sh
# Rewards 1. On an item containing "late" it holds its caller still for
# 3 s, as a job suspended and resumed would be, and answers half a second
# after the caller runs again.
while IFS= read -r line; do
	case $line in
	*late*)
		kill -STOP "$PPID"
		sleep 3
		kill -CONT "$PPID"
		sleep 0.5
		;;
	esac
	echo 1
done
