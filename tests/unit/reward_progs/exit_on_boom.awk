#!/usr/bin/awk -f
# Like len_mod3.awk, but exits with status 3 on a response containing "boom".
{
	if (index($0, "boom"))
		exit 3
	if (match($0, /"response":"[^"\\]*"/))
		print (RLENGTH - 13) % 3
	else
		print "no response"
	fflush()
}
