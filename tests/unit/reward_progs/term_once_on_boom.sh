#!/bin/sh
# Rewards 1, but kills itself with SIGTERM the first time it meets an item
# containing "boom": as if the job were stopped right then. A file in the
# directory $1 remembers each such item, so a fresh copy answers it.
while IFS= read -r line; do
	case $line in
	*boom*)
		index=${line#*\"index\":}
		index=${index%%,*}
		[ -e "$1/seen-$index" ] || {
			: >"$1/seen-$index"
			kill -TERM $$
		}
		;;
	esac
	echo 1
done
