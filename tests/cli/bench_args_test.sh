#!/usr/bin/env bash
# The benchmark programs check their arguments as the commands do: a value that is not what
# the usage says is one line naming it (and the usage) on stderr, exit status 2, before any work;
# bad input met while working (a preset that does not exist) is one line and exit 2 too, not an abort.
# Usage: bench_args_test.sh BENCH_IMPORT BENCH_SIM BENCH_STORE BENCH_DATASETS BENCH_VIEWER
#        BENCH_MULTIRANK BENCH_MULTIRANK_ANSWERS BENCH_SWAP_STANDIN BENCH_REPLAY_LINK BENCH_SINKHORN_CUDA
set -u
import=$1 sim=$2 store=$3 datasets=$4 viewer=$5
multirank=$6 answers=$7 standin=$8 replay_link=$9 sinkhorn_cuda=${10}
. "$(dirname "$0")/preamble.sh"
# refused WANT CMD...: exit 2, one line on stderr containing WANT, nothing on stdout
refused() {
    local want=$1; shift
    timeout 20 "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    [ $rc = 2 ] || fail "$* exited $rc, wanted 2: $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$*: wanted one line: $(cat "$tmp/err")"
    grep -qF -- "$want" "$tmp/err" || fail "$*: does not say '$want': $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "$*: printed before refusing: $(cat "$tmp/out")"
}
refused "EVENTS 'speed' is not a whole number (usage: mhc_bench_import [EVENTS]" "$import" speed 200000 "$tmp"
refused "EVENTS '12x' is not a whole number" "$import" 12x
refused "EVENTS '0' is outside [1," "$import" 0 "$tmp"
refused "REPS 'many' is not a whole number" "$import" 1000 "$tmp" many
refused "DIR '$tmp/none' is not a directory" "$import" 1000 "$tmp/none"
refused "unexpected argument 'extra'" "$import" 1000 "$tmp" 1 extra
refused "EVENTS '99999999999999999999' is outside" "$import" memory 99999999999999999999 "$tmp"
refused "MAX_MILLION_ROWS 'four' is not a whole number" "$sim" four
refused "REPS '-1' is outside [1, 1000]" "$sim" sweep -1
refused "the last word of one is early or no-early, not maybe" "$sim" one lru forecast 4 1 maybe
refused "ROWS '1e6' is not a whole number" "$store" 1e6
refused "MIN_ROWS 'lots' is not a whole number" "$datasets" gpt2-small lots
refused "--kernels 'ten' is not a whole number (usage: bench_viewer [--kernels N]" "$viewer" --kernels ten
refused "--allocations '0' is outside [1," "$viewer" --allocations 0
refused "--trace needs a value" "$viewer" --trace
refused "unknown option '--help'" "$viewer" --help
refused "bench_datasets: unknown preset 'nosuch'" "$datasets" nosuch 10
refused "bench_multirank: unknown preset 'nosuch'" "$multirank" 1 1 1 1 1 "$tmp" nosuch
refused "bench_multirank_answers: unknown preset 'nosuch'" "$answers" nosuch 1 1 1 1 1 1 "$tmp"
refused "unknown option '--gpu' (usage: bench_swap_standin [--cuda])" "$standin" --gpu
refused "REPEATS 'x' is not a whole number" "$replay_link" x
refused "--tokens 'abc' is not a whole number" "$sinkhorn_cuda" --tokens abc
echo "ok"
