#!/usr/bin/env bash
# Builds the importer fuzz targets with clang (libFuzzer + ASan + UBSan) in build-fuzz-import/
# and runs each for SECONDS (default 60). Exits non-zero if any target finds a crash, leak,
# timeout or sanitizer report. Seeds: small inputs derived from the public traces and our
# fixtures, written into the build directory (the sources stay untouched).
#   tests/import/fuzz/run-fuzzers.sh 60
#   tests/import/fuzz/run-fuzzers.sh --build-only     (builds the fuzzers, runs nothing: CI builds
#                                                     them beside its other steps, .ci/run)
set -euo pipefail
BUILD_ONLY=0
if [ "${1:-}" = --build-only ]; then BUILD_ONLY=1; shift; fi
SECONDS_EACH=${1:-60}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${MHC_FUZZ_BUILD:-$ROOT/build-fuzz-import}
PUB=${MHC_PUBLIC_DATASETS:-$ROOT/tests/data/public}
FIX=$ROOT/tests/import/fixtures
CC=${CC:-$(command -v clang-14 || command -v clang)}
CXX=${CXX:-$(command -v clang++-14 || command -v clang++)}
# pointer-overflow is off: Debian's rapidjson 1.1.0 computes NULL + n in internal/stack.h on its
# first allocation (UB reported on every input; fixed upstream after 1.1.0). Every other
# ASan/UBSan check stays on.
SAN="-fsanitize=address,undefined -fno-sanitize=pointer-overflow -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# Compiled directly (no CMake configure of the whole tree): only the libraries the importers
# need, so a broken folder elsewhere cannot stop the fuzzing.
mkdir -p "$BUILD/obj"
# The schema header is generated from trace/schema.sql the way trace/CMakeLists.txt does it.
mkdir -p "$BUILD/generated"
cmake -DIN="$ROOT/trace/schema.sql" -DOUT="$BUILD/generated/schema_sql.hpp" -P "$ROOT/trace/embed_schema.cmake"
if [ "$ROOT/trace/schema.sql" -nt "$BUILD/obj/trace_schema.o" ]; then rm -f "$BUILD/obj/trace_schema.o"; fi
INC="-I$ROOT/common/include -I$ROOT/trace/include -I$ROOT/trace/src -I$BUILD/generated -I$ROOT/trace/import/include -I$ROOT/trace/import/src"
# Line tables only (-gline-tables-only, not -g): the sanitizers' stack traces keep their files and
# lines; the compile takes about a fifth less (docs/results.md, "Building and testing").
# _GLIBCXX_ASSERTIONS: libstdc++'s bounds checks (operator[], front/back) where ASan sees nothing,
# an index past a vector's size inside its capacity (scripts/sanitize does the same; it found
# trace/src/check.cpp taking a block's row as a segment's on every snapshot, 2026-12-06). No
# measurable compile cost: check.cpp 10.7 and 10.8 s of CPU with it, 10.6 and 11.0 without (clang-14).
FLAGS="-std=c++20 -O1 -gline-tables-only $SAN -D_GLIBCXX_ASSERTIONS -fsanitize=fuzzer-no-link $INC"
# What none of the four fuzzers links (their link maps, 2026-12-06): compiled only when a link
# asks for it, so a new dependency costs a second link, never a missing object. After linking,
# check_unlinked compares the list with the link maps and names what to add or take out.
# Objects are rebuilt when the flags change.
if [ "$(cat "$BUILD/obj/flags" 2>/dev/null)" != "$CXX $FLAGS" ]; then rm -f "$BUILD"/obj/*.o; echo "$CXX $FLAGS" > "$BUILD/obj/flags"; fi
UNLINKED=" common/src/command_line.cpp common/src/help_format.cpp common/src/small_file.cpp common/src/text_table.cpp common/src/wrap.cpp
  trace/src/event_order.cpp trace/src/model.cpp trace/src/summary.cpp "
UNLINKED=${UNLINKED//$'\n'/ }
obj_of() { local dir=${1%/src/*}; local base=${1##*/}; echo "$BUILD/obj/${dir##*/}_${base%.cpp}.o"; }
# compile SOURCE...: MHC_FUZZ_JOBS (default 2) at a time, the next one started as soon as any
# finishes (the importers first: et.cpp alone takes a third of the time).
compile() {
  local src obj running=0 rc=0
  for src in "$@"; do
    obj=$(obj_of "$src")
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
      "$CXX" $FLAGS -c "$src" -o "$obj" &
      running=$((running + 1))
      if [ "$running" -ge "${MHC_FUZZ_JOBS:-2}" ]; then wait -n || rc=1; running=$((running - 1)); fi
    fi
  done
  while [ "$running" -gt 0 ]; do wait -n || rc=1; running=$((running - 1)); done
  return $rc
}
# link: the four fuzzers, two at a time, against an archive of the objects (the linker takes
# the members it needs, as it does from the build's libraries), each writing its link map for
# check_unlinked; a fuzzer newer than the archive and its source, with its map, is kept.
link() {
  local t pids=() rc=0 lib=$BUILD/obj/libfuzzdeps.a exe
  if [ ! -f "$lib" ] || [ -n "$(find "$BUILD/obj" -name '*.o' -newer "$lib")" ]; then
    rm -f "$lib"
    ar rcs "$lib" "$BUILD"/obj/*.o
  fi
  for t in pickle kineto et nsys; do
    exe=$BUILD/tests/import/fuzz_import_$t
    if [ -f "$BUILD/link-$t.map" ] && [ "$exe" -nt "$lib" ] && [ "$exe" -nt "$ROOT/tests/import/fuzz/fuzz_$t.cpp" ] &&
       [ "$exe" -nt "$ROOT/tests/import/fuzz/fuzz_util.hpp" ]; then continue; fi
    "$CXX" $FLAGS -fsanitize=fuzzer "$ROOT/tests/import/fuzz/fuzz_$t.cpp" "$lib" -lsqlite3 -lz -lsodium -lzip \
      -Wl,-Map="$BUILD/link-$t.map" -o "$exe" 2>"$BUILD/link-$t.log" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}
linked=() unlinked=()
for src in "$ROOT"/trace/import/src/*.cpp "$ROOT"/trace/src/*.cpp "$ROOT"/common/src/*.cpp; do
  if [[ $UNLINKED == *" ${src#"$ROOT"/} "* ]]; then unlinked+=("$src"); else linked+=("$src"); fi
done
# Objects of sources that are gone are dropped (the archive takes every object in obj/).
declare -A wanted=()
for src in "${linked[@]}" "${unlinked[@]}"; do wanted[$(obj_of "$src")]=1; done
for obj in "$BUILD"/obj/*.o; do
  [ -e "$obj" ] && [ -z "${wanted[$obj]:-}" ] && rm -f "$obj" "$BUILD/obj/libfuzzdeps.a"
done
# check_unlinked: the archive members the four links took (their maps) against UNLINKED. A listed
# source they take costs every build a second link; an unlisted one they leave, a compile for
# nothing. Both are named in one line in the build's log. Neither makes a fuzzer wrong, so neither
# fails the build: a source added elsewhere in trace/ or common/ (mhc prune's run_delete.cpp,
# 2026-12-06) stopped a clean CI run that had passed every test, for a compile of a few seconds.
check_unlinked() {
  local taken src rel stale=()
  taken=" $(grep -ho 'libfuzzdeps\.a([A-Za-z0-9_]*\.o)' "$BUILD"/link-{pickle,kineto,et,nsys}.map 2>/dev/null |
            sed 's/.*(\(.*\))/\1/' | sort -u | tr '\n' ' ') "
  for src in "${linked[@]}" "${unlinked[@]}"; do
    rel=${src#"$ROOT"/}
    if [[ $taken == *" $(basename "$(obj_of "$src")") "* ]]; then
      [[ $UNLINKED != *" $rel "* ]] || stale+=("take $rel out (linked)")
    elif [[ $UNLINKED != *" $rel "* ]]; then
      stale+=("add $rel (not linked)")
    fi
  done
  [ ${#stale[@]} -eq 0 ] && return 0
  printf -v rel '; %s' "${stale[@]}"
  echo "run-fuzzers: note: UNLINKED (tests/import/fuzz/run-fuzzers.sh) is out of date: ${rel#; }"
}
compile "${linked[@]}" || { echo "run-fuzzers: a source did not compile"; exit 1; }
mkdir -p "$BUILD/tests/import"
if ! link; then
  echo "run-fuzzers: the fuzzers need more than ${#linked[@]} sources: compiling the other ${#unlinked[@]}"
  compile "${unlinked[@]}" || { echo "run-fuzzers: a source did not compile"; exit 1; }
  link || { cat "$BUILD"/link-*.log; echo "run-fuzzers: the fuzzers did not link"; exit 1; }
fi
check_unlinked
[ "$BUILD_ONLY" = 0 ] || exit 0

# Seed corpora (small, uncompressed).
SEEDS=$BUILD/fuzz-seeds
rm -rf "$SEEDS"; mkdir -p "$SEEDS"/{pickle,kineto,et,nsys}
python3 - "$PUB" "$FIX" "$SEEDS" <<'PY'
import gzip, json, pickle, sys
pub, fix, out = sys.argv[1:4]
d = pickle.load(open(f"{pub}/torch-snapshot/mosaic-synthetic.pickle", "rb"))
for i, n in enumerate((4, 20, 60)):
    small = {"segments": d["segments"][:1], "device_traces": [d["device_traces"][0][:n]]}
    open(f"{out}/pickle/seed{i}", "wb").write(pickle.dumps(small, protocol=4))
# A torch.cuda._memory_viz page (trace_plot's): the pickle, 1 to 3 NULs, base64 (docs/import.md).
import base64
page = pickle.dumps(small)
page += b"\0" * (3 - len(page) % 3)
open(f"{out}/pickle/memory_viz.html", "w").write(
    '<!DOCTYPE html>\n<script type="module">\nconst local_files = ' +
    json.dumps([{"name": "snapshot.pickle", "base64": base64.b64encode(page).decode()}]) +
    "\nadd_local_files(local_files, 'Active Memory Timeline')\n</script>\n")
k = json.load(gzip.open(f"{pub}/kineto/simple_add_trace.json.gz"))
open(f"{out}/kineto/simple_add", "w").write(json.dumps(k))
m = json.load(gzip.open(f"{fix}/cpu_mlp_kineto.json.gz"))
m["traceEvents"] = [e for e in m["traceEvents"] if e.get("name") == "[memory]" or "ProfilerStep" in e.get("name", "")][:40]
open(f"{out}/kineto/cpu_memory", "w").write(json.dumps(m))
# GPU [memory] events in the real shapes: no Addr (PyTorch 1.9), Addr + Total Allocated with
# ties at one ts (CUDA), Device Type 6 (ROCm).
for name, src in (("no_addr", "tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz"),
                  ("total_allocated", "hta-df-index-resolver.json.gz"),
                  ("hip", "tracelens-mi300x-normalization-layer-test.json.gz")):
    g = json.load(gzip.open(f"{pub}/kineto/{src}"))
    mem = [e for e in g["traceEvents"] if e.get("name") == "[memory]"][:60]
    kern = [e for e in g["traceEvents"] if e.get("cat") in ("kernel", "Kernel")][:5]
    open(f"{out}/kineto/{name}", "w").write(json.dumps({"traceEvents": mem + kern}))
open(f"{out}/et/simple_add", "w").write(json.dumps(json.load(gzip.open(f"{pub}/chakra/simple_add_et.json.gz"))))
c = json.load(gzip.open(f"{pub}/chakra/chakra-1.0.2-et.json.gz")); c["nodes"] = c["nodes"][:40]
open(f"{out}/et/chakra", "w").write(json.dumps(c))
# Hostile seeds (docs/import.md, "Fuzzing"): deep nesting, gzip expansion, integer extremes in every format.
deep = "[" * 20000 + "]" * 20000
open(f"{out}/kineto/deep_event", "w").write('{"traceEvents":[{"ph":"X","args":%s}]}' % deep)
open(f"{out}/kineto/deep_member", "w").write('{"traceEvents":[],"x":%s}' % deep)
open(f"{out}/kineto/deep_member.gz", "wb").write(gzip.compress(('{"traceEvents":[],"x":%s}' % ("[" * 100000 + "]" * 100000)).encode()))
open(f"{out}/kineto/bomb.gz", "wb").write(gzip.compress(('{"traceEvents":[{"ph":"X","cat":"kernel","ts":1,"name":"%s"}]}' % ("a" * (4 << 20))).encode(), 9))
ev = ('{"ph":"X","cat":"kernel","name":"k","ts":%s,"dur":5,"args":{"device":0,"stream":7}},'
      '{"ph":"i","name":"[memory]","ts":11,"args":{"Addr":4096,"Bytes":%s,"Total Allocated":4096,"Device Type":1,"Device Id":0}}')
for i, (ts, b) in enumerate([("9223372036854775.807", "1"), ("1e300", "1"), ("NaN", "1"), ('"abc"', "1"), ("null", "1"),
                             ("10", "9223372036854775807"), ("10", "-9223372036854775808"), ("10", "NaN"), ("10", "18446744073709551616")]):
    open(f"{out}/kineto/extreme{i}", "w").write('{"traceEvents":[%s]}' % (ev % (ts, b)))
open(f"{out}/et/deep_node", "w").write('{"schema":"1.0.1","nodes":[{"id":1,"inputs":%s}]}' % deep)
open(f"{out}/et/deep_member", "w").write('{"schema":"1.0.1","x":%s,"nodes":[]}' % deep)
open(f"{out}/et/bomb.gz", "wb").write(gzip.compress(('{"schema":"1.0.1","nodes":[{"id":1,"name":"%s"}]}' % ("a" * (4 << 20))).encode(), 9))
open(f"{out}/et/extreme", "w").write(json.dumps({"schema": "1.0.1", "nodes": [
    {"id": 9223372036854775807, "name": "aten::add", "inputs": [[1, 1, 0, 9223372036854775807, 4, "cuda:0"]],
     "input_types": ["Tensor(float)"], "outputs": [[2, 2, -1, 4, 4, "cuda:0"]], "output_types": ["Tensor(float)"]},
    {"id": -9223372036854775808, "name": "aten::mul", "inputs": [[3, 3, 0, 1e300, 4, "cuda:99999999999"]],
     "input_types": ["Tensor(float)"], "parent": 9223372036854775807}]}))
hdr = b"\x80\x02}X\x0d\x00\x00\x00device_traces"
open(f"{out}/pickle/deep_lists", "wb").write(hdr + b"]" * 20000 + b"a" * 19999 + b"s.")
open(f"{out}/pickle/deep_marks", "wb").write(hdr + b"(" * 20000 + b"s.")
open(f"{out}/pickle/frame", "wb").write(b"\x80\x04\x95" + (1 << 40).to_bytes(8, "little") + b"}.")
open(f"{out}/pickle/bomb.gz", "wb").write(gzip.compress(hdr + b"\x8d" + (4 << 20).to_bytes(8, "little") + b"a" * (4 << 20) + b"s.", 9))
for i, size in enumerate((2**63 - 1, -2**63, 2**50 + 1)):
    big = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": size, "stream": 0, "time_us": 1},
                                              {"action": "free_completed", "addr": 1, "size": size, "time_us": 1e300}]]}
    open(f"{out}/pickle/extreme{i}", "wb").write(pickle.dumps(big, protocol=4))
PY
cp "$PUB/nsys/con_kernel.sqlite" "$SEEDS/nsys/" && chmod u+w "$SEEDS/nsys/con_kernel.sqlite"
# nsys: integer extremes, text and NULL in integer columns, a view in place of a table.
python3 - "$SEEDS/nsys" <<'PY'
import shutil, sqlite3, sys
d = sys.argv[1]
edits = {
    "int64_max_end": "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid = 1",
    "int64_min_start": "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -9223372036854775808 WHERE rowid = 1",
    "text_start": "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid = 1",
    "text_end": "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 'x' WHERE rowid = 2",   # end is NOT NULL here
    "bytes_max": "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 9223372036854775807 WHERE rowid = 1",
    "view": "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k2; CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM k2",
    "copy_kind_2p32": "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 4294967297 WHERE rowid = 1",
    "copy_kind_min": "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = -9223372036854775808 WHERE rowid = 1",
    "mem_op_99": "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET memoryOperationType = 99 WHERE rowid = 1",
    "mem_bytes_max": "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = 9223372036854775807 WHERE rowid = 1",
    "mem_start_min": "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET start = -9223372036854775808 WHERE rowid = 1",
    "string_id_max": "UPDATE StringIds SET id = 9223372036854775807 WHERE rowid = 1",
    "device_2p32": "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 4294967296 WHERE rowid = 1",
    "gpu_memory_max": "UPDATE TARGET_INFO_GPU SET totalMemory = 9223372036854775807",
    "meta_view": "ALTER TABLE EXPORT_META_DATA RENAME TO e2; CREATE VIEW EXPORT_META_DATA AS SELECT * FROM e2",
}
for name, sql in edits.items():
    p = f"{d}/{name}.sqlite"
    shutil.copy(f"{d}/con_kernel.sqlite", p)
    db = sqlite3.connect(p)
    db.executescript(sql)
    db.commit()
    db.close()
PY

# The four fuzzers run MHC_FUZZ_JOBS (default 2) at a time, each for SECONDS_EACH: one core each.
fuzz_one() {
  local t=$1 work=$BUILD/fuzz-corpus/$1 art=$BUILD/fuzz-artifacts/$1/ maxlen=65536
  mkdir -p "$work" "$art"
  [ "$t" = nsys ] && maxlen=300000
  (cd "$BUILD" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$BUILD/tests/import/fuzz_import_$t" "$work" "$SEEDS/$t" -max_total_time="$SECONDS_EACH" \
        -max_len=$maxlen -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$art" -print_final_stats=1 \
        > "$BUILD/fuzz-$t.log" 2>&1)
}
fail=0
names=(pickle kineto et nsys)
for ((i = 0; i < ${#names[@]}; i += ${MHC_FUZZ_JOBS:-2})); do
  batch=("${names[@]:i:${MHC_FUZZ_JOBS:-2}}")
  pids=()
  for t in "${batch[@]}"; do
    echo "== fuzz_import_$t for ${SECONDS_EACH}s"
    fuzz_one "$t" & pids+=($!)
  done
  for j in "${!batch[@]}"; do
    t=${batch[$j]}
    if ! wait "${pids[$j]}"; then
      echo "fuzz_import_$t FAILED: see $BUILD/fuzz-$t.log and $BUILD/fuzz-artifacts/$t/"; tail -30 "$BUILD/fuzz-$t.log"; fail=1
    else
      echo "fuzz_import_$t:"; grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$BUILD/fuzz-$t.log" | tail -2
    fi
  done
done
exit $fail
