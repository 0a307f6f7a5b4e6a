#!/usr/bin/awk -f
# A reward with a signal from the first step on, for comparing layouts: the
# first character of the response, as a digit, over 10 (0 for anything
# else). The tiny model's random start draws digits among other tokens, so
# rewards differ within a group and no batch is all-zero advantage.
{
	if (match($0, /"response":"[^"\\]/))
		print index("0123456789", substr($0, RSTART + RLENGTH - 1, 1)) / 10
	else
		print 0
	fflush()
}
