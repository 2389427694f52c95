#!/usr/bin/env bash
# A signal while a command stores its runs (docs/cli.md, "Messages and exit statuses"): the store
# is one transaction, which a signal used to cut (a hot journal the next open rolled back). Now
# the store finishes whole, then the command stops: exit 128+signal (143 for SIGTERM, 130 for
# SIGINT), one line saying what was stored, no journal left, every run there. Real sweeps and a
# real simulate, signalled once the warning before their store is printed (MHC_STORE_WARN_SIZE=1B
# makes it come, just before the transaction), with a store of about a second to land in.
set -u
set -m   # background jobs in their own group, so that SIGINT reaches them as from a terminal
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 8 --layers 48 --seq 1024 -o base.db >/dev/null || fail generate
caps=$(seq -s, 95 -2 41 | sed 's/,/%,/g')%   # 28 capacities x 2 policies: 56 runs, about 56 MiB to store
# interrupted SIG WANT_STATUS WANT_RUNS TARGET CMD...: CMD on a fresh copy of the trace (t.db),
# signalled in its store into TARGET (t.db or a new runs database).
interrupted() {
    local sig=$1 want=$2 runs=$3 target=$4; shift 4
    cp base.db t.db
    rm -f runs.db
    rm -f out err   # the last round's lines are not this one's
    MHC_STORE_WARN_SIZE=1B "$mhc" "$@" >out 2>err &
    local pid=$! waited=0
    until grep -q "warning: storing" err; do
        kill -0 $pid 2>/dev/null || fail "$*: ended before its store: $(cat err)"
        sleep 0.01; waited=$((waited + 1))
        [ $waited -lt 6000 ] || fail "$*: no store within a minute"
    done
    kill -s "$sig" $pid
    wait $pid; local rc=$?
    [ $rc = "$want" ] || fail "$* (SIG$sig in its store) exited $rc, wanted $want: $(cat err)"
    grep -q "^mhc: stopped by SIG$sig after the runs were stored whole in $target\$" err ||
        fail "$*: SIG$sig not said: $(cat err)"
    [ ! -e t.db-journal ] && [ ! -e runs.db-journal ] || fail "$*: SIG$sig left a hot journal"
    [ -z "$(ls | grep tmp-)" ] || fail "$*: SIG$sig left a temporary file: $(ls)"
    "$mhc" check t.db >/dev/null 2>check.err || fail "$*: check after SIG$sig: $(cat check.err)"
    local stored db=(); [ "$target" = runs.db ] && db=(--runs-db runs.db)
    stored=$("$mhc" info t.db "${db[@]}" | grep -cE '^ +[0-9]+ +simulated')
    [ "$stored" = "$runs" ] || fail "$*: $stored runs stored after SIG$sig, wanted all $runs: $("$mhc" info t.db | tail -5)"
    echo "SIG$sig in the store of '$*': exit $rc, $stored runs stored"
}
sweep=(sweep t.db --policies lru,largest --capacities "$caps" --links pcie4 --no-bisect)
interrupted TERM 143 56 t.db "${sweep[@]}"
interrupted INT 130 56 t.db "${sweep[@]}"
interrupted HUP 129 56 t.db "${sweep[@]}"
interrupted TERM 143 56 runs.db "${sweep[@]}" --runs-db runs.db
# A signal before the store (while simulating) stops at once, storing nothing, as before.
cp base.db t.db
"$mhc" "${sweep[@]}" >out 2>err &
pid=$!
sleep 0.2
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 143 ] || fail "sweep signalled while simulating exited $rc: $(cat err)"
[ ! -e t.db-journal ] || fail "a sweep signalled while simulating left a journal"
echo ok
