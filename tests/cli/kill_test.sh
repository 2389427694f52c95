#!/usr/bin/env bash
# SIGINT and SIGKILL (SIGTERM for a pipe's import) at random moments of generate, generate
# --all-ranks, import (of a file and of a pipe), simulate, simulate --ranks (into the rank traces
# and into a runs database), sweep and validate (host backend, on a tiny trace); afterwards every
# command works on the trace with no outside tool, a job's runs are in all its rank traces or in
# none, a job's files are all there or none (a SIGKILL during their renames may leave part of them:
# `simulate --ranks` then refuses them as an incomplete job), no copy of a pipe is left in $TMPDIR,
# and no temporary file survives the next run of the same command. Bounded: ROUNDS rounds of small
# inputs.
set -u
# Background jobs in their own process group, as from an interactive shell: without job control
# bash starts them with SIGINT ignored, and the SIGINT rounds interrupted nothing.
set -m
mhc=$1
fixture=$2
rounds=${3:-12}
. "$(dirname "$0")/preamble.sh"
export TMPDIR=$tmp/tmpdir   # where a pipe's copy goes: seen by this test alone
mkdir "$TMPDIR"
gen() { "$mhc" generate --preset gpt2-small --steps 2 --layers 4 --seq 256 "$@" >/dev/null 2>&1; }
t=$tmp/t.db
gen -o "$t" || fail "generate"
v=$tmp/v.db
"$mhc" generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o "$v" >/dev/null || fail "generate tiny"
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 --pp 2 --all-ranks -o "$tmp/j.db" >/dev/null \
    || fail "generate --all-ranks"
j0=$tmp/j.rank0.db j1=$tmp/j.rank1.db
RANDOM=${KILL_TEST_SEED:-13}
coupled() { "$mhc" info "$1" "${@:2}" | grep -c " coupled"; }
# A job's runs: as many in each rank's trace (or, with a runs database, for each rank in it).
job_whole() {
    local a b
    a=$(coupled "$j0" "$@") b=$(coupled "$j1" "$@")
    [ "$a" = "$b" ] || fail "a job's runs are in part of its ranks: rank 0 has $a, rank 1 has $b ($*)"
}
# A job's files: all or none; after a SIGKILL part of them only if `simulate --ranks` refuses them.
files_whole() {   # files_whole BASE N SIG
    local n; n=$(ls "$tmp" | grep -c "^$1\.rank[0-9]*\.db$")
    [ "$n" = 0 ] || [ "$n" = "$2" ] && return
    [ "$3" = KILL ] || fail "SIG$3 left $n of the $2 files of a job"
    "$mhc" simulate --ranks "$tmp/$1".rank*.db --capacity 90% --no-store >/dev/null 2>&1 \
        && fail "$n of the $2 files of a job (SIGKILL during the renames) were simulated as one job"
}
works() {   # every reading command on $1, and a stored run
    "$mhc" check "$1" >/dev/null 2>"$tmp/err" || fail "check after a kill: $(cat "$tmp/err")"
    "$mhc" info "$1" >/dev/null 2>"$tmp/err" || fail "info after a kill: $(cat "$tmp/err")"
    "$mhc" export "$1" --force -o "$tmp/x.json" >/dev/null 2>"$tmp/err" || fail "export after a kill: $(cat "$tmp/err")"
    # The imported fixture is a CPU profile: its memory is the host's (device -1), which is
    # simulated only when asked for.
    local dev=(); case $1 in "$tmp/i.db" | "$tmp/p.db") dev=(--device -1) ;; esac
    "$mhc" simulate "$1" --capacity 90% "${dev[@]}" >/dev/null 2>"$tmp/err"; local rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "simulate after a kill exited $rc: $(cat "$tmp/err")"
}
no_temps() {
    local left; left=$(ls "$tmp" | grep -E "tmp-[0-9]+|importing-[0-9]+|-journal$" || true)
    [ -z "$left" ] || fail "left behind after the next run: $left"
}
for r in $(seq 1 "$rounds"); do
    sig=$([ $((RANDOM % 2)) = 0 ] && echo INT || echo KILL)
    delay=0.$(printf "%03d" $((RANDOM % 400)))
    case $((r % 9)) in
        5) "$mhc" simulate --ranks "$j0" "$j1" --capacity 70% >/dev/null 2>&1 & out=$j0; what="simulate --ranks" ;;
        6) "$mhc" simulate --ranks "$j0" "$j1" --capacity 70% --runs-db "$tmp/jr.db" >/dev/null 2>&1 &
           out=$j0; what="simulate --ranks --runs-db" ;;
        7) "$mhc" -q generate --preset gpt2-small --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 100 \
               --steps 1 --dp 48 --all-ranks -o "$tmp/k$r.db" >/dev/null 2>&1 &
           out=; what="generate --all-ranks" ;;
        8) sig=$(case $((RANDOM % 3)) in 0) echo INT ;; 1) echo TERM ;; *) echo KILL ;; esac)
           delay=0.$(printf "%03d" $((RANDOM % 150)))
           "$mhc" import /dev/stdin --force -o "$tmp/p.db" <"$fixture" >/dev/null 2>&1 & out=$tmp/p.db; what="import /dev/stdin" ;;
        0) gen --force -o "$tmp/g.db" & out=$tmp/g.db; what=generate ;;
        1) "$mhc" import "$fixture" --force -o "$tmp/i.db" >/dev/null 2>&1 & out=$tmp/i.db; what=import ;;
        2) "$mhc" simulate "$t" --capacity 70% >/dev/null 2>&1 & out=$t; what=simulate ;;
        3) "$mhc" sweep "$t" --policies lru,largest --capacities 80%,60% --links pcie4 >/dev/null 2>&1 & out=$t; what=sweep ;;
        4) "$mhc" validate "$v" --capacity 70% >/dev/null 2>&1 & out=$v; what=validate
           # validate takes about 2 s (it replays): kill it anywhere in that span, stores included.
           delay=$((RANDOM % 2)).$(printf "%03d" $((RANDOM % 1000))) ;;
    esac
    pid=$!
    sleep "$delay"
    kill -s "$sig" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "round $r: $what, SIG$sig after ${delay}s"
    if [ -n "$out" ] && [ -f "$out" ]; then works "$out"; fi
    case $what in
        "simulate --ranks") job_whole ;;
        "simulate --ranks --runs-db") [ -f "$tmp/jr.db" ] && job_whole --runs-db "$tmp/jr.db" ;;
        "generate --all-ranks") files_whole "k$r" 48 "$sig" ;;
        "import /dev/stdin")
            left=$(ls "$TMPDIR" | grep "^mhc-import-$pid-" || true)
            if [ "$sig" = KILL ]; then
                "$mhc" import /dev/stdin --force -o "$tmp/p.db" <"$fixture" >/dev/null 2>&1 || fail "import after a kill"
            fi
            [ -z "$left" ] || [ "$sig" = KILL ] || fail "SIG$sig left the pipe's copy: $left"
            [ -z "$(ls "$TMPDIR")" ] || fail "the pipe's copy of a killed import was not removed: $(ls "$TMPDIR")" ;;
    esac
    # The next run of the same command leaves no temporary file of the killed one.
    case $what in
        generate) gen --force -o "$tmp/g.db" || fail "generate after a kill" ;;
        "simulate --ranks") "$mhc" simulate --ranks "$j0" "$j1" --capacity 70% >/dev/null 2>&1 || fail "simulate --ranks after a kill"
            job_whole ;;
        "simulate --ranks --runs-db")
            "$mhc" simulate --ranks "$j0" "$j1" --capacity 70% --runs-db "$tmp/jr.db" >/dev/null 2>&1 \
                || fail "simulate --ranks --runs-db after a kill"
            job_whole --runs-db "$tmp/jr.db" ;;
        "generate --all-ranks")
            "$mhc" -q generate --preset gpt2-small --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 100 \
                --steps 1 --dp 48 --all-ranks --force -o "$tmp/k$r.db" >/dev/null 2>&1 || fail "generate --all-ranks after a kill"
            rm -f "$tmp/k$r".rank*.db ;;
        import) "$mhc" import "$fixture" --force -o "$tmp/i.db" >/dev/null 2>&1 || fail "import after a kill" ;;
    esac
    no_temps
done
works "$t"
works "$v"
job_whole
[ -f "$tmp/jr.db" ] && job_whole --runs-db "$tmp/jr.db"
echo ok
