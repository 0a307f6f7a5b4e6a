#!/bin/sh
# README command (1): build, then run the main job on the built-in default
# config: GRPO trains the built-in tiny model from scratch on the CPU (about
# a minute on 2 cores), then the run's reward and step times are drawn in
# the terminal. Directly for now; under a throwaway local Slurm once the
# plugin work lands.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -f config.status ] && make distclean >/dev/null
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p build/main
cd build/main
[ -f Makefile ] || "$top/configure" >configure.log
make -j"$(nproc 2>/dev/null || echo 2)" >make.log
./rlrun train logger.log_dir=logs/demo
if command -v gnuplot >/dev/null 2>&1; then
	./rlrun plot logs/demo
fi
echo "rlrun: metrics in build/main/logs/demo/metrics.jsonl" >&2
