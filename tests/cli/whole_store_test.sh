#!/usr/bin/env bash
# Nothing stored is ever wrong (docs/trace-format.md, "Durability and concurrency"), from the
# command line: a run computed from a trace that was replaced meanwhile is not stored in the new
# one; ranks of different jobs are not coupled; a job's runs are stored whole, in its traces or
# in one runs database; nothing is written over a device, a FIFO or through a link to one; a
# 253-byte name is written; a hot journal in a read-only folder gets its one-line hint.
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
chmod 0755 "$tmp"
gen() { "$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 "$@" >/dev/null; }
one_line() { [ "$(wc -l <"$1")" = 1 ] || fail "$2: wanted one line: $(cat "$1")"; }
as_user=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi

# 1. A trace replaced while a sweep computes on it (as `generate --force` does: a rename over it):
# exit 4, one line, the new trace untouched. The sweep stops itself (SIGSTOP) once its runs are
# computed, before it stores them (MHC_TEST_STOP_BEFORE_STORE=1), and the trace is replaced then:
# the moment between the read and the store, every time (a poll of its descriptors could miss it
# on a loaded machine, and then the replacement came after the store).
gen -o t.db
gen --micro-batch 2 -o new.db
caps=50%,60%,70%,80%,90%
MHC_TEST_STOP_BEFORE_STORE=1 "$mhc" sweep t.db --policies lru,largest --capacities "$caps" --no-bisect >out 2>err &
pid=$!
state=
for _ in $(seq 1200); do   # up to 60 s
    state=$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f1)
    [ "$state" = T ] || [ -z "$state" ] || [ "$state" = Z ] && break
    sleep 0.05
done
[ "$state" = T ] || { kill $pid 2>/dev/null; fail "the sweep did not stop before its store (state '$state'): $(cat err)"; }
mv new.db t.db
kill -CONT $pid
wait $pid; rc=$?
[ $rc = 4 ] || fail "a sweep whose trace was replaced exited $rc: $(cat err)"
one_line err "replaced trace"
grep -q "changed after it was read" err || fail "replaced trace: $(cat err)"
[ -s out ] || fail "replaced trace: no result printed"
"$mhc" info t.db | grep -q simulated && fail "runs of the old trace were stored in the new one"
[ ! -e t.db-journal ] || fail "a journal was left"

# 3. Ranks that are not one job: refused naming the rank and the field.
"$mhc" -q generate --preset gpt2-small --layers 2 --seq 128 --pp 2 --steps 1 --all-ranks -o job.db >/dev/null \
    || fail "generate --all-ranks"
"$mhc" -q generate --preset llama2-7b --layers 2 --seq 128 --pp 2 --steps 1 --pp-stage 1 -o llama1.db >/dev/null
"$mhc" simulate --ranks job.rank0.db llama1.db --capacity 70% --no-store >/dev/null 2>err; rc=$?
[ $rc = 2 ] && grep -q "llama1.db (rank" err && grep -q "job.id" err || fail "ranks of two models coupled ($rc): $(cat err)"
one_line err "two models"
gen -o single1.db
gen --seed 5 -o single2.db
"$mhc" simulate --ranks single1.db single2.db --capacity 70% --no-store >/dev/null 2>err; rc=$?
[ $rc = 2 ] && grep -qE "job.id|world_size" err || fail "two unrelated traces coupled ($rc): $(cat err)"
cp job.rank1.db late.db
sqlite3 late.db "UPDATE meta SET value = '100000000000' WHERE key = 'time_origin_ns'"
"$mhc" simulate --ranks job.rank0.db late.db --capacity 70% --no-store >/dev/null 2>err; rc=$?
[ $rc = 2 ] && grep -q "late.db (rank 1)" err && grep -q "time_origin_ns" err || fail "a rank 100 s off coupled ($rc): $(cat err)"
"$mhc" simulate --ranks job.rank0.db job.rank1.db --capacity 70% --no-store >/dev/null 2>err || fail "one job refused: $(cat err)"
[ ! -s err ] || fail "one job: unexpected words: $(cat err)"
# Older traces without an identity: coupled, with what was assumed said in one line.
for r in 0 1; do
    cp job.rank$r.db old$r.db
    sqlite3 old$r.db "DELETE FROM meta WHERE key IN ('job.id', 'world_size', 'time_origin_ns')"
done
"$mhc" simulate --ranks old0.db old1.db --capacity 70% --no-store >/dev/null 2>err || fail "older traces refused: $(cat err)"
one_line err "older traces"
grep -q "warning: .*no meta job.id" err && grep -q "time_origin_ns" err || fail "nothing said of what was assumed: $(cat err)"

# 4. A job's runs: all or none. One rank read-only (as nobody when root): none stored.
n_runs() { sqlite3 "$1" "SELECT count(*) FROM runs"; }
"$mhc" -q generate --preset gpt2-small --layers 4 --seq 128 --pp 4 --steps 1 --all-ranks -o ro.db >/dev/null
if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} -gt 0 ]; then
    chmod 0777 "$tmp"; chmod 0666 ro.rank*.db; chmod 0444 ro.rank2.db
    "${as_user[@]}" "$mhc" simulate --ranks ro.rank0.db ro.rank1.db ro.rank2.db ro.rank3.db --capacity 70% >out 2>err; rc=$?
    chmod 0755 "$tmp"; chmod 0644 ro.rank*.db
    [ $rc = 4 ] || fail "a job with a read-only rank exited $rc: $(cat err)"
    one_line err "read-only rank"
    grep -q "ro.rank2.db" err || fail "the read-only rank is not named: $(cat err)"
    for r in 0 1 2 3; do [ "$(n_runs ro.rank$r.db)" = 0 ] || fail "rank $r stored a run of a job not stored whole"; done
else
    echo "skipped: read-only rank (root without setpriv)"
fi
# The whole job into one runs database, each run with its rank's trace; read back per rank.
"$mhc" simulate --ranks ro.rank0.db ro.rank1.db ro.rank2.db ro.rank3.db --capacity 70% --runs-db job-runs.db >out 2>err \
    || fail "a job into a runs database: $(cat err)"
[ "$(grep -c "^stored .* in job-runs.db" out)" = 4 ] || fail "not every rank stored: $(cat out)"
for r in 0 1 2 3; do
    [ "$("$mhc" info ro.rank$r.db --runs-db job-runs.db | grep -c coupled)" = 1 ] || fail "rank $r's run not in the runs database"
    [ "$(n_runs ro.rank$r.db)" = 0 ] || fail "rank $r's trace changed"
done

# 5. Special files: never replaced, even with --force; a link to a regular file is said.
mkfifo fifo
ln -s /dev/null null.db
for out in fifo null.db /dev/null; do
    for force in "" --force; do
        gen $force -o $out 2>err && fail "generate $force -o $out succeeded"
        grep -q "not a regular file" err || fail "generate -o $out: $(cat err)"
        "$mhc" export t.db $force -o $out >/dev/null 2>err && fail "export $force -o $out succeeded"
        grep -q "not a regular file" err || fail "export -o $out: $(cat err)"
        "$mhc" calibrate --backend host --quick $force -o $out >/dev/null 2>err && fail "calibrate $force -o $out succeeded"
        grep -q "not a regular file" err || fail "calibrate -o $out: $(cat err)"
    done
    "$mhc" simulate t.db --capacity 80% --runs-db $out >out 2>err; rc=$?   # refused before the work
    [ $rc = 2 ] && [ ! -s out ] && grep -q "not a regular file" err || fail "--runs-db $out exited $rc: $(cat err)"
done
[ -p fifo ] && [ -L null.db ] && [ -c /dev/null ] || fail "a special file was replaced"
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"device":0,"stream":7}}]}' >k.json
"$mhc" import k.json --force -o null.db >/dev/null 2>err && fail "import --force through a link to /dev/null"
gen -o real.db
ln -s real.db to-real.db
sum=$(sha256sum <real.db)
gen --force --seed 3 -o to-real.db 2>err || fail "generate --force over a link to a regular file: $(cat err)"
grep -q "symbolic link to real.db" err || fail "replacing a link is not said: $(cat err)"
[ ! -L to-real.db ] && [ "$(sha256sum <real.db)" = "$sum" ] || fail "the link's target was changed"

# 10. A legal 253-byte name: written, read, exported; its runs go to a runs database.
long=$(printf 'n%.0s' $(seq 1 250)).db
gen -o "$long" || fail "generate -o a 253-byte name"
"$mhc" check "$long" >/dev/null || fail "check of a 253-byte name"
"$mhc" export "$long" -o "${long%.db}.js" >/dev/null || fail "export to a 252-byte name"
"$mhc" simulate "$long" --capacity 80% >/dev/null 2>err; rc=$?
[ $rc = 4 ] && grep -q -- "--runs-db" err || fail "runs beside a 253-byte name: exit $rc: $(cat err)"
"$mhc" simulate "$long" --capacity 80% --runs-db long-runs.db >/dev/null || fail "--runs-db for a 253-byte trace"
ls | grep -q "mhc-tmp" && fail "temporary files left: $(ls | grep mhc-tmp)"

# 8. A hot journal beside a writable trace in a folder the reader cannot write: the hint.
if [ ${#as_user[@]} -gt 0 ] || [ "$(id -u)" != 0 ]; then
    mkdir ro && gen -o ro/t.db && "$mhc" simulate ro/t.db --capacity 80% >/dev/null
    python3 - ro/t.db <<'PY' || fail "could not leave a hot journal"
import os, sqlite3, sys
pid = os.fork()
if pid == 0:
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA cache_size=2")
    db.execute("BEGIN IMMEDIATE")
    for _ in range(3000):
        db.execute("INSERT INTO run_events VALUES (1,0,0,1,1,1,4096)")
    os._exit(0)   # dies in the middle of its transaction
os.waitpid(pid, 0)
sys.exit(0 if os.path.exists(sys.argv[1] + "-journal") else 1)
PY
    chmod 0666 ro/t.db ro/t.db-journal
    if [ "$(id -u)" = 0 ]; then chmod 0755 ro; else chmod 0555 ro; fi
    "${as_user[@]}" "$mhc" info ro/t.db >/dev/null 2>err; rc=$?
    [ $rc = 2 ] || fail "hot journal in a read-only folder exited $rc"
    one_line err "hot journal in a read-only folder"
    grep -q "interrupted write left ro/t.db-journal" err || fail "no journal hint: $(cat err)"
    chmod 0755 ro
    "$mhc" info ro/t.db | grep -q simulated || fail "the journal was not rolled back once the folder was writable"
    [ ! -e ro/t.db-journal ] || fail "journal still there"
else
    echo "skipped: read-only folder (root without setpriv)"
fi
echo ok
