#!/usr/bin/env bash
# Hostile pass 16 (docs/cli.md, "Messages and exit statuses"; docs/validation.md; docs/torch.md):
# what passes 1 to 15 left.
#   1. validate of a trace whose kernels run on many streams: a replay runs each stream on a thread
#      of its own; 100,002 streams spent 110 s starting threads, then ended "internal error:
#      Resource temporarily unavailable" (exit 1, 817 MB). Refused before any replay past 1,024;
#      a thread the system will not start (ulimit -u) is one line naming the stream, exit 2.
#   2. A model file's exception of a class outside Exception (GeneratorExit, its own BaseException
#      subclass; the latter tried) ended mhc-torch capture in a traceback, exit 1; now one line, exit 2.
#   3. A model that replaced sys.stdout or sys.stderr (io.StringIO()), closed sys.stdout or replaced
#      builtins.print: the capture's summary went nowhere (exit 0, nothing printed), its refusal too
#      (exit 2, nothing said), or it ended in a traceback of ValueError (exit 1) after the trace was
#      written. mhc-torch's own streams are put back after the model's code ran.
#   4. A capture whose rows mhc refuses (docs/trace-format.md, "Value ranges"): a fake tensor of 2^58
#      bytes was written (every mhc command then refused the trace), a matmul whose roofline time
#      passes 2^62 ns ended in "OverflowError: Python int too large to convert to SQLite INTEGER".
#      Now refused naming the row, no trace written.
# Usage: hostile_pass16_test.sh MHC PYTHON PKG (PKG: the folder holding mhc_torch; part 1's limit on
# threads needs root and setpriv, parts 2 to 4 a Python with torch; each is skipped, said, without)
set -u
mhc=$1
python=$2
pkg=$3
[ -x "$python" ] || python=python3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o t.db >/dev/null || fail generate

# 1. 1,100 streams on device 0 (a kernel each, accessing allocation 1): refused before any replay,
#    with nothing stored; 1,024 streams are replayed.
streams() {   # streams FILE N: t.db with N more kernels, each on a stream of its own
    cp t.db "$1" && sqlite3 "$1" "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $2)
        INSERT INTO kernels SELECT 100000 + i, 0, 1000 + i, 23, 400000 + i * 10, 400000 + i * 10 + 5, 0,
        1, 1, 1, 1, 1, 1, 0, 1, 100000 + i FROM c;
        INSERT INTO accesses SELECT id, 1, 1 FROM kernels WHERE id > 100000;" || fail "streams $1"
}
streams s.db 1100
refused "s.db: the kernels of device 0 run on 1101 streams; a replay runs each stream on a thread of its own, at most 1024" \
    validate s.db --backend host --capacity 80% --repeat 1
[ "$(sqlite3 s.db "SELECT count(*) FROM runs")" = 0 ] || fail "validate of s.db stored runs"
streams s2.db 1023
timeout 120 "$mhc" validate s2.db --backend host --capacity 80% --repeat 1 --no-store >out 2>err ||
    fail "validate of 1,024 streams exited $?: $(tail -3 err)"
# A thread the system will not start (here: a user's limit of 200 processes and threads) is one
# line naming the stream, exit 2. RLIMIT_NPROC binds no root process: run as the user nobody.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    mkdir nobody && cp s2.db nobody/ && chmod 755 . && chmod 777 nobody && chmod 666 nobody/s2.db || fail "nobody/"
    (cd nobody && ulimit -u 200 && setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$PWD" \
        timeout 120 "$mhc" validate s2.db --backend host --capacity 80% --repeat 1 --no-store >out 2>err)
    rc=$?
    [ $rc = 2 ] && [ "$(wc -l <nobody/err)" = 1 ] &&
        grep -qE "^mhc: cannot start the replay's thread for stream [0-9]+ of 1024: Resource temporarily unavailable \(a limit on this user's processes and threads: ulimit -u\)$" nobody/err ||
        fail "validate under ulimit -u 200 exited $rc: $(tail -3 nobody/err)"
else
    echo "SKIP part 1, a limit on threads: needs root and setpriv (RLIMIT_NPROC binds no root process)"
fi

# 2 to 4: mhc-torch capture of model files that misbehave.
if ! PYTHONPATH=$pkg "$python" -c "$find_modules" torch mhc_torch 2>/dev/null; then
    echo "SKIP parts 2 to 4: $python has no torch (mhc-torch capture)"
    echo "all hostile pass 16 checks passed (parts 2 to 4 skipped)"
    exit 0
fi
model() {   # model NAME FORWARD...: NAME.py, whose forward runs the lines given (8 spaces deep)
    local name=$1; shift
    {
        printf 'import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n'
        printf '        super().__init__()\n        self.lin = torch.nn.Linear(8, 8)\n    def forward(self, x):\n'
        for line in "$@"; do printf '        %s\n' "$line"; done
        printf 'def build_model():\n    return M()\ndef make_batch():\n    return (torch.randn(4, 8),)\n'
    } >"$name.py"
}
capture() {   # capture NAME: mhc-torch capture NAME.py -o NAME.db; $rc, out, err
    PYTHONPATH=$pkg timeout 300 "$python" -m mhc_torch.cli capture "$1.py" -o "$1.db" >out 2>err </dev/null
    rc=$?
}
capture_refused() {   # capture_refused NAME WANT: exit 2, one line with WANT, no trace
    capture "$1"
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$2" err ||
        fail "mhc-torch capture $1.py exited $rc, wanted 2 and one line with '$2': $(head -c 400 err)"
    [ ! -e "$1.db" ] || fail "mhc-torch capture $1.py left $1.db"
}
model own_base 'class Stop(BaseException): pass' 'raise Stop("custom")'
capture_refused own_base "mhc-torch: own_base.py:8 in forward: Stop: custom"

# 3. The model's changes to sys.stdout, sys.stderr and print do not reach mhc-torch's own output.
#    (each of the three alone failed before: tried one by one when this test was written)
model own_out 'import builtins, io, sys' 'sys.stdout.close(); sys.stdout = io.StringIO()' \
    'builtins.print = lambda *a, **k: None' 'return self.lin(x).sum()'
capture own_out
[ $rc = 0 ] && grep -q "^own_out.db: [0-9]* kernels" out ||
    fail "a model that closed and replaced sys.stdout and print: exit $rc, printed '$(head -c 200 out)': $(head -c 300 err)"
model own_err 'import sys, io; sys.stderr = io.StringIO()' 'raise ValueError("said")'
capture_refused own_err "mhc-torch: own_err.py:8 in forward: ValueError: said"

# 4. Rows mhc would refuse are not written.
model huge 'return torch.empty(2**55, dtype=torch.float64, device=x.device).sum() + self.lin(x).sum()'
capture_refused huge "huge.py: allocation 4 (M:aten::empty) holds 256.00 PiB, outside 1 B to 2^56 B"
model long 'a = torch.empty(2**27, 2**27, dtype=torch.bfloat16, device=x.device)' 'return self.lin(x).sum() + (a @ a).sum()'
capture_refused long "long.py: kernel 6 (aten::mm): a time of 4.89e+09 s, past 2^62 ns (146 years)"

echo "all hostile pass 16 checks passed"
