#!/usr/bin/env bash
# mhc check verifies every reference between the tables of a trace (docs/trace-format.md): a
# row that names a string, kernel, allocation, module or run names one that exists, and a
# replay's base run is a simulated run. A generated trace with a stored run, a replayed run and
# a model capture's rows (modules, kernel_info, saved_tensors) passes; each corruption below,
# made with sqlite3, is one problem naming the table, the row and the field, exit 2.
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate
# A model capture's rows: module 2 inside module 1, a kernel of module 2 (every kernel has its
# row), a storage saved by it; then run 1, computed from those rows (a run records the trace it
# was computed from: rows added after it make it stale), and a replay of it as `mhc validate`
# stores it (base_run = the simulated run, the same trace).
k=$(sqlite3 t.db "SELECT min(id) FROM kernels")
a=$(sqlite3 t.db "SELECT min(id) FROM allocations")
s=$(sqlite3 t.db "SELECT min(id) FROM strings")
sqlite3 t.db "INSERT INTO modules VALUES (1, $s, 0, $s), (2, $s, 1, $s);
              INSERT INTO kernel_info SELECT id, CASE id WHEN $k THEN 2 ELSE 0 END, 0, 0, 0 FROM kernels;
              INSERT INTO saved_tensors VALUES ($a, $k, 1)" || fail "sqlite3 setup"
"$mhc" -q simulate t.db --capacity 90% >/dev/null || fail simulate   # run 1: swaps, so events
replay() {   # replay ID BASE: a replayed run's row, of the trace run 1 was computed from
    echo "INSERT INTO runs SELECT $1, 'replayed', 'r$1', 'complete', '2026-12-03T00:00:00Z', $2, trace_fingerprint
          FROM runs WHERE id = 1"
}
sqlite3 t.db "$(replay 2 1)" || fail "sqlite3 replay"
[ "$(sqlite3 t.db "SELECT sum(allocation != 0) > 0 AND sum(kernel != 0) > 0 FROM run_events WHERE run = 1")" = 1 ] ||
    fail "the simulated run has no event of an allocation, or none of a kernel"
"$mhc" check t.db >out 2>err || fail "check of the whole trace: $(cat out err)"

# corrupt SQL WANT: check exits 2, prints exactly one problem, and it contains WANT. An edit of
# the trace's own rows also makes runs 1 and 2 stale (computed from other rows), each listed:
# those lines are not counted.
corrupt() {
    cp t.db c.db
    sqlite3 c.db "$1" || fail "sqlite3 $1"
    "$mhc" check c.db >all 2>err; local rc=$?
    grep -v "^c.db: run [12] (.*) was computed from other data than c.db holds now" all >out
    [ $rc = 2 ] || fail "check after '$1' exited $rc: $(cat out err)"
    [ "$(wc -l <out)" = 1 ] || fail "check after '$1': wanted one problem: $(cat out)"
    grep -qF -- "$2" out || fail "check after '$1' does not say '$2': $(cat out)"
}
e1="(SELECT min(rowid) FROM run_events WHERE run = 1 AND allocation != 0)"
e2="(SELECT min(rowid) FROM run_events WHERE run = 1 AND kernel != 0)"
corrupt "UPDATE runs SET base_run = 999 WHERE id = 2" \
    "c.db: runs row 2: base_run refers to run 999, which does not exist [unknown-id]"
corrupt "UPDATE runs SET base_run = 2 WHERE id = 2" "c.db: runs row 2: base_run refers to the run itself [base-run]"
corrupt "UPDATE runs SET base_run = 2 WHERE id = 1" \
    "c.db: runs row 1: base_run refers to run 2 (replayed) from a simulated run"
corrupt "$(replay 3 2)" \
    "c.db: runs row 3: base_run refers to run 2 (replayed) from a replayed run"
corrupt "UPDATE run_events SET allocation = 99999 WHERE rowid = $e1" \
    "c.db: run_events row $(sqlite3 t.db "SELECT $e1"): allocation refers to allocation 99999, which does not exist (run 1)"
corrupt "UPDATE run_events SET kernel = 99999 WHERE rowid = $e2" \
    "run_events row $(sqlite3 t.db "SELECT $e2"): kernel refers to kernel 99999, which does not exist (run 1)"
corrupt "UPDATE run_kernels SET kernel = 99999 WHERE run = 1 AND kernel = $k" \
    "c.db: run_kernels row 1: kernel refers to kernel 99999, which does not exist (the row of run 1 and kernel 99999)"
corrupt "UPDATE markers SET name = 99999 WHERE id = (SELECT min(id) FROM markers)" \
    "name refers to string 99999, which does not exist"
corrupt "UPDATE modules SET parent = 7 WHERE id = 2" "c.db: modules row 2: parent refers to module 7, which does not exist"
corrupt "UPDATE modules SET name = 99999 WHERE id = 1" "c.db: modules row 1: name refers to string 99999"
corrupt "UPDATE modules SET type = 99999 WHERE id = 1" "c.db: modules row 1: type refers to string 99999"
corrupt "UPDATE kernel_info SET module = 9 WHERE kernel = $k" "kernel_info row $k: module refers to module 9, which does not exist"
corrupt "INSERT INTO kernel_info VALUES (99999, 2, 0, 0, 0)" "kernel_info row 99999: kernel refers to kernel 99999, which does not exist"
# A model capture's kernel without its row (advise refused it; check passed it).
corrupt "DELETE FROM kernel_info WHERE kernel > $k" \
    "c.db: kernels row $((k + 1)): has no kernel_info row (its module and phase), nor have $(($(sqlite3 t.db "SELECT count(*) FROM kernels") - 2)) later kernels; every kernel of a model capture has one [kernel-info]"
corrupt "UPDATE saved_tensors SET kernel = 99999" \
    "saved_tensors row 99999: kernel refers to kernel 99999, which does not exist (the row of allocation $a and kernel 99999)"
corrupt "UPDATE saved_tensors SET allocation = 99999" \
    "saved_tensors row $k: allocation refers to allocation 99999, which does not exist (the row of allocation 99999"
# Many dangling rows: every one counted, the listing bounded.
cp t.db m.db
sqlite3 m.db "UPDATE run_events SET allocation = allocation + 1000000 WHERE allocation != 0"
n=$(sqlite3 m.db "SELECT count(*) FROM run_events WHERE allocation != 0")
"$mhc" check m.db --max 3 >out 2>err && fail "check passed $n dangling events"
grep -q "^m.db: $n problems$" err || fail "check of $n dangling events: $(cat err)"

# A runs database (--runs-db): check holds it to the trace it is given. Its runs are that trace's
# (fingerprint), and their rows refer to the trace's kernels and allocations and to runs that exist.
"$mhc" -q simulate t.db --capacity 90% --runs-db r.db >/dev/null || fail "simulate --runs-db"
"$mhc" check t.db --runs-db r.db >out 2>err || fail "check of a trace and its runs database: $(cat out err)"
grep -q "^r.db: ok: its runs of " out || fail "check did not say the runs database is ok: $(cat out)"
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --seq 64 -o other.db >/dev/null || fail generate other
"$mhc" check other.db --runs-db r.db >out 2>err; rc=$?
[ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "r.db: holds runs of another trace" err ||
    fail "check of another trace's runs database exited $rc: $(cat out err)"
runs_corrupt() {   # runs_corrupt SQL WANT: check TRACE --runs-db exits 2 naming WANT
    cp r.db c.db
    sqlite3 c.db "$1" || fail "sqlite3 $1"
    "$mhc" check t.db --runs-db c.db >out 2>err; local rc=$?
    [ $rc = 2 ] && grep -qF -- "$2" out || fail "check --runs-db after '$1' exited $rc: $(cat out err)"
}
r1="(SELECT min(rowid) FROM run_events WHERE allocation != 0)"
runs_corrupt "UPDATE run_events SET allocation = 99999 WHERE rowid = $r1" \
    "c.db: run_events row $(sqlite3 r.db "SELECT $r1"): allocation refers to allocation 99999, which does not exist (run 1)"
runs_corrupt "UPDATE run_kernels SET kernel = 99999 WHERE kernel = $k" \
    "c.db: run_kernels row 1: kernel refers to kernel 99999, which does not exist"
runs_corrupt "UPDATE runs SET base_run = 7" "c.db: runs row 1: base_run refers to run 7, which does not exist"
runs_corrupt "UPDATE run_trace SET trace = 5" \
    "c.db: run_trace row 1: trace refers to trace 5, which does not exist: run 1 belongs to no trace of this database"
runs_corrupt "DELETE FROM runs" "c.db: run_config row 1: "
echo ok
