#!/usr/bin/env bash
# Hostile pass 17 (docs/cli.md, "Messages and exit statuses"; docs/validation.md; docs/torch.md):
# what passes 1 to 16 left.
#   1. A value of 120 KB refused: the line quoted it whole (120 KB on the terminal), in mhc and in
#      mhc-torch. Now a value past 80 bytes is quoted as its first 60 and its length, and any word
#      past 4,096 bytes in any line either prints is shortened so.
#   2. validate --replay-steps of a trace where no kernel start of the last step is quiet (a kernel
#      on another stream runs across them all): the window search asked each start of each
#      prediction over all its kernels and events, quadratic (80,000 kernels: 19 s; 200,000 about
#      2 min). Now one pass over each prediction (200,000: well under a second of search).
#   3. mhc-torch capture of a model that leaves a non-daemon thread running: mhc-torch printed its
#      summary and never ended. Now the thread is named in one note and mhc-torch exits 0.
#   4. A model that calls os.fork(): the child went on with its copy of the capture and wrote the
#      trace too (with the parent waiting for it: the parent's own write was refused, "already
#      exists", exit 2, and the child's summary printed). Now only the parent writes; the child ends
#      silently when its copy is done.
#   5. generate and export past a file size limit (ulimit -f): killed by SIGXFSZ, exit 153, nothing
#      said, a temporary file left; now one line and exit 2, nothing left.
# Usage: hostile_pass17_test.sh MHC PYTHON PKG (PKG: the folder holding mhc_torch; parts 1's
# mhc-torch half, 3 and 4 need a Python with torch, skipped, said, without)
set -u
mhc=$1
python=$2
pkg=$3
[ -x "$python" ] || python=python3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 2 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o t.db >/dev/null || fail generate

# 1. Values of 120,000 bytes: one short line, the value's start and length said.
big=$(head -c 120000 /dev/zero | tr '\0' x)
short() {   # short WANT ARGS...: refused (exit 2, one line with WANT) in under 400 bytes
    local want=$1; shift
    refused "$want" "$@"
    [ "$(wc -c <err)" -lt 400 ] || fail "$(echo "$*" | cut -c1-60)...: a line of $(wc -c <err) bytes"
}
x60=$(printf "%.60s" "$big")
short "--capacity: '$x60...(120000 bytes)': " simulate t.db --capacity "$big"
short "'$x60...(120000 bytes)'" simulate t.db --capacity 80% --policy "$big"
short "'$x60...(120000 bytes)'" sweep t.db --capacities "50%,$big"
short "$x60...(120000 bytes)" info "$big"
short "$x60...(120000 bytes)" generate --preset "$big" -o x.db
short "$x60...(120000 bytes)" validate t.db --replay-steps "$big"
short "$x60...(120000 bytes)" advise t.db --budget "$big"
short "$x60...(120000 bytes)" simulate t.db --capacity 80% --link "$big"
# a value of 81 bytes is shortened too; one of 80 is quoted whole
short "'$(printf "%.60s" "$big")...(81 bytes)'" simulate t.db --capacity "$(printf "%.81s" "$big")"
short "'$(printf "%.80s" "$big")'" simulate t.db --capacity "$(printf "%.80s" "$big")"

# 2. A last step of 200,000 kernels of 10 ns, and one kernel on stream 99 running from step 0 to
#    the end: no kernel start of the last step is quiet. The search ends in seconds (refused
#    after it by --max-replay-time 1us: nothing is replayed).
n=200000
cp t.db w.db && sqlite3 w.db "
  CREATE TEMP TABLE e AS SELECT max(t_end) AS t, max(id) AS i FROM kernels;
  WITH RECURSIVE c(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM c WHERE k < $n)
    INSERT INTO kernels SELECT (SELECT i FROM e) + k, 0, 7, 23, (SELECT t FROM e) + k * 20, (SELECT t FROM e) + k * 20 + 10,
      1, 1, 1, 1, 1, 1, 1, 0, 1, (SELECT i FROM e) + k FROM c;
  INSERT INTO kernels SELECT i + $n + 1, 0, 99, 23, 1000, t + $n * 20 + 100, 0, 1, 1, 1, 1, 1, 1, 0, 1, i + $n + 1 FROM e;
  INSERT INTO accesses SELECT id, 1, 1 FROM kernels WHERE id > (SELECT i FROM e);" || fail "w.db"
start=$(date +%s)
timeout 60 "$mhc" validate w.db --backend host --capacity 80% --repeat 1 --replay-steps 1 --no-store \
    --max-replay-time 1us >out 2>err
rc=$?
took=$(( $(date +%s) - start ))
[ $rc = 2 ] && grep -q "w.db: the replays would take at least" err ||
    fail "validate --replay-steps 1 of 200,000 kernels exited $rc after $took s: $(tail -c 300 err)"
[ $took -le 30 ] || fail "validate --replay-steps 1 of 200,000 kernels took $took s"

# 5. Past a file size limit (ulimit -f, SIGXFSZ as the shell leaves it: not ignored): generate and
#    export were killed by SIGXFSZ (exit 153, nothing said, OUT.mhc-tmp-PID left); now one line
#    naming the output, exit 2, nothing left.
for cmd in "generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o big.db" "export t.db -o big.json"; do
    # shellcheck disable=SC2086
    (trap - XFSZ; ulimit -f 20; exec "$mhc" $cmd >out 2>err); rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -q "big\.\(db\|json\)" err ||
        fail "$cmd past ulimit -f 20 exited $rc: $(head -c 300 err)"
    [ -z "$(ls | grep '^big')" ] || fail "$cmd past ulimit -f 20 left $(ls | grep '^big')"
done

# 3 and 4: mhc-torch capture of model files that misbehave.
if ! PYTHONPATH=$pkg "$python" -c "$find_modules" torch mhc_torch 2>/dev/null; then
    echo "SKIP parts 1 (mhc-torch), 3 and 4: $python has no torch (mhc-torch capture)"
    echo "all hostile pass 17 checks passed (mhc-torch parts skipped)"
    exit 0
fi
torch_short() {   # torch_short WANT ARGS...: mhc-torch ARGS refused, one line under 400 bytes
    local want=$1; shift
    PYTHONPATH=$pkg timeout 120 "$python" -m mhc_torch.cli "$@" >out 2>err </dev/null
    local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && [ "$(wc -c <err)" -lt 400 ] && grep -qF -- "$want" err ||
        fail "mhc-torch $(echo "$*" | cut -c1-60)... exited $rc, $(wc -c <err) bytes: $(head -c 300 err)"
}
torch_short "unknown model '$x60...(120000 bytes)'" capture "$big" -o a.db
torch_short "--steps: '$x60...(120000 bytes)': not a whole number" capture tiny-gpt2 --steps "$big" -o a.db
torch_short "$x60...(120000 bytes)" runs "$big"

model() {   # model NAME LINES...: NAME.py, whose forward runs the lines given (8 spaces deep)
    local name=$1; shift
    {
        printf 'import os, threading, time, torch\nclass M(torch.nn.Module):\n    def __init__(self):\n'
        printf '        super().__init__()\n        self.lin = torch.nn.Linear(8, 8)\n    def forward(self, x):\n'
        for line in "$@"; do printf '        %s\n' "$line"; done
        printf '        return self.lin(x).sum()\n'
        printf 'def build_model():\n    return M()\ndef make_batch():\n    return (torch.randn(4, 8),)\n'
    } >"$name.py"
}
capture() {   # capture NAME: mhc-torch capture NAME.py -o NAME.db; $rc, out, err
    PYTHONPATH=$pkg timeout 120 "$python" -m mhc_torch.cli capture "$1.py" -o "$1.db" >out 2>err </dev/null
    rc=$?
}
# 3. A thread that never ends (not a daemon).
model thread 'threading.Thread(target=lambda: time.sleep(10**6), name="poller").start()'
capture thread
[ $rc = 0 ] && grep -q "^thread.db: [0-9]* kernels" out && [ "$(wc -l <err)" = 1 ] &&
    grep -q "^mhc-torch: note: the model's thread 'poller' still ran when mhc-torch was done" err ||
    fail "a model that left a thread running: exit $rc (124: never ended): $(head -c 300 err)"
"$mhc" check thread.db >/dev/null 2>err || fail "thread.db: $(cat err)"

# 4. os.fork() in forward, in build_model's file at its top level; the parent waits for the child
#    (which before wrote the trace first: the parent's write was refused).
model fork 'pid = os.fork()' 'if pid: os.waitpid(pid, 0)'
model fork_top
printf 'pid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\n' >>fork_top.py
for name in fork fork_top; do
    capture $name
    [ $rc = 0 ] && [ ! -s err ] && [ "$(grep -c "^$name.db: [0-9]* kernels" out)" = 1 ] ||
        fail "a model that forks ($name.py): exit $rc, $(grep -c kernels out) summaries: $(head -c 300 err)"
    "$mhc" check $name.db >/dev/null 2>err || fail "$name.db: $(cat err)"
    [ "$(ls | grep -c "^$name.db")" = 1 ] || fail "$name.py: files left: $(ls | grep "^$name")"
done

echo "all hostile pass 17 checks passed"
