#!/bin/sh
# Sizes read from files are checked before they size anything: a
# tokenizer.json naming a huge id, and checkpoint shards claiming 2^31 or
# 2^62 floats with no bytes behind them or a shape whose product overflows,
# each fail with a message naming the file and the entry, exit 1, and never
# ask for the memory (run under a 1 GB address-space limit, under the 1.3 GB
# that id 10^8 once asked for). rlrun ckpt list and verify on a
# missing directory or a broken manifest say so and exit 1, listing the good
# checkpoints still. Every input is made here by hand.
# ok and not_ok always succeed: `test && ok || not_ok` is an if-else here.
# shellcheck disable=SC2015
. "$(dirname "$0")/lib.sh"

cd "$WORK" || exit 1
SEAL=$top_builddir/tests/tools/ckpt_seal
# 1 GB of address space beyond the libraries rlrun maps: rlrun needs about
# 400 MB here with one thread, 92 MB of it the CPU build's libraries (the
# CUDA build maps 850 MB of them: cuBLASLt, NCCL...; the libraries'
# threads would each add a stack and an arena on a bigger machine), id 10^8
# once asked for 1.3 GB more. The timeout: under a limit too tight, UCX's
# mmap hook retries for ever. AddressSanitizer reserves terabytes: no limit
# there (the plain build runs the limited one).
if nm "$RLRUN" 2>/dev/null | grep -q __asan_init; then
	limited() { "$@"; }
else
	# dash and bash both have ulimit -v
	# shellcheck disable=SC3045
	libs_kb=$(ldd "$RLRUN" 2>/dev/null | awk '$3 ~ /^\// { print $3 }' | xargs -r ls -lL |
		awk '{ s += $5 } END { printf "%d", s / 1024 }')
	limit_kb=$((1000000 + ${libs_kb:-0}))
	limited() {
		(ulimit -v "$limit_kb" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 exec timeout 60 "$@")
	}
fi

# ---- tokenizer.json: ids bounded by the vocabulary's entries ----
# the hand-made fixture: 141 vocab entries (ids 0..140), 6 added tokens
tok=$top_srcdir/tests/fixtures/tokenizer/handmade/tokenizer.json
mkdir good
cp "$tok" good/tokenizer.json
expect_status 0 "the fixture tokenizer loads under the memory limit" -- \
	limited "$RLRUN" tokenize --model good --text 'hello!'
for id in 147 100000000 2147483646 2147483648 4611686018427387904; do
	mkdir "id$id"
	sed "s/\"!\": 0,/\"!\": $id,/" "$tok" >"id$id/tokenizer.json"
	expect_status 1 "vocab id $id" -- limited "$RLRUN" tokenize --model "id$id" --text hi
	expect_grep "$WORK/err" \
		"id$id/tokenizer.json: model.vocab\[\"!\"\]: id $id is past the 147 ids" \
		"  is refused, naming the file, the token and the id"
done
mkdir id2p64
sed 's/"!": 0,/"!": 18446744073709551615,/' "$tok" >id2p64/tokenizer.json
expect_status 1 "vocab id 2^64 - 1" -- limited "$RLRUN" tokenize --model id2p64 --text hi
expect_grep "$WORK/err" "id2p64/tokenizer.json: .*too big" "  is refused by the JSON reader"

# ---- checkpoint shards ----
# le64 N: N as 8 little-endian bytes
le64() {
	n=$1
	for _ in 1 2 3 4 5 6 7 8; do
		# shellcheck disable=SC2059
		printf "\\$(printf '%03o' $((n & 255)))"
		n=$((n >> 8))
	done
}
# shard FILE DATA_BYTES ENTRY...: a shard file whose header holds the
# entries (a tensor and its place each) and DATA_BYTES zero bytes of data
shard() {
	file=$1 bytes=$2
	shift 2
	tensors="" places=""
	for e in "$@"; do
		tensors="$tensors,${e%%|*}"
		places="$places,${e#*|}"
	done
	header="{\"__metadata__\":{\"format\":\"slurm-rl-shard-1\"$places}$tensors}"
	while [ $((${#header} % 4)) != 0 ]; do header="$header "; done
	{
		le64 ${#header}
		printf '%s' "$header"
		head -c "$bytes" /dev/zero
	} >"$file"
}
# entry KIND TENSOR SHAPE DATA_OFFSETS GLOBAL OFFSET BLOCK FLAT: one piece
entry() {
	place="{\\\"tensor\\\":\\\"$2\\\",\\\"kind\\\":\\\"$1\\\",\\\"global_shape\\\":$5"
	place="$place,\\\"block_offset\\\":$6,\\\"block_shape\\\":$7,\\\"flat\\\":$8}"
	printf '"%s/%s":{"dtype":"F32","shape":%s,"data_offsets":%s}|"%s/%s":"%s"' \
		"$1" "$2" "$3" "$4" "$1" "$2" "$place"
}
# checkpoint DIR STEP DATA_BYTES ENTRY...: a committed checkpoint DIR/step_STEP
checkpoint() {
	dir=$1/step_$2 step=$2 bytes=$3
	shift 3
	mkdir -p "$dir"
	shard "$dir/rank-00000.safetensors" "$bytes" "$@"
	"$SEAL" "$dir" "$step"
}
# the three kinds of tensor w, each of n floats [n] at data offset n*4*k
whole() { # N
	n=$1
	for k in 0 1 2; do
		kind=$(echo "weight exp_avg exp_avg_sq" | cut -d' ' -f$((k + 1)))
		entry "$kind" w "[$n]" "[$((n * 4 * k)),$((n * 4 * (k + 1)))]" "[$n]" "[0]" "[$n]" \
			"[0,$n]"
		echo
	done
}

# shellcheck disable=SC2046
checkpoint good.ck 1 24 $(whole 2)
expect_status 0 "a hand-made checkpoint of one tensor of 2 floats verifies" -- \
	limited "$RLRUN" ckpt verify good.ck/step_1
expect_grep "$WORK/out" "1 tensor with its Adam moments" "  with its three kinds"

big=2147483648 # 2^31, the largest dimension a piece may have
checkpoint p2p31.ck 1 0 "$(entry weight w "[$big]" "[0,0]" "[$big]" "[0]" "[$big]" "[0,$big]")"
expect_status 1 "a piece of 2^31 floats in 0 bytes" -- limited "$RLRUN" ckpt verify p2p31.ck/step_1
expect_grep "$WORK/err" "p2p31.ck/step_1/rank-00000.safetensors: tensor weight/w: bytes \[0, 0\) do not hold its $big floats" \
	"  is refused, naming the file and the tensor"

p62=4611686018427387904 # 2^62 floats: 0 bytes once multiplied by 4 in 64 bits
# all three kinds: once, verify found this tensor complete
for kind in weight exp_avg exp_avg_sq; do
	entry $kind w "[$big,$big]" "[0,0]" "[$big,$big]" "[0,0]" "[$big,$big]" "[0,$p62]"
	echo
done >p62.entries
# shellcheck disable=SC2046
checkpoint p2p62.ck 1 0 $(cat p62.entries)
expect_status 1 "a piece of 2^62 floats in 0 bytes" -- limited "$RLRUN" ckpt verify p2p62.ck/step_1
expect_grep "$WORK/err" "p2p62.ck/step_1/rank-00000.safetensors: tensor [a-z_]+/w: bytes \[0, 0\) do not hold its $p62 floats" \
	"  is refused, naming the file and the tensor"

checkpoint shape.ck 1 8 "$(entry weight w "[$big,$big,$big,$big]" "[0,8]" "[2]" "[0]" "[2]" "[0,2]")"
expect_status 1 "a shape of 2^124 elements" -- limited "$RLRUN" ckpt verify shape.ck/step_1
expect_grep "$WORK/err" "shape.ck/step_1/rank-00000.safetensors: tensor weight/w: its shape's element count overflows" \
	"  is refused, naming the file and the tensor"

checkpoint negative.ck 1 8 "$(entry weight w "[2]" "[0,8]" "[2]" "[0]" "[2]" "[0,-4611686018427387904]")"
expect_status 1 "a piece of -2^62 floats" -- limited "$RLRUN" ckpt verify negative.ck/step_1
expect_grep "$WORK/err" "negative.ck/step_1/rank-00000.safetensors: tensor weight/w: bytes \[0, 8\) do not hold" \
	"  is refused, naming the file and the tensor"

# ---- rlrun ckpt list and verify on what is not a good checkpoint ----
expect_status 1 "rlrun ckpt list on a missing directory" -- "$RLRUN" ckpt list nowhere.ck
expect_grep "$WORK/err" "^rlrun ckpt list: nowhere.ck: No such file or directory$" "  says so"
expect_status 1 "rlrun ckpt verify on a missing directory" -- "$RLRUN" ckpt verify nowhere.ck/step_1
expect_grep "$WORK/err" "^rlrun ckpt verify: nowhere.ck/step_1: No such file or directory$" \
	"  says so"
expect_status 0 "rlrun ckpt list on good checkpoints" -- "$RLRUN" ckpt list good.ck
expect_grep "$WORK/out" "^step_1 " "  lists them"

# shellcheck disable=SC2046
checkpoint good.ck 3 24 $(whole 2)
mkdir good.ck/step_2
echo '{"format": "slurm-rl-checkpoint-1", "step": 2,' >good.ck/step_2/manifest.json
echo step_3 >good.ck/latest
expect_status 1 "rlrun ckpt list with a broken manifest among good ones" -- \
	"$RLRUN" ckpt list good.ck
expect_grep "$WORK/out" "^step_1 " "  lists step_1"
expect_grep "$WORK/out" "^step_3 .*latest$" "  and step_3, the latest"
expect_grep "$WORK/out" "^step_2 +broken" "  marks step_2 broken"
expect_grep "$WORK/err" "good.ck/step_2/manifest.json:2: " "  and says what is wrong, where"
expect_grep "$WORK/err" "1 of the checkpoints in good.ck cannot be read" "  and how many are"
expect_status 1 "rlrun ckpt verify on the broken one" -- "$RLRUN" ckpt verify good.ck/step_2
expect_grep "$WORK/err" "good.ck/step_2/manifest.json:2: " "  says what is wrong, where"
expect_status 1 "rlrun ckpt verify on the run's directory" -- "$RLRUN" ckpt verify good.ck
expect_grep "$WORK/err" "good.ck holds checkpoints; name one of them" "  says to name one"

finish
