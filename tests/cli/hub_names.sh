#!/bin/sh
# Hugging Face hub names (ORG/NAME[@REVISION]) in the local cache, as
# huggingface_hub lays it out: models--ORG--NAME/refs/BRANCH holds the
# commit, snapshots/COMMIT/ the files as links into blobs/. The cache is
# made here from the fixture models; what each name must load is told by
# the fixtures' references (tokenizers' ids, transformers' greedy tokens),
# not by rlrun. Nothing is downloaded: a name not in the cache is an error
# that names the command that would fetch it.
. "$(dirname "$0")/lib.sh"

models=$top_srcdir/tests/fixtures/models
unset HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HOME XDG_CACHE_HOME
cd "$WORK" || exit 1

# snapshot CACHE REPO COMMIT FIXTURE: the fixture's files as the commit's,
# each a link to its blob, as huggingface_hub writes them
snapshot() {
	repo=$1/models--$(echo "$2" | sed 's|/|--|')
	mkdir -p "$repo/blobs" "$repo/snapshots/$3" "$repo/refs"
	for f in "$models/$4"/*; do
		b=$(sha256sum "$f" | cut -c1-64)
		cp "$f" "$repo/blobs/$b"
		ln -s "../../blobs/$b" "$repo/snapshots/$3/${f##*/}"
	done
}
ref() { printf '%s' "$4" >"$1/models--$(echo "$2" | sed 's|/|--|')/refs/$3"; }

hub=$WORK/hub
snapshot "$hub" acme/llama abc123 llama
ref "$hub" acme/llama main abc123
snapshot "$hub" acme/llama def456 qwen2
ref "$hub" acme/llama v2 def456

# what tokenizers made of the same text with each fixture
text=$(sed -n 1p "$models/llama.tokenize.txt")
llama_ids=$(sed -n 2p "$models/llama.tokenize.txt")
qwen2_ids=$(sed -n 2p "$models/qwen2.tokenize.txt")
[ "$(sed -n 1p "$models/qwen2.tokenize.txt")" = "$text" ] && [ "$llama_ids" != "$qwen2_ids" ] ||
	not_ok "the fixtures no longer tokenize one text two ways: this test cannot tell them apart"

expect_status 0 "HF_HUB_CACHE: acme/llama is refs/main's snapshot" -- \
	env HF_HUB_CACHE="$hub" "$RLRUN" tokenize --model acme/llama --text "$text"
expect_grep "$WORK/out" "^$llama_ids\$" "  the llama fixture's tokenizer (tokenizers' ids)"
expect_status 0 "acme/llama@v2: the branch v2's commit" -- \
	env HF_HUB_CACHE="$hub" "$RLRUN" tokenize --model acme/llama@v2 --text "$text"
expect_grep "$WORK/out" "^$qwen2_ids\$" "  the qwen2 fixture's tokenizer"
expect_status 0 "acme/llama@def456: a commit given by hand" -- \
	env HF_HUB_CACHE="$hub" "$RLRUN" tokenize --model acme/llama@def456 --text "$text"
expect_grep "$WORK/out" "^$qwen2_ids\$" "  the qwen2 fixture's tokenizer"

# the variables in huggingface_hub's order
mkdir -p home/hf xdg/huggingface home/user/.cache/huggingface
cp -R "$hub" home/hf/hub
cp -R "$hub" xdg/huggingface/hub
cp -R "$hub" home/user/.cache/huggingface/hub
expect_status 0 "HF_HOME: HF_HOME/hub" -- \
	env HF_HOME="$WORK/home/hf" "$RLRUN" tokenize --model acme/llama --text "$text"
expect_grep "$WORK/out" "^$llama_ids\$" "  the llama fixture's tokenizer"
expect_status 0 "XDG_CACHE_HOME: XDG_CACHE_HOME/huggingface/hub" -- \
	env XDG_CACHE_HOME="$WORK/xdg" HOME="$WORK/none" "$RLRUN" tokenize --model acme/llama --text "$text"
expect_grep "$WORK/out" "^$llama_ids\$" "  the llama fixture's tokenizer"
expect_status 0 "nothing set: ~/.cache/huggingface/hub" -- \
	env HOME="$WORK/home/user" "$RLRUN" tokenize --model acme/llama --text "$text"
expect_grep "$WORK/out" "^$llama_ids\$" "  the llama fixture's tokenizer"
expect_status 1 "HF_HUB_CACHE comes before HF_HOME" -- \
	env HF_HUB_CACHE="$WORK/empty" HF_HOME="$WORK/home/hf" "$RLRUN" tokenize --model acme/llama --text "$text"
expect_grep "$WORK/err" "$WORK/empty/models--acme--llama/refs/main" "  it looked in HF_HUB_CACHE only"

# a directory of that name is used as it is
mkdir -p local/acme && cp -R "$models/qwen2" local/acme/llama
expect_status 0 "a directory named like a hub name is taken as a directory" -- \
	sh -c "cd local && HF_HUB_CACHE='$hub' exec '$RLRUN' tokenize --model acme/llama --text '$text'"
expect_grep "$WORK/out" "^$qwen2_ids\$" "  the directory's tokenizer, not the cache's"

# forward and generate read the model's weights through the same name
prompt=$(tr -d ' \n' <"$models/llama.ref.json" |
	sed -E 's/.*"greedy":\[\{"prompt":\[([0-9,]*)\],"output":\[([0-9,]*)\].*/\1/')
greedy=$(tr -d ' \n' <"$models/llama.ref.json" |
	sed -E 's/.*"greedy":\[\{"prompt":\[([0-9,]*)\],"output":\[([0-9,]*)\].*/\2/')
expect_status 0 "generate --model acme/llama" -- env HF_HUB_CACHE="$hub" "$RLRUN" generate \
	--model acme/llama --ids "$prompt" --temperature 0 --max-new-tokens 12 --print-ids
expect_grep "$WORK/out" "^ids: $greedy\$" "  greedy tokens equal transformers' on the llama fixture"
expect_status 0 "forward --model acme/llama" -- env HF_HUB_CACHE="$hub" "$RLRUN" forward \
	--model acme/llama --ids "$prompt"
expect_grep "$WORK/out" "x 512 vocabulary" "  the fixture's 512-token vocabulary"

# policy.model_name: rlrun plan reads the snapshot's config.json (the
# llama fixture's 2 key/value heads do not split 4 ways)
expect_status 1 "plan: policy.model_name=acme/llama, tensor=4" -- env HF_HUB_CACHE="$hub" \
	"$RLRUN" plan policy.model_name=acme/llama policy.parallel.tensor=4 --tasks-per-node 4
expect_grep "$WORK/err" "does not divide the model.s 2 key/value heads \($hub/models--acme--llama/snapshots/abc123/config\.json\)" \
	"  refused with the snapshot's numbers"
expect_status 0 "train: policy.model_name=acme/llama, one step" -- env HF_HUB_CACHE="$hub" \
	"$RLRUN" train grpo.max_num_steps=1 policy.model_name=acme/llama logger.log_dir=train
expect_grep "$WORK/out" "acme/llama \(LlamaForCausalLM" "  the run names the model and its family"

# not in the cache: said, with the path tried and the command that fetches it
expect_status 1 "a hub name not in the cache" -- env HF_HUB_CACHE="$hub" "$RLRUN" tokenize \
	--model acme/none --text x
expect_grep "$WORK/err" "--model: acme/none is not a directory, and not in the local Hugging Face cache" \
	"  says so, naming the option"
expect_grep "$WORK/err" "no $hub/models--acme--none/refs/main" "  names the path tried"
expect_grep "$WORK/err" '`huggingface-cli download acme/none`' "  names the command that fetches it"
expect_status 1 "a revision not in the cache" -- env HF_HUB_CACHE="$hub" "$RLRUN" tokenize \
	--model acme/llama@v9 --text x
expect_grep "$WORK/err" 'huggingface-cli download acme/llama --revision v9' "  the command fetches that revision"
expect_status 0 "plan: a hub name not in the cache is planned, with a warning" -- \
	env HF_HUB_CACHE="$hub" "$RLRUN" plan policy.model_name=Qwen/Qwen3-8B --tasks-per-node 1
expect_grep "$WORK/err" 'warning: policy\.model_name: Qwen/Qwen3-8B is not a directory.*huggingface-cli download Qwen/Qwen3-8B' \
	"  the warning names the key and the command"
finish
