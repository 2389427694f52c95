#!/usr/bin/env bash
# Small things said rightly, each one line and exit 2 where it is a refusal: an option where
# --ranks wants files; capacities that mean nothing; an empty list of capacities; devices below
# -1; a busy timeout that is not a number, and a lock said in the seconds it was set to (not a
# problem of the trace); calibrate buffers larger than the machine; a folder as generate's
# output; a seed past 2^64-1; a Kineto duration below 0; a non-finite run metric; the pipe's name
# in an nsys warning; check --full and a damaged index; a warning before a sweep stores a lot; an
# execution trace without Kineto numbered as its events (order only), as info and mhc-view show it;
# info saying why a Kineto trace has no memory and what an end-state snapshot counts, each once;
# info giving each device's peak; generate refusing a trace past --max-output-size with its estimate;
# the MHC_* variables refused in one line beyond their documented values; export --runs-db waiting
# for a locked runs database under its name; info saying an import's warnings again; import of an
# execution trace with its Kineto trace saying how they joined; mhc seconds (a duration for
# scripts, out of mhc --help) and validate --calibration-max-age none.
set -u
mhc=$1
nsys=$2   # a public Nsight Systems export
. "$(dirname "$0")/preamble.sh"
trap 'kill $holder 2>/dev/null; rm -rf "$tmp"' EXIT
holder=
fixtures=$(cd "$(dirname "$0")/../import/fixtures" && pwd)
cd "$tmp" || exit 1
# refused CMD...: exit 2 and one line on stderr containing $want
refused() {
    "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] || fail "$* exited $rc, wanted 2: $(cat err)"
    [ "$(wc -l <err)" = 1 ] || fail "$*: wanted one line: $(cat err)"
    grep -qF -- "$want" err || fail "$*: does not say '$want': $(cat err)"
}
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate

# mhc seconds: a duration read as every option reads one, printed in seconds (gpu-check --budget).
for pair in 9min=540 "2.5 ms=0.0025" 1h=3600 90.5s=90.5 6us=0.000006; do
    got=$("$mhc" seconds "${pair%=*}") || fail "seconds ${pair%=*}"
    [ "$got" = "${pair#*=}" ] || fail "seconds ${pair%=*}: $got, wanted ${pair#*=}"
done
[ "$("$mhc" seconds --bare-unit s 540)" = 540 ] || fail "seconds --bare-unit s 540"
want="seconds: '540': a duration needs a unit: 540us, 540ms or 540s"; refused seconds 540
want="'9m': 'm' could be minutes or milliseconds"; refused seconds 9m
want="at most 1e9 s"; refused seconds 1000000h
"$mhc" --help | grep -q "^  seconds" && fail "mhc --help lists the scripts' seconds command"
"$mhc" help | grep -q "^  seconds" && fail "mhc help lists the scripts' seconds command"
want="'secondz' is not a command; commands: advise,"; refused secondz 5s
grep -q "seconds" err && fail "a typo is told of the scripts' seconds command: $(cat err)"
# --calibration-max-age takes none as every limit does (no age is stale); the refusal that it goes
# with --recalibrate shows the value was read, not refused as a duration.
want="--calibration-max-age and --recalibrate"; refused validate t.db --capacity 90% --recalibrate --calibration-max-age none
want="--calibration-max-age: 'never'"; refused validate t.db --capacity 90% --calibration-max-age never

want="--ranks: '--capacity': needs trace files, not an option"; refused simulate --ranks --capacity 70%
want="less than 0.0001% of the peak"; refused simulate t.db --capacity 0.00000001%
want="not a percentage"; refused simulate t.db --capacity 1e-300%
want="must be positive"; refused simulate t.db --capacity 0%
want="sweep: --capacities: '': an empty value"; refused sweep t.db --capacities ''
want="validate: --capacity: '': an empty value"; refused validate t.db --capacity ''
want="--device"; refused allocator t.db --device -5
want="--device"; refused simulate t.db --capacity 80% --device -5
want="more than half of this machine's memory"; refused calibrate --backend host --max-chunk 1TiB -o p.json
[ ! -e p.json ] || fail "calibrate wrote a profile"
mkdir d
want="is a directory"; refused generate --steps 1 --pp 2 --all-ranks -o d/
[ -z "$(ls -A d)" ] || fail "generate -o DIR/ wrote $(ls -A d)"
# The seed takes the whole-number grammar as every N does (010 was read as 10): past 2^64-1, said so.
want="--seed: '18446744073709551616': too large a number"; refused generate --steps 1 --seed 18446744073709551616 -o s.db

# A gzipped trace is said to be one, with how to decompress it (was "not an SQLite database" alone).
gzip -c t.db >gz.db && cp gz.db gz2.db.gz
want="gz.db: not an mhc trace: the file is gzip-compressed, not an SQLite database: decompress it first (gunzip -c gz.db > trace.db)"
refused info gz.db
refused check gz.db
refused simulate gz.db --capacity 50% --no-store
want="gz2.db.gz: not an mhc trace: the file is gzip-compressed, not an SQLite database: decompress it first (gunzip -k gz2.db.gz)"
refused info gz2.db.gz
# `mhc import -` names standard input, not the /dev/stdin it is read through.
printf 'garbage' | "$mhc" import - -o s.db >out 2>err; rc=$?
[ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -q "^mhc: standard input: unknown format" err && ! grep -q /dev/stdin err ||
    fail "import - of garbage ($rc): $(cat err)"
"$mhc" import - -o s.db <gz.db >out 2>err; rc=$?
[ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -q "^mhc: standard input: a gzip-compressed SQLite file" err ||
    fail "import - of a gzipped SQLite file ($rc): $(cat err)"
[ ! -e s.db ] || fail "a refused import wrote s.db"

# The busy timeout: malformed, refused; a lock, said in the seconds it was set to, no problem count.
MHC_BUSY_TIMEOUT_MS=soon "$mhc" info t.db >/dev/null 2>err; rc=$?
[ $rc = 2 ] && grep -q "MHC_BUSY_TIMEOUT_MS='soon'" err || fail "a malformed MHC_BUSY_TIMEOUT_MS was ignored ($rc): $(cat err)"
# An environment number follows the options' grammar (docs/cli.md, "Numbers"): 010 was read as 10.
for v in 010 +5 ' 7' 1_000 '٣'; do
    MHC_BUSY_TIMEOUT_MS=$v "$mhc" info t.db >/dev/null 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "MHC_BUSY_TIMEOUT_MS='$v': " err ||
        fail "MHC_BUSY_TIMEOUT_MS='$v' was taken ($rc): $(cat err)"
done
grep -qF "MHC_BUSY_TIMEOUT_MS='٣': not a whole number (decimal digits only" err || fail "the refusal: $(cat err)"
python3 -c "
import sqlite3, sys, time
db = sqlite3.connect('t.db', isolation_level=None)
db.execute('BEGIN EXCLUSIVE')
open('locked', 'w').close()
time.sleep(30)
" & holder=$!
for _ in $(seq 1 100); do [ -e locked ] && break; sleep 0.05; done
MHC_BUSY_TIMEOUT_MS=200 "$mhc" check t.db >out 2>err; rc=$?
kill $holder; wait $holder 2>/dev/null; holder=
[ $rc = 2 ] || fail "check of a locked trace exited $rc"
[ "$(cat out err | wc -l)" = 1 ] && grep -q "locked by another process for 0.2 s" err || fail "the lock: $(cat out err)"
grep -q "problem" out err && fail "a lock counted as a problem of the trace: $(cat out err)"
"$mhc" check t.db >/dev/null || fail "check after the lock"

# A Kineto kernel of -5000 us: imported as 0 ns long, and said.
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":-5000,"args":{"device":0,"stream":7}}]}' >neg.json
"$mhc" import neg.json -o neg.db >out 2>err || fail "import of a negative duration: $(cat err)"
grep -q "warning .*negative 'dur', read as 0 ns" out || fail "a negative duration was not said: $(cat out)"

# A run metric of +Inf (a damaged or foreign file) is refused, not printed as a negative size.
"$mhc" simulate t.db --capacity 80% >/dev/null || fail simulate
sqlite3 t.db "UPDATE run_metrics SET value = 9e999 WHERE key = 'simulated_peak_bytes'"
"$mhc" info t.db >out 2>err; rc=$?
[ $rc = 2 ] && grep -q "simulated_peak_bytes' is inf, not a finite number" err || fail "+Inf metric ($rc): $(cat out err)"
grep -q -- "-8388608" out && fail "+Inf printed as a size"

# An nsys export read through a FIFO: its warning names the FIFO, not the private copy.
mkfifo ns.fifo
(cat "$nsys" >ns.fifo &)
"$mhc" import ns.fifo -o ns.db >/dev/null 2>err || fail "import through a FIFO: $(cat err)"
if grep -q "missing tables" err; then
    grep -q "warning: ns.fifo: missing tables" err || fail "the warning names another file: $(cat err)"
    grep -q "mhc-import-" err && fail "the warning names the private copy: $(cat err)"
fi

# check --full: SQLite's full integrity check finds a damaged index the quick check does not.
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o idx.db >/dev/null
"$mhc" simulate idx.db --capacity 70% >/dev/null
sqlite3 idx.db "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX run_memory_by_run ON run_memory (run, device_bytes)' WHERE name = 'run_memory_by_run'"
"$mhc" check idx.db >/dev/null || fail "the quick check refused a file whose pages are whole"
"$mhc" check --full idx.db >out 2>&1; rc=$?
[ $rc = 2 ] && grep -q "an index is damaged" out || fail "check --full ($rc): $(cat out)"

# A sweep that stores more than MHC_STORE_WARN_SIZE says so first, with the size.
MHC_STORE_WARN_SIZE=10KiB "$mhc" sweep t.db --policies lru,largest --capacities 60%,70% --no-bisect >out 2>err \
    || fail "sweep: $(cat err)"
grep -q "warning: storing 4 runs adds about .* to t.db (more than 10.00 KiB)" err || fail "no size warning: $(cat err)"
MHC_STORE_WARN_SIZE=lots "$mhc" sweep t.db --policies lru --capacities 60% --no-bisect >/dev/null 2>err
grep -q "MHC_STORE_WARN_SIZE='lots'" err || fail "a malformed MHC_STORE_WARN_SIZE was ignored: $(cat err)"
# An execution trace alone is order only: its op k (from 1) is at k ns, as a snapshot without
# time_us numbers its events, so that info and the viewer say "event #k" (op k was at 1000 (k - 1) ns:
# event #1000, #2000, ...). cpu_mlp_et has 150 leaf ops with tensors.
"$mhc" import "$fixtures/cpu_mlp_et.json.gz" -o et.db >/dev/null || fail "import of an execution trace"
got=$(sqlite3 et.db "SELECT min(t_start), max(t_end), count(*), count(DISTINCT t_start), max(t_end - t_start) FROM kernels")
[ "$got" = "1|151|150|150|1" ] || fail "an execution trace's ops are not events 1..150: $got"
"$mhc" info et.db | grep -q "^duration    150 events$" || fail "info of an execution trace: $("$mhc" info et.db | head -8)"
# Joined with its Kineto trace, import says how the ops joined (meta et.join) as info does, and
# every note it prints once: cpu_mlp's 357 ops join by their record function ids.
"$mhc" import "$fixtures/cpu_mlp_et.json.gz" --kineto "$fixtures/cpu_mlp_kineto.json.gz" -o etk.db >out 2>err ||
    fail "import of an ET with its Kineto trace: $(cat err)"
grep -qE "^  join +357 of 357 ops joined \(1 of 1 threads\) by Record function id == rf_id$" out ||
    fail "import does not say how the ET joined its Kineto trace: $(cat out)"
"$mhc" info etk.db | grep -q "^join        357 of 357 ops joined" || fail "info lacks et.join: $("$mhc" info etk.db | tail -4)"
for label in timing accesses join; do
    [ "$(grep -c "^  $label " out)" = 1 ] || fail "import says '$label' other than once: $(cat out)"
done
# Its steps are spans of events too: param's ResNet ET has three steps of 2,584 ops each.
"$mhc" -q import "$(cd "$(dirname "$nsys")/.." && pwd)/chakra/param-resnet-1gpu-et-1.1.1.json.gz" -o et3.db >/dev/null 2>&1 \
    || fail "import of param's ResNet ET"
"$mhc" info et3.db | grep -q "^steps       3 (mean 2584 events)$" || fail "info of an ET's steps: $("$mhc" info et3.db | grep steps)"
# Public traces: vLLM's graph replay recorded with memory profiling on (nothing allocated), and
# verl's end-state snapshot with 9 blocks freed and pending (counted in its peak).
pub=$(cd "$(dirname "$nsys")/.." && pwd)
"$mhc" -q import "$pub/kineto/tracelens-mi300x-vllm-prefilldecode-piecewise.json.gz" -o vllm.db >/dev/null 2>&1 \
    || fail "import of the vLLM trace"
"$mhc" info vllm.db >out || fail "info of the vLLM trace"
grep -q "^allocations none: memory profiling was on" out || fail "info does not say why vLLM's trace has no memory: $(cat out)"
# What an import warned of is said again by info, long after (meta import.warnings).
"$mhc" -q import "$pub/kineto/hta-cupti-profiler-range.json.gz" -o range.db >/dev/null 2>&1 || fail "import of the range trace"
"$mhc" info range.db >out || fail "info of the range trace"
grep -q "^warning     77 events of categories mhc does not read were left out" out \
    || fail "info does not say the import's warning: $(cat out)"
# More than eight warnings: the first eight, then how many more and where they all are. Ten
# written into a copy of the range trace's meta: "w1" .. "w10", one a line.
cp range.db many.db
sqlite3 many.db "INSERT OR REPLACE INTO meta(key, value) VALUES ('import.warnings',
    'w1' || char(10) || 'w2' || char(10) || 'w3' || char(10) || 'w4' || char(10) || 'w5' || char(10) ||
    'w6' || char(10) || 'w7' || char(10) || 'w8' || char(10) || 'w9' || char(10) || 'w10')" || fail "sqlite3 many.db"
"$mhc" info many.db >out || fail "info of ten warnings"
[ "$(grep '^warning ' out | sed 's/^warning *//' | tr '\n' ' ')" = \
  "w1 w2 w3 w4 w5 w6 w7 w8 ... and 2 more (mhc info --json: meta import.warnings) " ] ||
    fail "info of ten warnings: $(grep '^warning' out)"
"$mhc" -q import "$pub/torch-snapshot/verl-megatron-vllm-end-state.pickle.gz" -o verl.db >/dev/null 2>&1 \
    || fail "import of verl's snapshot"
"$mhc" info verl.db >out || fail "info of verl's snapshot"
grep -q "^pending     9 blocks, 597377024 B" out || fail "info lacks the pending blocks: $(cat out)"
grep -q "^end state   only the blocks alive at the snapshot: 127 segments, 638 blocks" out || fail "info lacks the end state: $(cat out)"
for label in timing accesses; do
    [ "$(grep -c "^$label " out)" = 1 ] || fail "info says '$label' more than once: $(cat out)"
done
# Several devices: info's text gives each device's blocks peak (it gave the largest device's
# only; the others were in --json alone). extra-p's 16-stream export: GPU 0 and the host's
# pinned buffers each peak at 320,000,000 B (305.18 MiB; SOURCES.md).
"$mhc" -q import "$pub/nsys/extrap-concurrent-16-streams.sqlite" -o extrap.db >/dev/null 2>&1 || fail "import of extra-p"
"$mhc" info extrap.db >out || fail "info of extra-p"
grep -q "^blocks      305.18 MiB peak on device -1 (host) at " out &&
    grep -q "^blocks      305.18 MiB peak on device 0 at " out ||
    fail "info does not give each device's peak: $(cat out)"
"$mhc" info --json extrap.db | python3 -c '
import json, sys
memory = json.load(sys.stdin)["memory"]
assert [(m["device"], m["peak_bytes"]) for m in memory] == [(-1, 320000000), (0, 320000000)], memory
assert all(m["peak_time_ns"] >= 0 for m in memory), memory' || fail "info --json of extra-p's devices"
# generate refuses what it would write for hours, before a byte, with the estimate and the way
# past the bound; a trace within the bound is written, its rows as estimated.
want="huge.db: would be about "; refused generate --steps 1000000 --layers 4096 -o huge.db
grep -qE "more than --max-output-size 8.00 GiB; pass --max-output-size [0-9]+TiB to write it" err ||
    fail "the refusal lacks the bound or the way past it: $(cat err)"
[ ! -e huge.db ] && [ -z "$(ls -A | grep mhc-tmp)" ] || fail "a refused generate left a file: $(ls)"
want="more than --max-output-size 100.00 KiB"; refused generate --steps 3 --max-output-size 100KiB -o small.db
rows=$(sed -n 's/.*(\([0-9,]*\) rows, .*/\1/p' err | tr -d ,)
"$mhc" generate --steps 3 --max-output-size 1GiB -o small.db >out 2>err || fail "generate within the bound: $(cat err)"
grep -q "^rows        $rows: " out || fail "the estimate ($rows rows) is not what was written: $(cat out)"
want="--max-output-size"; refused generate --steps 3 --max-output-size 100 -o small2.db
# The time said is the rows at the slowest rate measured on one core (1.1 million rows a second,
# docs/results.md "generate's write rate"), in seconds below 90: 14,500 steps of gpt2-small.
want="more than --max-output-size 100.00 KiB"; refused generate --steps 14500 --max-output-size 100KiB -o big.db
rows=$(sed -n 's/.*(\([0-9,]*\) rows, .*/\1/p' err | tr -d ,)
secs=$(python3 -c "print(round($rows / 1.1e6))")
grep -qF "($(python3 -c "print(f'{$rows:,}')") rows, about $secs s of one core to write)" err ||
    fail "the time to write $rows rows is not $secs s of one core: $(cat err)"


"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o e0.db >/dev/null || fail generate
# The MHC_* variables: documented values only, refused in one line naming the variable by any
# command, before any work (MHC_TRACE_CACHE=yes read as on; the CPU path and the pool switch
# were read only when used, an unknown CPU path silently ignored; 0x10 read as 16).
envrefused() {   # envrefused VAR=VALUE CMD...: exit 2, one line naming VAR='VALUE'
    local assign=$1; shift
    env "$assign" "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "${assign%%=*}='${assign#*=}'" err ||
        fail "$assign $* exited $rc: $(cat out err)"
    [ ! -s out ] || fail "$assign $*: worked before refusing: $(head -c 200 out)"
}
for value in yes 2 '' true; do envrefused "MHC_TRACE_CACHE=$value" info e0.db; done
envrefused MHC_TRACE_CACHE=yes generate --steps 1 --layers 2 -o e.db
[ ! -e e.db ] || fail "generate wrote with a bad MHC_TRACE_CACHE"
for value in 0 1 off on OFF On; do
    MHC_TRACE_CACHE=$value "$mhc" info e0.db >/dev/null 2>err || fail "MHC_TRACE_CACHE=$value refused: $(cat err)"
done
envrefused MHC_CPU_ISA=avx9 info e0.db
envrefused MHC_VALIDATE_POOL_PER_REPLAY=yes info e0.db
envrefused MHC_CPU_BUFFER_RATIO=0x10 simulate e0.db --capacity 80%
envrefused MHC_MAX_SWAP_OPS_PER_SEC=' 5' simulate e0.db --capacity 80%
envrefused MHC_BUSY_TIMEOUT_MS=soon generate --steps 1 --layers 2 -o e.db
MHC_CPU_ISA=generic "$mhc" info e0.db >/dev/null 2>err || fail "MHC_CPU_ISA=generic refused: $(cat err)"

# --runs-db that cannot be one, and --no-store with --runs-db, refused before the work (a folder
# was said after the simulation, exit 4; both flags together stored nothing without a word).
mkdir -p rdir
for cmd in "simulate e0.db --capacity 80%" "sweep e0.db --policies lru --capacities 80% --no-bisect"; do
    want="rdir: is a directory"; refused $cmd --runs-db rdir
    want="no/r.db: cannot be created: no is not a directory"; refused $cmd --runs-db no/r.db
    want="--no-store and --runs-db r2.db: give one"; refused $cmd --no-store --runs-db r2.db
    [ ! -s out ] || fail "$cmd: computed before refusing: $(head -c 200 out)"
done
[ ! -e r2.db ] || fail "a refused --runs-db was made"
# An output in a folder that does not exist: one wording for every command (SQLite said "unable
# to open database file", export "No such file or directory").
want="nodir/o.db: cannot write into nodir: no such directory"
refused generate --steps 1 --layers 2 -o nodir/o.db
refused import "$fixtures/cpu_mlp_kineto.json.gz" -o nodir/o.db
want="nodir/o.json: cannot write into nodir: no such directory"; refused export e0.db -o nodir/o.json
refused calibrate --backend host -o nodir/o.json
# A file where export's folder goes: named (it said "cannot create directory: Not a directory").
want="e0.db/x: cannot create directory: e0.db is a file, not a folder"; refused export e0.db --format csv -o e0.db/x
want="e0.db: cannot create directory: e0.db is a file, not a folder"; refused export e0.db --format csv -o e0.db --force
# generate's numbers: a number that is not whole is said to be so (CLI11's range said "Value 1.5
# not in range 1 to 1000000"), a bound as written, and a configuration's field by its option.
want="--steps: '1.5': not a whole number"; refused generate --steps 1.5 -o n.db
want="--layers: '1e1': not a whole number"; refused generate --layers 1e1 -o n.db
want="--steps: '0': not in 1..1000000"; refused generate --steps 0 -o n.db
want="--jitter: '0.6': not in 0..0.5"; refused generate --jitter 0.6 -o n.db
want="--pp: '2': must divide layers (3)"; refused generate --layers 3 --pp 2 --steps 1 -o n.db
# Contrary options: a flag and its negation (the last won), --all-ranks with one rank named (the
# rank was ignored).
want="generate: --zero1 and --no-zero1 both given; give one"; refused generate --zero1 --no-zero1 --steps 1 -o n.db
want="--all-ranks writes every rank; --pp-stage, --dp-rank and --tp-rank choose one"
refused generate --pp 2 --layers 2 --steps 1 --pp-stage 1 --all-ranks -o n.db
[ ! -e n.db ] && [ ! -e n.rank0.db ] || fail "a refused generate wrote $(ls n.*)"
# A count past 32 bits was said to be below 1.
want="--replay-steps: '100000000000': all or a number of steps in 1..2147483647"
refused validate e0.db --policy lru --capacity 80% --replay-steps 100000000000

# export --runs-db of a locked runs database: the wait and the timeout name the runs database
# (the note named the trace, whose connection the runs database was attached to).
"$mhc" -q simulate e0.db --capacity 80% --runs-db r.db >/dev/null || fail "simulate --runs-db"
rm -f locked
python3 -c "
import sqlite3, time
db = sqlite3.connect('r.db', isolation_level=None)
db.execute('BEGIN EXCLUSIVE')
open('locked', 'w').close()
time.sleep(30)
" & holder=$!
for _ in $(seq 1 100); do [ -e locked ] && break; sleep 0.05; done
MHC_BUSY_TIMEOUT_MS=1500 "$mhc" export e0.db --format csv -o csvl --runs-db r.db >out 2>err; rc=$?
kill $holder; wait $holder 2>/dev/null; holder=
[ $rc = 2 ] || fail "export of a locked runs database exited $rc: $(cat err)"
grep -q "^mhc: r.db: locked by another process; waiting for it" err || fail "the wait does not name r.db: $(cat err)"
grep -q "e0.db: locked" err && fail "the wait names the trace: $(cat err)"
grep -q "r.db: .*stayed locked by another process for 1.5 s" err || fail "the timeout does not name r.db: $(cat err)"
[ ! -e csvl ] || fail "a refused export left its folder"
"$mhc" export e0.db --format csv -o csvl --runs-db r.db >/dev/null || fail "export after the lock"
[ "$(wc -l <csvl/runs.csv)" = 2 ] || fail "the runs database's run was not exported: $(cat csvl/runs.csv)"
echo ok
