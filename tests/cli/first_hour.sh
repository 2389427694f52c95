#!/usr/bin/env bash
# A newcomer's first hour with `mhc` (docs/cli.md): capacities need a unit, simulate needs a
# capacity, one allocator default shown in --help, an OOM headline said once, warnings about
# what a trace lacks (screen and --json), sweep summaries that say what they mean, info's run
# figures, and the small messages (unknown command, missing file).
# Usage: first_hour.sh MHC PUBLIC_DATASETS
set -uo pipefail
mhc=$1
pub=$2
. "$(dirname "$0")/preamble.sh"
# run STATUS CMD...: runs mhc, stdout in $tmp/out, stderr in $tmp/err, checks the status
run() {
    local want=$1; shift
    "$mhc" "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    [[ $got == "$want" ]] || fail "mhc $* exited $got, wanted $want: $(head -c 600 "$tmp/err") $(head -c 600 "$tmp/out")"
}
has() { grep -q -- "$1" "$2" || fail "${3:-$2} lacks '$1': $(head -c 1500 "$2")"; }
hasnt() { if grep -q -- "$1" "$2"; then fail "${3:-$2} has '$1': $(head -c 1500 "$2")"; fi; }

t=$tmp/small.db
run 0 generate --preset gpt2-small --layers 2 --steps 2 -o "$t"

# ---- 4: a capacity needs a unit, and at most 100% ----
for cmd in "simulate $t --capacity 70" "sweep $t --capacities 90%,70 --no-store" "validate $t --capacity 70 --no-store"; do
    # shellcheck disable=SC2086
    run 2 $cmd
    has "^mhc: --capacit[a-z]*: '70': a capacity needs a unit: 70% of the peak, 70GiB or 70GB (mhc help sizes)$" "$tmp/err" "$cmd"
    [[ $(wc -l <"$tmp/err") == 1 ]] || fail "$cmd: more than one line on stderr"
done
run 2 simulate "$t" --capacity 150%
has "more than 100%" "$tmp/err"
run 2 sweep "$t" --capacities 150% --no-store
has "more than 100%" "$tmp/err"
[[ $(sqlite3 "$t" "SELECT count(*) FROM runs") == 0 ]] || fail "a refused capacity stored a run"

# ---- 5: simulate requires --capacity; every default shown in --help, one allocator ----
run 2 simulate "$t"
has "--capacity is required" "$tmp/err"
[[ $(sqlite3 "$t" "SELECT count(*) FROM runs") == 0 ]] || fail "simulate without --capacity stored a run"
# Help is wrapped: its text is searched with the line breaks taken out.
flat() { tr '\n' ' ' <"$tmp/out" | tr -s ' ' >"$tmp/flat"; mv "$tmp/flat" "$tmp/out"; }
run 0 simulate --help
flat
for d in "default: lru]" "default: none]" "default: pcie4]" "default: caching]" "[required]" "default: auto]"; do
    has "$d" "$tmp/out" "simulate --help"
done
run 0 sweep --help
flat
for d in "default: lru,largest,belady,dtr,cost_aware]" "default: 90%,70%,50%]" "default: pcie4]" "default: 3%]" \
         "default: caching]" "default: 8]"; do
    has "$d" "$tmp/out" "sweep --help"
done
run 0 validate --help
flat
for d in "default: 60%]" "default: caching]" "default: host]"; do has "$d" "$tmp/out" "validate --help"; done
run 0 simulate "$t" --capacity 80% --no-store --json
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['config']['allocator']=='caching', j['config']" "$tmp/out" \
    || fail "simulate's default allocator is not caching"

# ---- 6: an OOM's headline is the OOM, said once, without a peak reduction ----
run 3 simulate "$t" --capacity 2MiB --no-store
cat "$tmp/out" "$tmp/err" >"$tmp/all"
[[ $(grep -ci "out of memory" "$tmp/all") == 1 ]] || fail "the OOM is not said exactly once: $(cat "$tmp/all")"
[[ $(sed -n 2p "$tmp/out") == "OUT OF MEMORY"* ]] || fail "the OOM is not the headline: $(head -3 "$tmp/out")"
hasnt "reduction [0-9]" "$tmp/out" "OOM run"
hasnt "throughput loss [0-9]" "$tmp/out" "OOM run"
has "of simulated time (the recorded trace lasts" "$tmp/out" "OOM run"
run 3 simulate "$t" --capacity 2MiB --no-store --json
python3 - "$tmp/out" <<'PY' || fail "OOM --json: $(head -c 800 "$tmp/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["oom"]["bytes_short"] > 0, j["oom"]
assert j["metrics"]["peak_reduction"] is None and j["metrics"]["throughput_loss"] is None, j["metrics"]
PY
[[ $(wc -l <"$tmp/err") == 1 ]] || fail "OOM --json: want one line on stderr"

# ---- 7: warnings for what a trace lacks; no allocations refused ----
# A memory snapshot: allocations, no kernels.
run 0 import "$pub/torch-snapshot/mosaic-synthetic.pickle" -o "$tmp/snap.db"
run 0 simulate "$tmp/snap.db" --capacity 90% --no-store
has "warning .*no kernels" "$tmp/out" "simulate of a snapshot"
has "swap-outs" "$tmp/out" "simulate of a snapshot"
run 0 simulate "$tmp/snap.db" --capacity 90% --no-store --json
python3 -c "import json,sys; w=json.load(open(sys.argv[1]))['warnings']; assert any('no kernels' in x for x in w), w" "$tmp/out" \
    || fail "--json lacks the no-kernels warning"
run 0 sweep "$tmp/snap.db" --policies lru --capacities 90% --no-store --no-bisect
has "warning: .*no kernels" "$tmp/out" "sweep of a snapshot"
# Nsight Systems: kernels and allocations, no accesses.
run 0 import "$pub/nsys/con_kernel.sqlite" -o "$tmp/nsys.db"
run 0 simulate "$tmp/nsys.db" --capacity 100% --device 0 --no-store --json
python3 -c "import json,sys; w=json.load(open(sys.argv[1]))['warnings']; assert any('no accesses' in x for x in w), w" "$tmp/out" \
    || fail "--json lacks the no-accesses warning"
# A timeline without allocations: nothing to simulate.
run 0 import "$pub/kineto/simple_add_trace.json.gz" -o "$tmp/kineto.db"
run 2 simulate "$tmp/kineto.db" --capacity 90%
has "no allocations" "$tmp/err"
[[ $(wc -l <"$tmp/err") == 1 ]] || fail "no allocations: want one line"
run 2 sweep "$tmp/kineto.db" --no-store
has "no allocations" "$tmp/err"
run 2 validate "$tmp/kineto.db" --no-store
has "no allocations" "$tmp/err"
run 0 info "$tmp/kineto.db"
hasnt "peak .* at -" "$tmp/out" "info without allocations"
hasnt "peak        0 B" "$tmp/out" "info without allocations"
has "peak        none" "$tmp/out" "info without allocations"
run 0 info "$tmp/kineto.db" --json
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['peak'] is None" "$tmp/out" || fail "info --json: peak of no allocations"

# ---- 9: the sweep's summary says what it means ----
run 0 sweep "$t" --policies lru,belady --prefetchers none,lookahead:8 --capacities 90%,50% --budget 0% --bisect-steps 1
has "no saving within the 0% budget" "$tmp/out" "sweep summary"
hasnt "reduction   0.0%" "$tmp/out" "sweep summary"
has "belady  *none \*" "$tmp/out" "oracle mark on belady"
has "lru  *lookahead:8 \*" "$tmp/out" "oracle mark on lookahead"
has "^\* oracle" "$tmp/out" "oracle legend"
grep "^lru  *none  " "$tmp/out" | grep -q "\*" && fail "lru+none marked as an oracle"
grid=$(grep -oE "s: [0-9]+ grid runs" "$tmp/out" | grep -oE "[0-9]+")
[[ $grid == 8 ]] || fail "grid runs: $grid, want 8: $(cat "$tmp/out")"
stored=$(grep -oE "stored [0-9]+ runs" "$tmp/out" | grep -oE "[0-9]+")
answers=$(grep -oE "and [0-9]+ bisection answers with a saving" "$tmp/out" | grep -oE "[0-9]+")
[[ $answers == 0 ]] || fail "answers without a saving were stored: $(cat "$tmp/out")"
[[ $stored == $((grid + answers)) ]] || fail "stored $stored runs, said $grid grid runs + $answers answers"
[[ $(sqlite3 "$t" "SELECT count(*) FROM runs") == "$stored" ]] || fail "the file holds $(sqlite3 "$t" "SELECT count(*) FROM runs") runs, said $stored"
sims=$(grep -oE "^[0-9]+ simulations" "$tmp/out" | grep -oE "[0-9]+")
[[ $sims == $((8 + 4 * 2)) ]] || fail "simulations: $sims, want 8 grid + 4 combos x 2 probes"
# info lists each run with its figures.
run 0 info "$t"
grep -E "^ +[0-9]+ +simulated +complete +[0-9.]+ [KMG]?i?B +[0-9.]+% +[0-9.]+% " "$tmp/out" >/dev/null \
    || fail "info does not show the runs' figures: $(sed -n '/^runs/,$p' "$tmp/out")"
run 3 simulate "$t" --capacity 2MiB
run 0 info "$t"
grep -E "^ +[0-9]+ +simulated +oom +- +- +OOM" "$tmp/out" >/dev/null && grep -q "(out of memory, short by" "$tmp/out" \
    || fail "info does not show the OOM run"

# ---- 11: unknown command, missing file ----
run 2 nosuchcmd
has "'nosuchcmd' is not a command" "$tmp/err"
has "simulate" "$tmp/err"
run 2 simulate "$tmp/missing.json" --capacity 50%
has "^mhc: $tmp/missing.json: no such file$" "$tmp/err"
run 2 info "$tmp/missing.db"
has "^mhc: $tmp/missing.db" "$tmp/err"
echo ok
