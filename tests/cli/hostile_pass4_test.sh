#!/usr/bin/env bash
# Hostile pass 4: damage found before the work, commands that did nothing said so.
#   - a runs database (or a trace's run tables) with a damaged page: refused before the
#     simulation, exit 2, naming the file and the page (it was met by the store after the work,
#     exit 4); `check --runs-db` lists the page;
#   - `export` to Perfetto of a trace `check` refuses (a kernel ending before it starts): exit 2
#     naming the row, no file (it drew the kernel with no length and said success);
#   - `validate --time-limit` too short for any limited configuration: exit 2 before any replay
#     (it replayed the baseline, said "not run" and exited 0);
#   - a signal mid-replay says which runs it leaves marked incomplete;
#   - numbers past what they can mean: 1e999 in a link profile, --cpu-buffer-ratio 1e308,
#     --time-scale 1e5 with pcie4, --max-replay-minutes 1e-9.
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
# A runs database given where a trace goes was "schema version 0 is not supported (this mhc reads
# version 1)", as if another mhc had written it.
runs_db_said="r.db: is a runs database (simulate --runs-db), not a trace: give its trace and --runs-db r.db (it was made for $tmp/t.db)"
refused "$runs_db_said" info r.db
refused "$runs_db_said" check r.db
refused "$runs_db_said" simulate r.db --capacity 90%
refused "$runs_db_said" export r.db -o x.json
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

# A --runs-db that is another kind of file (the link profile named twice): "cannot prepare query:
# not an SQLite database (wrong format or corrupt header)".
echo '{"name": "x"}' >p.json
refused "p.json: not an mhc runs database (not an SQLite database)" simulate t.db --capacity 90% --link pcie4 --runs-db p.json
refused "p.json: not an mhc runs database (not an SQLite database)" info t.db --runs-db p.json

# A runs database cut short: "cannot prepare query: the file is corrupt or truncated".
head -c 4096 r.db >rt.db
refused "rt.db: the file is truncated or corrupt (database disk image is malformed)" simulate t.db --capacity 90% --runs-db rt.db
refused "rt.db: the file is truncated or corrupt (database disk image is malformed)" info t.db --runs-db rt.db

# A signal mid-replay left the replayed run begun ("incomplete") in the trace and stopped with
# nothing said (exit 143, no line): the line says what is left.
cp t.db v.db
"$mhc" validate v.db --capacity 90% --link pcie4 --time-scale 3000 --repeat 1 >out 2>err &
pid=$!
for _ in $(seq 1 400); do
    [ "$(sqlite3 v.db 'SELECT count(*) FROM runs' 2>/dev/null)" = 1 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.02
done
kill -TERM $pid 2>/dev/null
{ wait $pid; } 2>/dev/null; rc=$?
if [ $rc = 143 ] && [ "$(sqlite3 v.db 'SELECT count(*) FROM runs')" = 1 ]; then
    [ "$(tail -1 err)" = "mhc: stopped by SIGTERM; run 1 (a replay begun) is left in v.db marked incomplete" ] ||
        fail "validate stopped mid-replay said: $(tail -2 err)"
else
    echo "note: validate was not stopped mid-replay (exit $rc, $(sqlite3 v.db 'SELECT count(*) FROM runs') runs)"
fi

# Numbers past what they can mean.
# A link profile with a number beyond a double: "internal error: [json.exception.out_of_range.406]
# number overflow parsing '1e999'", exit 1.
cat >l.json <<'JSON'
{"name": "x", "h2d": {"bandwidth_Bps": 1e999, "latency_s": 6e-6}, "d2h": {"bandwidth_Bps": 25e9, "latency_s": 6e-6},
 "duplex_factor": 0.5, "copy_engines": 2}
JSON
refused "l.json: not a link profile: not valid JSON (number overflow parsing '1e999')" simulate t.db --capacity 90% --link l.json --no-store
# A host buffer of 1e308 x the capacity overflowed to -8 EiB: an OOM at once, exit 3.
refused "--cpu-buffer-ratio: '1e308': not in 0..1000" simulate t.db --capacity 90% --cpu-buffer-ratio 1e308 --no-store
MHC_CPU_BUFFER_RATIO=1e300 "$mhc" simulate t.db --capacity 90% --no-store >out 2>err; rc=$?
[ $rc = 2 ] && grep -qF "at most 1000" err || fail "MHC_CPU_BUFFER_RATIO=1e300 exited $rc: $(cat err)"
"$mhc" simulate t.db --capacity 90% --cpu-buffer-ratio 1000 --no-store >out 2>err || fail "--cpu-buffer-ratio 1000: $(cat err)"
grep -q "host buffer 36.91 GiB" out || fail "--cpu-buffer-ratio 1000: $(grep 'host buffer' out)"
# A time scale that takes the replay's link past a link's bounds was said as a field of a link
# profile ("link pcie4 x100000: field 'h2d.bandwidth_Bps' ..."); --max-replay-minutes 1e-9 as
# "at least 0 s ... more than the 0 s allowed".
refused "--time-scale: at x100000 the replay's link pcie4 moves H2D at 2.5e+15 B/s, outside the [1e3, 1e15] B/s a link may have; with this link the time scale must be in [0.001, 4e+04]" \
    validate t.db --capacity 90% --link pcie4 --no-store --time-scale 1e5
refused "more than the 6e-08 s allowed" validate t.db --capacity 90% --link pcie4 --no-store --max-replay-minutes 1e-9
grep -qF "would take at least 0 s" err && fail "--max-replay-minutes 1e-9: $(cat err)"

# One of a thing is not "1 simulations ... 1 grid runs".
"$mhc" sweep t.db --capacities 90% --policies lru --no-bisect --no-store >out 2>err || fail "sweep: $(cat err)"
grep -q "^1 simulation in [0-9.]* s: 1 grid run$" out || fail "sweep of one run said: $(tail -1 out)"
echo ok
