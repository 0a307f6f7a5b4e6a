#!/bin/sh
# README command (1): build, then run the main job on the built-in default
# config the way a cluster runs it: a throwaway one-node Slurm on 127.0.0.1
# (tests/slurm/run-in-cluster.sh) with the just-built plugin, and
# `srun --rl-config=etc/examples/grpo-tiny.yaml rlrun`: the plugin checks the
# config, places the task and gives it its RL_* environment, and rlrun
# trains the built-in tiny model from scratch on the CPU (about a minute on
# 2 cores). Then the run's reward and step times are drawn in the terminal.
# Without root (the daemons need it) it runs rlrun directly and says so.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -f config.status ] && make distclean >/dev/null
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p build/main
cd build/main
[ -f Makefile ] || "$top/configure" >configure.log
make -j"$(nproc 2>/dev/null || echo 2)" >make.log
config=$top/etc/examples/grpo-tiny.yaml
if [ "$(id -u)" = 0 ] && command -v slurmctld >/dev/null 2>&1; then
	top_srcdir=$top top_builddir=$PWD "$top/tests/slurm/run-in-cluster.sh" \
		srun -n 1 --rl-config="$config" --rl-plan ./rlrun logger.log_dir=logs/demo
else
	echo "run-demo: not root (or no slurmctld): running rlrun without Slurm" >&2
	./rlrun train "$config" logger.log_dir=logs/demo
fi
if command -v gnuplot >/dev/null 2>&1; then
	./rlrun plot logs/demo
fi
echo "rlrun: metrics in build/main/logs/demo/metrics.jsonl" >&2
