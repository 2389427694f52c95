#!/usr/bin/env bash
# Hostile pass 9 (docs/cli.md, "Messages and exit statuses"): SQLite files that are valid SQLite but
# hostile, and what passes 1 to 8 left.
#   1. A trigger a file holds ran when mhc wrote into it: AFTER INSERT ON run_metrics ... SET value =
#      12345 stored every metric of a simulated run as 12345 (info printed them, check passed them);
#      a trigger on the cache table made `mhc simulate --no-store`, a reader, delete the stored runs.
#   2. Run tables of another shape: a column the store writes missing (runs without base_run), or one
#      of the file's own that needs a value (NOT NULL, no default): simulate computed, then failed to
#      store (exit 4, "cannot prepare query: table main.runs has no column named base_run"); a nullable
#      column of the user's own (ALTER TABLE run_memory ADD COLUMN note) failed every store ("4 columns
#      but 3 values were supplied"). Now refused before the work, said by check, and a column of the
#      user's own that needs no value is left alone.
#   3. Allocator settings a trace recorded that mhc cannot read: check passed them, simulate refused
#      them naming no file ("trace meta allocator.conf: ...").
#   4. A name ending in '/' that names a file: "t.db/: no such file"; as --runs-db to read, r.db/ was
#      opened as r.db (SQLite drops the '/') and its runs shown.
#   6. A run id of 2^63 - 1 made the next store take -2^63 (signed overflow), one of text gave the new
#      run another run's id; refused before the work, and check names an id below 1.
#   7. A stream of -2^63: mhc simulate ended in a segfault; an id of -2^63: signed overflow (UBSan).
#   5. mhc-torch: a model file that is a named pipe, a device or a loop of links was "no such file";
#      a setting's allocator option '²' or a NUL byte was a traceback (python/tests/test_allocator_grammar.py
#      holds the whole grammar).
# Usage: hostile_pass9_test.sh MHC PYTHON PKG (PKG: the folder holding mhc_torch; part 5 runs with any Python 3)
set -u
mhc=$1
python=$2
pkg=$3
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate

# 1. Triggers of the file's own do not run on mhc's writes.
cp t.db trig.db
sqlite3 trig.db "CREATE TRIGGER evil AFTER INSERT ON run_metrics BEGIN UPDATE run_metrics SET value = 12345 WHERE run = new.run; END;
                 CREATE TRIGGER evil_runs AFTER INSERT ON runs BEGIN UPDATE runs SET name = 'forged' WHERE id = new.id; END;" ||
    fail "sqlite3 trig.db"
"$mhc" simulate trig.db --capacity 90% --json >sim.json 2>err || fail "simulate trig.db: $(cat err)"
want=$(python3 -c 'import json; print(json.load(open("sim.json"))["metrics"]["baseline_makespan_ns"])')
got=$(sqlite3 trig.db "SELECT value FROM run_metrics WHERE key = 'baseline_makespan_ns'")
[ "${got%.0}" = "${want%.0}" ] || fail "a trigger of the file rewrote the stored metric: $got, computed $want"
[ "$(sqlite3 trig.db "SELECT count(*) FROM run_metrics WHERE value = 12345")" = 0 ] || fail "metrics stored as 12345"
[ "$(sqlite3 trig.db "SELECT name FROM runs")" != forged ] || fail "a trigger of the file renamed the stored run"
# The cache a reader writes into the file: a trigger on it deleted the stored runs.
sqlite3 trig.db "CREATE TRIGGER wipe AFTER INSERT ON trace_cache BEGIN DELETE FROM run_metrics; DELETE FROM runs; END;
                 DELETE FROM trace_cache" || fail "sqlite3 trig.db (cache)"
"$mhc" simulate trig.db --capacity 80% --no-store >/dev/null 2>err || fail "simulate --no-store trig.db: $(cat err)"
[ "$(sqlite3 trig.db "SELECT count(*) FROM trace_cache")" -gt 0 ] || fail "the cache was not written (the case is not tried)"
[ "$(sqlite3 trig.db "SELECT count(*) FROM runs")" = 1 ] || fail "a reader's cache write deleted the stored runs"
# The same into a runs database.
"$mhc" -q simulate t.db --capacity 90% --runs-db r.db >/dev/null || fail "simulate --runs-db r.db"
sqlite3 r.db "CREATE TRIGGER evil AFTER INSERT ON run_metrics BEGIN UPDATE run_metrics SET value = 12345; END;" || fail "sqlite3 r.db"
"$mhc" -q simulate t.db --capacity 80% --runs-db r.db >/dev/null || fail "simulate --runs-db r.db (2)"
[ "$(sqlite3 r.db "SELECT count(*) FROM run_metrics WHERE value = 12345")" = 0 ] || fail "a runs database's trigger rewrote the metrics"

# 2. Run tables of another shape: refused before the work (nothing printed), said by check.
shaped() {   # shaped FILE WANT: simulate refuses before its work, check names it
    local f=$1 want=$2
    refused "$f: $want; runs cannot be stored in it (--no-store or --runs-db FILE leaves it alone)" \
        simulate "$f" --capacity 90%
    [ ! -s out ] || fail "simulate $f computed before refusing: $(head -c 200 out)"
    refused "$f: $want" sweep "$f" --capacities 90% --policies lru --no-bisect
    "$mhc" check "$f" >out 2>err; local rc=$?
    [ $rc = 2 ] && grep -qxF "$f: $want" out || fail "check $f exited $rc: $(cat out err)"
    "$mhc" simulate "$f" --capacity 90% --no-store >out 2>err || fail "simulate --no-store of $f: $(cat err)"
}
cp t.db nobase.db && sqlite3 nobase.db "ALTER TABLE runs DROP COLUMN base_run" || fail sqlite3
shaped nobase.db "table runs has no column base_run, which runs are stored in (a damaged or foreign file)"
cp t.db extra.db && sqlite3 extra.db "DROP TABLE run_metrics; CREATE TABLE run_metrics (run INTEGER NOT NULL,
    key TEXT NOT NULL, value REAL NOT NULL, source TEXT NOT NULL, PRIMARY KEY (run, key)) WITHOUT ROWID" || fail sqlite3
shaped extra.db "table run_metrics has a column source of its own that is NOT NULL with no default: a run stored gives it no value"
# A column of the user's own that takes no value, or has a default: the runs are stored beside it.
cp t.db mine.db && sqlite3 mine.db "ALTER TABLE run_memory ADD COLUMN note TEXT;
    ALTER TABLE run_metrics ADD COLUMN source TEXT NOT NULL DEFAULT 'mhc'" || fail sqlite3
"$mhc" simulate mine.db --capacity 90% >out 2>err || fail "simulate beside a column of the user's own: $(cat err)"
"$mhc" check mine.db >out 2>err || fail "check of run tables with columns of the user's own: $(cat out err)"
# In a runs database too.
cp r.db r2.db && sqlite3 r2.db "ALTER TABLE run_kernels DROP COLUMN t_end" || fail sqlite3
refused "r2.db: table run_kernels has no column t_end" simulate t.db --capacity 70% --runs-db r2.db
[ ! -s out ] || fail "simulate --runs-db r2.db computed before refusing"
"$mhc" check t.db --runs-db r2.db >out 2>err; rc=$?
[ $rc = 2 ] && grep -qxF "r2.db: table run_kernels has no column t_end, which runs are stored in (a damaged or foreign file)" out ||
    fail "check --runs-db r2.db exited $rc: $(cat out err)"

# 3. Allocator settings a trace recorded (meta allocator.conf) that the caching model cannot read
# (mhc-torch wrote "max_split_size_mb:٣٣", digits of another script): check said "ok", then simulate
# and advise refused the trace with "mhc: trace meta allocator.conf: ...", naming no file.
for conf in "max_split_size_mb:٣٣|'max_split_size_mb:٣٣': '٣٣' is not a whole number; max_split_size_mb takes a whole number of MiB, 20 to 1073741824" \
            "roundup_power2_divisions:3|'roundup_power2_divisions:3': the divisions '3' are not a power of 2 (or 0); roundup_power2_divisions takes a power of 2 (or 0), or a list [MiB:divisions,...,>:divisions] of them" \
            "garbage_collection_threshold:0.5_0|'garbage_collection_threshold:0.5_0': '0.5_0' is not a number; garbage_collection_threshold takes a number strictly between 0 and 1"; do
    cp t.db conf.db
    sqlite3 conf.db "INSERT OR REPLACE INTO meta VALUES ('allocator.conf', '${conf%%|*}')" || fail sqlite3
    "$mhc" check conf.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qxF "conf.db: meta allocator.conf: ${conf#*|} [meta]" out || fail "check of allocator.conf ${conf%%|*} exited $rc: $(cat out err)"
    refused "mhc: conf.db: meta allocator.conf: ${conf#*|}" simulate conf.db --capacity 90% --no-store
done

# 4. A name ending in '/' (a folder's) that names a file: "t.db/: no such file" beside t.db, and as a
# runs database to read, opened as r.db (SQLite drops the '/'): info printed r.db's runs.
for cmd in "info t.db/" "check t.db/" "simulate t.db/ --capacity 90% --no-store" "export t.db/ -o e.json"; do
    # shellcheck disable=SC2086
    refused "t.db/: t.db is a file, not a folder (a name ending in '/' names a folder)" $cmd
done
refused "t.db/x: t.db is a file, not a folder" info t.db/x
refused "r.db/: r.db is a file, not a folder (a name ending in '/' names a folder)" info t.db --runs-db r.db/
refused "r.db/: r.db is a file, not a folder" check t.db --runs-db r.db/
refused "nothere.db: no such file" info nothere.db

# 6. Run ids at the ends: a run stored as id 9223372036854775807 (check: ok) made the next store take
# -9223372036854775808 (max + 1, signed overflow), which no --run names; a run id of text ('zzz' sorts
# above numbers, read as 0) gave the new run id 1, another run's. Refused before the work; check
# names a run id below 1.
cp t.db ids.db
"$mhc" -q simulate ids.db --capacity 90% >/dev/null || fail "simulate ids.db"
cp ids.db top.db
for table in runs:id run_metrics:run run_config:run run_events:run run_kernels:run run_memory:run run_event_rows:run; do
    sqlite3 top.db "UPDATE ${table%%:*} SET ${table#*:} = 9223372036854775807" || fail "sqlite3 $table"
done
refused "top.db: holds run 9223372036854775807, the largest id there is: no id is left for a new run" \
    simulate top.db --capacity 80%
[ ! -s out ] || fail "simulate top.db computed before refusing"
[ "$(sqlite3 top.db "SELECT count(*) FROM runs WHERE id < 1")" = 0 ] || fail "a run stored with an id below 1"
cp ids.db text.db && sqlite3 text.db "INSERT INTO run_config VALUES ('zzz', 'a', 'b')" || fail sqlite3
refused "text.db: a run table holds the run id 'zzz', not a whole number" simulate text.db --capacity 80%
cp top.db low.db
for table in runs:id run_metrics:run run_config:run run_events:run run_kernels:run run_memory:run run_event_rows:run; do
    sqlite3 low.db "UPDATE ${table%%:*} SET ${table#*:} = -9223372036854775808" || fail "sqlite3 $table"
done
"$mhc" check low.db >out 2>err; rc=$?
[ $rc = 2 ] && grep -qxF "low.db: runs row -9223372036854775808: id is -9223372036854775808: run ids are 1 or more, which --run names [range]" out ||
    fail "check of a run id below 1 exited $rc: $(cat out err)"

# 7. Values at int64's ends in the trace's own rows (found with the sanitizer build): a stream of -2^63
# ended simulate in a segfault (the caching allocator model took it for one of its private pools'
# lanes); an id of -2^63 was signed overflow in every command (UBSan stops there: exit 1). A stream
# is now within ±2^60, said as every range is; an id of -2^63 is an id like any other.
cp t.db stream.db && sqlite3 stream.db "UPDATE allocations SET stream = -9223372036854775808 WHERE id = (SELECT min(id) FROM allocations)" ||
    fail sqlite3
for cmd in "info stream.db" "simulate stream.db --capacity 90% --no-store" "simulate stream.db --capacity 90% --no-store --allocator caching"; do
    # shellcheck disable=SC2086
    refused "stream.db: allocations row" $cmd
    grep -qF "stream is -9223372036854775808, outside [-2^60, 2^60]" err || fail "$cmd: $(cat err)"
done
# A snapshot whose stream is past that range: refused by the import, not written for every command
# to refuse afterwards.
python3 -c '
import pickle
ev = lambda action, t: {"action": action, "addr": 4096, "size": 512, "stream": 2**62, "time_us": t, "frames": []}
pickle.dump({"segments": [], "device_traces": [[ev("alloc", 1), ev("free_requested", 2), ev("free_completed", 3)]]},
            open("s.pickle", "wb"))' || fail "python3 s.pickle"
refused "stream is 4611686018427387904, outside [-2^60, 2^60]" import s.pickle -o s.db
[ ! -e s.db ] || fail "import wrote a trace every command refuses"
cp t.db id.db && sqlite3 id.db "UPDATE allocations SET id = -9223372036854775808 WHERE id = (SELECT min(id) FROM allocations);
    UPDATE kernels SET id = -9223372036854775808 WHERE id = (SELECT min(id) FROM kernels)" || fail sqlite3
for cmd in "info id.db" "check id.db" "simulate id.db --capacity 90% --no-store"; do
    # shellcheck disable=SC2086
    "$mhc" $cmd >out 2>err; rc=$?
    [ $rc = 0 ] || [ $rc = 2 ] && [ "$(wc -l <err)" -le 1 ] || fail "$cmd with an id of -2^63 exited $rc: $(head -c 300 err)"
done

# 5. mhc-torch's model file that is no file: a named pipe, a link to a device and a loop of links were
# each "no such file"; refused before torch is imported (any Python 3 runs this part).
[ -x "$python" ] || python=python3
torch_refused() {   # torch_refused WANT ARGS...: `mhc-torch capture ARGS...` exits 2 in one line with WANT
    local want=$1; shift
    PYTHONPATH=$pkg timeout 60 "$python" -m mhc_torch.cli capture "$@" >out 2>err </dev/null; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err || fail "mhc-torch capture $* exited $rc: $(head -c 300 err)"
}
mkfifo fifo.py
ln -s /dev/zero zero.py
ln -s loopb.py loopa.py && ln -s loopa.py loopb.py
echo 'x = 1' >model.py
printf 'import torch\ndef build_model():\n    return torch.nn.Linear(4, 4)\ndef make_batch():\n    return torch.randn(2, 4)\n' >net.py
torch_refused "mhc-torch: fifo.py: is a named pipe, not a regular file" fifo.py -o m.db
torch_refused "mhc-torch: zero.py: is a character device, not a regular file" zero.py -o m.db
torch_refused "mhc-torch: loopa.py: cannot be reached: Too many levels of symbolic links" loopa.py -o m.db
torch_refused "mhc-torch: model.py/x.py: model.py is a file, not a folder" model.py/x.py -o m.db
torch_refused "mhc-torch: none.py: no such file" none.py -o m.db
# A setting's allocator options mhc could not read: a traceback (exit 1) for '²' and a NUL byte.
torch_refused "mhc-torch: setting: allocator: max_split_size_mb:²: expected a whole number" net.py -o m.db \
    --setting '{"allocator": "max_split_size_mb:²"}'
torch_refused "mhc-torch: setting: allocator: 'roundup_power2_divisions:?': holds a control character" net.py -o m.db \
    --setting '{"allocator": "roundup_power2_divisions:\u0000"}'
[ ! -e m.db ] || fail "a refused capture wrote m.db"

echo "all hostile pass 9 checks passed"
