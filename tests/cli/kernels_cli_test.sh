#!/usr/bin/env bash
# `mhc kernels sinkhorn` from the outside: results written, bad input -> exit 2 with one
# line naming the file, previous outputs left intact on failure.
set -euo pipefail
MHC=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
fail() { echo "FAIL: $*" >&2; exit 1; }

# floats FILE COUNT [SPECIAL_INDEX SPECIAL_VALUE]: deterministic logits
floats() {
    python3 - "$@" <<'PY'
import struct, sys, math, random
path, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(count)
vals = [rng.gauss(0, 2) for _ in range(count)]
if len(sys.argv) > 4:
    vals[int(sys.argv[3])] = float(sys.argv[4])
open(path, "wb").write(struct.pack("<%df" % count, *vals))
PY
}

# expect_bad DESCRIPTION PATTERN -- ARGS: exit 2, one line on stderr matching PATTERN
expect_bad() {
    local what=$1 pattern=$2
    shift 3
    set +e
    "$MHC" "$@" >out.txt 2>err.txt
    local rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2 ($(cat err.txt))"
    [ "$(wc -l <err.txt)" -eq 1 ] || fail "$what: expected one line on stderr, got: $(cat err.txt)"
    grep -q -- "$pattern" err.txt || fail "$what: stderr '$(cat err.txt)' does not match '$pattern'"
}

floats H.f32 $((1000 * 16))
floats G.f32 $((1000 * 16))
"$MHC" kernels sinkhorn --n 4 --iters 20 --input H.f32 --output P.f32 >out.txt
[ "$(stat -c %s P.f32)" -eq 64000 ] || fail "P.f32 has the wrong size"
"$MHC" kernels sinkhorn --n 4 --iters 2000 --tol 1e-6 --input H.f32 --output Pc.f32 >/dev/null
grep -q "max |row sum - 1|" out.txt || fail "no convergence report"
"$MHC" kernels sinkhorn --n 4 --input H.f32 --output P2.f32 --backward --grad G.f32 --grad-output dH.f32 \
    --log-domain --column-first >/dev/null
[ "$(stat -c %s dH.f32)" -eq 64000 ] || fail "dH.f32 has the wrong size"
"$MHC" kernels sinkhorn --n 2 --input H.f32 --output P3.f32 --tol 1e-5 --iters 500 | grep -q "iterations: mean" \
    || fail "tolerance mode does not report iterations"
"$MHC" kernels sinkhorn --n 4 --input H.f32 --output Pb.bf16 --output-dtype bf16 >/dev/null
[ "$(stat -c %s Pb.bf16)" -eq 32000 ] || fail "bf16 output has the wrong size"
python3 - <<'PY' || fail "P.f32 is not doubly stochastic"
import struct
d = open("Pc.f32", "rb").read()
p = struct.unpack("<%df" % (len(d) // 4), d)
for t in range(len(p) // 16):
    m = p[t * 16:(t + 1) * 16]
    for i in range(4):
        assert abs(sum(m[i * 4:i * 4 + 4]) - 1) < 1e-5
        assert abs(sum(m[i::4]) - 1) < 1e-5
PY

cp P.f32 keep.f32
floats short.f32 $((16 * 3 + 5))
expect_bad "size not a whole number of matrices" "^mhc: short.f32: " -- kernels sinkhorn --input short.f32 --output P.f32
cmp -s P.f32 keep.f32 || fail "a failed run changed the previous output"
floats nan.f32 $((16 * 10)) $((16 * 6 + 3)) nan
expect_bad "NaN names the token" "^mhc: nan.f32: token 6 " -- kernels sinkhorn --input nan.f32 --output P.f32
floats inf.f32 $((16 * 10)) 17 -inf
expect_bad "Inf names the token" "^mhc: inf.f32: token 1 " -- kernels sinkhorn --input inf.f32 --output P.f32
expect_bad "n too large" "not in 2..16" -- kernels sinkhorn --n 17 --input H.f32 --output P.f32
expect_bad "n too small" "^mhc: --n: '1': not in 2..16$" -- kernels sinkhorn --n 1 --input H.f32 --output P.f32
# The option named as typed (not the library's field: "iters = 0").
expect_bad "iters zero" "^mhc: --iters: '0': not in 1..100000$" -- kernels sinkhorn --iters 0 --input H.f32 --output P.f32
expect_bad "eps zero" "^mhc: --eps: '0': must be more than 0 without --log-domain" -- kernels sinkhorn --eps 0 --input H.f32 --output P.f32
expect_bad "threads negative" "^mhc: --threads: '-1': not 0 or more (0: all cores)" -- kernels sinkhorn --threads -1 --input H.f32 --output P.f32
# The input as the output: refused, the input intact (a success once replaced it with its result).
cp H.f32 H-keep.f32
expect_bad "input as output" "^mhc: H.f32: is the input file H.f32" -- kernels sinkhorn --input H.f32 --output H.f32
ln -s H.f32 H-link.f32
expect_bad "input as output by a link" "is the input file H.f32" -- kernels sinkhorn --input H.f32 --output H-link.f32
expect_bad "gradient as gradient output" "is the input file G.f32" -- kernels sinkhorn --input H.f32 --output P.f32 \
    --backward --grad G.f32 --grad-output G.f32
expect_bad "two outputs in one file" "^mhc: --grad-output dH.f32 is also --output" -- kernels sinkhorn --input H.f32 \
    --output dH.f32 --backward --grad G.f32 --grad-output dH.f32
# The same new file under two names (dH.f32, ./dH.f32): both were written to it (with --force, exit
# 0), or the first was and the second refused as existing (exit 2, half the outputs written).
rm -f dH.f32
expect_bad "two outputs in one new file, two names" "^mhc: --grad-output ./dH.f32 is also --output" -- kernels sinkhorn \
    --input H.f32 --output dH.f32 --backward --grad G.f32 --grad-output ./dH.f32 --force
[ ! -e dH.f32 ] || fail "a refused run wrote dH.f32"
cmp -s H.f32 H-keep.f32 || fail "a refused run changed the input"
floats G2.f32 $((999 * 16))
expect_bad "gradient of another size" "^mhc: G2.f32: " -- kernels sinkhorn --input H.f32 --output P.f32 \
    --backward --grad G2.f32 --grad-output dH.f32
expect_bad "backward without gradient" "--grad" -- kernels sinkhorn --input H.f32 --output P.f32 --backward
expect_bad "missing input" "^mhc: missing.f32: " -- kernels sinkhorn --input missing.f32 --output P.f32
: >empty.f32
expect_bad "empty input" "^mhc: empty.f32: " -- kernels sinkhorn --input empty.f32 --output P.f32
expect_bad "unknown device" "device" -- kernels sinkhorn --input H.f32 --output P.f32 --device tpu
if ! "$MHC" kernels sinkhorn --input H.f32 --output Pg.f32 --device cuda >/dev/null 2>err.txt; then
    # No CUDA build or no GPU: a clear one-line refusal with exit 2.
    expect_bad "cuda unavailable" "cuda\|CUDA" -- kernels sinkhorn --input H.f32 --output Pg.f32 --device cuda
fi
cmp -s P.f32 keep.f32 || fail "a failed run changed the previous output"
ls ./*.tmp.* >/dev/null 2>&1 && fail "temporary files left behind"

"$MHC" calibrate --backend host --quick --max-chunk 1MiB -o link.json >/dev/null
python3 - <<'PY' || fail "link.json is not a valid link profile"
import json
j = json.load(open("link.json"))
# notes, nccl_share and memcpy_share are optional fields of the format (docs/simulator.md)
assert set(j) - {"notes", "nccl_share", "memcpy_share"} == {"name", "h2d", "d2h", "copy_engines", "duplex_factor", "source", "by_chunk"}, set(j)
assert all(0 <= j.get(k, 0) < 1 for k in ("nccl_share", "memcpy_share"))
for d in ("h2d", "d2h"):
    assert j[d]["bandwidth_Bps"] > 0 and j[d]["latency_s"] >= 0
assert isinstance(j["copy_engines"], int) and 0 < j["duplex_factor"] <= 1
assert j["source"].startswith("mhc calibrate")
for row in j["by_chunk"]:
    assert set(row) == {"bytes", "h2d_Bps", "d2h_Bps", "both_h2d_Bps", "both_d2h_Bps"}
    assert all(v > 0 for v in row.values())
assert [r["bytes"] for r in j["by_chunk"]] == [4096, 16384, 65536, 262144, 1048576]
PY
expect_bad "unknown backend" "backend" -- calibrate --backend tpu -o x.json
echo "cli tests passed"
