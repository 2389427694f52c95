#!/usr/bin/env bash
# Findings of the outside passes of 2026-12-05, each held here:
# 1. simulate --no-events: its help says what a run keeps (metrics and the memory timeline, not
#    the events or kernel times; it said "no timeline") and a stored run keeps just that.
# 2. info: an OOM run whose name is too long for its line keeps "short by N" whole (the line was
#    cut through the figure at 100 columns: "short by 70....") and the name is cut instead.
# 3. A trace whose events are all at one instant (t = 0): a loss over a zero baseline is not
#    defined; simulate says so (no "throughput loss 0.00%"), --json has null, sweep prints "-",
#    never bisects to an answer "within budget", info lists the runs without a loss, and --ranks
#    refuses it (ranks are coupled by time; each rank's loss printed "nan%").
# Usage: outside_pass5_test.sh MHC
set -uo pipefail
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate

# 1. --no-events
"$mhc" simulate --help >help || fail "simulate --help"
line=$(grep -A1 -- "--no-events" help | tr -s ' \n' ' ')
[[ $line == *"memory timeline"* && $line == *"not the events or kernel times"* ]] \
    || fail "--no-events help does not say what is stored: $line"
cp t.db n.db
"$mhc" simulate n.db --capacity 80% --no-events >/dev/null || fail "simulate --no-events"
memory=$(sqlite3 n.db "SELECT COUNT(*) FROM run_memory")
events=$(sqlite3 n.db "SELECT COUNT(*) FROM run_events")
kernels=$(sqlite3 n.db "SELECT COUNT(*) FROM run_kernels")
[[ $memory -gt 0 && $events == 0 && $kernels == 0 ]] \
    || fail "--no-events stored $memory memory samples, $events events, $kernels kernel times"

# 2. A long OOM run name in info: the figure whole, the name cut.
cp t.db o.db
conf="expandable_segments:True,garbage_collection_threshold:0.8,max_split_size_mb:200,roundup_power2_divisions:4"
"$mhc" simulate o.db --capacity 1MiB --allocator caching --allocator-conf "$conf" >/dev/null; rc=$?
[[ $rc == 3 ]] || fail "simulate at 1 MiB exited $rc, wanted 3 (OOM)"
"$mhc" info o.db >info || fail info
awk 'length($0) > 100 {print; bad = 1} END {exit bad}' info || fail "info: lines past 100 columns"
grep -qE '^      lru\+none@1\.00 MiB/pcie4/caching\[expandable_segments:[^ ]*\.\.\. \(out of memory, short by [0-9.]+ [KMG]iB\)$' info \
    || fail "info's long OOM run: $(sed -n '/^runs/,$p' info)"

# 3. Every event at t = 0.
sqlite3 t.db "UPDATE kernels SET t_start = 0, t_end = 0; UPDATE markers SET t_start = 0, t_end = 0;
              UPDATE copies SET t_start = 0, t_end = 0;
              UPDATE allocations SET t_alloc = 0, t_free = CASE WHEN t_free IS NULL THEN NULL ELSE 0 END" \
    || fail "sqlite3"
"$mhc" check t.db >/dev/null || fail "the zero-time trace does not pass check"
"$mhc" simulate t.db --capacity 99% --no-store >sim || fail "simulate 99%: $(cat sim)"
grep -q "^warning  *every recorded event of device 0 is at one instant: .*not defined" sim \
    || fail "simulate: no warning of the zero duration: $(cat sim)"
grep -q "^makespan       recorded 0 ns -> simulated .* (throughput loss not defined: see the warning)$" sim \
    || fail "simulate's makespan line: $(grep makespan sim)"
grep -q "loss 0.00%" sim && fail "simulate reports a loss over a zero baseline: $(cat sim)"
"$mhc" simulate t.db --capacity 99% --no-store --json >json || fail "simulate --json"
python3 -c "
import json, sys
m = json.load(open('json'))['metrics']
assert m['throughput_loss'] is None, m['throughput_loss']
assert m['baseline_makespan_ns'] == 0 and m['simulated_makespan_ns'] > 0, m" || fail "--json's loss is not null"
# A sweep with its default loss budget: no bisection, no answer, each run's loss "-".
"$mhc" sweep t.db --capacities 99%,100% --policies lru --prefetchers none >sweep || fail "sweep: $(cat sweep)"
grep -q "within" sweep && fail "sweep speaks of a budget: $(cat sweep)"
grep -q "bisection probe" sweep && fail "sweep bisected: $(cat sweep)"
[[ $(grep -cE '^lru +none +(99|100)% +[0-9.]+ MiB +[0-9.]+% +- ' sweep) == 2 ]] \
    || fail "sweep's rows lack '-' for the loss: $(cat sweep)"
grep -q "^2 simulations in .*: 2 grid runs$" sweep || fail "sweep ran more than its grid: $(cat sweep)"
[[ $(sqlite3 t.db "SELECT COUNT(*) FROM run_metrics WHERE key = 'throughput_loss'") == 0 ]] \
    || fail "a loss over a zero baseline was stored"
"$mhc" info t.db >info || fail "info"
[[ $(grep -cE '^ +[0-9]+ simulated +complete +[0-9.]+ MiB +[0-9.]+% +- +lru\+none@' info) == 2 ]] \
    || fail "info lists a loss for the zero-time runs: $(sed -n '/^runs/,$p' info)"
# --ranks couples ranks by time: a trace without duration is refused, as an order-only one is.
refused "t.db: every recorded event of device 0 is at one instant" simulate --ranks t.db --capacity 99% --no-store
echo ok
