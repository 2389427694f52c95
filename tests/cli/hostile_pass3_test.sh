#!/usr/bin/env bash
# Hostile pass 3: outputs named as SQLite's side files of a trace (T.db-journal, -wal, -shm),
# and such a name taken by something that is no file; meta device_memory that is no size.
# Usage: hostile_pass3_test.sh MHC
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate

# An output named T.db-journal (or -wal, -shm) of an existing database: SQLite takes it for an
# interrupted write of T.db and deletes it the next time T.db is opened. `simulate --runs-db
# t.db-journal` stored its runs there, and the next `mhc info t.db` removed them; `export -o
# t.db-journal` likewise, and until then `import t.db` called t.db corrupt. Refused before the work.
for args in "simulate t.db --capacity 90% --runs-db t.db-journal" "sweep t.db --capacities 90% --policies lru --no-bisect --runs-db t.db-wal" \
            "export t.db -o t.db-journal" "export t.db --format csv -o t.db-wal" "info t.db --runs-db t.db-shm" \
            "generate --preset gpt2-small --steps 1 --layers 1 -o t.db-journal"; do
    # shellcheck disable=SC2086
    refused "is the name of t.db's" $args
done
refused "t.db-wal: is the name of t.db's write-ahead log (t.db is an SQLite database)" export t.db --format csv -o t.db-wal
[ -z "$(ls -A | grep -v -e '^t.db$' -e '^out$' -e '^err$')" ] || fail "a refused command left: $(ls -A)"
# A name ending so beside a file that is no SQLite database is a name like any other.
echo notes >n.txt
"$mhc" export t.db -o n.txt-journal >/dev/null 2>err || fail "export -o n.txt-journal: $(cat err)"

# A folder where SQLite keeps a trace's journal or write-ahead log: every command said "cannot
# read: unable to open database file" (and an export making t.db-wal mid-run "near FROM: syntax
# error"); now it names the folder.
for side in journal wal; do
    mkdir "t.db-$side"
    refused "t.db: cannot read: t.db-$side is a directory, where SQLite keeps t.db's" info t.db
    refused "t.db-$side is a directory" simulate t.db --capacity 90%
    rmdir "t.db-$side"
done
"$mhc" check t.db >/dev/null || fail "t.db after the folders went"

# meta device_memory that is no size: `info` printed "1e400" as "(1 B)" (std::stoll stopped at
# the 'e') and "9223372036854775807" as 8.00 EiB, `check` said ok. Now check names it and info
# prints no size.
for bad in 1e400 abc -1 9223372036854775807; do
    cp t.db m.db
    sqlite3 m.db "UPDATE meta SET value = '$bad' WHERE key = 'device_memory'" || fail "sqlite3"
    "$mhc" check m.db >out 2>&1; rc=$?
    [ $rc = 2 ] && grep -qF "m.db: meta device_memory: '$bad' is not a size in bytes in [0, 2^56] [meta]" out ||
        fail "check of device_memory '$bad' exited $rc: $(cat out)"
    "$mhc" info m.db >out 2>err || fail "info of device_memory '$bad': $(cat err)"
    grep -q '^device .*(' out && fail "info printed a device size for '$bad': $(grep '^device' out)"
done
echo ok
