#!/bin/sh
# Writes a C file defining SYMBOL (the bytes of FILE, NUL-terminated) and
# SYMBOL_len, so that rlrun carries its default config without a runtime
# file lookup. Usage: embed.sh SYMBOL FILE > out.c
set -eu
sym=$1
file=$2
echo "/* Generated from $(basename "$file") by build-aux/embed.sh; do not edit. */"
echo "#include <stddef.h>"
echo "const char ${sym}[] = {"
od -An -v -tu1 "$file" | awk '{ line = "\t"; for (i = 1; i <= NF; i++) line = line $i ","; print line }'
printf "\t0\n"
echo "};"
echo "const size_t ${sym}_len = sizeof(${sym}) - 1;"
