#!/bin/sh
# The plugin is loaded into slurmstepd, which links hwloc and libslurm
# itself: only Slurm's entry points may be exported, and no second libslurm
# may be pulled in.
. "$(dirname "$0")/lib.sh"
so=$top_builddir/spank_rl.so
[ -f "$so" ] || { not_ok "spank_rl.so not built"; finish; exit 1; }
nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^$' > "$WORK/syms"
extra=$(grep -vE '^(slurm_spank_[a-z_]+|plugin_name|plugin_type|plugin_version)$' "$WORK/syms" || true)
if [ -z "$extra" ]; then ok "exports only Slurm's symbols ($(tr '\n' ' ' < "$WORK/syms"))"; else
	not_ok "unexpected exported symbols: $extra"
fi
for s in slurm_spank_init slurm_spank_local_user_init plugin_name plugin_type plugin_version; do
	grep -qx "$s" "$WORK/syms" && ok "exports $s" || not_ok "does not export $s"
done
if readelf -d "$so" | grep -q 'NEEDED.*libslurm'; then not_ok "links libslurm"; else ok "does not link libslurm"; fi
if readelf -d "$so" | grep -q 'NEEDED.*libyaml'; then ok "links libyaml for the config check"; else not_ok "libyaml not linked"; fi
finish
