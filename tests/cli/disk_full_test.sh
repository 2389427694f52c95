#!/usr/bin/env bash
# A full disk. A run that cannot be stored for lack of space leaves the trace intact, its result
# printed, one line on stderr and exit 4 (simulate, sweep, a coupled job in its rank traces or in
# a runs database): no journal is left beside the trace, and a store that fails half-way (room for
# its journal, not for its pages) is rolled back before the command ends, so that a copy of the
# trace alone holds no part of it. import, generate (one trace or a job's rank files) and export
# onto a full disk leave no output, no folder and no temporary file, say why in one line, exit 2.
#
# How the disk is filled, in order of preference:
#  1. A 6 MiB tmpfs mounted in a private mount namespace (`unshare -m`, so nothing leaks to the
#     host and the mount vanishes with the test): a real ENOSPC, as a full disk gives. Needs
#     CAP_SYS_ADMIN, which root has here and in CI (a privileged container), or an unprivileged
#     user namespace (`unshare -rm`) where the kernel allows them.
#  2. Otherwise RLIMIT_FSIZE (`ulimit -f`) with SIGXFSZ ignored, so that a write past the limit
#     fails with EFBIG instead of killing the process: the same failure path (a write that fails
#     half-way), though the errno differs.
# If neither can be set up the test exits 77, which ctest reports as skipped, never passed.
set -u
mhc=$1
fixture=$2

if [ "${DISK_FULL_INNER:-}" = "" ]; then
    export DISK_FULL_INNER=1
    for ns in "unshare -m" "unshare -rm"; do
        # Probe: can this namespace mount a tmpfs?
        if $ns sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d" && rmdir "$d"' \
            >/dev/null 2>&1; then
            DISK_FULL_MODE=tmpfs exec $ns "$0" "$@"
        fi
    done
    if (trap '' XFSZ; ulimit -f 64) 2>/dev/null; then
        DISK_FULL_MODE=fsize exec "$0" "$@"
    fi
    echo "skipped: neither a tmpfs (mount namespace) nor RLIMIT_FSIZE can be set up here"
    exit 77
fi

tmp=$(mktemp -d)
mode=$DISK_FULL_MODE
cleanup() { [ "$mode" = tmpfs ] && umount "$tmp/full" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL ($mode): $*"; exit 1; }
show() { echo "$mode: $*: $(cat "$tmp/err")"; }   # what the user saw
gen() { "$mhc" generate --preset gpt2-small --steps 1 --layers 2 --seq 128 "$@"; }
mkdir "$tmp/full"
# Size of the trace's copy on the full medium; a store of runs needs more than is left.
gen -o "$tmp/t.db" >/dev/null || fail "generate"
"$mhc" simulate "$tmp/t.db" --capacity 80% >/dev/null || fail "simulate on a roomy disk"
runs_before=$("$mhc" info "$tmp/t.db" | grep -cE '^ +[0-9]+ +simulated')
sum_before=$(sha256sum <"$tmp/t.db")
# A job of two ranks, also copied onto the full medium.
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 --pp 2 --all-ranks -o "$tmp/j.db" >/dev/null \
    || fail "generate --all-ranks"
job_sum=$(cat "$tmp"/j.rank0.db "$tmp"/j.rank1.db | sha256sum)

# run_full CMD...: runs CMD where writing more than the trace's size fails.
if [ "$mode" = tmpfs ]; then
    mount -t tmpfs -o size=6m tmpfs "$tmp/full" || fail "mount"
    cp "$tmp/t.db" "$tmp/full/t.db"
    cp "$tmp"/j.rank0.db "$tmp"/j.rank1.db "$tmp/full/"
    # Fill every block that is left (dd stops at ENOSPC).
    dd if=/dev/zero of="$tmp/full/filler" bs=4k >/dev/null 2>&1
    [ "$(df --output=avail -k "$tmp/full" | tail -1 | tr -d ' ')" -le 4 ] || fail "tmpfs not full"
    run_full() { "$@"; }
else
    cp "$tmp/t.db" "$tmp/full/t.db"
    cp "$tmp"/j.rank0.db "$tmp"/j.rank1.db "$tmp/full/"
    # No file may be written past 8 KiB (bash's ulimit -f counts 1024-byte blocks): SQLite writes
    # into the trace's free pages below its size, but the rollback journal (a header and a 4 KiB
    # page) and every new trace or export pass that limit with their first pages, as on a full disk.
    run_full() { (trap '' XFSZ; ulimit -f 8; "$@"); }
fi
t=$tmp/full/t.db

expect4() {   # expect4 CMD...: result printed, one line naming the reason, exit 4
    run_full "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    [ $rc = 4 ] || fail "$* exited $rc on a full disk, wanted 4: $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$*: wanted one line on stderr: $(cat "$tmp/err")"
    grep -q "not stored" "$tmp/err" || fail "$*: does not say the run was not stored: $(cat "$tmp/err")"
    grep -q -- "--no-store" "$tmp/err" || fail "$*: no --no-store hint: $(cat "$tmp/err")"
    [ -s "$tmp/out" ] || fail "$*: no result printed"
    show "$@"
    [ "$(sha256sum <"$t")" = "$sum_before" ] || fail "$*: the trace changed"
    [ ! -e "$t-journal" ] || fail "$*: a journal was left beside the trace"
}
expect4 "$mhc" simulate "$t" --capacity 80%
grep -q "loss" "$tmp/out" || fail "simulate: no result printed: $(cat "$tmp/out")"
[ "$mode" = fsize ] || grep -qi "full" "$tmp/err" || fail "simulate: the reason is not a full disk: $(cat "$tmp/err")"
expect4 "$mhc" simulate "$t" --capacity 80% --json
grep -q "^{" "$tmp/out" || fail "simulate --json: no JSON printed"
expect4 "$mhc" sweep "$t" --policies lru,largest --capacities 80%,60% --links pcie4
grep -q "lru" "$tmp/out" || fail "sweep: no table printed: $(cat "$tmp/out")"
# A runs database on the full disk fails the same way.
expect4 "$mhc" simulate "$t" --capacity 80% --runs-db "$tmp/full/runs.db"
[ ! -e "$tmp/full/runs.db" ] || [ ! -s "$tmp/full/runs.db" ] || "$mhc" info "$t" --runs-db "$tmp/full/runs.db" >/dev/null \
    || fail "a half-created runs database was left"

# A coupled job: in its rank traces or in one runs database, stored whole or not at all.
j0=$tmp/full/j.rank0.db j1=$tmp/full/j.rank1.db
job_unchanged() {
    [ "$(cat "$j0" "$j1" | sha256sum)" = "$job_sum" ] || fail "$1: a rank trace changed"
    [ ! -e "$j0-journal" ] && [ ! -e "$j1-journal" ] || fail "$1: a journal was left beside a rank trace"
}
run_full "$mhc" simulate --ranks "$j0" "$j1" --capacity 80% >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 4 ] || fail "simulate --ranks exited $rc on a full disk, wanted 4: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "not stored" "$tmp/err" || fail "simulate --ranks: $(cat "$tmp/err")"
grep -q "coupled run" "$tmp/out" || fail "simulate --ranks: no result printed"
show simulate --ranks
job_unchanged "simulate --ranks"
run_full "$mhc" simulate --ranks "$j0" "$j1" --capacity 80% --runs-db "$tmp/full/jr.db" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 4 ] || fail "simulate --ranks --runs-db exited $rc on a full disk, wanted 4: $(cat "$tmp/err")"
[ ! -e "$tmp/full/jr.db" ] || fail "a half-made runs database of a job was left"
job_unchanged "simulate --ranks --runs-db"

# The trace still works, with the one run it had.
for c in check info; do
    "$mhc" $c "$t" >/dev/null 2>"$tmp/err" || fail "$c after a full disk: $(cat "$tmp/err")"
done
[ "$("$mhc" info "$t" | grep -cE '^ +[0-9]+ +simulated')" = "$runs_before" ] || fail "the stored runs changed"

# New files onto the full disk: one line, no output, no temporary file.
expect_clean() {   # expect_clean OUT CMD...
    local out=$1; shift
    run_full "$@" >/dev/null 2>"$tmp/err"; local rc=$?
    [ $rc != 0 ] || fail "$* succeeded on a full disk"
    [ $rc -lt 128 ] || fail "$* died of a signal ($rc)"
    show "$@"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$*: wanted one line on stderr: $(cat "$tmp/err")"
    grep -q "$out" "$tmp/err" || fail "$*: the error does not name $out: $(cat "$tmp/err")"
    grep -q "mhc-tmp" "$tmp/err" && fail "$*: the error names the temporary file: $(cat "$tmp/err")"
    [ "$mode" = fsize ] || grep -qiE "full|space" "$tmp/err" || fail "$*: the reason is not a full disk: $(cat "$tmp/err")"
    [ $rc = 2 ] || fail "$* exited $rc on a full disk, wanted 2 (an environment problem, not an internal error)"
    [ ! -e "$out" ] || fail "$*: a half-written $out was left"
    local left; left=$(ls "$tmp/full" | grep -vE '^(t\.db|j\.rank[01]\.db|filler)$')
    [ -z "$left" ] || fail "$*: left behind: $left"
}
expect_clean "$tmp/full/g.db" "$mhc" generate --preset gpt2-small --steps 1 -o "$tmp/full/g.db"
expect_clean "$tmp/full/i.db" "$mhc" import "$fixture" -o "$tmp/full/i.db"
expect_clean "$tmp/full/x.json" "$mhc" export "$t" -o "$tmp/full/x.json"
expect_clean "$tmp/full/csv" "$mhc" export "$t" --format csv -o "$tmp/full/csv"
expect_clean "$tmp/full/k.rank0.db" "$mhc" generate --preset gpt2-small --steps 1 --pp 2 --all-ranks -o "$tmp/full/k.db"
# On a real full disk generate says so before writing, with its estimate (it wrote until the disk
# was full, then said why).
if [ "$mode" = tmpfs ]; then
    for ranks in "" "--pp 2 --all-ranks"; do
        "$mhc" generate --preset gpt2-small --steps 1 $ranks -o "$tmp/full/g.db" >/dev/null 2>"$tmp/err"
        grep -q "would be about .*, but its filesystem has only .* of space free" "$tmp/err" ||
            fail "generate $ranks onto a full disk: $(cat "$tmp/err")"
    done
fi
# --force over an existing trace on a full disk: the old trace survives whole.
expect_force() {
    run_full "$@" --force -o "$t" >/dev/null 2>"$tmp/err"; local rc=$?
    [ $rc != 0 ] && [ $rc -lt 128 ] || fail "$* --force over a trace on a full disk exited $rc"
    [ "$(sha256sum <"$t")" = "$sum_before" ] || fail "$* --force on a full disk damaged the trace"
}
expect_force "$mhc" generate --preset gpt2-small --steps 1
expect_force "$mhc" import "$fixture"

# Half-way: room for the journal but not for the run's pages. A run larger than SQLite's page
# cache writes pages into the file before its commit; the write that fails leaves a hot journal,
# which the command rolls back before it ends: the trace alone is as it was.
if [ "$mode" = tmpfs ]; then umount "$tmp/full" || fail "umount"; fi
rm -rf "$tmp/full" && mkdir "$tmp/full"
"$mhc" -q generate --preset gpt2-small --steps 40 --seq 1024 -o "$tmp/big.db" >/dev/null || fail "generate big"
cp "$tmp/big.db" "$tmp/grown.db"
# The run alone: the trace's cache, written after the run in its own transaction, is not part of it.
MHC_TRACE_CACHE=0 "$mhc" simulate "$tmp/grown.db" --capacity 40% >/dev/null || fail "simulate big"
size=$(stat -c %s "$tmp/big.db")
room=$(( size + ($(stat -c %s "$tmp/grown.db") - size) / 2 ))
if [ "$mode" = tmpfs ]; then
    mount -t tmpfs -o size=$(( room / 1024 ))k tmpfs "$tmp/full" || fail "mount"
    run_half() { "$@"; }
else
    run_half() { (trap '' XFSZ; ulimit -f $(( room / 1024 )); "$@"); }   # bash counts KiB
fi
cp "$tmp/big.db" "$tmp/full/t.db"
big_sum=$(sha256sum <"$tmp/big.db")
run_half "$mhc" simulate "$tmp/full/t.db" --capacity 40% >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 4 ] || fail "half-way: exited $rc, wanted 4: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "not stored" "$tmp/err" || fail "half-way: $(cat "$tmp/err")"
show simulate, half-way
[ ! -e "$tmp/full/t.db-journal" ] || fail "half-way: a hot journal was left beside the trace"
cp "$tmp/full/t.db" "$tmp/copy.db"   # the trace alone, as a user copies or mails it
[ "$(sha256sum <"$tmp/copy.db")" = "$big_sum" ] || fail "half-way: the trace alone is not as it was"
"$mhc" check --full "$tmp/copy.db" >/dev/null || fail "half-way: the trace alone fails check --full"
"$mhc" info "$tmp/copy.db" | grep -q simulated && fail "half-way: the trace alone holds part of the run"
echo "ok ($mode)"
