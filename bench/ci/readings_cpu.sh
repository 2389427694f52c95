#!/usr/bin/env bash
# CPU of a second reading's entry, two versions of tests/sim one after the other under the same
# load: user + system seconds of the whole entry (the reading and every process it starts) and of
# the `mhc` runs alone (through a wrapper that times each), the rest being the Python reading's.
# Usage: bench/ci/readings_cpu.sh OLD_SIM_DIR NEW_SIM_DIR MHC WORKDIR SCRIPT [ARGS...]
#   SCRIPT: the entry's script name in tests/sim (e.g. reference_search_compare.py); ARGS: the
#   entry's arguments after MHC and its work folder. WORKDIR gets a copy per version (old/, new/),
#   made from WORKDIR/seed when that exists (cached captures).
# e.g. git archive HEAD~3 tests/sim | tar -x -C /tmp/old
#      bench/ci/readings_cpu.sh /tmp/old/tests/sim tests/sim build/cli/mhc /tmp/w reference_compare.py --quick --sample=2
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: $0 OLD_SIM_DIR NEW_SIM_DIR MHC WORKDIR SCRIPT [ARGS...]" >&2; exit 2; }
old=$1 new=$2 mhc=$(realpath "$3") work=$4 script=$5
shift 5
wrapper="$work/mhc-timed"
mkdir -p "$work"
cat >"$wrapper" <<EOW
#!/bin/sh
exec /usr/bin/time -a -o "\$MHC_CPU_LOG" -f "%U %S" "$mhc" "\$@"
EOW
chmod +x "$wrapper"
echo "version exit wall_s user_s sys_s mhc_runs mhc_user_s mhc_sys_s reading_cpu_s"
for v in old new; do
  dir=$old; [ "$v" = new ] && dir=$new
  rm -rf "${work:?}/$v"
  if [ -d "$work/seed" ]; then cp -r "$work/seed" "$work/$v"; else mkdir -p "$work/$v"; fi
  log="$work/$v.mhc-cpu"; : >"$log"
  rc=0
  MHC_CPU_LOG=$log /usr/bin/time -o "$work/$v.time" -f "%e %U %S" python3 "$dir/$script" "$wrapper" "$work/$v" "$@" \
    >"$work/$v.out" 2>&1 || rc=$?
  read -r wall user sys <"$work/$v.time"
  read -r n mu ms < <(awk '{n++; u += $1; s += $2} END {printf "%d %.2f %.2f\n", n, u, s}' "$log")
  echo "$v $rc $wall $user $sys $n $mu $ms $(awk -v a="$user" -v b="$sys" -v c="$mu" -v d="$ms" 'BEGIN {printf "%.2f", a + b - c - d}')"
done
