#!/usr/bin/env bash
# An export interrupted by SIGTERM or SIGHUP while it writes leaves nothing where its output was
# to be: no temporary file, and no folder it made (export --format csv -o DIR made DIR, then
# died with it empty). The signal is sent once the folder exists, so each try kills the export
# mid-write unless it has finished already (then the output must be whole: every table).
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
    killed=$((killed + 1))
    [ ! -e out ] && [ ! -e nested ] || fail "SIG$sig mid-export left: $(find out nested 2>/dev/null | head -5)"
    [ -z "$(ls -A | grep -v -e '^t.db$' -e '^whole$' -e '^err$')" ] || fail "SIG$sig left: $(ls -A)"
done
[ $killed -gt 0 ] || fail "no try was interrupted mid-write (every export finished first)"
echo "ok ($killed of 12 interrupted mid-write)"
