#!/usr/bin/env bash
# A runs database belongs to the trace's rows, not only to its meta and row counts: a Kineto
# file re-imported with one memory event moved by 5 us (same meta, same counts) is another trace
# to the runs stored for the first import, and so is a trace changed by hand with sqlite3 (the
# content digest's triggers); a digest made stale with the triggers dropped is what `mhc check`
# reports (rule content-digest). Usage: runs_db_identity_test.sh MHC KINETO_JSON_GZ
set -u
mhc=$1
kineto=$2
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 0; }

cp "$kineto" orig.json.gz
# The same profile with one free ([memory] event of negative Bytes) 5 us later; each is imported
# as p.json.gz, so that the meta (import.input) is the same.
python3 - orig.json.gz moved.json.gz <<'PY' || fail "could not move an event"
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1], "rt"))
frees = [e for e in d["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Bytes", 0) < 0]
frees[len(frees) // 2]["ts"] += 5.0
json.dump(d, gzip.open(sys.argv[2], "wt"))
PY
cp orig.json.gz p.json.gz
"$mhc" -q import p.json.gz -o trace.db >/dev/null 2>&1 || fail "import"
"$mhc" -q simulate trace.db --device -1 --capacity 1GiB --runs-db runs.db >/dev/null || fail "simulate --runs-db"
"$mhc" -q info trace.db --runs-db runs.db >/dev/null || fail "info --runs-db on its own trace"
before=$(sqlite3 trace.db "SELECT group_concat(t_free) FROM (SELECT t_free FROM allocations ORDER BY id)")
meta_before=$(sqlite3 trace.db "SELECT group_concat(key || '=' || value, ';') FROM meta WHERE key <> 'content_digest'")
counts_before=$(sqlite3 trace.db "SELECT (SELECT count(*) FROM allocations), (SELECT count(*) FROM kernels)")

cp moved.json.gz p.json.gz
"$mhc" -q import p.json.gz -o trace.db --force >/dev/null 2>&1 || fail "import --force of the moved event"
after=$(sqlite3 trace.db "SELECT group_concat(t_free) FROM (SELECT t_free FROM allocations ORDER BY id)")
[ "$before" != "$after" ] || fail "moving the event changed no row: the test proves nothing"
[ "$meta_before" = "$(sqlite3 trace.db "SELECT group_concat(key || '=' || value, ';') FROM meta WHERE key <> 'content_digest'")" ] ||
    fail "the re-import changed the meta: the test proves nothing"
[ "$counts_before" = "$(sqlite3 trace.db "SELECT (SELECT count(*) FROM allocations), (SELECT count(*) FROM kernels)")" ] ||
    fail "the re-import changed the row counts: the test proves nothing"
# The old runs are not this trace's: refused in one line naming the runs database.
refused "runs.db: holds runs of another trace ($PWD/trace.db as it was before it was rewritten or edited" info trace.db --runs-db runs.db
refused "runs.db: holds runs of another trace" check trace.db --runs-db runs.db
refused "runs.db: holds runs of another trace" simulate trace.db --device -1 --capacity 2GiB --runs-db runs.db
[ "$(sqlite3 runs.db 'SELECT count(*) FROM runs')" = 1 ] || fail "a run was stored beside another trace's"

# The same file imported again is the same trace: its runs are its own.
cp orig.json.gz p.json.gz
"$mhc" -q import p.json.gz -o trace.db --force >/dev/null 2>&1 || fail "import again"
"$mhc" -q info trace.db --runs-db runs.db >/dev/null || fail "info --runs-db after the same import"

# A hand edit (sqlite3) of one row: the triggers mark the digest edited, the identity changes.
sqlite3 trace.db "UPDATE allocations SET t_free = t_free + 5000 WHERE id = (SELECT max(id) FROM allocations WHERE t_free IS NOT NULL)" ||
    fail "sqlite3 update"
case "$(sqlite3 trace.db "SELECT value FROM meta WHERE key = 'content_digest'")" in
    edited:*) ;;
    *) fail "the edit left the digest as it was" ;;
esac
refused "runs.db: holds runs of another trace" info trace.db --runs-db runs.db
"$mhc" -q check trace.db >out 2>&1 || fail "check of an edited (valid) trace: $(cat out)"

# The triggers dropped, the row changed, the digest put back by hand: check says so.
"$mhc" -q import p.json.gz -o trace.db --force >/dev/null 2>&1 || fail "import a third time"
"$mhc" -q check trace.db >/dev/null 2>&1 || fail "check of a fresh import"
sqlite3 trace.db "SELECT 'DROP TRIGGER ' || name || ';' FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'content_digest_%'" >drop.sql
sqlite3 trace.db <drop.sql || fail "drop triggers"
sqlite3 trace.db "UPDATE allocations SET t_free = t_free + 5000 WHERE id = (SELECT max(id) FROM allocations WHERE t_free IS NOT NULL)"
"$mhc" check trace.db >out 2>&1 && fail "check passed a trace whose digest is stale"
grep -q "content-digest" out || fail "check does not name rule content-digest: $(cat out)"
echo PASS
