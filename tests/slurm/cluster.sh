#!/bin/sh
# A throwaway one-node Slurm on 127.0.0.1: a munged, a slurmctld and a
# slurmd of our own, with spank_rl.so in the plugin stack.
#
#   cluster.sh start DIR   write the config into DIR, start the daemons, wait
#                          until the node is idle; print `export SLURM_CONF=...`
#                          on stdout for the caller to eval
#   cluster.sh stop DIR    cancel the jobs, stop exactly the daemons started in
#                          DIR (their pid files) and wait for them; idempotent
#
# Everything (key, socket, state, spool, logs) lives in DIR, so nothing
# global is touched. Needs root: slurmd starts the jobs as their user.
# Environment: top_srcdir, top_builddir (where spank_rl.so is), CLUSTER_CPUS
# (CPUs the node declares, default 8), CLUSTER_CONF_EXTRA (a file whose lines
# are appended to slurm.conf).
set -eu
PATH=$PATH:/usr/sbin:/sbin
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$(cd "$here/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"

say() { echo "cluster.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}

# PID exists and is not a zombie: our daemons end up children of PID 1,
# which in some containers reaps them late or never
running() { # PID
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -n "$state" ] && [ "$state" != Z ]
}

# the pid in DIR/FILE when that process is alive, is NAME and was started
# for DIR (its command line names DIR): a stale pid file must never make us
# kill someone else's process
live_pid() { # DIR FILE NAME
	[ -s "$1/$2" ] || return 1
	pid=$(cat "$1/$2")
	case $pid in '' | *[!0-9]*) return 1 ;; esac
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$3" ] || return 1
	running "$pid" || return 1
	tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$1/" || return 1
	echo "$pid"
}

# ports in use, any state, from the kernel's tables (no ss/netstat needed)
port_busy() { # PORT
	hex=$(printf '%04X' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }'
}

# Two adjacent free ports below the ephemeral range, starting from a place
# that depends on DIR: clusters of different builds and tests do not meet.
pick_ports() { # DIR
	seed=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
	p=$((20000 + seed % 5000 * 2))
	tries=0
	while port_busy "$p" || port_busy $((p + 1)); do
		tries=$((tries + 1))
		[ "$tries" -lt 200 ] || die "no two free ports found in 20000-29999"
		p=$((p + 2))
		[ "$p" -lt 30000 ] || p=20000
	done
	echo "$p"
}

logs_tail() { # DIR
	for f in "$1"/log/*.log "$1"/log/*.out; do
		[ -s "$f" ] || continue
		echo "--- $f (last 15 lines)" >&2
		tail -n 15 "$f" >&2
	done
}

# the pids of the descendants of PID
descendants() { # PID
	ps -e -o pid=,ppid= | awk -v root="$1" '
		{ parent[$1] = $2 }
		END { for (p in parent) { q = parent[p]
			while (q != "" && q != 0 && q != 1) { if (q == root) { print p; break } q = parent[q] } } }'
}

# slurmstepd processes of this cluster: they hold its slurmd log open. They
# outlive slurmd, so stop must find them itself.
stepds() { # DIR
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
		running "${p#/proc/}" || continue
		for f in "$p"/fd/*; do
			case $(readlink "$f" 2>/dev/null) in
			"$1"/*)
				echo "${p#/proc/}"
				break
				;;
			esac
		done
	done
}

# client commands talking to this cluster (SLURM_CONF in their environment):
# an srun whose step daemon had to be killed would wait for it forever
clients() { # CONF
	for p in /proc/[0-9]*; do
		case $(cat "$p/comm" 2>/dev/null) in srun | sbatch | salloc | sattach) ;; *) continue ;; esac
		running "${p#/proc/}" || continue
		if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "SLURM_CONF=$1"; then
			echo "${p#/proc/}"
		fi
	done
}

wait_gone() { # SECONDS PID...
	n=$(($1 * 10))
	shift
	while [ "$n" -gt 0 ]; do
		alive=
		for p in "$@"; do running "$p" && alive=1; done
		[ -z "$alive" ] && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

stop_pid() { # NAME PID: TERM, then KILL after 15 s
	kill "$2" 2>/dev/null || return 0
	wait_gone 15 "$2" && return 0
	say "$1 ($2) ignored SIGTERM; killing it"
	kill -KILL "$2" 2>/dev/null || true
	wait_gone 5 "$2" || say "$1 ($2) is still there"
}

stop() { # DIR
	dir=$(cd "$1" 2>/dev/null && pwd -P) || return 0
	conf=$dir/slurm.conf
	if [ -f "$conf" ] && live_pid "$dir" slurmctld.pid slurmctld >/dev/null; then
		jobs=$(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null || true)
		# shellcheck disable=SC2086
		[ -z "$jobs" ] || SLURM_CONF=$conf scancel $jobs 2>/dev/null || true
	fi
	pids=$(stepds "$dir")
	# shellcheck disable=SC2086
	if [ -n "$pids" ] && ! wait_gone 10 $pids; then
		for p in $(stepds "$dir"); do
			say "killing step daemon $p and its tasks"
			# shellcheck disable=SC2046
			kill -KILL $(descendants "$p") "$p" 2>/dev/null || true
		done
	fi
	for d in slurmd slurmctld; do
		pid=$(live_pid "$dir" "$d.pid" "$d") && stop_pid "$d" "$pid"
		rm -f "$dir/$d.pid"
	done
	pid=$(live_pid "$dir" munge/munged.pid munged) && stop_pid munged "$pid"
	rm -f "$dir/munge/munged.pid"
	pids=$(clients "$conf")
	if [ -n "$pids" ]; then
		say "stopping client commands of the cluster: $pids"
		# shellcheck disable=SC2086
		kill $pids 2>/dev/null || true
		# shellcheck disable=SC2086
		wait_gone 5 $pids || kill -KILL $pids 2>/dev/null || true
	fi
	return 0
}

start_failed() {
	status=$?
	[ "$status" = 0 ] && return
	logs_tail "$dir"
	stop "$dir"
	exit "$status"
}

start() { # DIR
	mkdir -p "$1"
	# physical: the step daemons' open files are matched against it
	dir=$(cd "$1" && pwd -P)
	[ "$(id -u)" = 0 ] || die "must run as root (slurmd starts jobs as their user)"
	for c in munged munge unmunge slurmctld slurmd sinfo; do
		command -v "$c" >/dev/null || die "$c not found (tests/deps-debian.sh installs it)"
	done
	so=$(cd "$top_builddir" && pwd)/spank_rl.so
	[ -f "$so" ] || die "$so not found: build it first (make spank_rl.so)"
	template=$top_srcdir/etc/slurm.conf.in
	[ -f "$template" ] || die "$template not found"
	live_pid "$dir" slurmctld.pid slurmctld >/dev/null && die "a cluster already runs in $dir"

	# munged wants every directory above its socket searchable by all
	mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
	chmod 755 "$dir" "$dir/munge"
	conf=$dir/slurm.conf
	sock=$dir/munge/munge.socket
	# from here on, a failure stops what was started
	trap start_failed EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	(umask 077 && head -c 1024 /dev/urandom >"$dir/munge/munge.key")
	chmod 400 "$dir/munge/munge.key"
	munged --socket="$sock" --key-file="$dir/munge/munge.key" \
		--pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" \
		--log-file="$dir/log/munged.log" </dev/null >"$dir/log/munged.out" 2>&1 ||
		die "munged did not start"
	munge -n -S "$sock" | unmunge -S "$sock" >/dev/null 2>&1 ||
		die "munge credentials do not round-trip through $sock"

	echo "required $so" >"$dir/plugstack.conf"
	port=$(pick_ports "$dir")
	host=$(uname -n)
	host=${host%%.*}
	sed -e "s|@DIR@|$dir|g" -e "s|@HOST@|$host|g" -e "s|@CTLD_PORT@|$port|g" \
		-e "s|@SLURMD_PORT@|$((port + 1))|g" -e "s|@CPUS@|${CLUSTER_CPUS:-8}|g" \
		"$template" >"$conf"
	if [ -n "${CLUSTER_CONF_EXTRA:-}" ]; then cat "$CLUSTER_CONF_EXTRA" >>"$conf"; fi
	SLURM_CONF=$conf
	export SLURM_CONF

	# both daemonize; their early errors (before the log file opens) go to .out
	slurmctld -c -f "$conf" </dev/null >"$dir/log/slurmctld.out" 2>&1 || die "slurmctld did not start"
	slurmd -f "$conf" -N "$host" </dev/null >"$dir/log/slurmd.out" 2>&1 || die "slurmd did not start"
	n=300
	until [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || die "the node is not idle after 30 s (sinfo: $(sinfo -h -o %T 2>&1))"
		live_pid "$dir" slurmctld.pid slurmctld >/dev/null || [ "$n" -gt 290 ] ||
			die "slurmctld died"
		live_pid "$dir" slurmd.pid slurmd >/dev/null || [ "$n" -gt 290 ] || die "slurmd died"
		sleep 0.1
	done
	trap - EXIT INT TERM
	say "cluster up in $dir (slurmctld port $port, node $host)"
	echo "export SLURM_CONF='$conf'"
}

case ${1:-}:${2:-} in
start:?*) start "$2" ;;
stop:?*) stop "$2" ;;
*)
	echo "usage: $0 start DIR | stop DIR" >&2
	exit 2
	;;
esac
