#!/usr/bin/env bash
# What a large runs database costs a command that stores into it (`--runs-db FILE`): before its
# work, the command checks that FILE is a runs database of this trace (check_runs_db_of), and at
# the end it stores its run there. Builds a small trace and a runs database of N + 1 runs
# (bench/lib.sh runs_db: one simulated run's rows copied N times with SQL), then times under
# /usr/bin/time, ROUNDS times each:
#   - `mhc simulate T --capacity 90% --no-store` (the work alone),
#   - the same with `--runs-db` a fresh file, and with `--runs-db` the large one.
# The difference between the last two is what the database's size costs (check and store).
# bench/trace/runs_db_check.sh compares two binaries over several sizes.
# Usage: bench/trace/runs_db_precheck.sh MHC [RUNS=100000] [ROUNDS=3]
set -euo pipefail
mhc=$(realpath "$1")
runs=${2:-100000}
rounds=${3:-3}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp runs-db-bench
cd "$tmp"
tiny_trace "$mhc" t.db
runs_db "$mhc" t.db big.db "$runs"
echo "runs database: $(sqlite3 big.db 'SELECT count(*) FROM runs') runs," \
    "$(sqlite3 big.db 'SELECT count(*) FROM run_metrics') metric rows," \
    "$(sqlite3 big.db 'SELECT count(*) FROM run_events') event rows, $(du -m big.db | cut -f1) MB;" \
    "$(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg), $(date -u +%Y-%m-%d)"
for round in $(seq 1 "$rounds"); do
    rm -f fresh.db
    echo "round $round:"
    measure "  simulate --no-store" "$mhc" -q simulate t.db --capacity 90% --no-store
    measure "  simulate --runs-db (a new file)" "$mhc" -q simulate t.db --capacity 90% --runs-db fresh.db
    measure "  simulate --runs-db (the large one)" "$mhc" -q simulate t.db --capacity 90% --runs-db big.db
done
