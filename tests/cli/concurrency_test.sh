#!/usr/bin/env bash
# 8 `mhc simulate` and 2 `mhc sweep` at once on one trace store every run under distinct ids,
# while `info` and `check` run in a loop and are never refused; 8 `simulate --runs-db` create one
# runs database; 4 coupled jobs (`simulate --ranks`) at once on the same rank traces, beside
# single runs, each stored whole in both ranks, and 4 into one new runs database; then 8
# `mhc validate` at once on a tiny trace (host backend) store all their runs the same way.
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
# Runs info and check on TRACE in a loop while any of the processes in pids[] is alive; every
# read must succeed. Leaves the number of rounds in $reads.
read_while_writers_run() {
    local trace=$1 what=$2 alive p
    reads=0
    while :; do
        alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 1 ] || break
        "$mhc" info "$trace" >/dev/null 2>"$tmp/rerr" || fail "info refused while $what ran: $(cat "$tmp/rerr")"
        "$mhc" check "$trace" >/dev/null 2>"$tmp/rerr" || fail "check refused while $what ran: $(cat "$tmp/rerr")"
        reads=$((reads + 1))
    done
}

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
read_while_writers_run "$t" writers
wreads=$reads
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "writer $i exited $rc: $(cat "$tmp"/sim.* "$tmp"/sweep.* | grep mhc:)"
done
n=$("$mhc" info "$t" | grep -cE '^ +[0-9]+ +simulated')
[ "$n" = 12 ] || fail "$n runs stored, wanted 12 (8 simulate + 2 sweeps of 2)"
ids=$("$mhc" info "$t" | awk '$1 ~ /^[0-9]+$/ && $2 == "simulated" {print $1}' | sort -u | wc -l)
[ "$ids" = 12 ] || fail "run ids collide: $ids distinct"

# 8 simulate processes at once into a runs database that none of them finds: one creates it
# (built whole, renamed into place), the others use it; every run is stored.
pids=()
for i in 1 2 3 4 5 6 7 8; do
    "$mhc" simulate "$t" --capacity $((50 + 5 * i))% --runs-db "$tmp/runs.db" >"$tmp/rdb.$i" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "simulate --runs-db $i exited $rc: $(cat "$tmp/rdb.$((i + 1))")"
done
n=$("$mhc" info "$t" --runs-db "$tmp/runs.db" | grep -cE '^ +[0-9]+ +simulated')
[ "$n" = 8 ] || fail "$n runs stored in a new runs database by 8 processes, wanted 8"

# Coupled jobs at once on the same rank traces (each stores into both, in one transaction over
# them), with single-trace runs into rank 0, while rank 1 is read in a loop: every job is stored
# whole, in both ranks, under distinct ids.
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 --pp 2 --all-ranks -o "$tmp/j.db" >/dev/null \
    || fail "generate --all-ranks"
j0=$tmp/j.rank0.db j1=$tmp/j.rank1.db
pids=()
for i in 1 2 3 4; do
    "$mhc" simulate --ranks "$j1" "$j0" --capacity $((55 + 5 * i))% >"$tmp/job.$i" 2>&1 &
    pids+=($!)
    "$mhc" simulate "$j0" --capacity $((55 + 5 * i))% >"$tmp/one.$i" 2>&1 &
    pids+=($!)
done
read_while_writers_run "$j1" "coupled jobs"
jreads=$reads
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "a coupled or single simulate exited $rc: $(cat "$tmp"/job.* "$tmp"/one.* | grep mhc:)"
done
[ "$("$mhc" info "$j0" | grep -c " coupled")" = 4 ] && [ "$("$mhc" info "$j1" | grep -c " coupled")" = 4 ] \
    || fail "coupled jobs at once: not every job in both ranks: $("$mhc" info "$j0" | grep -c coupled), $("$mhc" info "$j1" | grep -c coupled)"
[ "$("$mhc" info "$j0" | grep -cE '^ +[0-9]+ +simulated')" = 8 ] || fail "rank 0: wanted 4 coupled + 4 single runs"
[ "$("$mhc" info "$j0" | awk '$1 ~ /^[0-9]+$/ && $2 == "simulated" {print $1}' | sort -u | wc -l)" = 8 ] || fail "rank 0: run ids collide"
# The same into one runs database that none of them finds: it is made once, for the job.
pids=()
for i in 1 2 3 4; do
    "$mhc" simulate --ranks "$j0" "$j1" --capacity $((55 + 5 * i))% --runs-db "$tmp/jobruns.db" >"$tmp/jrdb.$i" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "simulate --ranks --runs-db $i exited $rc: $(cat "$tmp/jrdb.$((i + 1))")"
done
for r in "$j0" "$j1"; do
    [ "$("$mhc" info "$r" --runs-db "$tmp/jobruns.db" | grep -c " coupled")" = 4 ] || fail "$r: not 4 jobs in the runs database"
done

# 8 validate processes at once on a tiny trace: each stores a simulated and a replayed run for
# the baseline and for its capacity (4 runs), the same transaction contract as simulate.
v=$tmp/v.db
"$mhc" generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o "$v" >/dev/null || fail "generate tiny"
pids=()
for i in 1 2 3 4 5 6 7 8; do
    "$mhc" validate "$v" --capacity $((50 + 5 * i))% >"$tmp/val.$i" 2>&1 &
    pids+=($!)
done
read_while_writers_run "$v" validate
vreads=$reads
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    # 1: a replay that disagrees with its prediction (status column) still stored its runs.
    [ $rc = 0 ] || [ $rc = 1 ] || [ $rc = 3 ] || fail "validate $i exited $rc: $(grep mhc: "$tmp"/val.*)"
    grep -q "stored runs" "$tmp/val.$((i + 1))" || fail "validate $i did not store: $(cat "$tmp/val.$((i + 1))")"
done
n=$("$mhc" info "$v" | grep -cE '^ +[0-9]+ +(simulated|replayed)')
[ "$n" = 32 ] || fail "$n validate runs stored, wanted 32 (8 x baseline and one capacity, simulated and replayed)"
ids=$("$mhc" info "$v" | awk '$1 ~ /^[0-9]+$/ && $2 ~ /^(simulated|replayed)$/ {print $1}' | sort -u | wc -l)
[ "$ids" = 32 ] || fail "validate run ids collide: $ids distinct"
left=$(ls "$tmp" | grep -E "tmp-[0-9]+|-journal$" || true)
[ -z "$left" ] || fail "temporary files left: $left"
echo "ok ($wreads + $jreads + $vreads reader rounds)"
