#!/usr/bin/awk -f
# Answers each line at once with its "index", whatever the size of the line.
{
	if (match($0, /"index":[0-9]+/))
		print substr($0, RSTART + 8, RLENGTH - 8)
	else
		print "no index"
	fflush()
}
