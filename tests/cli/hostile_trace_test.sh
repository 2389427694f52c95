#!/usr/bin/env bash
# Files that are not traces, or traces in a state no command can use, given to every command
# that reads a trace (info, check, simulate, sweep, advise, validate, export, allocator, and
# mhc-view when given): a truncated file, an empty one, another program's SQLite database,
# a trace of a newer schema version, random bytes, an SQLite header alone, a trace without its
# meta or kernels table, a symlink loop, a folder. Each is refused in one line naming the file,
# exit 2, with no output file left. Then: another program's database given as --runs-db is
# refused and left as it was (mhc's tables were written into it); a trace another process holds
# locked is said after a second of waiting, on a terminal or not (a silent wait of up to ten minutes).
# Usage: hostile_trace_test.sh MHC [MHC_VIEW]
set -u
mhc=$1
view=${2:-}
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate
size=$(stat -c %s t.db)
head -c $((size / 2)) t.db >truncated.db
: >empty.db
sqlite3 other.db "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes VALUES (1, 'hi')"
cp t.db newer.db && sqlite3 newer.db "PRAGMA user_version = 2"
cp t.db newer-meta.db && sqlite3 newer-meta.db "UPDATE meta SET value = '2' WHERE key = 'schema_version'"
head -c 4096 /dev/urandom >random.db
{ printf 'SQLite format 3\0'; head -c 100 /dev/zero; } >header.db
cp t.db no-meta.db && sqlite3 no-meta.db "DROP TABLE meta"
cp t.db no-kernels.db && sqlite3 no-kernels.db "DROP TABLE kernels"
ln -s loop-b.db loop-a.db && ln -s loop-a.db loop-b.db
mkdir folder.db
commands=("info" "check" "simulate --capacity 90% --no-store" "simulate --capacity 90%"
          "sweep --capacities 90% --policies lru --no-bisect" "advise --capacity 800MiB"
          "validate --capacity 90% --link pcie4 --repeat 1 --no-store" "export -o e.json --force" "allocator")
tried=0
for f in truncated.db empty.db other.db newer.db newer-meta.db random.db header.db no-meta.db no-kernels.db \
         loop-a.db folder.db; do
    for cmd in "${commands[@]}"; do
        rm -f e.json
        read -r -a words <<<"$cmd"
        timeout 60 "$mhc" "${words[0]}" "$f" "${words[@]:1}" >out 2>err; rc=$?
        tried=$((tried + 1))
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "$f" err ||
            fail "$cmd $f exited $rc, wanted 2 and one line naming it: $(head -c 300 err)"
        [ ! -e e.json ] || fail "export $f left e.json"
    done
    if [ -n "$view" ] && command -v xvfb-run >/dev/null; then
        timeout 60 xvfb-run -a "$view" "$f" --screenshot s.png >out 2>err; rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "$f" err ||
            fail "mhc-view $f exited $rc, wanted 2 and one line naming it: $(head -c 300 err)"
        [ ! -e s.png ] || fail "mhc-view $f wrote a screenshot"
    fi
done
[ $tried = 99 ] || fail "tried $tried commands, wanted 99"

# A trace that cannot be read (mode 000) and one in a folder that cannot be searched: said so
# (they read "cannot open: unable to open database file" and "no such file"). Root reads
# anything, so as root these run as the user nobody (skipped without setpriv).
as_user=()
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null && as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    chmod 0755 "$tmp"
fi
if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} -gt 0 ]; then
    cp t.db unreadable.db && chmod 000 unreadable.db
    mkdir closed && cp t.db closed/t.db && chmod 700 closed
    for cmd in info check "simulate --capacity 90% --no-store" "export -o /dev/null"; do
        read -r -a words <<<"$cmd"
        "${as_user[@]}" "$mhc" "${words[0]}" unreadable.db "${words[@]:1}" >out 2>err; rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "unreadable.db: cannot read: Permission denied" err ||
            fail "$cmd of an unreadable trace exited $rc: $(cat err)"
        "${as_user[@]}" "$mhc" "${words[0]}" closed/t.db "${words[@]:1}" >out 2>err; rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "closed/t.db: cannot be reached: Permission denied" err ||
            fail "$cmd of a trace in a closed folder exited $rc: $(cat err)"
    done
else
    echo "skipped: unreadable traces (root without setpriv)"
fi

# Another program's database as --runs-db: refused before the work, exit 2 (it was printed, then
# not stored: exit 4), its tables as they were. mhc wrote its ten tables beside 'notes' and said nothing.
before=$(sqlite3 other.db .schema)
for cmd in "simulate t.db --capacity 90%" "sweep t.db --capacities 90% --policies lru --no-bisect"; do
    read -r -a words <<<"$cmd"
    "$mhc" "${words[@]}" --runs-db other.db >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && [ ! -s out ] || fail "$cmd --runs-db other.db exited $rc: $(cat err)"
    grep -qF "other.db: not an mhc runs database" err ||
        fail "$cmd --runs-db other.db: $(cat err)"
    [ "$(sqlite3 other.db .schema)" = "$before" ] || fail "$cmd --runs-db other.db changed it: $(sqlite3 other.db .tables)"
done
# A runs database to read that is a FIFO: said as such (it was "cannot open: disk I/O error").
mkfifo pipe.db
for cmd in "info t.db" "check t.db"; do
    read -r -a words <<<"$cmd"
    timeout 10 "$mhc" "${words[@]}" --runs-db pipe.db >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "pipe.db: is a FIFO, not a regular file" err ||
        fail "$cmd --runs-db pipe.db exited $rc: $(cat err)"
done
# An empty file is still a runs database to be (docs/trace-format.md).
: >runs.db
"$mhc" -q simulate t.db --capacity 90% --runs-db runs.db >/dev/null 2>err || fail "--runs-db of an empty file: $(cat err)"
[ "$(sqlite3 runs.db "SELECT count(*) FROM runs")" = 1 ] || fail "--runs-db of an empty file stored no run"

# A trace locked by another writer: on a terminal, one line after a second says what the command
# waits for; then the timeout's one line (exit 2), or the command's output once the lock goes.
# Off a terminal too; with -q nothing but the timeout's line. (`script` gives the terminal.)
if command -v script >/dev/null; then
    # hold: an exclusive lock on t.db, as a writer in the middle of its commit, until release
    # (at most 2 minutes). Released by the test, not after a fixed time: on a loaded machine the
    # commands below may start seconds late.
    hold() {
        touch hold.flag
        # .timeout: the probe below may hold a read lock for the moment BEGIN EXCLUSIVE asks
        # (without it sqlite3 gives up at once, "database is locked", and no lock is held).
        (echo ".timeout 10000"
         echo "BEGIN EXCLUSIVE; UPDATE meta SET value = value WHERE key = 'format';"
         for _ in $(seq 1200); do [ -e hold.flag ] || break; sleep 0.1; done
         echo "COMMIT;") | sqlite3 t.db &
        for _ in $(seq 50); do
            sqlite3 t.db "PRAGMA busy_timeout = 0; SELECT 1 FROM meta LIMIT 1" >/dev/null 2>&1 || return 0
            sleep 0.1
        done
        fail "the lock was not taken"
    }
    note="mhc: t.db: locked by another process; waiting for it (at most"
    hold
    MHC_BUSY_TIMEOUT_MS=2000 script -qec "'$mhc' info t.db" /dev/null >tty.txt; rc=$?
    [ $rc = 2 ] || fail "info of a locked trace on a terminal exited $rc: $(cat tty.txt)"
    grep -qF "$note 2 s: MHC_BUSY_TIMEOUT_MS)" tty.txt || fail "no note of the wait: $(cat tty.txt)"
    grep -qF "t.db: cannot read: the file stayed locked by another process for 2 s" tty.txt ||
        fail "no timeout line: $(cat tty.txt)"
    [ "$(grep -c . tty.txt)" = 2 ] || fail "wanted the note and the timeout line: $(cat tty.txt)"
    # Off a terminal (a log, a CI job) the wait is said too, once, before the timeout's line;
    # -q keeps only the timeout's line.
    MHC_BUSY_TIMEOUT_MS=1500 "$mhc" info t.db >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 2 ] && grep -qF "$note 1.5 s: MHC_BUSY_TIMEOUT_MS)" err ||
        fail "info of a locked trace off a terminal exited $rc: $(cat err)"
    MHC_BUSY_TIMEOUT_MS=1500 "$mhc" -q info t.db >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "stayed locked by another process for 1.5 s" err ||
        fail "info -q of a locked trace off a terminal exited $rc: $(cat err)"
    rm -f hold.flag
    wait
    hold
    # released once the command has said that it waits (not after a fixed time: a command that
    # started late on a loaded machine found the lock gone and said nothing)
    rm -f tty.txt
    (for _ in $(seq 300); do grep -qF "$note" tty.txt 2>/dev/null && break; sleep 0.1; done; rm -f hold.flag) &
    MHC_BUSY_TIMEOUT_MS=20000 script -qec "'$mhc' info t.db" /dev/null >tty.txt || fail "info after the lock: $(cat tty.txt)"
    grep -qF "$note 20 s: MHC_BUSY_TIMEOUT_MS)" tty.txt && grep -q "^source *generate" tty.txt ||
        fail "info that waited for a lock: $(head -5 tty.txt)"
    wait
    hold
    # -q says nothing to wait on: released after 3 s (a late start finds the lock gone, which
    # this case, the silence of -q, still checks)
    (sleep 3; rm -f hold.flag) &
    MHC_BUSY_TIMEOUT_MS=20000 script -qec "'$mhc' -q info t.db" /dev/null >tty.txt || fail "info -q after the lock"
    grep -qF "locked by another process" tty.txt && fail "info -q said the wait: $(head -3 tty.txt)"
    wait
else
    echo "skipped: the lock-wait note (no 'script' command for a terminal)"
fi
echo ok
