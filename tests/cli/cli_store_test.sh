#!/usr/bin/env bash
# The CLI's storage contract (docs/cli.md): no silent overwrite, a result printed before it is
# stored, a distinct exit status when it cannot be stored, --runs-db, and inputs to the
# simulator range-checked (devices, samples, link profiles).
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
gen() { "$mhc" generate --preset gpt2-small --steps 1 --layers 2 --seq 128 "$@" >/dev/null; }
t=$tmp/t.db

# Defect 9: an existing output is refused without --force, and left as it was.
gen -o "$t" || fail "generate failed"
"$mhc" simulate "$t" --capacity 80% >/dev/null || fail "simulate failed"
gen --seed 7 -o "$t" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "generate over an existing trace exited $rc, wanted 2"
grep -q -- "--force" "$tmp/err" || fail "no --force hint: $(cat "$tmp/err")"
"$mhc" info "$t" | grep -q "simulated" || fail "the refused generate lost the stored run"
chmod 0444 "$t"
gen --seed 7 -o "$t" 2>/dev/null && fail "generate replaced a read-only trace without --force"
chmod 0644 "$t"
gen --seed 7 --force -o "$t" || fail "generate --force failed"
"$mhc" info "$t" | grep -q "simulated" && fail "generate --force kept the old runs"
ls "$tmp" | grep -q "tmp-" && fail "temporary file left: $(ls "$tmp")"
# export: an existing output (here another trace, with its runs) is refused without --force, and
# the trace being exported is never its own output, nor an import's input its output.
gen -o "$tmp/other.db"
"$mhc" simulate "$tmp/other.db" --capacity 80% >/dev/null || fail "simulate other"
sum=$(sha256sum <"$tmp/other.db")
"$mhc" export "$t" -o "$tmp/other.db" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "export over an existing trace exited $rc, wanted 2"
grep -q -- "--force" "$tmp/err" || fail "export: no --force hint: $(cat "$tmp/err")"
"$mhc" export "$t" --format csv -o "$tmp/csv" >/dev/null || fail "export csv"
"$mhc" export "$t" --format csv -o "$tmp/csv" >/dev/null 2>&1 && fail "export csv replaced existing tables without --force"
"$mhc" export "$t" --format csv --force -o "$tmp/csv" >/dev/null || fail "export csv --force"
for f in "$t" "$tmp/other.db"; do
    "$mhc" export "$f" --force -o "$f" >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc = 2 ] || fail "export of $f onto itself with --force exited $rc, wanted 2"
    grep -q "input file" "$tmp/err" || fail "export onto itself: $(cat "$tmp/err")"
done
ln -s "$tmp/other.db" "$tmp/link.db"
"$mhc" export "$tmp/other.db" --force -o "$tmp/link.db" >/dev/null 2>&1 && fail "export onto a link to its input"
[ "$(sha256sum <"$tmp/other.db")" = "$sum" ] || fail "export damaged an existing trace"
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2}]}' >"$tmp/k.json"
ksum=$(sha256sum <"$tmp/k.json")
"$mhc" import "$tmp/k.json" --force -o "$tmp/k.json" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "input file" "$tmp/err" || fail "import onto its own input exited $rc: $(cat "$tmp/err")"
[ "$(sha256sum <"$tmp/k.json")" = "$ksum" ] || fail "import replaced its own input"
rm -f "$tmp/link.db" "$tmp/k.json"

# Defect 4: a run that cannot be stored: the result is printed, exit 4, one line. Root writes
# 0444 files, so the store also fails here through a runs database that cannot be created.
not_stored() {   # not_stored ARGS...: simulate and sweep with these storage arguments
    "${as_user[@]}" "$mhc" simulate "$t" --capacity 80% "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 4 ] || fail "simulate $* exited $rc, wanted 4: $(cat "$tmp/err")"
    grep -q "loss" "$tmp/out" || fail "no result printed: $(cat "$tmp/out")"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "expected one line on stderr: $(cat "$tmp/err")"
    grep -q -- "--no-store" "$tmp/err" || fail "no --no-store hint: $(cat "$tmp/err")"
    "${as_user[@]}" "$mhc" simulate "$t" --capacity 80% --json "$@" >"$tmp/out" 2>/dev/null; rc=$?
    [ $rc = 4 ] || fail "simulate --json $* exited $rc, wanted 4"
    grep -q "^{" "$tmp/out" || fail "no JSON printed"
    "${as_user[@]}" "$mhc" sweep "$t" --policies lru --capacities 80% --links pcie4 "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 4 ] || fail "sweep $* exited $rc, wanted 4: $(cat "$tmp/err")"
}
as_user=()
# A runs database in a folder that is not there is known before the work: refused, exit 2,
# nothing computed (it was computed, then not stored: exit 4).
for cmd in "simulate $t --capacity 80%" "sweep $t --policies lru --capacities 80% --links pcie4"; do
    "$mhc" $cmd --runs-db "$tmp/no/such/dir/runs.db" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 2 ] && [ ! -s "$tmp/out" ] && grep -q "no/such/dir is not a directory" "$tmp/err" ||
        fail "$cmd --runs-db in no folder exited $rc: $(cat "$tmp/out" "$tmp/err")"
done
# Read-only (0444) traces: root writes them anyway (and CI runs as root), so as root these cases
# run as the unprivileged user nobody, who can read the trace (the folder is made world-readable)
# but not write it; without setpriv or runuser they are reported as skipped (exit 77).
ro_skipped=
if [ "$(id -u)" = 0 ]; then
    if command -v setpriv >/dev/null; then
        as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    elif command -v runuser >/dev/null; then
        as_user=(runuser -u nobody --)
    else
        ro_skipped="root without setpriv or runuser: the read-only cases cannot run"
    fi
    chmod 0755 "$tmp"
fi
chmod 0444 "$t"
if [ -z "$ro_skipped" ]; then
    runs_ro=$("$mhc" info "$t" | grep -cE '^ +[0-9]+ +simulated')
    "${as_user[@]}" "$mhc" info "$t" >/dev/null 2>"$tmp/err" || fail "info of a read-only trace as $(whoami): $(cat "$tmp/err")"
    not_stored
    "${as_user[@]}" "$mhc" simulate "$t" --capacity 80% >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 4 ] || fail "simulate on a read-only trace exited $rc, wanted 4: $(cat "$tmp/err")"
    grep -q "throughput" "$tmp/out" || grep -q "loss" "$tmp/out" || fail "no result printed: $(cat "$tmp/out")"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "expected one line on stderr: $(cat "$tmp/err")"
    grep -q "read-only" "$tmp/err" || fail "the reason is not a read-only trace: $(cat "$tmp/err")"
    grep -q -- "--runs-db" "$tmp/err" || fail "no --runs-db hint: $(cat "$tmp/err")"
    "${as_user[@]}" "$mhc" simulate "$t" --capacity 80% --json >"$tmp/out" 2>/dev/null; rc=$?
    [ $rc = 4 ] || fail "simulate --json on a read-only trace exited $rc, wanted 4"
    grep -q "^{" "$tmp/out" || fail "no JSON printed"
    "${as_user[@]}" "$mhc" sweep "$t" --policies lru --capacities 80% --links pcie4 >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 4 ] || fail "sweep on a read-only trace exited $rc, wanted 4: $(cat "$tmp/err")"
    [ "$("$mhc" info "$t" | grep -cE '^ +[0-9]+ +simulated')" = "$runs_ro" ] || fail "a run was stored in a read-only trace"
    # generate over a read-only trace without --force: refused.
    "${as_user[@]}" "$mhc" generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o "$t" >/dev/null 2>"$tmp/err" \
        && fail "generate replaced a read-only trace without --force (as $(whoami))"
fi
# --runs-db stores beside a read-only trace; info reads them back.
"$mhc" simulate "$t" --capacity 80% --runs-db "$tmp/runs.db" >"$tmp/out" || fail "simulate --runs-db failed"
grep -q "runs.db" "$tmp/out" || fail "simulate did not say where it stored the run"
"$mhc" sweep "$t" --policies lru,largest --capacities 80% --links pcie4 --no-bisect --runs-db "$tmp/runs.db" >/dev/null \
    || fail "sweep --runs-db failed"
n=$("$mhc" info "$t" --runs-db "$tmp/runs.db" | grep -cE '^ +[0-9]+ +simulated')
[ "$n" = 3 ] || fail "info --runs-db listed $n runs, wanted 3"
"$mhc" check "$t" >/dev/null || fail "check of a read-only trace failed"
"$mhc" export "$t" -o "$tmp/t.json" >/dev/null || fail "export of a read-only trace failed"
chmod 0644 "$t"
gen -o "$tmp/u.db"
"$mhc" info "$tmp/u.db" --runs-db "$tmp/runs.db" 2>"$tmp/err" && fail "info accepted runs of another trace"
grep -q "another trace" "$tmp/err" || fail "wrong message: $(cat "$tmp/err")"
# Storing into another trace's runs database, or into a trace: refused before the work, exit 2,
# nothing printed (the result was computed and printed, then not stored: exit 4, as docs/cli.md
# said it was not).
for cmd in "simulate $tmp/u.db --capacity 80% --runs-db $tmp/runs.db" \
           "sweep $tmp/u.db --capacities 80% --policies lru --no-bisect --runs-db $tmp/runs.db" \
           "validate $tmp/u.db --capacity 80% --link pcie4 --repeat 1 --runs-db $tmp/runs.db" \
           "simulate $t --capacity 80% --runs-db $tmp/u.db"; do
    # shellcheck disable=SC2086
    "$mhc" $cmd >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] ||
        fail "$cmd exited $rc, wanted 2 before the work: $(cat "$tmp/err") $(head -c 200 "$tmp/out")"
    grep -qE "holds runs of another trace|not an mhc runs database" "$tmp/err" || fail "$cmd: $(cat "$tmp/err")"
done
# A coupled job likewise: another trace's runs database, or one of the job's own traces.
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 --pp 2 --all-ranks -o "$tmp/j.db" >/dev/null ||
    fail "generate --all-ranks"
for db in "$tmp/runs.db" "$tmp/./j.rank1.db"; do
    "$mhc" simulate --ranks "$tmp/j.rank0.db" "$tmp/j.rank1.db" --capacity 90% --runs-db "$db" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] ||
        fail "simulate --ranks --runs-db $db exited $rc, wanted 2 before the work: $(cat "$tmp/err")"
done
"$mhc" -q simulate --ranks "$tmp/j.rank0.db" "$tmp/j.rank1.db" --capacity 90% --runs-db "$tmp/job-runs.db" >/dev/null &&
    "$mhc" -q simulate --ranks "$tmp/j.rank0.db" "$tmp/j.rank1.db" --capacity 80% --runs-db "$tmp/job-runs.db" >/dev/null ||
    fail "simulate --ranks into its own runs database"
# --runs-db naming the trace itself, under any name (./T.db, a link): its own runs, as without it
# (./T.db and a link were refused after the work, exit 4, while T.db stored into the trace).
ln -s "$tmp/u.db" "$tmp/u-link.db"
for same in "$tmp/u.db" "$tmp/./u.db" "$tmp/u-link.db"; do
    before=$(sqlite3 "$tmp/u.db" "SELECT count(*) FROM runs")
    "$mhc" simulate "$tmp/u.db" --capacity 80% --runs-db "$same" >"$tmp/out" 2>"$tmp/err" ||
        fail "simulate --runs-db $same (the trace) exited $?: $(cat "$tmp/err")"
    [ "$(sqlite3 "$tmp/u.db" "SELECT count(*) FROM runs")" = $((before + 1)) ] || fail "--runs-db $same stored no run in the trace"
    "$mhc" info "$tmp/u.db" --runs-db "$same" >"$tmp/out" 2>"$tmp/err" || fail "info --runs-db $same exited $?: $(cat "$tmp/err")"
    "$mhc" check "$tmp/u.db" --runs-db "$same" >"$tmp/out" 2>"$tmp/err" || fail "check --runs-db $same exited $?: $(cat "$tmp/err")"
done

# Defect 10 and 6: options and link profiles out of range are exit 2, nothing stored.
expect2() {
    "$@" >/dev/null 2>"$tmp/err"; local rc=$?
    [ $rc = 2 ] || fail "$* exited $rc, wanted 2: $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" -le 2 ] || fail "$*: long error: $(cat "$tmp/err")"
}
runs_before=$("$mhc" info "$t" | grep -cE '^ +[0-9]+ +simulated')
expect2 "$mhc" simulate "$t" --capacity 50% --device 99
grep -q "its devices: 0" "$tmp/err" || fail "--device 99 did not list the devices: $(cat "$tmp/err")"
expect2 "$mhc" simulate "$t" --capacity 50% --memory-samples 2147483647
grep -q "memory-samples" "$tmp/err" || fail "--memory-samples 2147483647: the error does not name memory-samples: $(cat "$tmp/err")"
expect2 "$mhc" simulate "$t" --capacity 50% --max-swap-ops-per-sec 1e-20
grep -q "max-swap-ops-per-sec" "$tmp/err" || fail "--max-swap-ops-per-sec 1e-20: the error does not name max-swap-ops-per-sec: $(cat "$tmp/err")"
expect2 "$mhc" simulate "$t" --capacity 50% --latency 10000000000s
grep -q -- "--latency: '10000000000s'" "$tmp/err" || fail "--latency 10000000000s: the error does not name the option and its value: $(cat "$tmp/err")"
expect2 "$mhc" simulate "$t" --capacity 50% --h2d-bandwidth 0.000000000001B/s
grep -q -- "--h2d-bandwidth: '0.000000000001B/s'" "$tmp/err" || fail "--h2d-bandwidth 0.000000000001B/s: the error does not name the option and its value: $(cat "$tmp/err")"
cat >"$tmp/link.json" <<'JSON'
{"name": "huge", "h2d": {"bandwidth_Bps": 2.5e10, "latency_s": 6e-6},
 "d2h": {"bandwidth_Bps": 2.5e10, "latency_s": 6e-6}, "copy_engines": 4294967297, "duplex_factor": 0.8}
JSON
expect2 "$mhc" simulate "$t" --capacity 50% --link "$tmp/link.json"
grep -q "copy_engines" "$tmp/err" || fail "copy_engines not named: $(cat "$tmp/err")"
sed -i 's/4294967297/2/; s/"latency_s": 6e-6}, "copy/"latency_s": 1e10}, "copy/' "$tmp/link.json"
expect2 "$mhc" simulate "$t" --capacity 50% --link "$tmp/link.json"
# The check of --runs-db before the work reads the database's meta and tables, not its runs: it
# listed every run with its metrics and config (100,000 runs: 12.5 s and 500 MiB before a
# simulate of a tiny trace; bench/trace/runs_db_precheck.sh). 20,000 runs copied by SQL: the
# simulate's peak memory, 100 MiB before, stays under 48 MiB.
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o "$tmp/tiny.db" >/dev/null && "$mhc" -q simulate "$tmp/tiny.db" --capacity 90% --runs-db "$tmp/many.db" >/dev/null ||
    fail "tiny trace and its runs database"
sqlite3 "$tmp/many.db" >/dev/null <<'SQL' || fail "copying runs in $tmp/many.db"
PRAGMA journal_mode=OFF;
CREATE TEMP TABLE k(v INTEGER PRIMARY KEY);
WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM c WHERE v < 20000) INSERT INTO k SELECT v FROM c;
BEGIN;
INSERT INTO runs (id, kind, name, status, created, base_run, trace_fingerprint)
  SELECT id + v, kind, name, status, created, base_run, trace_fingerprint FROM runs, k WHERE id = 1;
INSERT INTO run_config SELECT run + v, key, value FROM run_config, k WHERE run = 1;
INSERT INTO run_metrics SELECT run + v, key, value FROM run_metrics, k WHERE run = 1;
INSERT INTO run_trace SELECT run + v, trace FROM run_trace, k WHERE run = 1;
COMMIT;
SQL
python3 - "$mhc" "$tmp/tiny.db" "$tmp/many.db" <<'PY' || fail "simulate --runs-db of 20,000 runs"
import resource, subprocess, sys
mhc, trace, runs = sys.argv[1:]
subprocess.run([mhc, "-q", "simulate", trace, "--capacity", "90%", "--runs-db", runs], check=True, stdout=subprocess.DEVNULL)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
assert peak < 48, f"peak memory {peak:.1f} MiB"
PY
[ "$(sqlite3 "$tmp/many.db" 'SELECT count(*) FROM runs')" = 20002 ] || fail "the run was not stored among 20,000"
[ "$("$mhc" info "$t" | grep -cE '^ +[0-9]+ +simulated')" = "$runs_before" ] || fail "a refused simulate stored a run"
if [ -n "$ro_skipped" ]; then echo "skipped: $ro_skipped"; exit 77; fi
echo ok
