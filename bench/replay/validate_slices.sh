#!/usr/bin/env bash
# The figures of docs/results.md "Validate defaults and speed": `mhc validate` with its defaults on the llama2-7b and
# mhc-27b slices (--layers 4, 2 steps) at 20-50% peak reduction, on this machine as it is now.
# Each slice is validated once per --replay-steps value in STEPS (default "1 all": the last
# step, the default, and every step), so that the window's verdicts and errors stand beside the
# whole trace's from the same machine and hour. Prints the commands, the self-calibrated link,
# the time scale, the load, the wall time of each validation and one markdown row per
# configuration and steps value, then the two side by side (docs/results.md and
# docs/validation.md quote its output with its date).
# The figures are timed on a shared host: run it on an idle machine; the output says the load.
# Usage: [STEPS="1 all"] bench/replay/validate_slices.sh [MHC] [extra validate options...]
set -euo pipefail
mhc=${1:-build/cli/mhc}
shift || true
read -r -a steps_list <<<"${STEPS:-1 all}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { echo "\$ $*" >&2; "$@"; }
run "$mhc" generate --preset mhc-27b --layers 4 --seq 512 --dp 1 --steps 2 -o "$tmp/mhc.db" >/dev/null
run "$mhc" generate --preset llama2-7b --layers 4 --steps 2 --seq 2048 -o "$tmp/llama.db" >/dev/null
for steps in "${steps_list[@]}"; do
    for slice in mhc:80%,70%,60% llama:80%,70%,60%,50%; do
        name=${slice%%:*}
        caps=${slice#*:}
        echo "load average before $name, --replay-steps $steps: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores); $(date -u +%FT%TZ)"
        t0=$(date +%s.%N)
        run "$mhc" validate "$tmp/$name.db" --capacity "$caps" --no-store --json --replay-steps "$steps" "$@" \
            >"$tmp/$name-$steps.json" || true
        t1=$(date +%s.%N)
        echo "wall $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"
    done
done
python3 - "$tmp" "${steps_list[@]}" <<'PY'
import json, sys
tmp, steps_list = sys.argv[1], sys.argv[2:]
slices = (("mhc", "mhc-27b"), ("llama", "llama2-7b"))
rows = {}
for steps in steps_list:
    for name, slice_ in slices:
        j = json.load(open(f"{tmp}/{name}-{steps}.json"))
        print(f"\n{slice_}, --replay-steps {steps}: link {j['link']['name']} ({j['link']['obtained']})")
        print(f"  source: {j['link']['source']}")
        print(f"  time scale x{j['time_scale']:.3g}; paced {j['paced']}; load {j['load']}")
        print(f"  replayed and measured: {j.get('window', {}).get('origin', 'all steps')}")
        print(f"  baseline replays {len(j['baseline']['repeats']['makespans_ns'])}; repeat {j['repeat']}"
              f"{' (adaptive: at most)' if j.get('repeat_adaptive') else ''}")
        if j.get("phases"):
            print("  phases (wall, CPU): " + "; ".join(f"{p['phase']} {p['seconds']:.1f} s ({p['cpu_seconds']:.1f} s)" for p in j["phases"]))
        for c in j["configurations"]:
            rows[(slice_, c["name"].split("@")[1].split("/")[0], steps)] = c
print("\n| slice | capacity | steps | reduction | peak pred / meas | loss pred / meas | error | spread | replays | late transfers | bytes, checksums | verdict |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (slice_, cap, steps), c in rows.items():
    p, m = c["predicted"], c["measured"]
    same = p["peak_bytes"] == m["peak_bytes"] and p["swap_out_bytes"] == m["swap_out_bytes"] and p["swap_in_bytes"] == m["swap_in_bytes"]
    checks = f"{'equal' if same else 'DIFFER'}, {m['checksum_mismatches']} mismatches"
    spread = c["repeats"]["spread_pp"]
    err = c["loss_error_pp"]
    print(f"| {slice_} | {cap} | {steps} | {100 * p['peak_reduction']:.1f}% | {p['peak_bytes'] / 2**30:.2f} / {m['peak_bytes'] / 2**30:.2f} GiB "
          f"| {100 * p['loss']:.2f}% / {100 * m['loss']:.2f}% | {err:+.2f} pp | {spread:.2f} pp | {len(c['repeats']['makespans_ns'])} "
          f"| {m['late_transfers']} ({m['late_ns'] / 1e6:.2f} ms) | {checks} | {c['verdict'].split(':')[0]} |")
if len(steps_list) > 1:
    first, *others = steps_list
    print(f"\nverdicts side by side (--replay-steps {' / '.join(steps_list)}):")
    for (slice_, cap, steps), c in rows.items():
        if steps != first:
            continue
        line = [f"{rows[(slice_, cap, s)]['verdict'].split(':')[0]} ({rows[(slice_, cap, s)]['loss_error_pp']:+.2f} pp)" for s in steps_list]
        agree = len({rows[(slice_, cap, s)]['verdict'].split(':')[0] for s in steps_list}) == 1
        print(f"  {slice_} {cap}: {' / '.join(line)}{'' if agree else '  <- the verdicts differ'}")
PY
