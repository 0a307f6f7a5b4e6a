#!/bin/sh
# Rewards 1, each after sleeping $SLEEP_S seconds (default 0.2): a slow
# program whose copies' time adds up only if they do not run at once.
while IFS= read -r _; do
	sleep "${SLEEP_S:-0.2}"
	echo 1
done
