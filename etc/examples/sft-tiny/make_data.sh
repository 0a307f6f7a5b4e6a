#!/bin/sh
# Writes the tiny SFT example's data next to this script: every sum a+b of
# two numbers below 20, problem "a+b=" and answer "a+b"'s value, one JSON
# object per line; about one sum in ten, drawn by the Park-Miller generator
# (exact in awk's doubles, so every awk draws the same), is the validation
# set, never trained on.
cd "$(dirname "$0")" || exit 1
awk 'BEGIN {
	x = 42
	for (a = 0; a < 20; a++)
		for (b = 0; b < 20; b++) {
			x = (x * 16807) % 2147483647
			f = x % 10 == 0 ? "validation.jsonl" : "train.jsonl"
			printf "{\"input\": \"%d+%d=\", \"output\": \"%d\"}\n", a, b, a + b > f
		}
}'
