#!/usr/bin/awk -f
# Rewards 1, but answers items whose response names a kind of garbage with it.
{
	if (index($0, "\"response\":\"garbage\""))
		print "abc"
	else if (index($0, "\"response\":\"nan\""))
		print "nan"
	else if (index($0, "\"response\":\"inf\""))
		print "-inf"
	else if (index($0, "\"response\":\"empty\""))
		print ""
	else if (index($0, "\"response\":\"trailing\""))
		print "1 2"
	else if (index($0, "\"response\":\"long\"")) {
		s = "1"
		for (i = 0; i < 10; i++)
			s = s s
		print s
	} else
		print "1"
	fflush()
}
