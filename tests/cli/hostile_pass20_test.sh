#!/usr/bin/env bash
# Hostile pass 20 (docs/cli.md, "Numbers", "Messages and exit statuses", "Environment";
# docs/kernels.md): what passes 1 to 19 left.
#   1. A whole number "-0" passed the options that take a number below 0 (kernels sinkhorn
#      --threads -0 ran; mhc-view --device -0 read GPU 0): now "'-0': zero has no sign; write 0".
#   2. kernels sinkhorn --eps and --tol, f32 in the kernels: --eps 1e20 and --tol 1e20 were taken
#      (every entry divided to 0), --tol 1e-50 became 0 (fixed iterations, without a word), --eps
#      1e-300 was refused as '0' and --eps 1e300 in the library's words ("eps must be a finite
#      number >= 0"). Now each is in [1.18e-38, 1) (--tol 0 too), said as typed.
#   3. Five variables' refusals quoted a value of 200 bytes whole (MHC_TRACE_CACHE,
#      MHC_VALIDATE_POOL_PER_REPLAY, MHC_CPU_ISA, MHC_EVICTION_STRATEGY, MHC_CPU_BUFFER_RATIO),
#      and MHC_CUDA_SINKHORN=bogus was taken by every command on a machine without a GPU (read
#      only by --device cuda). Now quoted as an option's value is, and checked by every command.
#   4. Option checks that quoted the value by hand said one of 200 bytes whole (a choice among
#      names, a number's range, a number past a double's, simulate --ranks).
#   5. A table without one of its columns: "cannot prepare query: no such column: stream", which
#      of the file's tables unsaid; now "table kernels has no column stream".
#   6. A trace cut short while read (SIGBUS) was said by its absolute path, not as given; made
#      deterministic here: a debugger stops the reader mid-scan and the file is cut then.
#   7. mhc-view --view quoted by hand (a value of 200 bytes whole); --step 5 on a one-step trace
#      with --screenshot wrote the PNG and said nothing, exit 0.
#   8. mhc-torch capture -o LINK, a link to nothing or a loop of links: the capture ran, then said
#      "appeared while it was being written (another process?)"; now refused first, as mhc does.
#   9. A runs database of another PRAGMA user_version (mhc writes 0; its version is in meta) was
#      read and stored into as this version's; now refused naming it.
# Usage: hostile_pass20_test.sh MHC [PYTHON PKG [MHC_VIEW]] (the parts that need gdb, torch or
# mhc-view are skipped, said, without them)
set -u
mhc=$1
python=${2:-python3}
pkg=${3:-}
view=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
# Every check says its FAIL line and the test goes on (the count of them on an older mhc is what
# this pass fixed); the test fails at its end if any did.
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
refused() {
    local want=$1; shift
    "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err ||
        fail "$* (exit $rc, wanted 2 and one line saying '$want'): $(head -c 300 err)"
}
"$mhc" -q generate --preset gpt2-small --steps 2 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o t.db >/dev/null || { fail generate; exit 1; }
"$python" -c "import struct; open('h.f32', 'wb').write(struct.pack('<32f', *([0.5] * 32)))" || fail "h.f32"
k=(kernels sinkhorn --n 4 --iters 2 --input h.f32)
x200=$(printf 'x%.0s' $(seq 200))
x60=${x200:0:60}

# 1. "-0" for a whole number, where an option takes one below 0 too.
refused "--threads: '-0': zero has no sign; write 0" "${k[@]}" -o p.f32 --threads -0
[ ! -e p.f32 ] || fail "kernels --threads -0 wrote p.f32"
rm -f p.f32

# 2. --eps and --tol: as typed, within what an f32 holds and a marginal means.
refused "--eps: '1e20': not in [1.18e-38, 1)" "${k[@]}" -o p.f32 --eps 1e20
refused "--eps: '1e300': not in [1.18e-38, 1)" "${k[@]}" -o p.f32 --eps 1e300
refused "--eps: '1e-300': not in [1.18e-38, 1)" "${k[@]}" -o p.f32 --eps 1e-300
refused "--eps: '0': must be more than 0 without --log-domain" "${k[@]}" -o p.f32 --eps 0
refused "--tol: '1e20': not 0 (fixed iterations) or in [1.18e-38, 1)" "${k[@]}" -o p.f32 --tol 1e20
refused "--tol: '1e-50': not 0 (fixed iterations) or in [1.18e-38, 1)" "${k[@]}" -o p.f32 --tol 1e-50
refused "--tol: '1': not 0 (fixed iterations)" "${k[@]}" -o p.f32 --tol 1
[ ! -e p.f32 ] || fail "a refused kernels run wrote p.f32"
rm -f p.f32
"$mhc" "${k[@]}" -o q.f32 --eps 0.05 --tol 0.5 >out 2>err || fail "--eps 0.05 --tol 0.5: $(cat err)"

# 3. The variables: a value of 200 bytes quoted short, and MHC_CUDA_SINKHORN checked everywhere.
for var in MHC_TRACE_CACHE MHC_VALIDATE_POOL_PER_REPLAY MHC_CPU_ISA MHC_EVICTION_STRATEGY MHC_CPU_BUFFER_RATIO \
    MHC_CUDA_SINKHORN MHC_BUSY_TIMEOUT_MS; do
    env "$var=$x200" "$mhc" info t.db >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "$var='$x60...(200 bytes)': " err ||
        fail "$var of 200 bytes: exit $rc: $(head -c 300 err)"
done
MHC_STORE_WARN_SIZE=$x200 refused "MHC_STORE_WARN_SIZE='$x60...(200 bytes)': not a size" simulate t.db --capacity 90%
MHC_CUDA_SINKHORN=fast refused "MHC_CUDA_SINKHORN='fast': use fused or baseline" "${k[@]}" -o p.f32
MHC_CUDA_SINKHORN=fused "$mhc" info t.db >/dev/null 2>err || fail "MHC_CUDA_SINKHORN=fused refused: $(cat err)"

# 4. Values of 200 bytes in the checks that quoted by hand.
refused "--device: '$x60...(200 bytes)': use one of cpu, cuda" "${k[@]}" -o p.f32 --device "$x200"
tiny=0.$(printf '0%.0s' $(seq 197))1   # 1e-198, 200 bytes
refused "--tol: '${tiny:0:60}...(200 bytes)': not 0" "${k[@]}" -o p.f32 --tol "$tiny"
refused "--preset: '$x60...(200 bytes)': use one of" generate --preset "$x200" -o g.db
refused "--ranks: '-${x200:0:59}...(201 bytes)': needs trace files" simulate --ranks "-$x200" --capacity 90%

# 5. A column missing: its table named, by every command that reads it.
for table in kernels allocations markers; do
    cp t.db c.db
    column=$(sqlite3 c.db "PRAGMA table_info($table)" | cut -d'|' -f2 | sed -n 3p)
    sqlite3 c.db "ALTER TABLE $table DROP COLUMN $column" || fail "drop $table.$column"
    MHC_TRACE_CACHE=0 refused "c.db: table $table has no column $column (a damaged or foreign file)" info c.db
done

# 6. A trace cut short mid-scan, named as given. SQLite checks the file's size when a read begins:
#    a cut between two reads is said as a corrupt file; one inside a read is a SIGBUS, said in one
#    line naming b.db. The scan is stopped after several counts of rows; one must land inside.
if command -v gdb >/dev/null; then
    sigbus=0
    for rows in 200 500 1000 2000 4000; do
        cp t.db b.db
        rm -f e.json
        MHC_TRACE_CACHE=0 timeout 120 gdb -q -batch -ex 'handle SIGBUS nostop noprint pass' \
            -ex 'set breakpoint pending on' -ex 'break sqlite3_step' -ex "ignore 1 $rows" -ex run \
            -ex 'shell truncate -s 8192 b.db' -ex delete -ex continue --args "$mhc" export b.db -o e.json \
            >gdb.out 2>&1 </dev/null
        grep -q '^mhc: ' gdb.out || continue   # done before the cut
        [ "$(grep -c '^mhc: ' gdb.out)" = 1 ] && grep -q "exited with code 02" gdb.out ||
            fail "export b.db cut after $rows rows: $(grep -v '^\[\|^Breakpoint\|^Using' gdb.out | tail -c 300)"
        if grep -q "cut short by another process" gdb.out; then
            sigbus=1
            grep -qx "mhc: b.db: cut short by another process while mhc read it (SIGBUS); stopped, nothing half-written left" \
                gdb.out || fail "cut short: $(grep '^mhc: ' gdb.out)"
        fi
        [ -z "$(ls | grep '^e\.json')" ] || fail "export b.db cut after $rows rows left $(ls | grep '^e\.json')"
    done
    [ $sigbus = 1 ] || echo "SKIP part 6's SIGBUS: no cut of 5 landed inside a read"
else
    echo "SKIP part 6 (a trace cut short mid-scan): needs gdb"
fi

# 7. mhc-view: --view quoted as every value is, --step of a step the trace lacks, -0.
if [ -n "$view" ] && [ -x "$view" ]; then
    screen=(); command -v xvfb-run >/dev/null && screen=(xvfb-run -a)   # a screenshot taken, not refused for want of one
    vrefused() {
        local want=$1; shift
        timeout 60 "${screen[@]}" "$view" "$@" >out 2>err </dev/null; local rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err || fail "mhc-view $*: exit $rc: $(head -c 300 err)"
    }
    vrefused "mhc-view: --view: '$x60...(200 bytes)': use one of timeline" t.db --view "$x200"
    vrefused "mhc-view: --device: '-0'" t.db --device -0 --screenshot d.png
    "$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
        --vocab 1000 -o one.db >/dev/null || fail "generate one.db"
    vrefused "mhc-view: --step: '5': not a step of one.db (its steps: 0)" one.db --screenshot s.png --step 5
    [ ! -e s.png ] || fail "mhc-view --step 5 of a one-step trace wrote s.png"
else
    echo "SKIP part 7 (mhc-view's options): no mhc-view"
fi

# 8. mhc-torch capture -o a link to nothing, or a loop of links: refused before the capture.
if [ -n "$pkg" ] && "$python" -c "$find_modules" torch 2>/dev/null; then
    ln -s nowhere dangling.db && ln -s loop2.db loop1.db && ln -s loop1.db loop2.db
    for out in dangling.db loop1.db; do
        PYTHONPATH=$pkg MHC_EXE=$mhc timeout 300 "$python" -m mhc_torch.cli capture tiny-gpt2 -o $out >out 2>err; rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] &&
            grep -qF "mhc-torch: $out: already exists (a symbolic link to " err ||
            fail "mhc-torch capture -o $out: exit $rc: $(head -c 300 err)"
        [ -L $out ] || fail "mhc-torch capture -o $out replaced the link"
    done
else
    echo "SKIP part 8 (mhc-torch capture over a link): no torch"
fi

# 9. A runs database whose PRAGMA user_version is set (a newer mhc's, or another program's): read,
#    and stored into, as this version's. Refused before any work, nothing stored.
"$mhc" simulate t.db --capacity 90% --runs-db r.db >/dev/null 2>err || fail "simulate --runs-db r.db: $(cat err)"
sqlite3 r.db "PRAGMA user_version=99" || fail "user_version of r.db"
for args in "info t.db" "simulate t.db --capacity 80%" "export t.db -o r.json --run 1"; do
    refused "r.db: runs database with PRAGMA user_version 99, where this mhc writes 0" $args --runs-db r.db
done
[ "$(sqlite3 r.db 'SELECT count(*) FROM runs')" = 1 ] || fail "a run was stored into r.db of user_version 99"

[ $failed = 0 ] || { echo "$failed hostile pass 20 checks failed"; exit 1; }
echo "all hostile pass 20 checks passed"
