#!/usr/bin/env bash
# Traces written before the v2 content digest carry a v1 digest (every row in key order): `mhc
# check` recomputes v1 for them, accepts the file as written, and reports a row changed with the
# triggers dropped (rule content-digest, naming the v1 value the rows give). Usage:
# digest_v1_test.sh MHC V1_TRACE_DB_GZ
set -u
mhc=$1
v1=$2
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 0; }
gzip -dc "$v1" >t.db || fail "gunzip $v1"
digest=$(sqlite3 t.db "SELECT value FROM meta WHERE key = 'content_digest'")
case "$digest" in v1:*) ;; *) fail "the fixture has no v1 digest: '$digest'" ;; esac
"$mhc" -q check t.db >out 2>&1 || fail "check of a v1 trace as written: $(cat out)"
sqlite3 t.db "SELECT 'DROP TRIGGER ' || name || ';' FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'content_digest_%'" >drop.sql
sqlite3 t.db <drop.sql || fail "drop triggers"
"$mhc" -q check t.db >out 2>&1 || fail "check after dropping the triggers: $(cat out)"
sqlite3 t.db "UPDATE strings SET text = text || 'x' WHERE id = (SELECT max(id) FROM strings)" || fail "sqlite3 update"
"$mhc" check t.db >out 2>&1 && fail "check passed a v1 trace whose rows changed"
grep -q "content-digest" out || fail "check does not name rule content-digest: $(cat out)"
grep -q "but the rows give v1:" out || fail "check did not recompute v1: $(cat out)"
echo PASS
