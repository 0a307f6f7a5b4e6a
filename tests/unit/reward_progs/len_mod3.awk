#!/usr/bin/awk -f
# A well-behaved reward program: the length of the response mod 3, one line
# per item, flushed. Responses must not contain escaped characters.
{
	if (match($0, /"response":"[^"\\]*"/))
		print (RLENGTH - 13) % 3
	else
		print "no response"
	fflush()
}
