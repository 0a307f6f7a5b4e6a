#!/bin/sh
# README command (1): build, then run what slurm-rl can run today on the
# built-in default config. There is no training in this release: this
# resolves and prints the config that training will use, shows the engine
# generating from a tiny test model, and says so.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -f config.status ] && make distclean >/dev/null
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p build/main
cd build/main
[ -f Makefile ] || "$top/configure" >configure.log
make -j"$(nproc 2>/dev/null || echo 2)" >make.log
./rlrun config
echo "rlrun generate (tiny random Llama from tests/fixtures, greedy):" >&2
./rlrun generate --model "$top/tests/fixtures/models/llama" --prompt "Hello" \
	--temperature 0 --max-new-tokens 8 --print-ids
echo "rlrun: config resolved; GRPO training (rlrun train) is not implemented in this release." >&2
