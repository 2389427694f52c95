#!/usr/bin/env bash
# Hostile pass 4: damage found before the work, commands that did nothing said so.
#   - a runs database (or a trace's run tables) with a damaged page: refused before the
#     simulation, exit 2, naming the file and the page (it was met by the store after the work,
#     exit 4); `check --runs-db` lists the page;
#   - `export` to Perfetto of a trace `check` refuses (a kernel ending before it starts): exit 2
#     naming the row, no file (it drew the kernel with no length and said success);
#   - `validate --time-limit` too short for any limited configuration: exit 2 before any replay
#     (it replayed the baseline, said "not run" and exited 0).
# Usage: hostile_pass4_test.sh MHC
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate

# damage FILE TABLE: overwrites the header of TABLE's root page in FILE with 0xff bytes.
damage() {
    local size root
    size=$(sqlite3 "$1" 'PRAGMA page_size') && root=$(sqlite3 "$1" "SELECT rootpage FROM sqlite_master WHERE name = '$2'") ||
        fail "sqlite3 $1"
    printf '\377\377\377\377\377\377\377\377\377\377\377\377' |
        dd of="$1" bs=1 seek=$(((root - 1) * size)) conv=notrunc 2>/dev/null || fail "dd $1"
    echo "$root"
}
# A damaged page in a runs database: every command that would store there refuses first.
"$mhc" -q simulate t.db --capacity 90% --runs-db r.db >/dev/null || fail "simulate --runs-db r.db"
for table in run_events run_metrics runs; do
    cp r.db c.db
    page=$(damage c.db $table)
    refused "c.db: the file is truncated or corrupt: Page $page: " simulate t.db --capacity 90% --runs-db c.db
    [ ! -s out ] || fail "simulate printed a result before refusing the runs database: $(cat out)"
    grep -qF "mhc check t.db --runs-db c.db lists the damage" err || fail "no way on: $(cat err)"
    refused "c.db: the file is truncated or corrupt: Page $page: " sweep t.db --capacities 90% --policies lru --no-bisect --runs-db c.db
    # check lists it, one line each.
    "$mhc" check t.db --runs-db c.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qxF "c.db: the file is truncated or corrupt: Page $page: btreeInitPage() returns error code 11" out ||
        fail "check --runs-db of a damaged $table page exited $rc: $(cat out err)"
done
"$mhc" -q simulate t.db --capacity 90% --no-store >/dev/null || fail "--no-store is not held by a runs database it leaves alone"
# The same in the trace's own run tables, where the runs go without --runs-db.
cp t.db s.db
"$mhc" -q simulate s.db --capacity 90% >/dev/null || fail "simulate s.db"
page=$(damage s.db run_events)
refused "s.db: the file is truncated or corrupt: Page $page: " simulate s.db --capacity 80%
[ ! -s out ] || fail "simulate printed a result before refusing the trace's run tables: $(cat out)"
"$mhc" -q simulate s.db --capacity 80% --no-store >/dev/null || fail "simulate --no-store of a trace whose run tables are damaged"
# check said the damage in two lines ("*** in database main ***" and the page): one line each.
"$mhc" check s.db >out 2>err
grep -q '\*\*\*' out && fail "check printed SQLite's heading: $(cat out)"
grep -qxF "s.db: the file is truncated or corrupt: Page $page: btreeInitPage() returns error code 11" out ||
    fail "check of the damaged run_events page: $(cat out)"

# Perfetto export of a trace check refuses.
cp t.db b.db
sqlite3 b.db "UPDATE kernels SET t_end = t_start - 5 WHERE id = 3" || fail sqlite3
refused "b.db: kernels row 3: ends at" export b.db -o b.json
[ ! -e b.json ] || fail "a refused export left b.json"
refused "[end-before-start]" export b.db -o b.json.gz
cp t.db d.db
sqlite3 d.db "DELETE FROM kernels WHERE id = 5" || fail sqlite3
refused "refers to kernel 5, which does not exist [unknown-id] (and 1 more problem; run" export d.db -o d.json
"$mhc" export t.db -o t.json >/dev/null || fail "export of a sound trace"

# validate --time-limit below the baseline's and the first limited configuration's replays.
for limit in 0.000001 0.001; do
    refused "t.db: --time-limit $(printf '%g' $limit) s leaves no limited configuration a replay" \
        validate t.db --capacity 90% --link pcie4 --time-limit $limit
    grep -qF "nothing would be validated" err || fail "validate --time-limit $limit: $(cat err)"
done
[ "$(sqlite3 t.db 'SELECT count(*) FROM runs')" = 0 ] || fail "a refused validate stored runs"
echo ok
