#!/usr/bin/env bash
# An export interrupted by SIGTERM or SIGHUP while it writes leaves nothing where its output was
# to be: no temporary file, and no folder it made (export --format csv -o DIR made DIR, then
# died with it empty). The signal is sent once the folder exists, so each try kills the export
# mid-write unless it has finished already (then the output must be whole: every table).
# A signal right after an output is in place, or while it is written, says so in one line.
# Usage: interrupt_output_test.sh MHC
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset mhc-27b --steps 2 -o t.db >/dev/null || fail generate
tables=$("$mhc" export t.db --format csv -o whole | head -1 | sed 's/.*: \([0-9]*\) tables.*/\1/')
[ "$tables" -gt 10 ] || fail "export csv: $tables tables"
killed=0
for try in $(seq 1 12); do
    sig=TERM; [ $((try % 2)) = 0 ] && sig=HUP
    rm -rf out nested
    dir=out; [ $((try % 3)) = 0 ] && dir=nested/deeper/out
    "$mhc" export t.db --format csv -o "$dir" >/dev/null 2>err &
    pid=$!
    while [ ! -d "$dir" ] && kill -0 $pid 2>/dev/null; do :; done
    kill -$sig $pid 2>/dev/null
    { wait $pid; } 2>/dev/null; rc=$?
    if [ $rc = 0 ]; then
        [ "$(ls "$dir" | wc -l)" = "$tables" ] || fail "a finished export left $(ls "$dir" | wc -l) files"
        continue
    fi
    [ $rc -gt 128 ] || fail "export exited $rc: $(cat err)"
    # The tables begun are counted and named, in the folder they were for (it said "before
    # out/meta.csv and 2 other files were written").
    grep -qE "^mhc: stopped by SIG$sig before [0-9]+ files in $dir/ \(meta.csv, .*\) were written \(no part of them left\)|^mhc: stopped by SIG$sig before $dir/meta.csv was written \(no part of it left\)$" err ||
        [ ! -s err ] || fail "SIG$sig mid-export said: $(cat err)"
    killed=$((killed + 1))
    [ ! -e out ] && [ ! -e nested ] || fail "SIG$sig mid-export left: $(find out nested 2>/dev/null | head -5)"
    [ -z "$(ls -A | grep -v -e '^t.db$' -e '^whole$' -e '^err$')" ] || fail "SIG$sig left: $(ls -A)"
done
[ $killed -gt 0 ] || fail "no try was interrupted mid-write (every export finished first)"

# A signal that comes right after an output is renamed into place (the command not done: its
# summary unprinted) stopped it with 143 and nothing said, as one that came before; now one line
# says what is left. MHC_TEST_SIGNAL_AFTER_COMMIT=N raises signal N at that moment.
fixture=$(dirname "$0")/../import/fixtures/cpu_mlp_kineto.json.gz
after_commit() {   # SIGNAL WANT COMMAND...: stopped with 128+SIGNAL, one line on stderr, WANT
    local sig=$1 want=$2
    shift 2
    MHC_TEST_SIGNAL_AFTER_COMMIT=$sig "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = $((128 + sig)) ] || fail "$* with signal $sig after the rename exited $rc: $(cat err)"
    [ "$(wc -l <err)" = 1 ] && [ "$(cat err)" = "$want" ] || fail "$*: said '$(cat err)', wanted '$want'"
}
after_commit 15 "mhc: stopped by SIGTERM after g.db was written whole" generate --preset gpt2-small --steps 1 --layers 1 -o g.db
"$mhc" check g.db >/dev/null || fail "the trace said whole is not"
after_commit 1 "mhc: stopped by SIGHUP after i.db was written whole" import "$fixture" -o i.db
"$mhc" check i.db >/dev/null || fail "the import said whole is not"
after_commit 2 "mhc: stopped by SIGINT after e.json was written whole" export g.db -o e.json
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' e.json || fail "the export said whole is not"
rm -rf csv
# Every table is named or counted (it said "after csv/run_memory.csv and 15 other files", as if
# one table were whole and the others something else).
after_commit 15 "mhc: stopped by SIGTERM after $tables files in csv/ (meta.csv, allocations.csv, kernels.csv, accesses.csv, copies.csv, ..., run_memory.csv) were written whole" \
    export t.db --format csv -o csv
[ "$(ls csv | wc -l)" = "$tables" ] || fail "the csv export said whole has $(ls csv | wc -l) files"
# A runs database made before the first store is no output of its own: the store's lines say
# (the first at once, the second once the runs are stored).
MHC_TEST_SIGNAL_AFTER_COMMIT=15 "$mhc" simulate g.db --capacity 90% --runs-db runs.db >out 2>err; rc=$?
[ $rc = 143 ] && [ "$(cat err)" = "mhc: interrupted: storing the runs whole first, then stopping
mhc: stopped by SIGTERM after the runs were stored whole in runs.db" ] || fail "simulate --runs-db exited $rc: $(cat err)"
# validate --link auto writes its calibration to a cache: a signal after that (mid-replay) said
# "stopped by SIGTERM after ~/.cache/mhc/replay-link-....json was written whole", as if that were
# the command's output. The cache is not named.
XDG_CACHE_HOME=$tmp/cache MHC_TEST_SIGNAL_AFTER_COMMIT=15 "$mhc" validate g.db --capacity 90% --link auto \
    --recalibrate --repeat 1 --no-store >out 2>err; rc=$?
[ $rc = 143 ] || fail "validate --link auto with a signal after the cache's rename exited $rc: $(tail -3 err)"
[ -n "$(ls "$tmp/cache/mhc/"replay-link-*.json 2>/dev/null)" ] || fail "no calibration cached: $(tail -3 err)"
grep -q "written whole" err && fail "validate named its cache as written: $(grep 'written whole' err)"
# A signal while the output is written: the line says that no part of it is left.
mid=0
for try in 1 2 3 4 5 6; do
    rm -f m.db
    "$mhc" generate --preset mhc-27b --steps 2 -o m.db >/dev/null 2>err &
    pid=$!
    while ! ls | grep -q '^m\.db\.mhc-tmp-' && kill -0 $pid 2>/dev/null; do :; done
    kill -TERM $pid 2>/dev/null
    { wait $pid; } 2>/dev/null; rc=$?
    [ $rc = 0 ] && continue
    [ $rc = 143 ] || fail "generate stopped mid-write exited $rc: $(cat err)"
    [ "$(wc -l <err)" = 1 ] || fail "generate stopped mid-write said: $(cat err)"
    if [ "$(cat err)" = "mhc: stopped by SIGTERM before m.db was written (no part of it left)" ]; then
        [ ! -e m.db ] || fail "m.db said not written is there"
        mid=$((mid + 1))
    else
        [ "$(cat err)" = "mhc: stopped by SIGTERM after m.db was written whole" ] || fail "mid-write: $(cat err)"
    fi
done
[ $mid -gt 0 ] || fail "no generate was stopped mid-write"
# generate stops on SIGINT by a handler of its own: the same words (it said "generate
# interrupted; m.db was not written").
"$mhc" generate --preset mhc-27b --steps 2 -o m.db >/dev/null 2>err &
pid=$!
while ! ls | grep -q '^m\.db\.mhc-tmp-' && kill -0 $pid 2>/dev/null; do :; done
kill -INT $pid 2>/dev/null
{ wait $pid; } 2>/dev/null; rc=$?
[ $rc = 0 ] || { [ $rc = 130 ] && [ "$(cat err)" = "mhc: stopped by SIGINT before m.db was written (no part of it left)" ]; } ||
    fail "generate stopped by SIGINT exited $rc: $(cat err)"
echo "ok ($killed of 12 interrupted mid-write; $mid of 6 generates)"
