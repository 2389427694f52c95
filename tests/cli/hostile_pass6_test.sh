#!/usr/bin/env bash
# Hostile pass 6 (docs/cli.md, "Messages and exit statuses"): what the earlier passes left.
#   1. mhc-torch capture's output, checked as mhc checks its own: a name that is a descriptor of the
#      process (a link to /proc/self/fd/1, /dev/fd/1) was replaced, or written through (as root,
#      `-o /dev/stdout --force` replaced /dev/stdout with the trace), and T.db-journal or -wal of a
#      trace T.db was written (SQLite removes it when T.db is next opened);
#   2. mhc-torch's JSON inputs (--setting, --recipe, --kernel-times): a named pipe waited for a
#      writer forever, nesting 100,000 deep or a 5,000-digit number printed a traceback (exit 1), a
#      key given twice was read as its last value, and -o naming the setting, recipe or profile
#      file with --force replaced it with the trace;
#   3. a model file calling os._exit(0): the capture ended with exit status 0, no trace, nothing said;
#   3b. a newline or an escape in a name mhc-torch quoted was sent as is (two lines, an escape);
#   3c. a model file that changed the working folder had its trace written there;
#   4. mhc-torch runs of a trace named x#y.db read x (the name went into an SQLite URI unquoted); a
#      trace locked by a writer was "not a trace: database is locked" after 5 s;
#   5. a link profile or an advise --setting holding a key twice in one object ran with the last;
#   6. a file name longer than a folder allows: an internal error (exit 1), or refused only after
#      the work (exit 4 for a --runs-db);
#   7. advise --verify left its capture's log and trace in $TMPDIR (by names anyone could guess);
#   8. validate --link auto hung on a named pipe in place of its cached calibration.
# Usage: hostile_pass6_test.sh MHC PYTHON PKG (PKG: the folder holding mhc_torch; PYTHON with torch
# for the parts that import it, which are skipped, said, without one)
set -u
mhc=$1
python=$2
pkg=$3
. "$(dirname "$0")/preamble.sh"
capture=$(cd "$(dirname "$0")/../data/advise" && pwd)/tiny_mhc.db
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate

# 5. A key given twice in one object of a file users write (a link profile, an advise setting): it
# ran with the last value ({"copy_engines": 2, "copy_engines": 1}; {"weights": "bf16", "weights":
# "fp32"} advised the step as captured). Refused naming the field's path, before any work.
link='"name": "x", "h2d": {"bandwidth_Bps": 25e9, "latency_s": 6e-6}, "d2h": {"bandwidth_Bps": 25e9, "latency_s": 6e-6}, "duplex_factor": 0.5'
echo "{$link, \"copy_engines\": 2, \"copy_engines\": 1}" >twice.json
cat >nested.json <<'JSON'
{"name": "x", "h2d": {"bandwidth_Bps": 25e9, "latency_s": 6e-6, "bandwidth_Bps": 1e3},
 "d2h": {"bandwidth_Bps": 25e9, "latency_s": 6e-6}, "duplex_factor": 0.5, "copy_engines": 2}
JSON
echo "{$link, \"copy_engines\": 2}" >once.json
twice="is given twice: JSON readers take either value; give it once"
refused "twice.json: field 'copy_engines' $twice" simulate t.db --capacity 90% --no-store --link twice.json
[ ! -s out ] || fail "simulate ran before refusing the link profile: $(head -c 200 out)"
refused "nested.json: field 'h2d.bandwidth_Bps' $twice" sweep t.db --capacities 90% --no-bisect --no-store --links nested.json
refused "twice.json: field 'copy_engines' $twice" validate t.db --capacity 90% --no-store --repeat 1 --link twice.json
"$mhc" simulate t.db --capacity 90% --no-store --link once.json >out 2>err || fail "a link profile with each key once: $(cat err)"
refused "--setting: '{\"weights\": \"bf16\", \"weights\": \"fp32\"}': field 'weights' $twice" advise "$capture" \
    --setting '{"weights": "bf16", "weights": "fp32"}'
refused "field 'checkpoint[1].policy' $twice" advise "$capture" \
    --setting '{"checkpoint": [{"modules": ["a"]}, {"modules": ["b"], "policy": "full", "policy": "mhc"}]}'
"$mhc" advise "$capture" --setting '{"weights": "fp32"}' >out 2>err || fail "advise --setting with each key once: $(cat err)"

# 6. A name longer than a folder allows (300 bytes; a path past 4096): import, calibrate and kernels
# said "internal error: filesystem error: status: File name too long" (exit 1); simulate, sweep and
# validate --runs-db computed, then could not store (exit 4); generate, export and advise
# --trace-out did the work, then failed to move the file into place. Now each is refused at once.
long=$(printf 'n%.0s' $(seq 300))
deep=$(printf 'd%.0s' $(seq 200)); deep=$(printf "$deep/%.0s" $(seq 25))x
head -c 512 /dev/zero >H.f32
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":5,"args":{"device":0,"stream":7}}]}' >k.json
too_long="cannot be reached: File name too long"
for out in "$long" "$deep"; do
    refused "$too_long" generate --steps 1 --layers 1 --seq 64 -o "$out.db"
    refused "$too_long" export t.db -o "$out.json"
    refused "$too_long" import k.json -o "$out.db"
    refused "$too_long" calibrate --backend host --quick --rounds 1 --max-chunk 16KiB -o "$out.json"
    grep -q "h2d" out && fail "calibrate measured before refusing its output"
    refused "$too_long" kernels sinkhorn --n 4 --iters 2 --input H.f32 --output "$out.f32"
    refused "$too_long" advise "$capture" --setting '{}' --trace-out "$out.db"
    refused "$too_long" simulate t.db --capacity 90% --runs-db "$out.db"
    [ ! -s out ] || fail "simulate ran before refusing --runs-db: $(head -c 200 out)"
    refused "$too_long" sweep t.db --capacities 90% --no-bisect --runs-db "$out.db"
    refused "$too_long" validate t.db --capacity 90% --link pcie4 --repeat 1 --runs-db "$out.db"
    grep -q "replay" out && fail "validate replayed before refusing --runs-db"
    refused "$too_long" info t.db --runs-db "$out.db"
done
[ -z "$(ls | grep -e mhc-tmp -e "^$long")" ] || fail "a refused command left: $(ls | grep -e mhc-tmp -e "^$long")"
# A loop of symbolic links in an output's folders: said five ways ("cannot create: unable to open
# database file", "cannot write: Too many levels ...", "cannot be created: loop1 is not a
# directory"), now one.
ln -s loop1 loop2 && ln -s loop2 loop1
loop="cannot be reached: Too many levels of symbolic links"
refused "loop1/x.db: $loop" generate --steps 1 --layers 1 --seq 64 -o loop1/x.db
refused "loop1/x.json: $loop" export t.db -o loop1/x.json
refused "loop1/x.db: $loop" simulate t.db --capacity 90% --runs-db loop1/x.db
[ ! -s out ] || fail "simulate ran before refusing --runs-db loop1/x.db"
refused "loop1/x.db: $loop" advise "$capture" --setting '{}' --trace-out loop1/x.db
refused "loop1/x.db: $loop" import k.json -o loop1/x.db

# 6b. A file of /proc that is no descriptor (/proc/cpuinfo) was called "a descriptor of this process".
refused "/proc/cpuinfo: a file of /proc (the kernel's), not a file mhc reads or writes" info /proc/cpuinfo
refused "/proc/self/environ: a file of /proc (the kernel's)" export t.db -o /proc/self/environ --force
refused "/proc/self/fd/0: a descriptor of this process" info /proc/self/fd/0

# 7. advise --verify's files: the capture's log was $TMPDIR/mhc-advise-PID-I.db.log, opened
# O_CREAT|O_TRUNC by a name anyone could guess, and left behind when mhc-torch could not be run;
# the capture's trace was left when it was no trace, and the message named only that file.
mkdir tmpdir
printf '#!/bin/sh\necho garbage >"$7"\n' >garbage.sh
printf '#!/bin/sh\ncp "%s" "$7"\n' "$capture" >same.sh
printf '#!/bin/sh\nkill -SEGV $$\n' >segv.sh
printf '#!/bin/sh\nsleep 20\n' >slow.sh
chmod +x garbage.sh same.sh segv.sh slow.sh
TMPDIR=$tmp/tmpdir MHC_TORCH=/nonexistent refused "--verify: cannot run /nonexistent" advise "$capture" --setting '{}' --verify
TMPDIR=$tmp/tmpdir MHC_TORCH=./garbage.sh refused "(./garbage.sh) exited 0 but wrote no trace mhc reads" \
    advise "$capture" --setting '{}' --verify
TMPDIR=$tmp/tmpdir MHC_TORCH=./segv.sh refused "failed: killed by signal 11" advise "$capture" --setting '{}' --verify
TMPDIR=$tmp/tmpdir MHC_TORCH=./same.sh "$mhc" advise "$capture" --setting '{}' --verify >out 2>err ||
    fail "advise --verify with a capture of the same step: $(cat err)"
TMPDIR=$tmp/tmpdir MHC_TORCH=./slow.sh "$mhc" advise "$capture" --setting '{}' --verify >out 2>err &
pid=$!
for _ in $(seq 100); do [ -n "$(ls tmpdir)" ] && break; sleep 0.05; done
kill -TERM $pid
{ wait $pid; } 2>/dev/null
[ -z "$(ls -A tmpdir)" ] || fail "advise --verify left in TMPDIR: $(ls -A tmpdir)"

# 8. validate --link auto's cached calibration replaced by a named pipe: validate waited for a
# writer forever. Now the cache is said not to load, and the link is measured again.
export XDG_CACHE_HOME=$tmp/cache
"$mhc" validate t.db --capacity 90% --link auto --repeat 1 --no-store >out 2>err || fail "validate --link auto: $(cat err)"
cached=$(ls cache/mhc/replay-link-*.json) || fail "validate --link auto cached no calibration"
rm "$cached" && mkfifo "$cached"
timeout 120 "$mhc" validate t.db --capacity 90% --link auto --repeat 1 --no-store >out 2>err; rc=$?
[ $rc = 0 ] || fail "validate --link auto with a named pipe as its cache exited $rc: $(tail -2 err)"
grep -qF "the cached calibration does not load ($tmp/$cached: not a regular file, not a link profile)" out ||
    fail "validate --link auto did not say why the cache was not read: $(grep obtained out)"
unset XDG_CACHE_HOME

# The Python front-end: its checks before torch is imported run with any Python 3.
[ -x "$python" ] || python=python3
torch=yes
PYTHONPATH=$pkg "$python" -c "$find_modules" torch 2>/dev/null || torch=
# torch_refused WANT ARGS...: `mhc-torch capture ARGS...` exits 2 within 60 s, one line containing WANT.
torch_refused() {
    local want=$1; shift
    PYTHONPATH=$pkg timeout 60 "$python" -m mhc_torch.cli capture "$@" >out 2>err </dev/null; local rc=$?
    [ $rc = 2 ] || fail "mhc-torch capture $* exited $rc, wanted 2: $(head -c 300 err)"
    [ "$(wc -l <err)" = 1 ] || fail "mhc-torch capture $*: wanted one line: $(head -c 300 err)"
    grep -qF -- "$want" err || fail "mhc-torch capture $*: does not say '$want': $(cat err)"
}
cat >net.py <<'PY'
import torch
def build_model():
    return torch.nn.Linear(4, 4)
def make_batch():
    return torch.randn(2, 4)
PY

# 1. Outputs that are descriptors of the process, or SQLite's side files of a trace.
ln -s /proc/self/fd/1 fd1.db
ln -s /dev/stdout stdout.db   # never /dev/stdout itself: a capture that replaced it would replace the machine's
for out in fd1.db stdout.db /dev/fd/1 /proc/self/fd/1; do
    torch_refused "a descriptor of this process, not a file; name a file" net.py -o $out --force
done
[ -L fd1.db ] && [ -L stdout.db ] || fail "mhc-torch capture replaced a link to its standard output"
for side in journal wal shm; do
    torch_refused "t.db-$side: is the name of t.db's" net.py -o t.db-$side
    [ ! -e t.db-$side ] || fail "mhc-torch capture wrote t.db-$side"
done

# 2. JSON inputs: pipes, depth, huge numbers, repeated keys, the output naming them.
mkfifo pipe.json
torch_refused "setting: pipe.json: is a named pipe, not a regular file" net.py -o x.db --setting pipe.json
torch_refused "recipe: pipe.json: is a named pipe, not a regular file" --recipe pipe.json -o x.db
python3 -c "print('[' * 100000 + ']' * 100000)" >deep.json
python3 -c "print('{\"offload\": ' + '1' * 5000 + '}')" >digits.json
torch_refused "setting: deep.json: not JSON mhc-torch reads: nested too deeply" net.py -o x.db --setting deep.json
torch_refused "recipe: deep.json: not JSON mhc-torch reads: nested too deeply" --recipe deep.json -o x.db
torch_refused "setting: digits.json: not JSON mhc-torch reads: a number of more digits" net.py -o x.db --setting digits.json
torch_refused "setting: key 'weights' is given twice: JSON readers take either value; give it once" net.py -o x.db --setting '{"weights": "bf16", "weights": "fp32"}'
torch_refused "recipe: key 'model' is given twice" --recipe '{"model": "tiny-gpt2", "model": "net.py"}' -o x.db
echo '{"weights": "bf16"}' >s.json
echo '{"model": "tiny-gpt2", "seq": 16, "layers": 1}' >r.json
echo '{"traceEvents": []}' >k.json
torch_refused "./s.json: is the input file s.json" net.py --setting s.json -o ./s.json --force
torch_refused "r.json: is the input file r.json" --recipe r.json -o r.json --force
torch_refused "k.json: is the input file k.json" net.py --kernel-times k.json -o k.json --force
[ "$(cat s.json)" = '{"weights": "bf16"}' ] && grep -q tiny-gpt2 r.json && grep -q traceEvents k.json ||
    fail "mhc-torch capture replaced an input file"
[ ! -e x.db ] || fail "a refused capture wrote x.db"
# 3b. A newline or an escape in a name mhc-torch quotes: one line, each shown as '?' (as mhc shows
# it; it was sent as is: two or three lines, or the terminal's escape sequence).
torch_refused "mhc-torch: a?b.py: no such file" $'a\nb.py' -o x.db
torch_refused "mhc-torch: no?dir/x.db: cannot write into no?dir: no such directory" net.py -o $'no\ndir/x.db'
torch_refused "mhc-torch: unknown model 'a?[2Jb'" $'a\e[2Jb' -o x.db
grep -q $'\e' err && fail "mhc-torch sent an escape byte to the terminal"

# 4. mhc-torch runs of a trace whose name holds '#', '?' or '%' (read as a URI: x#y.db opened x,
# 50%41.db was a traceback), and of a named pipe (said to be no such file).
if PYTHONPATH=$pkg "$python" -c "$find_modules" pandas 2>/dev/null; then
    "$mhc" -q simulate t.db --capacity 90% --no-events >/dev/null || fail "simulate t.db"
    : >x
    for name in 'x#y.db' 'x?y.db' '50%41.db'; do
        cp t.db "$name"
        PYTHONPATH=$pkg "$python" -m mhc_torch.cli runs "$name" >out 2>err || fail "mhc-torch runs $name: $(cat err)"
        grep -q "lru+none@90%" out || fail "mhc-torch runs $name: $(cat out)"
    done
    PYTHONPATH=$pkg timeout 60 "$python" -m mhc_torch.cli runs pipe.json >out 2>err
    [ $? = 2 ] && [ "$(cat err)" = "mhc-torch: pipe.json: is a named pipe, not a trace" ] || fail "mhc-torch runs pipe.json: $(cat err)"
    # A runs database given as a trace was "schema version 0, expected 1", as if another version
    # had written it (mhc says what it is).
    "$mhc" -q simulate t.db --capacity 90% --no-events --runs-db r.db >/dev/null || fail "simulate --runs-db r.db"
    PYTHONPATH=$pkg "$python" -m mhc_torch.cli runs r.db >out 2>err
    [ $? = 2 ] && grep -qxF "mhc-torch: r.db: is a runs database (mhc simulate --runs-db), not a trace (it was made for $tmp/t.db)" err ||
        fail "mhc-torch runs of a runs database: $(cat err)"
    # A trace another process writes (an exclusive lock held): "not a trace: database is locked"
    # after 5 s whatever MHC_BUSY_TIMEOUT_MS said. Now the wait is mhc's, and said as a lock.
    # Held until the file `release` is there (at most 60 s), not for a fixed 4 s: on a loaded
    # machine the first reader's start alone could outlast a fixed window.
    rm -f release
    # (.timeout: its BEGIN waits out the poll below's read instead of failing at once.)
    (echo ".timeout 10000"; echo "BEGIN EXCLUSIVE; UPDATE meta SET value = value WHERE key = 'format';"
     for _ in $(seq 1200); do [ -e release ] && break; sleep 0.05; done
     echo "COMMIT;") |
        sqlite3 t.db &
    holder=$!
    for _ in $(seq 50); do
        sqlite3 t.db "PRAGMA busy_timeout = 0; SELECT 1 FROM meta LIMIT 1" >/dev/null 2>&1 || break
        sleep 0.05
    done
    MHC_BUSY_TIMEOUT_MS=500 PYTHONPATH=$pkg "$python" -m mhc_torch.cli runs t.db >out 2>err
    [ $? = 2 ] && [ "$(cat err)" = "mhc-torch: t.db: cannot read: the file stayed locked by another process for 0.5 s (MHC_BUSY_TIMEOUT_MS sets the wait)" ] ||
        { touch release; fail "mhc-torch runs of a locked trace: $(cat err)"; }
    # Started while the lock is held, it waits for it (the default wait), then reads.
    PYTHONPATH=$pkg "$python" -m mhc_torch.cli runs t.db >out 2>err &
    waiter=$!
    sleep 0.5; touch release
    wait $waiter || { wait $holder; fail "mhc-torch runs waiting for a lock: $(cat err)"; }
    wait $holder
else
    echo "skipped: mhc-torch runs (no pandas in $python)"
fi
if [ -n "$torch" ]; then
    torch_refused "--kernel-times: pipe.json: is a named pipe, not a regular file" net.py -o x.db --kernel-times pipe.json
    torch_refused "--kernel-times: deep.json: not JSON mhc-torch reads: nested too deeply" net.py -o x.db --kernel-times deep.json
    # 3. os._exit in a model file, at its top level or in build_model().
    printf 'import os\nos._exit(0)\n' >exits.py
    torch_refused "exits.py:2 in <module>: the model called os._exit(0); no trace written" exits.py -o x.db
    sed 's/return torch.nn.Linear(4, 4)/import os; os._exit(0)/' net.py >exits2.py
    torch_refused "exits2.py:3 in build_model: the model called os._exit(0); no trace written" exits2.py -o x.db
    [ ! -e x.db ] || fail "a refused capture wrote x.db"
    # An exception whose message cannot be made (its __str__ raises): its type, in one line (a
    # traceback of 44 lines, exit 1).
    printf 'class E(Exception):\n    def __str__(self):\n        raise ValueError("no")\nraise E()\n' >strfails.py
    torch_refused "strfails.py:4 in <module>: E (its message could not be read: ValueError)" strfails.py -o x.db
    # 3c. A model file that changes the working folder: the trace goes where -o named it (it went
    # into the model's folder, under the name given).
    mkdir elsewhere
    sed "s|^import torch|import os, torch; os.chdir('$tmp/elsewhere')|" net.py >moves.py
    PYTHONPATH=$pkg "$python" -m mhc_torch.cli capture moves.py -o moved.db >out 2>err || fail "capture moves.py: $(cat err)"
    [ -s moved.db ] && [ ! -e elsewhere/moved.db ] || fail "a model that changed folder had its trace written in $(ls elsewhere)"
else
    echo "skipped: mhc-torch's checks after torch is imported (no torch in $python)"
fi
echo ok
