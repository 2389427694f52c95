#!/usr/bin/env bash
# What the commands print, for terminals 80-100 columns wide, in one vocabulary: info and sweep
# lines within 100 columns (long kernel names, many links, runs of every kind), bytes swapped
# per direction in sweep exactly as simulate prints them, the peak reduction with the same words
# and sign in simulate, sweep and info, and a forecast line without placeholders.
# Usage: output_test.sh MHC
set -uo pipefail
mhc=$1
. "$(dirname "$0")/preamble.sh"
narrow() {  # narrow FILE WHAT: every line within 100 columns
    awk -v w="$2" 'length($0) > 100 {print w ": " length($0) " columns: " $0; bad = 1} END {exit bad}' "$1" \
        || fail "$2: lines past 100 columns"
}

t=$tmp/mhc.db
"$mhc" generate --preset mhc-27b --layers 4 --steps 2 -o "$t" >/dev/null || fail generate
"$mhc" simulate "$t" --capacity 70% --policy lru --no-store >"$tmp/sim" || fail "simulate lru"
narrow "$tmp/sim" "simulate"
"$mhc" sweep "$t" --policies lru,cost_aware --prefetchers none,lookahead:500 --capacities 70%,90% \
    --links pcie4,nvlink4-peer --bisect-steps 2 >"$tmp/sweep" || fail sweep
# Into a file the grid and the notes within 100 columns, each answer one whole line (a script reads
# one fact a line: an answer wrapped onto a second line until 2026-12-07); a terminal of 100
# columns gets every line within them, the answers wrapped under their figures.
grep -v '% = .*: peak .*, peak reduction .*, throughput loss ' "$tmp/sweep" >"$tmp/sweep-rest"
narrow "$tmp/sweep-rest" "sweep"
awk '/^smallest capacity/ { on = 1 } /^$|^\*|^peaks: / { on = 0 } on && /^ / { bad = 1 } END { exit !bad }' "$tmp/sweep" &&
    fail "sweep: an answer continued on a line: $(cat "$tmp/sweep")"
COLUMNS=100 "$mhc" sweep "$t" --policies lru,cost_aware --prefetchers none,lookahead:500 --capacities 70%,90% \
    --links pcie4,nvlink4-peer --bisect-steps 2 --no-store >"$tmp/sweep100" || fail "COLUMNS=100 sweep"
narrow "$tmp/sweep100" "COLUMNS=100 sweep"
# One heading per link; the grid's swap-in and swap-out are simulate's, direction by direction.
[[ $(grep -c "^link " "$tmp/sweep") == 2 ]] || fail "sweep: one heading per link: $(cat "$tmp/sweep")"
row=$(awk '/^link pcie4/ {on = 1} /^link nvlink4-peer/ {on = 0} on && /^lru +none +70%/' "$tmp/sweep")
in_sim=$(sed -n 's/^swap-in (H2D) .*transfers, \([0-9.]* [KMGT]*i*B\).*/\1/p' "$tmp/sim")
out_sim=$(sed -n 's/^swap-out (D2H) .*transfers, \([0-9.]* [KMGT]*i*B\).*/\1/p' "$tmp/sim")
[[ -n $in_sim && -n $out_sim ]] || fail "simulate prints no swap-in/out: $(cat "$tmp/sim")"
[[ $row == *"$in_sim $out_sim" || $row == *"$in_sim  $out_sim" || $row =~ $in_sim\ +$out_sim$ ]] \
    || fail "sweep's lru+none@70% row '$row' does not end with simulate's swap-in $in_sim and swap-out $out_sim"
grep -q "swapped" "$tmp/sweep" && fail "sweep still sums both directions: $(head -3 "$tmp/sweep")"
# The peak reduction: the same figure, words and sign in simulate, sweep and info.
red=$(sed -n 's/^peak .*(peak reduction \([0-9.]*%\))$/\1/p' "$tmp/sim")
[[ -n $red ]] || fail "simulate: no 'peak reduction N%': $(cat "$tmp/sim")"
[[ $row =~ \ $red\  ]] || fail "sweep row '$row' lacks simulate's reduction $red"
"$mhc" simulate "$t" --capacity 70% --policy lru >/dev/null || fail "simulate lru (stored)"
"$mhc" simulate "$t" --capacity 1MiB --policy lru >/dev/null; [[ $? == 3 ]] || fail "simulate 1MiB: want OOM"
"$mhc" simulate "$t" --capacity 60% --policy cost_aware --prefetch forecast >"$tmp/forecast" || fail forecast
narrow "$tmp/forecast" "simulate forecast"
grep -q "^forecast  *error [0-9.]*% per kernel" "$tmp/forecast" || fail "forecast line: $(cat "$tmp/forecast")"
grep -q -- "- per kernel\| -  *per\|; - " "$tmp/forecast" && fail "forecast placeholder: $(grep forecast -A1 "$tmp/forecast")"
"$mhc" info "$t" >"$tmp/info" || fail info
narrow "$tmp/info" "info"
grep -qE -- "-[0-9.]+%" "$tmp/info" && fail "info writes the reduction with a minus sign: $(sed -n '/^runs/,$p' "$tmp/info")"
grep -E "^ +[0-9]+ simulated +complete +[0-9.]+ GiB +$red +[0-9.]+% +lru\+none@70%" "$tmp/info" >/dev/null \
    || fail "info's lru@70% run lacks simulate's peak reduction $red: $(sed -n '/^runs/,$p' "$tmp/info")"
grep -E "^ +[0-9]+ simulated +oom +- +- +OOM( |$)" "$tmp/info" >/dev/null \
    && grep -qE "lru\+none@1.00 MiB/pcie4/caching \(out of memory, short by [0-9.]+ MiB\)$" "$tmp/info" \
    || fail "info's OOM run: $(sed -n '/^runs/,$p' "$tmp/info")"
# A name too long for its row goes under it, whole.
grep -qE "^      bisect:cost_aware\+lookahead:500@[0-9.]+%/nvlink4-peer/caching$" "$tmp/info" \
    || fail "info: a long run name: $(sed -n '/^runs/,$p' "$tmp/info")"
# Long kernel names are cut to the line; --json keeps them whole.
grep -q '\.\.\.$' "$tmp/info" || fail "info cut no long kernel name: $(sed -n '/^kernels by/,/^runs/p' "$tmp/info")"
"$mhc" info "$t" --json | python3 -c "
import json, sys
names = [k['name'] for k in json.load(sys.stdin)['top_kernels']]
assert max(map(len, names)) > 80, names" || fail "info --json cut the kernel names"
echo ok
