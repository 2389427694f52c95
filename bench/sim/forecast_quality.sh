#!/usr/bin/env bash
# forecast's decisions, a base commit's against this tree's, side by side: `mhc simulate` of
# `--prefetch forecast` with each side's own `mhc` (the base built in a worktree by
# bench/base_build.sh) on the generator's presets (4 steps) and on public traces imported with
# `mhc import`, at capacities 40-90% of each trace's peak, under lru, cost_aware and belady, over
# pcie4 and nvlink-c2c. Prints, per run, each side's peak, throughput loss, stall time and bytes
# moved (swap-in + swap-out), then a summary per trace and overall: the mean and the worst
# difference in loss (new - old, percentage points; negative is better) over the runs both sides
# finished, and the OOMs of each side. Deterministic: the figures do not depend on the machine.
# Usage: bench/sim/forecast_quality.sh [BASE=3551a05 (forecast with its sampled early eviction)] [OUT_DIR]
# Env: MHC_CMAKE_ARGS, MHC_JOBS (base_build.sh); MHC_BASE_MHC: the base's mhc already built (then
# nothing is built: this tree's build/cli/mhc must be current); QUALITY_CAPS, QUALITY_POLICIES,
# QUALITY_LINKS narrow the grid.
set -euo pipefail
base=${1:-3551a05}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
dir=${2:-$(mktemp -d "${TMPDIR:-/tmp}/forecast-quality.XXXXXX")}
mkdir -p "$dir"
if [ -n "${MHC_BASE_MHC:-}" ]; then
  old=$MHC_BASE_MHC
else
  build_base_and_this "$base" sim mhc
  old="$wt/build/cli/mhc"
fi
new="$root/build/cli/mhc"
compare_header "sim" "load $(load)"
echo "old: $old; new: $new; traces and runs in $dir"
caps=${QUALITY_CAPS:-40% 50% 60% 70% 80% 90%}
policies=${QUALITY_POLICIES:-lru cost_aware belady}
links=${QUALITY_LINKS:-pcie4 nvlink-c2c}

traces=()
for preset in ${QUALITY_PRESETS:-gpt2-small llama2-7b mhc-27b llama2-70b-slice}; do
  [ -f "$dir/$preset.db" ] || "$new" generate --preset "$preset" --steps 4 -o "$dir/$preset.db" --force >/dev/null
  traces+=("$preset")
done
# public traces with more than one training step (forecast acts from its second step on)
for f in torch-snapshot/stanford-cs336-training-step.pickle torch-snapshot/cs336-wedsonlin-medium-128-training.pickle.gz \
         torch-snapshot/cs336-bcrafton-benchmark.pickle.gz torch-snapshot/decomfl-memory.pickle.gz \
         kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz kineto/tracelens-h100-bert-small-uncased.json.gz \
         kineto/hta-mi250-rocm6.2-minitoy-train.json.gz; do
  name=public-$(basename "$f" | sed 's/\..*//')
  [ -f "$dir/$name.db" ] || "$new" import "tests/data/public/$f" -o "$dir/$name.db" >/dev/null 2>&1 || { echo "skip $f: import failed"; continue; }
  traces+=("$name")
done

runs="$dir/runs.tsv"
: >"$runs"
for t in "${traces[@]}"; do
  for link in $links; do
    for pol in $policies; do
      for cap in $caps; do
        for side in old new; do
          bin=$old; [ "$side" = new ] && bin=$new
          json=$("$bin" simulate "$dir/$t.db" --capacity "$cap" --policy "$pol" --prefetch forecast --link "$link" \
                   --json --no-store 2>/dev/null || true)
          printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$link" "$pol" "$cap" "$side" "$(tr -d '\n' <<<"$json")" >>"$runs"
        done
      done
    done
  done
done

python3 - "$runs" <<'EOF'
import json, sys
from collections import defaultdict
rows = defaultdict(dict)
for line in open(sys.argv[1]):
    t, link, pol, cap, side, js = line.rstrip("\n").split("\t", 5)
    try:
        m = json.loads(js)["metrics"]
    except (ValueError, KeyError):
        m = None
    rows[(t, link, pol, cap)][side] = m
def cell(m):
    if m is None: return "error"
    if m.get("throughput_loss") is None: return "OOM"
    return "%9.2f GiB %8.2f%% %9.3f s %9.1f GiB" % (m["simulated_peak_bytes"] / 2**30, 100 * m["throughput_loss"],
            m["stall_ns"] / 1e9, (m["swap_in_bytes"] + m["swap_out_bytes"]) / 2**30)
print("%-28s %-10s %-10s %4s | %-44s | %-44s | %s" % ("trace", "link", "policy", "cap",
      "old: peak, loss, stall, swapped", "new: peak, loss, stall, swapped", "loss new-old (points)"))
per = defaultdict(list); oom = defaultdict(lambda: [0, 0]); ev = defaultdict(lambda: [0, 0])
for key in sorted(rows):
    o, n = rows[key].get("old"), rows[key].get("new")
    d = ""
    if o and n and o.get("throughput_loss") is not None and n.get("throughput_loss") is not None:
        diff = 100 * (n["throughput_loss"] - o["throughput_loss"])
        per[key[0]].append((diff, key)); d = "%+8.2f" % diff
    oom[key[0]][0] += bool(o) and o.get("throughput_loss") is None
    oom[key[0]][1] += bool(n) and n.get("throughput_loss") is None
    ev[key[0]][0] += (o or {}).get("forecast_evictions", 0) or 0
    ev[key[0]][1] += (n or {}).get("forecast_evictions", 0) or 0
    print("%-28s %-10s %-10s %4s | %-44s | %-44s | %s" % (key + (cell(o), cell(n), d)))
print("\nsummary: loss new - old in points over the runs both finished (negative: new is better)")
print("%-28s %5s %9s %9s %9s %7s %7s %7s %11s %11s" % ("trace", "runs", "mean", "worst", "best", "better", "worse",
      "same", "OOM old/new", "early ev."))
alld = []
for t in sorted(set(k[0] for k in rows)):
    ds = [d for d, _ in per[t]]; alld += per[t]
    if not ds:
        print("%-28s %5d %9s %9s %9s %7s %7s %7s %5d/%-5d %s" % (t, 0, "-", "-", "-", "-", "-", "-", oom[t][0], oom[t][1], ev[t])); continue
    print("%-28s %5d %+9.2f %+9.2f %+9.2f %7d %7d %7d %5d/%-5d %d/%d" % (t, len(ds), sum(ds) / len(ds), max(ds), min(ds),
          sum(d < -0.005 for d in ds), sum(d > 0.005 for d in ds), sum(abs(d) <= 0.005 for d in ds), oom[t][0], oom[t][1],
          ev[t][0], ev[t][1]))
ds = [d for d, _ in alld]
if ds:
    print("%-28s %5d %+9.2f %+9.2f %+9.2f %7d %7d %7d" % ("all", len(ds), sum(ds) / len(ds), max(ds), min(ds),
          sum(d < -0.005 for d in ds), sum(d > 0.005 for d in ds), sum(abs(d) <= 0.005 for d in ds)))
    print("by link and policy (every trace):")
    groups = defaultdict(list)
    for d, k in alld: groups[(k[1], k[2])].append(d)
    for g in sorted(groups):
        v = groups[g]
        print("  %-10s %-10s %4d runs  mean %+7.2f  worst %+7.2f  best %+7.2f" % (g + (len(v), sum(v) / len(v), max(v), min(v))))
    print("worst runs (largest increase in loss):")
    for d, k in sorted(alld, reverse=True)[:8]: print("  %+8.2f  %s" % (d, " ".join(k)))
    print("best runs:")
    for d, k in sorted(alld)[:5]: print("  %+8.2f  %s" % (d, " ".join(k)))
EOF
