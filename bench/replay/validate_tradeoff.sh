#!/usr/bin/env bash
# Which part of validate's time buys which part of its accuracy, on gpt2-small (2 steps) at 70%:
# 1. replays: one validation with many repeats (baseline 2N-1, configuration N; --repeat N,
#    default 5), then for each count of baseline and configuration replays (the first k, in
#    the order they ran) the error and spread the verdict would have seen, the replay seconds
#    they cost, and where the adaptive rule (--repeat auto) stops;
# 2. the time scale: one validation (--repeat 3) per scale in SCALES (default: the auto scale
#    x 1/4, 1/2 and 1) with late transfers, error, spread and seconds.
# The predicted loss is the one validate compares (over the replayed window: the last step by
# default, --replay-steps; predicted on the baseline replay's clock as retimed by its median
# replay); a prefix's own median would move it slightly.
# Usage: bench/replay/validate_tradeoff.sh [MHC] [N] [SCALES...]
set -euo pipefail
mhc=${1:-build/cli/mhc}
n=${2:-5}
shift 2 || shift $# || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$mhc" generate --preset gpt2-small --steps 2 -o "$tmp/g.db" >/dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores); $(date -u +%FT%TZ)"
"$mhc" validate "$tmp/g.db" --capacity 70% --no-store --json --repeat "$n" >"$tmp/many.json"
scales=("$@")
if [ ${#scales[@]} -eq 0 ]; then
    auto=$(python3 -c "import json; print(json.load(open('$tmp/many.json'))['time_scale'])")
    scales=($(python3 -c "print(' '.join(f'{$auto * f:.3g}' for f in (0.25, 0.5, 1)))"))
fi
for s in "${scales[@]}"; do
    "$mhc" validate "$tmp/g.db" --capacity 70% --no-store --json --repeat 3 --time-scale "$s" >"$tmp/scale-$s.json"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/many.json" "$tmp"/scale-*.json <<'PY'
import json, sys

def spread(v):
    v = sorted(v)
    if len(v) < 2:
        return 0
    drop = 1 if len(v) >= 5 else 0
    return v[len(v) - 1 - drop] - v[drop]

def median(v):
    return sorted(v)[(len(v) - 1) // 2]

j = json.load(open(sys.argv[1]))
b, c = j["baseline"], j["configurations"][0]
bm_all, cm_all = b["repeats"]["makespans_ns"], c["repeats"]["makespans_ns"]
bs_all, cs_all = b["repeats"]["replay_seconds"], c["repeats"]["replay_seconds"]
loss_p, target = c["predicted"]["loss"], j["target_pp"]
print(f"\n1. replays (time scale x{j['time_scale']:.3g}; load {j['load']})")
print(f"baseline makespans (ms): {[round(x / 1e6, 2) for x in bm_all]}")
print(f"70% makespans (ms): {[round(x / 1e6, 2) for x in cm_all]}")
print("| baseline replays | 70% replays | replay seconds | error | spread | verdict's bound |")
print("| --- | --- | --- | --- | --- | --- |")
for k in range(1, len(bm_all) + 1):
    for m in range(1, len(cm_all) + 1):
        if k not in (1, 3, 5, len(bm_all)) or m not in (1, 2, 3, len(cm_all)):
            continue
        bmed, cmed = median(bm_all[:k]), median(cm_all[:m])
        loss = cmed / bmed - 1
        sp = 100 * spread(cm_all[:m]) / bmed + 100 * (1 + loss) * spread(bm_all[:k]) / bmed
        secs = sum(bs_all[:k]) + sum(cs_all[:m])
        ok = "validated" if abs(100 * (loss - loss_p)) <= target and sp <= target and m > 1 else "-"
        print(f"| {k} | {m} | {secs:.1f} s | {100 * (loss - loss_p):+.2f} pp | {sp:.2f} pp | {ok} |")
# Where --repeat auto would have stopped (replay/src/validate_configuration.cpp: agreed, repeats_agree).
worst = max(loss_p, 0)
k = len(bm_all)
for i in range(3, len(bm_all) + 1):
    if 100 * (1 + worst) * spread(bm_all[:i]) / median(bm_all[:i]) <= 0.25 * target:
        k = i
        break
k = min(k, 5)
bmed = median(bm_all[:k])
carried = 100 * (1 + worst) * spread(bm_all[:k]) / bmed
m = min(3, len(cm_all))
for i in range(2, min(3, len(cm_all)) + 1):
    if 100 * spread(cm_all[:i]) / bmed + carried <= 0.5 * target:
        m = i
        break
print(f"--repeat auto would stop at {k} baseline and {m} limited replays "
      f"({sum(bs_all[:k]) + sum(cs_all[:m]):.1f} s of replays; --repeat 3: {sum(bs_all[:5]) + sum(cs_all[:3]):.1f} s)")
print("\n2. time scale (--repeat 3)")
print("| time scale | late transfers | late | error | spread | replay seconds (all) | verdict |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for path in sys.argv[2:]:
    s = json.load(open(path))
    r = s["configurations"][0]
    secs = sum(s["baseline"]["repeats"]["replay_seconds"]) + sum(r["repeats"]["replay_seconds"])
    me = r["measured"]
    print(f"| x{s['time_scale']:.3g} | {me['late_transfers']} | {me['late_ns'] / 1e6:.2f} ms | {r['loss_error_pp']:+.2f} pp "
          f"| {r['repeats']['spread_pp']:.2f} pp | {secs:.1f} s | {r['verdict'].split(':')[0]} |")
PY
