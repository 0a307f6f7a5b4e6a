#!/bin/sh
# The man pages render without a groff warning, and rl-config(5) carries
# every key of the schema (it is generated from it at build time).
. "$(dirname "$0")/lib.sh"
if [ -z "${GROFF:-}" ] && ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff not installed (apt-get install groff-base)"
	exit 77
fi
for page in "$top_srcdir/man/rlrun.1" "$top_srcdir/man/spank_rl.8" "$top_srcdir/man/checkpoint.5" \
	"$top_srcdir/man/rl-env.7" \
	"$top_builddir/man/rl-config.5"; do
	if [ ! -f "$page" ]; then not_ok "$page missing"; continue; fi
	groff -ww -man -z "$page" >"$WORK/warn" 2>&1
	if [ -s "$WORK/warn" ]; then not_ok "groff warns on $(basename "$page"):"; sed 's/^/  | /' "$WORK/warn"; else
		ok "$(basename "$page") renders cleanly"
	fi
done
"$RLRUN" config --schema | grep -v '^ ' > "$WORK/keys"
missing=0
while read -r key; do
	grep -qF ".B $(echo "$key" | sed 's/-/\\-/g')" "$top_builddir/man/rl-config.5" || { missing=$((missing + 1)); echo "  missing: $key"; }
done < "$WORK/keys"
if [ "$missing" = 0 ]; then ok "rl-config(5) documents all $(wc -l < "$WORK/keys") keys"; else not_ok "$missing keys missing from rl-config(5)"; fi
finish
