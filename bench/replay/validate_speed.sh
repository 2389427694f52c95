#!/usr/bin/env bash
# Wall time of `mhc validate` on gpt2-small (2 steps) at 70% (target: under 20 s on the
# 2-core host; it took 83 s, 45 s of them mapping pages). Prints the wall time, the time spent
# allocating the page pool, mapping pages and replaying, and the load average around the run.
# Usage: bench/replay/validate_speed.sh [MHC] [extra validate options...]
# Results: docs/results.md ("validate speed").
set -euo pipefail
mhc=${1:-build/cli/mhc}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$mhc" generate --preset gpt2-small --steps 2 -o "$tmp/g.db" >/dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
t0=$(date +%s.%N)
# CPU time too: on a loaded machine wall time is mostly other processes' share of the cores.
/usr/bin/time -f "cpu: user %U s, sys %S s, max RSS %M KiB" -o "$tmp/time.txt" \
    "$mhc" validate "$tmp/g.db" --capacity 70% --no-store --json "$@" >"$tmp/out.json"
cat "$tmp/time.txt"
t1=$(date +%s.%N)
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/out.json" "$t0" "$t1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
rows = [j["baseline"]] + j["configurations"]
m = sum(r["measured"]["page_map_seconds"] for r in rows)
rp = sum(r["measured"]["replay_seconds"] for r in rows)
print(f"wall {wall:.1f} s; shared pool and host arena {j['pool_seconds']:.1f} s; replays (last of each configuration) {rp:.1f} s, of which page mapping {m:.2f} s; "
      f"time scale x{j['time_scale']:.3g}; repeat {j['repeat']}; link {j['link']['obtained']}")
for r in j["configurations"]:
    print(f"  {r['name']}: {r['verdict']}")
PY
