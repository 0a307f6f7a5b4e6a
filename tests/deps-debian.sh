#!/bin/sh
# Installs what slurm-rl needs to build and test on Debian 12, and nothing
# when it is all there already. Uses sudo when not root.
set -eu
pkgs="build-essential autoconf automake pkg-config binutils groff-base
libyaml-dev libhwloc-dev hwloc libslurm-dev libpmi2-0-dev libmpich-dev mpich
slurmctld slurmd slurm-client munge
libopenblas-openmp-dev libjansson-dev libpcre2-dev libunistring-dev libxxhash-dev libcriterion-dev
libprotobuf-c-dev protobuf-c-compiler
gnuplot-nox valgrind"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps-debian: installing:$missing"
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
