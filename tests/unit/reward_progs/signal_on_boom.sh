#!/bin/sh
# Rewards 1, but kills itself with SIGTERM on an item containing "boom".
while IFS= read -r line; do
	case $line in
	*boom*) kill -TERM $$ ;;
	esac
	echo 1
done
