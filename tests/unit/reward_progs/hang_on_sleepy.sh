#!/bin/sh
# Rewards 1, but hangs on an item containing "sleepy" in a child process
# (its pid goes to $SLEEP_PID_FILE when set), so that only killing the whole
# process group ends it.
while IFS= read -r line; do
	case $line in
	*sleepy*)
		sleep 1000 &
		if [ -n "$SLEEP_PID_FILE" ]; then echo $! >"$SLEEP_PID_FILE"; fi
		wait
		;;
	esac
	echo 1
done
