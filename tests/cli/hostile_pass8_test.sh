#!/usr/bin/env bash
# Hostile pass 8 (docs/cli.md, "Messages and exit statuses"): what passes 1 to 7 left.
#   1. The standard output: a write that failed (a full disk behind `> out.json`) was exit 0 with
#      the output cut short and nothing said; a reader that went away (`| true`, `| head -1` of a
#      long output) killed sweep and simulate with SIGPIPE before they stored their runs, and left
#      validate's finished replays marked incomplete.
#   2. Sizes, durations and bandwidths past a double (inf taken), advise's host and collective
#      bandwidths without bounds (the capture blamed), a step time that rounded to "not given".
#   3. Two CSV exports into one folder at once left it holding tables of both traces.
#   4. Environment variables: a number past its range blamed on the option it stands for; TMPDIR
#      naming no folder was "a file: cannot be reached".
#   5. An allocation that requested more than its block holds, read as is by info.
#   6. mhc-torch capture whose reader went away printed a traceback of BrokenPipeError (exit 1)
#      after writing its trace.
#   7. mhc-view: a newline in a name or a value it quoted was said over two lines; --screenshot
#      was written through PATH.tmp, one name for every process, with no check of PATH (a link
#      to /proc/self/fd/1; as root, /dev/stdout was replaced), and --layout by an unchecked
#      ofstream; both are now checked before the window opens and written whole.
#   8. A link profile named with a newline or an escape: every run made with it printed over two
#      lines and stored so; a stored run's name with one, printed as is by info.
#   9. Negative zero stored as -0 (run_config, meta).
# Usage: hostile_pass8_test.sh MHC CAPTURE PYTHON PKG [MHC_VIEW] (CAPTURE: a model capture,
# tests/data/advise/tiny_mhc.db; PKG: the folder holding mhc_torch; PYTHON with torch for part 6,
# skipped, said, without one; part 7 needs MHC_VIEW, skipped, said, without it)
set -u
mhc=$1
capture=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
python=$3
pkg=$4
view=${5:-}
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate

# 1. A file past RLIMIT_FSIZE (SIGXFSZ ignored: the write fails with EFBIG, as on a full disk):
# one line naming the standard output, exit 2, for text, JSON and help alike.
for cmd in "info t.db" "info t.db --json" "--help" "simulate t.db --capacity 90% --no-store --json"; do
    # shellcheck disable=SC2086
    (trap '' XFSZ; ulimit -f 1; exec "$mhc" $cmd >big.out 2>err); rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -q "^mhc: standard output: cannot be written: .*; what was printed is cut short$" err ||
        fail "$cmd with its output past the file size limit exited $rc: $(cat err)"
done
# A reader gone before the result is printed: the runs are stored all the same (they were lost to
# SIGPIPE), the exit status is SIGPIPE's (141) and nothing is said.
cp t.db p.db
"$mhc" sweep p.db --capacities 80%,70% --policies lru,largest --no-bisect 2>err | true
rc=${PIPESTATUS[0]}
[ $rc = 141 ] && [ ! -s err ] || fail "sweep | true exited $rc: $(cat err)"
[ "$(sqlite3 p.db "SELECT count(*) FROM runs")" = 4 ] || fail "sweep | true stored $(sqlite3 p.db "SELECT count(*) FROM runs") runs of 4"
"$mhc" simulate p.db --capacity 85% 2>err | true
[ "$(sqlite3 p.db "SELECT count(*) FROM runs")" = 5 ] || fail "simulate | true did not store its run: $(cat err)"
"$mhc" validate p.db --capacity 90% --link pcie4 --repeat 1 2>err | true
got=$(sqlite3 p.db "SELECT group_concat(status) FROM runs WHERE kind = 'replayed'")
[ "$got" = "complete,complete" ] || fail "validate | true left its replays $got: $(tail -2 err)"
# Where the caller ignores SIGPIPE (the write fails with EPIPE): the same.
runs=$(sqlite3 p.db "SELECT count(*) FROM runs")
(trap '' PIPE; "$mhc" simulate p.db --capacity 95% 2>err | true; exit "${PIPESTATUS[0]}"); rc=$?
[ $rc = 141 ] && [ ! -s err ] && [ "$(sqlite3 p.db "SELECT count(*) FROM runs")" = $((runs + 1)) ] ||
    fail "simulate | true with SIGPIPE ignored exited $rc: $(cat err)"
# A program mhc starts does not inherit an ignored SIGPIPE (SIG_IGN survives exec, a handler does
# not): advise --verify's mhc-torch, here a script that notes its ignored signals.
printf '#!/bin/sh\ngrep ^SigIgn /proc/$$/status >sigign.seen\ncp "%s" "$7"\n' "$capture" >fake.sh
chmod +x fake.sh
MHC_TORCH=./fake.sh "$mhc" advise "$capture" --setting '{}' --verify >out 2>err || fail "advise --verify: $(cat err)"
mask=$(sed 's/^SigIgn:[[:space:]]*//' sigign.seen)
[ $(( 0x$mask & 0x1000 )) = 0 ] || fail "advise --verify's child was started with SIGPIPE ignored ($mask)"

# 2. Numbers at a double's limits in sizes, durations and bandwidths. 400 digits read as inf: a
# bandwidth or a duration of inf was taken (advise --host-bandwidth ran with it); advise's host
# bandwidth and --comm-link had no bounds (0.001B/s was refused as "T.db: allocations row 65:
# t_free is 7421872000009798820 ... [range]", blaming the capture); --step-time 0.4ns rounded to 0
# ns, read as not given.
big=$(printf '9%.0s' $(seq 400))
# A value past 80 bytes is quoted by its first 60 and its length (pass 17).
shown="$(printf '9%.0s' $(seq 60))...(404 bytes)"
refused "--host-bandwidth: '${shown}': too large" advise "$capture" --capacity 80MiB --host-bandwidth "${big}GB/s"
refused "--latency: '$(printf '9%.0s' $(seq 60))...(401 bytes)': too large" simulate t.db --capacity 80% --no-store --latency "${big}s"
refused "--gpu-bw: '${shown}': too large" generate --steps 1 --gpu-bw "${big}GB/s" -o g.db
refused "--host-bandwidth: '0.001B/s': not in [1kB/s, 1000TB/s]" advise "$capture" --capacity 80MiB --host-bandwidth 0.001B/s
refused "--comm-link: '0.001B/s': not in [1kB/s, 1000TB/s]" advise "$capture" --capacity 80MiB --comm-link 0.001B/s
refused "--step-time: '0.4ns': less than 1 ns" advise "$capture" --capacity 80MiB --step-time 0.4ns
refused "--capacity: '1..2': unknown unit '.2'" simulate t.db --capacity 1..2 --no-store   # told "1..2% of the peak"
refused "--capacity: '.': not a size" simulate t.db --capacity . --no-store                 # told "must be positive"
"$mhc" advise "$capture" --capacity 80MiB --host-bandwidth 1kB/s >out 2>err || fail "advise --host-bandwidth 1kB/s: $(cat err)"

# 3. Two exports of different traces into one CSV folder at once (--force): each moved its tables
# into place one by one, the two sets interleaved, and the folder held tables of both traces
# (3 of one, 3 of the other among the 6 that differ). Now one set replaces the other whole.
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --seq 64 -o u.db >/dev/null || fail "generate u.db"
"$mhc" export t.db --format csv -o R1 >/dev/null && "$mhc" export u.db --format csv -o R2 >/dev/null || fail "export"
[ "$(diff -rq R1 R2 | wc -l)" -gt 2 ] || fail "the two traces' tables hardly differ"
for round in $(seq 20); do
    "$mhc" export t.db --format csv -o D --force >/dev/null 2>err1 &
    "$mhc" export u.db --format csv -o D --force >/dev/null 2>err2 &
    wait
    [ ! -s err1 ] && [ ! -s err2 ] || fail "concurrent exports said: $(cat err1 err2)"
    diff -rq D R1 >/dev/null || diff -rq D R2 >/dev/null ||
        fail "round $round: D holds tables of both traces: $(diff -rq D R1 | tr '\n' ' ')"
done

# 4. Environment variables given hostile values. A number past its range is said naming the
# variable (MHC_CPU_BUFFER_RATIO=1e308 was "--cpu-buffer-ratio must be at most 1000", an option
# not given); TMPDIR naming no folder with HOME and XDG_CACHE_HOME empty ended validate --link
# auto with "mhc: a file: cannot be reached: No such file or directory".
refused_env() {   # refused_env VAR=VALUE WANT ARGS...
    local assign=$1 want=$2; shift 2
    env "$assign" "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err || fail "$assign $* exited $rc: $(cat err)"
}
refused_env MHC_CPU_BUFFER_RATIO=1e308 "environment variable MHC_CPU_BUFFER_RATIO='1e308': must be at most 1000" info t.db
refused_env MHC_MAX_SWAP_OPS_PER_SEC=1e-300 "environment variable MHC_MAX_SWAP_OPS_PER_SEC='1e-300': must be 0 (unlimited) or in" \
    simulate t.db --capacity 80% --no-store
HOME='' XDG_CACHE_HOME='' TMPDIR=$tmp/none "$mhc" validate t.db --capacity 90% --link auto --repeat 1 --no-store \
    --max-replay-minutes 0.0001 >out 2>err; rc=$?
[ $rc = 2 ] && grep -q "the replays would take" err || fail "validate --link auto with TMPDIR naming no folder ($rc): $(cat err)"

MHC_TORCH='   ' refused "MHC_TORCH='   ': names no command" advise "$capture" --setting '{}' --verify   # was "cannot run capture"

# 5. Values that contradict each other across a row's fields, its pages valid: an allocation that
# requested more than its block holds (no allocator gives less than asked; every public snapshot
# keeps requested_bytes <= bytes) passed check, and info printed "requested 3.32 GiB peak (what the
# program asked for; `peak` counts the allocator's blocks)" over a block peak of 849 MiB.
cp t.db r.db
sqlite3 r.db "UPDATE allocations SET requested_bytes = bytes * 4 WHERE id = 1; UPDATE allocations SET requested_bytes = bytes WHERE id = 2"
"$mhc" check r.db >out 2>err; rc=$?
[ $rc = 2 ] && grep -q "^r.db: allocations row 1: requested_bytes is [0-9]*, more than the block's [0-9]* bytes .*\[requested-over-block\]$" out &&
    ! grep -q "row 2:" out || fail "check of requested_bytes over the block ($rc): $(cat out err)"
refused "r.db: allocations row 1: requested_bytes is" info r.db
refused "[requested-over-block]" simulate r.db --capacity 90% --no-store

# 8. A link profile's name goes into the name of every run made with it (lru+none@80%/NAME): one
# with a newline and an escape (calibrate --name, or a profile written by hand) was printed by
# simulate and info over two lines with the escape sent to the terminal, and stored so.
refused "--name: 'my?link?[2J': holds a control character" calibrate --backend host --quick --rounds 1 \
    --max-chunk 16KiB --name $'my\nlink\e[2J' -o nl.json
[ ! -e nl.json ] || fail "calibrate wrote a profile named over two lines"
"$mhc" calibrate --backend host --quick --rounds 1 --max-chunk 16KiB --name fine -o nl.json >/dev/null 2>err ||
    fail "calibrate --name fine: $(cat err)"
python3 -c '
import json, sys
p = json.load(open("nl.json")); p["name"] = "my\nlink\x1b[2J"; json.dump(p, open("nl.json", "w"))'
refused "nl.json: field 'name': holds a control character" simulate t.db --capacity 80% --link nl.json --no-store
refused "nl.json: field 'name': holds a control character" sweep t.db --capacities 80% --links nl.json --no-bisect --no-store
# A stored run's name with one (a runs table written by another program): info shows it as '?'.
cp t.db n.db
"$mhc" -q simulate n.db --capacity 80% >/dev/null || fail "simulate n.db"
sqlite3 n.db "UPDATE runs SET name = 'a' || char(10) || 'b' || char(27) || '[2J'"
"$mhc" info n.db >out 2>err || fail "info of a run named over two lines: $(cat err)"
grep -q $'\x1b' out && fail "info sent a run name's escape to the terminal"
grep -q " a?b?\[2J$" out || fail "info of a run named over two lines: $(tail -2 out)"

# 9. Negative zero is zero: --nccl-share -0 and --memcpy-share -0.0 were stored as -0 in
# run_config, generate --jitter -0 as gen.jitter -0, MHC_CPU_BUFFER_RATIO=-0 as cpu_buffer_ratio -0.
cp t.db z.db
"$mhc" -q simulate z.db --capacity 80% --nccl-share -0 --memcpy-share -0.0 >/dev/null || fail "simulate --nccl-share -0"
MHC_CPU_BUFFER_RATIO=-0 "$mhc" -q simulate z.db --capacity 85% >/dev/null || fail "simulate MHC_CPU_BUFFER_RATIO=-0"
got=$(sqlite3 z.db "SELECT count(*) FROM run_config WHERE value LIKE '-0%'")
[ "$got" = 0 ] || fail "negative zero stored: $(sqlite3 z.db "SELECT key, value FROM run_config WHERE value LIKE '-0%'")"
"$mhc" -q generate --steps 1 --layers 1 --jitter -0 -o j.db >/dev/null || fail "generate --jitter -0"
[ "$(sqlite3 j.db "SELECT value FROM meta WHERE key = 'gen.jitter'")" = 0 ] || fail "generate --jitter -0 stored $(sqlite3 j.db "SELECT value FROM meta WHERE key = 'gen.jitter'")"
refused "--nccl-share: '-0.5': not in [0, 1)" simulate t.db --capacity 80% --no-store --nccl-share -0.5

# 7. mhc-view's messages and outputs (no display needed: each is refused before the window).
if [ -n "$view" ]; then
    view_refused() {   # view_refused WANT ARGS...
        local want=$1; shift
        timeout 60 "$view" "$@" >out 2>err; local rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err || fail "mhc-view $* exited $rc: $(cat err)"
    }
    view_refused "mhc-view: a?b.db: no such file" $'a\nb.db'
    view_refused "mhc-view: --size: '1?2': expected WxH" t.db --size $'1\n2'
    view_refused "mhc-view: --click: '1?2': expected X,Y" t.db --click $'1\n2'
    ln -s /proc/self/fd/1 stdout.png
    view_refused "stdout.png: is a symbolic link to /proc/self/fd/1: a descriptor of this process" t.db --screenshot stdout.png
    [ -L stdout.png ] || fail "mhc-view --screenshot replaced a link to its standard output"
    mkdir shots
    view_refused "shots: is a directory" t.db --screenshot shots
    view_refused "nodir/l.json: cannot write into nodir: no such directory" t.db --screenshot s.png --layout nodir/l.json
    [ ! -e s.png ] || fail "mhc-view wrote its screenshot before refusing --layout"
else
    echo "part 7 skipped: no mhc-view"
fi

# 6. mhc-torch, its standard output closed by its reader (a pipe whose read end is closed first:
# the write fails at once, whatever the timing): exit 141 as mhc's, nothing said, the trace whole.
cat >closed.py <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
sys.stderr.buffer.write(p.stderr)
sys.exit(p.returncode)
PY
python3 closed.py "$mhc" info t.db 2>err; rc=$?
[ $rc = 141 ] && [ ! -s err ] || fail "mhc info into a closed pipe exited $rc: $(cat err)"
if ! PYTHONPATH=$pkg "$python" -c "$find_modules" torch 2>/dev/null; then
    echo "part 6 skipped: $python has no torch"
    echo "all hostile pass 8 checks passed"
    exit 0
fi
PYTHONPATH=$pkg timeout 300 python3 closed.py "$python" -m mhc_torch.cli capture tiny-mhc -o cap.db 2>err </dev/null; rc=$?
[ $rc = 141 ] && [ ! -s err ] || fail "mhc-torch capture into a closed pipe exited $rc: $(head -c 400 err)"
"$mhc" check cap.db >out 2>err || fail "the capture written before the closed pipe: $(cat out err)"

echo "all hostile pass 8 checks passed"
