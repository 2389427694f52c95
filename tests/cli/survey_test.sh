#!/usr/bin/env bash
# The hostile tester's survey of sweep, generate, import, record, calibrate, export, info, check,
# allocator and kernels (docs/cli.md, "Messages and exit statuses"): each refusal below was, before,
# taken and run (an option that did nothing, a file named '-' written, a folder or a device handed to
# the recorder) or said in other words. Each is one line on stderr and exit 2, before any output
# is written; the combinations that do matter still run.
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
fixtures=$(cd "$(dirname "$0")/../import/fixtures" && pwd)
snapshot=$(cd "$(dirname "$0")/../data/public/torch-snapshot" && pwd)/flexgen-oom-snapshot.pickle
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate
"$mhc" -q simulate t.db --capacity 90% --runs-db runs.db >/dev/null || fail "simulate --runs-db"
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":5,"args":{"device":0,"stream":7}}]}' >k.json
head -c 512 /dev/zero >H.f32
printf '\177ELF' >lib.so   # a shared library as far as mhc looks (its ELF header); never loaded here
runs() { "$mhc" "$@" >out 2>err || fail "$* exited $?: $(cat err)"; }

# 1. A file option given '-': generate and import wrote a file named '-', export and calibrate
# said it existed; mhc writes whole files renamed into place and reads files by seeking in them.
# ./- names a file called '-'.
for cmd in "generate --steps 1 --layers 2 --seq 128 -o -" "import k.json -o -" "export t.db -o -" \
           "calibrate --backend host --quick --rounds 1 --max-chunk 16KiB -o -" "record --library lib.so -o - -- true" \
           "kernels sinkhorn --n 4 --iters 2 --input H.f32 --output -" "advise t.db --setting {} --trace-out -"; do
    # shellcheck disable=SC2086
    refused "-: mhc writes whole files renamed into place, not standard output; name a file (./- for one called -)" $cmd
done
for cmd in "info -" "check -" "allocator -" "export - -o e.json" "kernels sinkhorn --n 4 --iters 2 --input - --output P.f32" \
           "import $fixtures/cpu_mlp_et.json.gz --kineto - -o e.db" "record --library - -o r.db -- true"; do
    # shellcheck disable=SC2086
    refused "names a file to read, not standard input; name a file (./- for one called -)" $cmd
done
for cmd in "info t.db --runs-db -" "simulate t.db --capacity 90% --runs-db -" "sweep t.db --capacities 90% --runs-db -"; do
    # shellcheck disable=SC2086
    refused "--runs-db -: a runs database is a file, not standard input or output" $cmd
done
[ ! -e ./- ] && [ ! -e P.f32 ] && [ ! -e e.db ] || fail "a refused command wrote its output"
runs import k.json -o ./-   # a file called '-', named so
[ -s ./- ] || fail "import -o ./- wrote nothing"
cat k.json | "$mhc" import - -o dash.db >out 2>err || fail "import - (standard input) exited $?: $(cat err)"

# 1b. import --max-input-size of a file that is not gzip-compressed bounds nothing (it bounds a gzip
# input's decompressed bytes, and a pipe's): said in one line after the import; a gzip input and
# standard input are bounded, nothing said.
"$mhc" import k.json -o m1.db --max-input-size 1GiB >out 2>err || fail "import --max-input-size: $(cat err)"
[ "$(cat err)" = "mhc: warning: --max-input-size had no effect: k.json is not gzip-compressed (it bounds a gzip input's decompressed bytes, and a pipe's)" ] ||
    fail "import --max-input-size of a plain file: $(cat err)"
"$mhc" import "$fixtures/cpu_mlp_kineto.json.gz" -o m2.db --max-input-size 1GiB >out 2>err && [ ! -s err ] ||
    fail "import --max-input-size of a gzip file: $(cat err)"
cat k.json | "$mhc" import - -o m3.db --max-input-size 1GiB >out 2>err && [ ! -s err ] ||
    fail "import --max-input-size of standard input: $(cat err)"
refused "m1.db: already exists" import k.json -o m1.db --max-input-size 1GiB   # the refusal alone

# 2. A required option or argument left out: said with its command and help (CLI11 said
# "trace is required", "command is required").
refused "info: the TRACE argument is required (mhc info --help)" info
refused "info: the TRACE argument '-': it names a file to read" info -
refused "import: the FILE argument is required (mhc import --help)" import
refused "generate: --output is required (mhc generate --help)" generate
refused "record: the COMMAND argument is required: mhc record [OPTIONS] -- COMMAND [ARGS...]" record --library lib.so --
refused "kernels sinkhorn: --input is required (mhc kernels sinkhorn --help)" kernels sinkhorn --n 4

# 2b. An option's value left out, or given empty after '=': CLI11's words ("--top: 1 required
# INT:POSITIVE missing"). A short option given '=' (-o=g.db) took '=g.db' as its value: generate
# wrote a file named '=g.db'. mhc's own option after the command was answered "did you mean -h?";
# '--' before any command "unknown option --".
refused "info: --top needs a value: none was given (mhc info --help)" info t.db --top
refused "info: --top: '': an empty value (mhc info --help)" info t.db --top=
refused "simulate: --capacity needs a value: none was given" simulate t.db --capacity
refused "kernels sinkhorn: --n needs a value: none was given" kernels sinkhorn --n
refused "generate: '-o=g.db': a short option takes its value after a space (-o g.db); this would be '=g.db'" \
    generate --steps 1 --layers 2 --seq 128 -o=g.db
refused "sweep: '-j=2': a short option takes its value after a space (-j 2)" sweep t.db -j=2 --no-store --no-bisect
ls -- =* >/dev/null 2>&1 && fail "a short option given '=' wrote a file named $(ls -- =*)"
refused "info: -q is an option of mhc itself: give it before the command (mhc -q info ...)" info t.db -q
refused "info: unknown option --version (mhc info --help)" info t.db --version
refused "mhc: a command is required before --; commands: advise," -- info t.db
runs -q info t.db

# 2c. mhc help of a command's own command (it was "help: unexpected argument 'sinkhorn'").
"$mhc" help kernels sinkhorn >h1 2>err || fail "help kernels sinkhorn: $(cat err)"
"$mhc" kernels sinkhorn --help >h2
cmp -s h1 h2 || fail "mhc help kernels sinkhorn differs from mhc kernels sinkhorn --help"
refused "help: 'sinkhron' is not a command of kernels; did you mean sinkhorn? (mhc help kernels)" help kernels sinkhron
refused "help: 'x' is not a command of info, which has none (mhc help info)" help info x
refused "help: sizes is a topic, with no commands: 'x' (mhc help sizes)" help sizes x

# 3. sweep: the bisection's options with --no-bisect did nothing; an empty item of a list was dropped.
s="sweep t.db --policies lru --capacities 90% --no-store"
# shellcheck disable=SC2086
{
    refused "--budget and --no-bisect: --budget is for the bisection" $s --no-bisect --budget 5%
    refused "--bisect-steps and --no-bisect: --bisect-steps is for the bisection" $s --no-bisect --bisect-steps 3
    runs $s --budget 5% --bisect-steps 3
}
# Unlimited capacities alone and no bisection: how to evict, prefetch or swap does nothing (as
# simulate --capacity unlimited refuses it); with a limit among them, or the bisection, it runs.
for opt in "--policies lru,dtr" "--prefetchers none,lookahead:2" "--links pcie4,pcie5"; do
    # shellcheck disable=SC2086
    refused "${opt%% *} and --capacities unlimited with --no-bisect: nothing is evicted or swapped without a limit" \
        sweep t.db --capacities unlimited --no-bisect --no-store $opt
done
runs sweep t.db --capacities unlimited,90% --no-bisect --no-store --policies lru,dtr
runs sweep t.db --capacities unlimited --no-store --policies lru
for list in "--capacities 90%,,70%" "--capacities 90%," "--policies lru,,dtr" "--prefetchers ,none" "--links pcie4,,pcie5"; do
    # shellcheck disable=SC2086
    refused "'${list#* }': an empty item (two commas, or one at an end)" sweep t.db --no-store --no-bisect $list
done
refused "--capacity: '90%,,70%': an empty item" validate t.db --capacity 90%,,70% --no-store --link pcie4 --repeat 1
# A link profile that is a folder was "no such file"; one that is no JSON said the JSON library's
# tag and the bytes it read (a binary file's control bytes).
mkdir -p linkdir
refused "linkdir: is a directory, not a link profile" sweep t.db --capacities 90% --no-store --no-bisect --links linkdir
refused "linkdir: is a directory, not a link profile" simulate t.db --capacity 90% --no-store --link linkdir
refused "/dev/null: not a regular file, not a link profile" sweep t.db --capacities 90% --no-store --no-bisect --links /dev/null
refused "t.db: not a link profile: not valid JSON (parse error at line 1, column 1: syntax error while parsing value - invalid literal)" \
    sweep t.db --capacities 90% --no-store --no-bisect --links t.db
grep -q "json.exception\|last read" err && fail "a link profile's JSON error in the library's words: $(cat err)"

# 4. generate: options the configuration leaves with nothing to do (the trace was the same without
# them, or its meta said a ZeRO-1 that sharded over one rank); a negation states the default and runs.
g="generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o g.db --force"
# shellcheck disable=SC2086
{
    refused "--zero1 with dp 1: ZeRO-1 shards the optimizer states over data-parallel ranks" $g --zero1
    refused "--bucket with dp 1: gradient buckets are all-reduced" $g --dp 1 --bucket 25MiB
    refused "--sinkhorn-iters with --hc 1: Sinkhorn-Knopp mixes the streams of mHC" $g --sinkhorn-iters 5
    refused "--hc-recompute with --hc 1: there is no n-stream residual" $g --hc 1 --hc-recompute
    refused "--hc-block with --hc 1: there is no n-stream residual" $g --hc-block 1
    refused "--hc-recompute with --recompute: every layer is recomputed whole" $g --hc 4 --recompute --hc-recompute
    refused "--hc-block without --hc-recompute: the blocks are those it recomputes" $g --hc 4 --hc-block 1
    refused "--max-positions with --arch llama: its positions are rotary" $g --arch llama --max-positions 256
    refused "--seed with --jitter 0: the seed draws the jitter alone" $g --seed 5 --jitter 0
    refused "--seed: '010': a whole number starts with no 0" $g --seed 010   # was read as 10
    [ ! -e g.db ] || fail "a refused generate wrote its output"
    runs $g --dp 2 --zero1 --bucket 1MiB --hc 4 --hc-recompute --hc-block 1 --sinkhorn-iters 5 --seed 5
    runs $g --no-zero1 --no-hc-recompute --arch gpt2 --max-positions 256
    runs generate --preset llama2-7b --steps 1 --layers 2 --seq 64 --dp 1 -o g7.db   # the preset's ZeRO-1, not given
}
"$mhc" generate --help >out
grep -qE -- "--seed N " out && grep -qE -- "--arch NAME " out || fail "generate --help: --seed N, --arch NAME: $(grep -E -- '--seed|--arch' out)"

# 5. export, info, check: a runs database read for nothing, or not there.
refused "--runs-db runs.db without --run: a perfetto export holds a run only with --run ID" export t.db -o e.json --runs-db runs.db
refused "--runs-db and --json: info --json prints the trace's summary, without its runs" info t.db --json --runs-db runs.db
[ ! -e e.json ] || fail "a refused export wrote its output"
runs export t.db -o e.json --runs-db runs.db --run 1
runs export t.db -o csv --format csv --runs-db runs.db
for cmd in "info t.db" "check t.db" "export t.db -o e2.json --run 1"; do   # was "cannot open: unable to open database file"
    # shellcheck disable=SC2086
    refused "mhc: missing.db: no such file" $cmd --runs-db missing.db
done

# 6. allocator: --device -1 was read as auto; a PYTORCH_CUDA_ALLOC_CONF key given twice ran with
# the last (in every command that takes --allocator-conf).
runs import "$snapshot" -o snap.db
refused "--device: '-1': a device is 0 or more, or auto" allocator snap.db --device -1
runs allocator snap.db --device 0
refused "expandable_segments is given twice (the last one was used); give it once" \
    allocator snap.db --allocator-conf expandable_segments:True,expandable_segments:False
refused "max_split_size_mb is given twice" simulate t.db --capacity 90% --no-store --allocator-conf "max_split_size_mb:64, max_split_size_mb :128"
refused "is given twice" sweep t.db --capacities 90% --no-store --allocator-conf max_split_size_mb:64,max_split_size_mb:64
runs allocator snap.db --allocator-conf "roundup_power2_divisions:[256:1,>:4],expandable_segments:True"

# 7. record: its output checked as every command's, its library as a shared library, before the
# program runs (the recorder was pointed at a folder or /dev/stdout; the CUDA driver handed a
# file it cannot load). A program that ran would have made ran.
mkdir folder
refused "folder: is a directory" record --library lib.so -o folder --force -- touch ran
refused "/dev/null: is a character device, not a regular file" record --library lib.so -o /dev/null --force -- touch ran
refused "a descriptor of this process" record --library lib.so -o /dev/stdout --force -- touch ran
refused "nodir/r.db: cannot write into nodir: no such directory" record --library lib.so -o nodir/r.db -- touch ran
refused "--library: folder: is a directory" record --library folder -o r.db -- touch ran
refused "--library: t.db: not a shared library (no ELF header)" record --library t.db -o r.db -- touch ran
MHC_RECORD_LIBRARY=k.json refused "MHC_RECORD_LIBRARY: k.json: not a shared library" record -o r.db -- touch ran
[ ! -e ran ] || fail "record ran its program before refusing"

# 8. calibrate: names checked when parsed; --path with the host backend (one way to copy); more
# than the 3 rounds --quick measures. Refused before a byte is measured or written.
c="calibrate --quick --rounds 1 --max-chunk 16KiB"
# shellcheck disable=SC2086
{
    refused "--backend: 'hots': use one of auto, host, cuda; did you mean host?" $c -o c.json --backend hots
    refused "--path: 'zero': use one of copy-engine, zero-copy; did you mean zero-copy?" $c -o c.json --path zero
    refused "--path and --backend host: the host backend copies one way" $c -o c.json --backend host --path zero-copy
    refused "--rounds 5 and --quick: --quick measures at most 3 rounds; give one" calibrate --quick --rounds 5 -o c.json
    [ ! -e c.json ] || fail "a refused calibrate wrote its profile"
    # A warning never stands before a refusal (two lines): the refusal alone.
    refused "--max-chunk: '100': a size needs a unit" calibrate --quick --rounds 1 -o c.json --max-chunk 100 --path zero-copy
    # A --max-chunk between two measured sizes (4 KiB times powers of 4): said, and run.
    "$mhc" calibrate --backend host --quick --rounds 1 --max-chunk 20KiB -o c20.json >out 2>err ||
        fail "calibrate --max-chunk 20KiB: $(cat err)"
    [ "$(cat err)" = "mhc: warning: --max-chunk 20KiB: chunks are 4 KiB times a power of 4; the largest measured is 16.00 KiB" ] ||
        fail "calibrate --max-chunk 20KiB: $(cat err)"
    # With auto: on a machine without a GPU (the host backend) said in one line, and run.
    "$mhc" $c -o c.json --path zero-copy >out 2>err || fail "calibrate --path with auto: $(cat err)"
    [ ! -s err ] || [ "$(cat err)" = "mhc: warning: --path zero-copy has no effect: no GPU here, the host backend copies one way" ] ||
        fail "calibrate --path with auto: $(cat err)"
}

# 9. kernels sinkhorn: --eps with --log-domain (which divides by nothing), --threads with --device cuda.
k="kernels sinkhorn --n 4 --iters 2 --input H.f32 --output P.f32"
# shellcheck disable=SC2086
{
    refused "--eps and --log-domain: --eps guards the plain variant's divisions" $k --log-domain --eps 1e-3
    refused "--threads and --device cuda: --threads sets the CPU's threads" $k --device cuda --threads 2
    [ ! -e P.f32 ] || fail "a refused kernels sinkhorn wrote its output"
    runs $k --eps 1e-5 --threads 1
    # An existing output was replaced without --force (every other command refuses it): refused
    # before the work, the file left as it was; --force replaces it.
    cp P.f32 keep.f32
    refused "P.f32: already exists; pass --force to replace it" kernels sinkhorn --n 4 --iters 3 --input H.f32 --output P.f32
    cmp -s P.f32 keep.f32 || fail "kernels sinkhorn replaced an existing output without --force"
    runs $k --force
}
echo ok
