#!/usr/bin/env bash
# Issue 13, defect 3: 8 `mhc simulate` and 2 `mhc sweep` at once on one trace store every run
# under distinct ids, while `info` and `check` run in a loop and are never refused.
set -u
mhc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
t=$tmp/t.db
"$mhc" generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o "$t" >/dev/null || fail "generate"
pids=()
for i in 1 2 3 4 5 6 7 8; do
    "$mhc" simulate "$t" --capacity $((50 + 5 * i))% >"$tmp/sim.$i" 2>&1 &
    pids+=($!)
done
for i in 1 2; do
    "$mhc" sweep "$t" --policies lru,largest --capacities 70% --links pcie4 --no-bisect >"$tmp/sweep.$i" 2>&1 &
    pids+=($!)
done
reads=0
while :; do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || break
    "$mhc" info "$t" >/dev/null 2>"$tmp/rerr" || fail "info refused while writers ran: $(cat "$tmp/rerr")"
    "$mhc" check "$t" >/dev/null 2>"$tmp/rerr" || fail "check refused while writers ran: $(cat "$tmp/rerr")"
    reads=$((reads + 1))
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "writer $i exited $rc: $(cat "$tmp"/sim.* "$tmp"/sweep.* | grep mhc:)"
done
n=$("$mhc" info "$t" | grep -c "simulated")
[ "$n" = 12 ] || fail "$n runs stored, wanted 12 (8 simulate + 2 sweeps of 2)"
ids=$("$mhc" info "$t" | awk '/simulated/ {print $1}' | sort -u | wc -l)
[ "$ids" = 12 ] || fail "run ids collide: $ids distinct"
echo "ok ($reads reader rounds)"
