#!/usr/bin/env bash
# mhc's contract on bad input: one line on stderr and exit 2; a clean trace checks with 0.
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"

expect() {  # expect STATUS CMD...
    local want=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    [ "$got" = "$want" ] || fail "$* exited $got, wanted $want: $(cat "$tmp/err")"
    if [ "$want" = 2 ]; then
        local lines; lines=$(wc -l <"$tmp/err")
        [ "$lines" -ge 1 ] && [ "$lines" -le 2 ] || fail "$*: expected a short error, got $lines lines"
    fi
}

expect 2 "$mhc" check "$tmp/missing.db"
expect 2 "$mhc" info "$tmp/missing.db"
expect 2 "$mhc" --no-such-option
expect 2 "$mhc" info --no-such-option x.db
expect 2 "$mhc" no-such-command
echo "not sqlite at all" > "$tmp/text.db"
expect 2 "$mhc" check "$tmp/text.db"
grep -q "not an SQLite database" "$tmp/err" || fail "check did not say what is wrong: $(cat "$tmp/err")"
expect 2 "$mhc" info "$tmp/text.db"
grep -q "text.db" "$tmp/err" || fail "info did not name the file"
: > "$tmp/empty.db"
expect 2 "$mhc" check "$tmp/empty.db"
echo "ok"
