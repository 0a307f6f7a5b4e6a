#!/bin/sh
# run-in-cluster.sh CMD [ARGS...]: runs CMD with SLURM_CONF pointing at a
# throwaway one-node Slurm (tests/slurm/cluster.sh) started for it in a
# temporary directory, stops that cluster however CMD ends (also on Ctrl-C),
# and exits with CMD's status. Needs root, Slurm and munge installed, and
# spank_rl.so in $top_builddir.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$(cd "$here/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
export top_srcdir top_builddir
[ $# -gt 0 ] || {
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
}
# short and under /tmp: munged wants every directory above its socket
# searchable, and socket paths are short
dir=$(mktemp -d /tmp/rl-slurm-XXXXXX) || exit 1
trap '"$here/cluster.sh" stop "$dir"; rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# CMD sees this cluster only, not the Slurm job or RL run we may be inside of
for v in $(env | sed -nE 's/^((RL|SLURM|SBATCH|SALLOC|SRUN)_[A-Za-z0-9_]*)=.*/\1/p'); do
	unset "$v"
done
exports=$("$here/cluster.sh" start "$dir") || exit 1
eval "$exports"
"$@"
