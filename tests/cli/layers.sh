#!/bin/sh
# The rooms of the tree and the one direction of their arrows
# (ARCHITECTURE.md), checked on what is built, not on what is said:
#   includes  every #include between rooms points down the order below;
#   calls     every symbol one room's objects take from another's (nm on
#             the static libraries, one per room, and rlrun's objects)
#             points down it too;
#   circles   no two files of the algorithm, rollout and trainer rooms
#             (grpo, rollout, train) call each other, directly or round
#             about;
#   trainer   nothing below the trainer room includes its header;
#   memory    nothing above kernels/ allocates backend memory uncounted.
# A room is runtime/NAME (its library librlNAME.a), or kernels, topology
# or spank.
. "$(dirname "$0")/lib.sh"

# lowest first: a room may use the rooms before it, never those after
order="kernels topology base logger config tokenizer chat model generate comm parallel ckpt data
reward env grpo algo rollout job train plan cli spank"
rank_of() { # ROOM: its place in the order, empty when it is not a room
	i=0
	for r in $order; do
		[ "$r" = "$1" ] && echo $i && return
		i=$((i + 1))
	done
}
room_of() { # PATH: the room of a file or an include
	case $1 in
	runtime/*/*) p=${1#runtime/} && echo "${p%%/*}" ;;
	kernels/* | topology/* | spank/*) echo "${1%%/*}" ;;
	esac
}

# ---- includes ----
cd "$top_srcdir" || exit 1
bad=0 n=0
for f in $(find runtime kernels topology spank -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' |
	sort); do
	from=$(room_of "$f")
	rf=$(rank_of "$from")
	[ -n "$rf" ] || continue
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		to=$(room_of "$inc")
		[ -n "$to" ] && [ "$to" != "$from" ] || continue
		n=$((n + 1))
		rt=$(rank_of "$to")
		if [ -z "$rt" ] || [ "$rt" -gt "$rf" ]; then
			echo "  $f ($from) includes $inc ($to): an arrow up the order"
			bad=$((bad + 1))
		fi
	done
done
[ "$bad" = 0 ] && ok "includes: $n between rooms, each down the order" ||
	not_ok "includes: $bad of $n go up the order"
grep -rl '"runtime/train/' runtime/grpo runtime/rollout >"$WORK/up" 2>/dev/null
[ ! -s "$WORK/up" ] && ok "nothing in grpo/ or rollout/ includes a header of the trainer" ||
	not_ok "the trainer's headers are included below it: $(tr '\n' ' ' <"$WORK/up")"
# every allocation of backend memory is counted by kind (kernels/memory_use.h:
# the mem_*_bytes metrics): nothing above kernels/ calls the table's own
# alloc or release
grep -rnE '(ops|ops_cpu|ops_cuda|ops_fenced)(->|\.)(alloc|release)\(' runtime spank \
	--include='*.c' >"$WORK/raw_alloc" 2>/dev/null
[ ! -s "$WORK/raw_alloc" ] && ok "runtime/ allocates backend memory only through rl_ops_alloc" ||
	not_ok "backend memory allocated uncounted (use rl_ops_alloc): $(head -3 "$WORK/raw_alloc")"

# ---- calls: which object defines each symbol, which objects use it ----
cd "$top_builddir" || exit 1
libs=
for r in $order; do
	[ -f "librl$r.a" ] && libs="$libs librl$r.a"
done
[ -n "$libs" ] || { not_ok "no room's library (librlNAME.a) in $top_builddir"; finish; exit 1; }
# "ROOM FILE.o SYMBOL" for every global definition (types TDBRCGSV) or
# use (U) of an object
symbols() { # NM-OPTION TYPES
	for lib in $libs; do
		room=${lib#librl}
		room=${room%.a}
		nm -A "$1" "$lib" 2>/dev/null | awk -v room="$room" -v types="$2" '{
			split($1, at, ":"); f = at[2]; sub("^librl" room "_a-", "", f)
			if (NF >= 2 && index(types, $(NF - 1))) print room, f, $NF }'
	done
	for o in runtime/cli/rlrun-*.o; do
		[ -f "$o" ] || continue
		f=${o#runtime/cli/rlrun-}
		nm "$1" "$o" 2>/dev/null | awk -v f="$f" -v types="$2" '
			NF >= 2 && index(types, $(NF - 1)) { print "cli", f, $NF }'
	done
}
symbols --defined-only TDBRGS >"$WORK/defs"
symbols -u U >"$WORK/uses"
[ -s "$WORK/defs" ] && [ -s "$WORK/uses" ] ||
	{ not_ok "nm found no symbols in $libs"; finish; exit 1; }
# one definition per symbol, or a use cannot say where it goes (an
# archive that kept the objects of files since moved to another room)
awk '($3 in at) && at[$3] != $1 "/" $2 { print "  " $3 " in " at[$3] " and " $1 "/" $2 }
	{ at[$3] = $1 "/" $2 }' "$WORK/defs" >"$WORK/twice"
[ ! -s "$WORK/twice" ] && ok "every symbol has one definition" || {
	not_ok "symbols defined twice (remove the librl*.a of $top_builddir and make again):"
	head -5 "$WORK/twice"
}
# "FROM_ROOM FROM_FILE TO_ROOM TO_FILE" per call edge between files
awk 'NR == FNR { def[$3] = $1 " " $2; next }
	($3 in def) { split(def[$3], d, " "); if ($2 != d[2] || $1 != d[1]) print $1, $2, d[1], d[2] }' \
	"$WORK/defs" "$WORK/uses" | sort -u >"$WORK/edges"
bad=0 n=0
while read -r from ffile to tfile; do
	[ "$from" != "$to" ] || continue
	n=$((n + 1))
	rf=$(rank_of "$from") rt=$(rank_of "$to")
	if [ -z "$rf" ] || [ -z "$rt" ] || [ "$rt" -gt "$rf" ]; then
		echo "  $from/$ffile calls into $to/$tfile: an arrow up the order"
		bad=$((bad + 1))
	fi
done <"$WORK/edges"
[ "$n" -gt 0 ] || not_ok "no calls between rooms found: nm's output was not understood"
[ "$bad" = 0 ] && ok "calls: $n file-to-file calls between rooms, each down the order" ||
	not_ok "calls: $bad of $n go up the order"

# ---- circles among the files of grpo, rollout and train ----
awk '$1 ~ /^(grpo|rollout|train)$/ && $3 ~ /^(grpo|rollout|train)$/ && $1 "/" $2 != $3 "/" $4 {
	print $1 "/" $2, $3 "/" $4 }' "$WORK/edges" >"$WORK/three"
awk '{ n[$1] = n[$2] = 1; reach[$1, $2] = 1 }
	END {
		for (k in n) for (i in n) if ((i, k) in reach) for (j in n) if ((k, j) in reach)
			reach[i, j] = 1
		for (i in n) for (j in n) if (i < j && (i, j) in reach && (j, i) in reach)
			print "  " i " and " j " call each other"
	}' "$WORK/three" | sort >"$WORK/circles"
files=$(awk '{ print $1; print $2 }' "$WORK/three" | sort -u | wc -l)
if [ -s "$WORK/circles" ]; then
	not_ok "circles among the files of grpo, rollout and train:"
	cat "$WORK/circles"
else
	ok "no circle among the $files files of grpo, rollout and train that call each other ($(wc -l <"$WORK/three") calls)"
fi
finish
