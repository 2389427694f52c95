# shellcheck shell=bash
# Sourced by the bench scripts: what they share, written once. Sourcing it moves to the
# repository's root and sets $root there; bench/base_build.sh (the compare scripts' two builds)
# comes with it.
#   . "$(dirname "$0")/../lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$(pwd)
# shellcheck source=bench/base_build.sh
. bench/base_build.sh

# Sets $tmp to a new temporary folder (mhc-NAME.XXXXXX), removed when the script exits.
#   bench_tmp NAME
bench_tmp() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhc-$1.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
}

# The load average over 1, 5 and 15 minutes.
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The median of the numbers in FILE, one a line.
#   median FILE
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# The compare scripts' trace: gpt2-small of STEPS steps (2985: about 10 M rows) in
# $tmp/trace.db, with a copy for each side ($tmp/before.db, $tmp/after.db), written by this
# tree's mhc; then the comparison's header (bench/base_build.sh) with the trace's size.
#   compare_trace STEPS "FOLDERS"
compare_trace() {
  "$root/build/cli/mhc" -q generate --preset gpt2-small --steps "$1" -o "$tmp/trace.db" >/dev/null
  compare_header "$2" "$(nproc) cores; trace: gpt2-small, $1 steps, $(du -m "$tmp/trace.db" | cut -f1) MB"
  cp "$tmp/trace.db" "$tmp/before.db"
  cp "$tmp/trace.db" "$tmp/after.db"
}

# The runs-database benches' trace: a tiny gpt2-small step (its simulation takes milliseconds).
#   tiny_trace MHC OUT
tiny_trace() {
  "$1" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o "$2" >/dev/null
}

# A runs database DB of TRACE holding RUNS + 1 runs: one run simulated and stored by MHC, then
# its rows copied RUNS times with SQL as runs 2..RUNS+1 (runs, run_config, run_metrics,
# run_trace, run_events: about what RUNS sweeps' runs hold).
#   runs_db MHC TRACE DB RUNS
runs_db() {
  "$1" -q simulate "$2" --capacity 90% --runs-db "$3" >/dev/null
  sqlite3 "$3" >/dev/null <<SQL
PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
CREATE TEMP TABLE k(v INTEGER PRIMARY KEY);
WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM c WHERE v < $4) INSERT INTO k SELECT v FROM c;
BEGIN;
INSERT INTO runs SELECT id + v, kind, name, status, created, base_run FROM runs, k WHERE id = 1;
INSERT INTO run_config SELECT run + v, key, value FROM run_config, k WHERE run = 1;
INSERT INTO run_metrics SELECT run + v, key, value FROM run_metrics, k WHERE run = 1;
INSERT INTO run_trace SELECT run + v, trace FROM run_trace, k WHERE run = 1;
INSERT INTO run_events SELECT run + v, kind, t_start, t_end, allocation, kernel, bytes FROM run_events, k WHERE run = 1;
COMMIT;
SQL
}

# Runs a command under /usr/bin/time, its output dropped, and prints LABEL with its wall
# seconds, CPU seconds (user + system) and peak memory; exits the script when it fails. Leaves
# "WALL CPU" in $tmp/last.
#   measure LABEL COMMAND...
measure() {
  local label=$1 wall user sys kib
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$tmp/time.txt" "$@" >/dev/null 2>"$tmp/err.txt" ||
    { echo "$label: failed: $(cat "$tmp/err.txt")"; exit 1; }
  read -r wall user sys kib <"$tmp/time.txt"
  echo "$wall $(echo "$user + $sys" | bc)" >"$tmp/last"
  printf '%-34s wall %6.2f s  CPU %6.2f s  peak memory %7.1f MiB\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" \
    "$(echo "scale=1; $kib / 1024" | bc)"
}
