#!/bin/sh
# Crashes on its first item as a Python program with a bug does: a
# traceback on stderr, exit status 1.
IFS= read -r _
cat >&2 <<'TB'
Traceback (most recent call last):
  File "judge.py", line 7, in <module>
    score = grade(item)
ZeroDivisionError: division by zero
TB
exit 1
