#!/usr/bin/env bash
# Hostile pass 13 (docs/cli.md, "Messages and exit statuses"; docs/trace-format.md, "Runs and
# their data"): what passes 1 to 12 left.
#   1. A run stored in a trace did not record which data it was computed from: after the trace's
#      rows were edited (sqlite3 UPDATE), `info`, `export --run`, `check`, mhc-view and
#      `mhc-torch runs` still showed the run as the trace's. Each run now records the trace's
#      fingerprint; every reader compares it and leaves a stale run out (one line saying so), or
#      refuses it by id. Runs stored before (no fingerprint) stay the trace's until its rows change.
#   2. A write-ahead log beside a trace that is not in WAL mode (another file's, copied or left
#      there) was applied by SQLite whenever the trace was opened, read-only too: the trace read
#      as another's rows under its own content digest, or "malformed" (and a writer checkpointed
#      the mix into the file for good). Now refused before SQLite opens the file, by mhc and
#      mhc-torch. A WAL trace read without a lock (a folder this process cannot write) that
#      changes while it is read is refused instead of giving a mix of two versions.
#   3. A result line on stdout quoted a file name as it is: a newline in the name made two lines
#      of one (export, generate, check, simulate's "stored"), where errors show '?'.
#   4. mhc-torch runs of a file whose name is no UTF-8 ended in a UnicodeEncodeError traceback;
#      mhc_torch.digest.of_file("x#y.db") read the file x (a '#' starts a URI's fragment) and
#      returned the digest of nothing.
# Usage: hostile_pass13_test.sh MHC PYTHON PKG [MHC_VIEW] (PKG: the folder holding mhc_torch; the
# parts that need pandas, mhc-view or another user are skipped, said)
set -u
mhc=$1
python=$2
pkg=$3
view=${4:-}
[ -x "$python" ] || python=python3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
gen=(generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000)
"$mhc" -q "${gen[@]}" -o t.db >/dev/null || fail generate
has_pandas=0
PYTHONPATH=$pkg "$python" -c "$find_modules" pandas 2>/dev/null && has_pandas=1
torch_cli() { PYTHONPATH=$pkg timeout 300 "$python" -m mhc_torch.cli "$@"; }
fresh() { rm -f "$1" "$1"-*; cp t.db "$1"; }

# 1. Runs computed from other data.
fresh s.db
"$mhc" simulate s.db --capacity 80% >/dev/null || fail "simulate s.db"
[ -n "$(sqlite3 s.db "SELECT trace_fingerprint FROM runs WHERE id = 1")" ] || fail "run 1 records no fingerprint"
"$mhc" info s.db >out 2>err && [ ! -s err ] && grep -q "^runs        1 stored" out || fail "info of s.db: $(cat err)"
sqlite3 s.db "UPDATE allocations SET bytes = bytes * 2 WHERE id = 1"
stale="s.db: run 1 (lru+none@80%/pcie4/caching) was computed from other data than s.db holds now (trace fingerprint "
"$mhc" info s.db >out 2>err || fail "info of an edited trace exited $?: $(cat err)"
[ "$(wc -l <err)" = 1 ] && grep -qF "mhc: warning: s.db: run 1 (lru+none@80%/pcie4/caching) is not shown: it was computed from other data than s.db holds now" err &&
    grep -qF "compute it again from the trace as it is: mhc simulate s.db" err || fail "info's warning: $(cat err)"
! grep -q "^runs " out || fail "info lists a stale run: $(grep -A2 '^runs' out)"
refused "mhc: $stale" export s.db --run 1 -o r.json
refused "mhc: $stale" export s.db --format csv --run 1 -o rcsv
[ ! -e r.json ] && [ ! -e rcsv ] || fail "a refused export wrote files"
"$mhc" export s.db --format csv -o csv >/dev/null 2>&1 || fail "export csv of s.db"
[ "$(wc -l <csv/runs.csv)" = 1 ] && [ "$(wc -l <csv/run_metrics.csv)" = 1 ] || fail "export csv kept the stale run: $(cat csv/runs.csv)"
"$mhc" check s.db >out 2>err; rc=$?
[ $rc = 2 ] && grep -qF "$stale" out || fail "check of s.db exited $rc: $(cat out)"
if [ -n "$view" ] && [ -x "$view" ]; then
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" s.db --run 1 >out 2>err </dev/null; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "mhc-view: $stale" err || fail "mhc-view --run 1 exited $rc: $(cat err)"
else
    echo "SKIP part 1 (mhc-view): no mhc-view"
fi
if [ "$has_pandas" = 1 ]; then
    torch_cli runs s.db >out 2>err || fail "mhc-torch runs s.db exited $?: $(cat err)"
    grep -qF "mhc-torch: warning: s.db: run 1 (lru+none@80%/pcie4/caching) is not shown: it was computed from other data" err &&
        grep -q "s.db: no runs" out || fail "mhc-torch runs of s.db: $(cat out err)"
    PYTHONPATH=$pkg "$python" -c "
import sys
from mhc_torch.store import TraceError, read_run_table
try:
    read_run_table('s.db', 'run_events', run=1)
except TraceError as e:
    sys.exit(0 if 'was computed from other data' in str(e) else 1)
sys.exit(1)" || fail "read_run_table of a stale run"
else
    echo "SKIP part 1 (mhc-torch): no pandas"
fi
# Computed again: the new run is the trace's; the stale one stays out.
"$mhc" simulate s.db --capacity 80% >/dev/null || fail "simulate s.db again"
"$mhc" info s.db >out 2>err && grep -q "^runs        1 stored" out && grep -q "^    2 simulated" out &&
    grep -qF "run 1 (lru+none@80%/pcie4/caching) is not shown" err || fail "info after simulating again: $(cat out err)"
# Meta changed (allocator.conf is read by the caching model): stale too.
fresh m.db
"$mhc" simulate m.db --capacity 80% >/dev/null && sqlite3 m.db "INSERT INTO meta VALUES ('allocator.conf', 'max_split_size_mb:20')"
"$mhc" info m.db >out 2>err && grep -qF "m.db: run 1 (lru+none@80%/pcie4/caching) is not shown" err || fail "a meta edit: $(cat err)"
# A run stored before runs recorded a fingerprint: the trace's while its rows are as written, not after.
fresh l.db
"$mhc" simulate l.db --capacity 80% >/dev/null && sqlite3 l.db "UPDATE runs SET trace_fingerprint = NULL"
"$mhc" info l.db >out 2>err && [ ! -s err ] && grep -q "^runs        1 stored" out || fail "a run without a fingerprint: $(cat err)"
sqlite3 l.db "UPDATE kernels SET grid_x = grid_x + 1 WHERE id = 1"
"$mhc" info l.db >out 2>err && grep -qF "l.db: run 1 (lru+none@80%/pcie4/caching) is not shown: it does not record which data it was computed from" err ||
    fail "an older run in an edited trace: $(cat err)"
# A file made before the column (old fixtures): read as before, checked clean; the store adds it.
cp "$here/../data/advise/speech_gru.db" old.db
"$mhc" info old.db >out 2>err && [ ! -s err ] && grep -q "^runs        4 stored" out || fail "an older file's runs: $(cat err)"
"$mhc" check old.db >/dev/null || fail "check of an older file: $("$mhc" check old.db | head -3)"
"$mhc" simulate old.db --capacity 90% >/dev/null || fail "simulate old.db"
[ "$(sqlite3 old.db "SELECT count(trace_fingerprint) FROM runs")" = 1 ] && "$mhc" check old.db >/dev/null ||
    fail "the store into an older file: $("$mhc" check old.db | head -3)"
# In a runs database, each run records its trace's fingerprint as well.
fresh d.db
"$mhc" simulate d.db --capacity 80% --runs-db runs.db >/dev/null || fail "simulate --runs-db"
[ "$(sqlite3 runs.db "SELECT trace_fingerprint FROM runs")" = "$(sqlite3 runs.db "SELECT fingerprint FROM traces")" ] ||
    fail "the runs database's run records another fingerprint"
"$mhc" info d.db --runs-db runs.db >out 2>err && [ ! -s err ] && grep -q "^runs        1 stored" out || fail "info --runs-db: $(cat err)"

# 2. Another file's write-ahead log beside a trace: refused, the trace and the log left as they are.
fresh other.db
sqlite3 other.db "UPDATE allocations SET bytes = bytes + 512" >/dev/null
"$python" - <<'PY' || fail "python3 other.db"
import os, sqlite3
db = sqlite3.connect("other.db")
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("UPDATE allocations SET bytes = bytes + 512")
db.commit()
os._exit(0)   # the log keeps the writes: no checkpoint
PY
[ -s other.db-wal ] || fail "no other.db-wal"
fresh w.db
cp other.db-wal w.db-wal && cp w.db w.before
for cmd in "info w.db" "check w.db" "simulate w.db --capacity 80%" "export w.db -o w.json" "advise w.db --capacity 40MiB"; do
    # shellcheck disable=SC2086
    refused "mhc: w.db: w.db-wal is there, a write-ahead log that w.db (not in SQLite's WAL mode) did not leave" $cmd
done
refused "mhc: w.db: w.db-wal is there" info t.db --runs-db w.db
cmp -s w.db w.before && cmp -s w.db-wal other.db-wal && [ ! -e w.db-shm ] || fail "a refused command changed w.db or its log"
if [ "$has_pandas" = 1 ]; then
    torch_cli runs w.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qF "mhc-torch: w.db: w.db-wal is there, a write-ahead log that w.db (not in SQLite's WAL mode)" err ||
        fail "mhc-torch runs beside a stray log exited $rc: $(cat err)"
fi
# A WAL trace's own log is its: read through it as before.
"$mhc" info other.db >/dev/null 2>err || fail "a WAL trace with its own log: $(cat err)"
# Read without a lock: a WAL trace in a folder the reader cannot write, changed while it is read
# (root's touch stands for another process's checkpoint): refused, not a mix of two versions.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chmod 0755 "$tmp" && mkdir ro && "$mhc" -q generate --preset gpt2-small --steps 2 --layers 6 -o ro/big.db >/dev/null &&
        sqlite3 ro/big.db "PRAGMA journal_mode=WAL" >/dev/null && chmod 0644 ro/big.db || fail "ro/big.db"
    as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    HOME=$tmp "${as_nobody[@]}" "$mhc" info ro/big.db >out 2>err || fail "info of a WAL trace as nobody: $(cat err)"
    # Its times flipped between two values (a file's times tick a few ms apart): a read that
    # spans a flip is refused. A short read may fall between two: a few tries.
    "$python" -c "
import os
while True:
    os.utime('ro/big.db', (1, 1)); os.utime('ro/big.db', (2, 2))" &
    toucher=$!
    for try in 1 2 3 4 5 6 7 8 9 10; do
        HOME=$tmp "${as_nobody[@]}" "$mhc" info ro/big.db >out 2>err; rc=$?
        [ $rc = 0 ] || break
    done
    kill "$toucher"; wait "$toucher" 2>/dev/null
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "mhc: ro/big.db: changed while it was read (it is in SQLite's WAL mode in a folder this process cannot write" err ||
        fail "info of a WAL trace changed while read exited $rc after $try tries: $(cat err)"
    HOME=$tmp "${as_nobody[@]}" "$mhc" info ro/big.db >out 2>err || fail "info of the WAL trace left alone: $(cat err)"
else
    echo "SKIP part 2 (a WAL trace changed while read): needs root and setpriv"
fi

# 3. A newline in a file's name: every result line one line, the name with '?'.
nl=$'n\nl'
"$mhc" -q "${gen[@]}" -o "$nl.db" >out 2>err || fail "generate $nl.db"
grep -qx "n?l.db: written in [0-9.]* s" out || fail "generate said: $(head -2 out)"
"$mhc" export "$nl.db" -o "$nl.json" >out || fail "export"
[ "$(wc -l <out)" = 1 ] && grep -q "^n?l.json: " out || fail "export said: $(cat out)"
"$mhc" export "$nl.db" --format csv -o "$nl.csv" >out || fail "export csv"
grep -q "^n?l.csv: " out || fail "export csv said: $(head -2 out)"
"$mhc" check "$nl.db" >out || fail "check"
[ "$(wc -l <out)" = 1 ] && grep -q "^n?l.db: ok" out || fail "check said: $(cat out)"
"$mhc" simulate "$nl.db" --capacity 80% >out || fail "simulate"
grep -qx "stored         run 1 in n?l.db" out || fail "simulate said: $(tail -2 out)"

# 4. Names mhc-torch reads as the file system's bytes.
bad=$'bad\xff.db'
fresh "$bad"
if [ "$has_pandas" = 1 ]; then
    torch_cli runs "$bad" >out 2>err || fail "mhc-torch runs of a name that is no UTF-8 exited $?: $(tail -3 err)"
    grep -q "no runs" out || fail "mhc-torch runs $bad: $(cat out)"
fi
cp t.db 'x#y.db'
want=$(sqlite3 t.db "SELECT value FROM meta WHERE key = 'content_digest'")
got=$(PYTHONPATH=$pkg "$python" -c "from mhc_torch import digest; print(digest.of_file('x#y.db'))" 2>&1)
[ "$got" = "$want" ] || fail "digest.of_file('x#y.db') is $got, the file's is $want"

echo "all hostile pass 13 checks passed"
