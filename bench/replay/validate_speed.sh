#!/usr/bin/env bash
# Wall time of `mhc validate` on gpt2-small (2 steps) at 70% (target: under 20 s on the
# 2-core host with the accuracy of the defaults). Prints the wall and CPU time, where the
# time went (validate's phases, wall and CPU: calibration, page pool and host arena, the
# baseline's and the limited configuration's replays; each replay's seconds and page mapping),
# the replays' makespans, the error, the byte checks and the verdict, and the load around it.
# Usage: bench/replay/validate_speed.sh [MHC] [extra validate options...]
#   ... build/cli/mhc                           the default: every step replayed and measured
#   ... build/cli/mhc --replay-steps 1          the last step only (the steps before run at once)
#   ... build/cli/mhc --repeat 3                the fixed repeats (baseline 5, configuration 3)
#   MHC_BASE=COMMIT ... build/cli/mhc [options]  also builds COMMIT (bench/base_build.sh) and
#       runs it right after this tree with the same options, each figure beside the other's;
#       with --link auto both read the link cached by this tree's run unless the load moved
#       in between (pass --link FILE to be sure).
# Results: docs/results.md ("Validate defaults and speed").
set -euo pipefail
mhc=${1:-build/cli/mhc}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bins=("$mhc")
if [ -n "${MHC_BASE:-}" ]; then
    # shellcheck source=../base_build.sh
    source "$(dirname "$0")/../base_build.sh"
    build_base_and_this "$MHC_BASE" "" mhc
    bins+=("$wt/build/cli/mhc")
fi
"$mhc" generate --preset gpt2-small --steps 2 -o "$tmp/g.db" >/dev/null
i=0
for bin in "${bins[@]}"; do
    echo "== $bin"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
    t0=$(date +%s.%N)
    # CPU time too: on a loaded machine wall time is mostly other processes' share of the cores.
    /usr/bin/time -f "cpu: user %U s, sys %S s, max RSS %M KiB" -o "$tmp/time.txt" \
        "$bin" validate "$tmp/g.db" --capacity 70% --no-store --json "$@" >"$tmp/out$i.json" || true
    t1=$(date +%s.%N)
    cat "$tmp/time.txt"
    echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
    python3 - "$tmp/out$i.json" "$t0" "$t1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
phases = j.get("phases", [])
accounted = sum(p["seconds"] for p in phases)
print(f"wall {wall:.1f} s; time scale x{j['time_scale']:.3g}; repeat {j['repeat']}"
      f"{' (adaptive: at most)' if j.get('repeat_adaptive') else ''}; link {j['link']['obtained']}")
if phases:
    print("phases (wall, CPU of all threads): " + "; ".join(f"{p['phase']} {p['seconds']:.2f} s (CPU {p['cpu_seconds']:.2f} s)" for p in phases) +
          f"; outside validate (start, exit; trace generation excluded) {wall - accounted:.2f} s")
else:
    print(f"shared pool and host arena {j['pool_seconds']:.1f} s (no phases in this build)")
print(f"load: {j['load']}")
if "window" in j:
    print(f"replayed and measured: {j['window']['origin']}")
for r in [j["baseline"]] + j["configurations"]:
    rep = r["repeats"]
    m = r["measured"]
    line = f"  {r['name']}: {len(rep['makespans_ns'])} replays, makespans " + ", ".join(f"{x / 1e6:.1f}" for x in rep["makespans_ns"]) + " ms"
    if "replay_seconds" in rep:
        line += "; seconds " + ", ".join(f"{x:.2f}" for x in rep["replay_seconds"])
        line += "; page mapping " + ", ".join(f"{x:.2f}" for x in rep["page_map_seconds"])
    else:
        line += f"; the median's seconds {m['replay_seconds']:.2f}, page mapping {m['page_map_seconds']:.2f}"
    if "host_arena_high_water_bytes" in m and m["swap_out_bytes"]:
        line += f"; host arena {m['host_arena_high_water_bytes'] / 1e9:.2f} of {m['host_arena_bytes'] / 1e9:.2f} GB used"
    print(line + f"; late transfers {m['late_transfers']} ({m['late_ns'] / 1e6:.2f} ms)")
for r in j["configurations"]:
    e = r["loss_error_pp"]
    if r.get("window"):
        w = r["window"]
        print(f"  window: predicted from {w['predicted_start_ns'] / 1e6:.2f} ms (shift {w['shift_ns'] / 1e6:.2f} ms, "
              f"{w['transfers_in_flight']} transfers in flight); the whole run: makespan {w['whole_run_makespan_ns'] / 1e6:.1f} ms, "
              f"loss {100 * w['whole_run_loss']:.2f}%")
    print(f"  {r['name']}: loss predicted {100 * r['predicted']['loss']:.2f}% measured {100 * r['measured']['loss']:.2f}%, "
          f"error {e:+.2f} pp, spread {r['repeats']['spread_pp']:.2f} pp; peak {r['predicted']['peak_bytes']} / "
          f"{r['measured']['peak_bytes']} B, swap-out {r['predicted']['swap_out_bytes']} / {r['measured']['swap_out_bytes']} B, "
          f"checksum mismatches {r['measured']['checksum_mismatches']}")
    print(f"  verdict: {r['verdict']}")
PY
    i=$((i + 1))
done
