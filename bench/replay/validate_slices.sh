#!/usr/bin/env bash
# The figures of docs/results.md "Validate defaults and speed": `mhc validate` with its defaults on the llama2-7b and
# mhc-27b slices (--layers 4, 2 steps) at 20-50% peak reduction, on this machine as it is now.
# Prints the commands, the self-calibrated link, the time scale, the load and one markdown row
# per configuration (docs/results.md and docs/validation.md quote its output with its date).
# The figures are timed on a shared host: run it on an idle machine; the output says the load.
# Usage: bench/replay/validate_slices.sh [MHC] [extra validate options...]
set -euo pipefail
mhc=${1:-build/cli/mhc}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { echo "\$ $*" >&2; "$@"; }
run "$mhc" generate --preset mhc-27b --layers 4 --seq 512 --dp 1 --steps 2 -o "$tmp/mhc.db" >/dev/null
run "$mhc" generate --preset llama2-7b --layers 4 --steps 2 --seq 2048 -o "$tmp/llama.db" >/dev/null
for slice in mhc:80%,70%,60% llama:80%,70%,60%,50%; do
    name=${slice%%:*}
    caps=${slice#*:}
    echo "load average before $name: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
    t0=$(date +%s.%N)
    run "$mhc" validate "$tmp/$name.db" --capacity "$caps" --no-store --json "$@" >"$tmp/$name.json" || true
    t1=$(date +%s.%N)
    echo "wall $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"
done
python3 - "$tmp/mhc.json" "$tmp/llama.json" <<'PY'
import json, sys
for path, slice_ in zip(sys.argv[1:], ("mhc-27b", "llama2-7b")):
    j = json.load(open(path))
    print(f"\n{slice_}: link {j['link']['name']} ({j['link']['obtained']})")
    print(f"  source: {j['link']['source']}")
    print(f"  time scale x{j['time_scale']:.3g}; paced {j['paced']}; load {j['load']}")
    print(f"  baseline replays {len(j['baseline']['repeats']['makespans_ns'])}; repeat {j['repeat']}"
          f"{' (adaptive: at most)' if j.get('repeat_adaptive') else ''}")
    if j.get("phases"):
        print("  phases (wall, CPU): " + "; ".join(f"{p['phase']} {p['seconds']:.1f} s ({p['cpu_seconds']:.1f} s)" for p in j["phases"]))
print("\n| slice | capacity | reduction | peak pred / meas | loss pred / meas | error | spread | replays | late transfers | verdict |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for path, slice_ in zip(sys.argv[1:], ("mhc-27b", "llama2-7b")):
    j = json.load(open(path))
    for c in j["configurations"]:
        p, m = c["predicted"], c["measured"]
        cap = c["name"].split("@")[1].split("/")[0]
        verdict = c["verdict"].split(":")[0]
        spread = c["repeats"]["spread_pp"]
        err = c["loss_error_pp"]
        print(f"| {slice_} | {cap} | {100 * p['peak_reduction']:.1f}% | {p['peak_bytes'] / 2**30:.2f} / {m['peak_bytes'] / 2**30:.2f} GiB "
              f"| {100 * p['loss']:.2f}% / {100 * m['loss']:.2f}% | {err:+.2f} pp | {spread:.2f} pp | {len(c['repeats']['makespans_ns'])} "
              f"| {m['late_transfers']} ({m['late_ns'] / 1e6:.2f} ms) | {verdict} |")
PY
