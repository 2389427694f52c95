#!/usr/bin/env bash
# --runs-db for the commands that read runs: export (csv and perfetto) and mhc-view read the runs
# that simulate stored in a runs database, as info and check do; a runs database made for
# another trace is refused in one line naming it (exit 2), with no output written; the runs
# database is never an output.
# Usage: runs_db_readers_test.sh MHC [MHC_VIEW]
set -u
mhc=$1
view=${2:-}
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
gen() { "$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 "$@" >/dev/null || fail "generate $*"; }
gen --seed 1 -o t.db
gen --seed 2 -o u.db
"$mhc" -q simulate t.db --capacity 80% --runs-db runs.db >/dev/null || fail "simulate --runs-db"
"$mhc" -q simulate t.db --capacity 90% --runs-db runs.db >/dev/null || fail "simulate --runs-db"
[ "$(sqlite3 t.db 'SELECT count(*) FROM runs')" = 0 ] || fail "the trace got runs"
# refused CMD...: exit 2, one line on stderr naming $want
refused() {
    "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err || fail "$* exited $rc: $(cat err)"
}

# csv: the run tables are the runs database's runs of the trace (2 runs, their events).
"$mhc" export t.db --format csv -o csv --runs-db runs.db >/dev/null || fail "export csv --runs-db"
[ "$(($(wc -l <csv/runs.csv) - 1))" = 2 ] || fail "runs.csv: $(cat csv/runs.csv)"
[ "$(($(wc -l <csv/run_events.csv) - 1))" = "$(sqlite3 runs.db 'SELECT count(*) FROM run_events')" ] ||
    fail "run_events.csv does not hold the runs database's events"
[ "$(($(wc -l <csv/allocations.csv) - 1))" = "$(sqlite3 t.db 'SELECT count(*) FROM allocations')" ] ||
    fail "allocations.csv is not the trace's"
"$mhc" export t.db --format csv -o csv2 --runs-db runs.db --run 2 >/dev/null || fail "export csv --runs-db --run 2"
[ "$(tail -n +2 csv2/runs.csv | cut -d, -f1)" = 2 ] || fail "--run 2: $(cat csv2/runs.csv)"
# perfetto: the run's events come from the runs database.
"$mhc" export t.db -o p.json --run 1 --runs-db runs.db >/dev/null || fail "export perfetto --runs-db --run 1"
grep -q '"run 1 (' p.json || fail "the Perfetto trace lacks run 1"
# Without --runs-db the trace has no run 1.
want="run 1"; refused "$mhc" export t.db -o q.json --run 1
[ ! -e q.json ] || fail "a refused export left q.json"
# Another trace's runs database: refused, nothing written.
want="another trace"; refused "$mhc" export u.db --format csv -o csv3 --runs-db runs.db
[ ! -e csv3 ] || fail "a refused export left csv3"
# (A perfetto export reads a runs database only for --run: without it, --runs-db is refused as
# having nothing to do, tests/cli/survey_test.sh.)
want="another trace"; refused "$mhc" export u.db -o u.json --runs-db runs.db --run 1
[ ! -e u.json ] || fail "a refused export left u.json"
# An unknown run of the runs database, a missing runs database, the runs database as output.
want="run 9 does not exist"; refused "$mhc" export t.db --format csv -o csv4 --runs-db runs.db --run 9
[ ! -e csv4 ] || fail "a refused export left csv4"
want="missing.db: no such file"; refused "$mhc" export t.db -o m.json --runs-db missing.db --run 1
[ ! -e missing.db ] || fail "export created the runs database it was to read"
cp runs.db runs-before.db
want="runs.db: is the input file runs.db"; refused "$mhc" export t.db -o runs.db --runs-db runs.db --force --run 1
cmp -s runs.db runs-before.db || fail "export wrote over its runs database"

# mhc-view: another trace's runs database is refused before any window opens; its runs are
# shown from the runs database (a screenshot of run 1 under xvfb).
if [ -n "$view" ]; then
    want="another trace"; refused "$view" u.db --runs-db runs.db
    want="missing.db"; refused "$view" t.db --runs-db missing.db
    if command -v xvfb-run >/dev/null; then
        timeout 120 xvfb-run -a "$view" t.db --runs-db runs.db --run 1 --run 2 --view compare --screenshot s.png \
            --layout l.json >out 2>err || fail "mhc-view --runs-db --run 1 --run 2: $(cat err)"
        [ -s s.png ] || fail "no screenshot"
        python3 -c '
import json, sys
runs = json.load(open("l.json"))["compare"]["runs"]
assert [r["id"] for r in runs] == [1, 2], runs' || fail "the compare view does not show runs 1 and 2: $(head -c 600 l.json)"
    else
        echo "skipped: mhc-view screenshots (no xvfb-run)"
    fi
else
    echo "skipped: mhc-view (not built)"
fi
echo ok
