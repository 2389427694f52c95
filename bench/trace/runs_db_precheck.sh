#!/usr/bin/env bash
# What a large runs database costs a command that stores into it (`--runs-db FILE`): before its
# work, the command checks that FILE is a runs database of this trace (check_runs_db_of), and at
# the end it stores its run there. Builds a small trace, stores one simulated run into a runs
# database, copies that run's rows N times with SQL (runs, run_config, run_metrics, run_trace,
# run_events: about what N sweeps' runs hold), then times under /usr/bin/time, ROUNDS times each:
#   - `mhc simulate T --capacity 90% --no-store` (the work alone),
#   - the same with `--runs-db` a fresh file, and with `--runs-db` the large one.
# The difference between the last two is what the database's size costs (check and store).
# Usage: bench/trace/runs_db_precheck.sh MHC [RUNS=100000] [ROUNDS=3]
set -euo pipefail
mhc=$(realpath "$1")
runs=${2:-100000}
rounds=${3:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhc-runs-db-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o t.db >/dev/null
"$mhc" -q simulate t.db --capacity 90% --runs-db big.db >/dev/null
# Run 1's rows again as runs 2..RUNS+1 (ids offset by k).
sqlite3 big.db >/dev/null <<SQL
PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
CREATE TEMP TABLE k(v INTEGER PRIMARY KEY);
WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM c WHERE v < $runs) INSERT INTO k SELECT v FROM c;
BEGIN;
INSERT INTO runs SELECT id + v, kind, name, status, created, base_run FROM runs, k WHERE id = 1;
INSERT INTO run_config SELECT run + v, key, value FROM run_config, k WHERE run = 1;
INSERT INTO run_metrics SELECT run + v, key, value FROM run_metrics, k WHERE run = 1;
INSERT INTO run_trace SELECT run + v, trace FROM run_trace, k WHERE run = 1;
INSERT INTO run_events SELECT run + v, kind, t_start, t_end, allocation, kernel, bytes FROM run_events, k WHERE run = 1;
COMMIT;
SQL
echo "runs database: $(sqlite3 big.db 'SELECT count(*) FROM runs') runs," \
    "$(sqlite3 big.db 'SELECT count(*) FROM run_metrics') metric rows," \
    "$(sqlite3 big.db 'SELECT count(*) FROM run_events') event rows, $(du -m big.db | cut -f1) MB;" \
    "$(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg), $(date -u +%Y-%m-%d)"
measure() {   # label, then the command: wall s, CPU s, peak memory
    local label=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o time.txt "$@" >/dev/null 2>err.txt || { echo "$label: failed: $(cat err.txt)"; exit 1; }
    read -r wall user sys kib <time.txt
    printf '%-34s wall %6.2f s  CPU %6.2f s  peak memory %7.1f MiB\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" \
        "$(echo "scale=1; $kib / 1024" | bc)"
}
for round in $(seq 1 "$rounds"); do
    rm -f fresh.db
    echo "round $round:"
    measure "  simulate --no-store" "$mhc" -q simulate t.db --capacity 90% --no-store
    measure "  simulate --runs-db (a new file)" "$mhc" -q simulate t.db --capacity 90% --runs-db fresh.db
    measure "  simulate --runs-db (the large one)" "$mhc" -q simulate t.db --capacity 90% --runs-db big.db
done
