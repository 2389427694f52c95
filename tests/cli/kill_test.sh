#!/usr/bin/env bash
# Issue 13, defects 2 and 8: SIGINT and SIGKILL at random moments of generate, import, simulate,
# sweep and validate (host backend, on a tiny trace); afterwards every command works on the trace with no outside tool, and no temporary
# file survives the next run of the same command. Bounded: ROUNDS rounds of small inputs.
set -u
mhc=$1
fixture=$2
rounds=${3:-12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
gen() { "$mhc" generate --preset gpt2-small --steps 2 --layers 4 --seq 256 "$@" >/dev/null 2>&1; }
t=$tmp/t.db
gen -o "$t" || fail "generate"
v=$tmp/v.db
"$mhc" generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o "$v" >/dev/null || fail "generate tiny"
RANDOM=${KILL_TEST_SEED:-13}
works() {   # every reading command on $1, and a stored run
    "$mhc" check "$1" >/dev/null 2>"$tmp/err" || fail "check after a kill: $(cat "$tmp/err")"
    "$mhc" info "$1" >/dev/null 2>"$tmp/err" || fail "info after a kill: $(cat "$tmp/err")"
    "$mhc" export "$1" --force -o "$tmp/x.json" >/dev/null 2>"$tmp/err" || fail "export after a kill: $(cat "$tmp/err")"
    # The imported fixture is a CPU profile: its memory is the host's (device -1), which is
    # simulated only when asked for.
    local dev=(); [ "$1" = "$tmp/i.db" ] && dev=(--device -1)
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
    case $((r % 5)) in
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
    if [ -f "$out" ]; then works "$out"; fi
    # The next run of the same command leaves no temporary file of the killed one.
    case $what in
        generate) gen --force -o "$tmp/g.db" || fail "generate after a kill" ;;
        import) "$mhc" import "$fixture" --force -o "$tmp/i.db" >/dev/null 2>&1 || fail "import after a kill" ;;
    esac
    no_temps
done
works "$t"
works "$v"
echo ok
