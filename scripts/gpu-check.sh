#!/usr/bin/env bash
# GPU checks for mhc-toolkit, to run on a machine with an NVIDIA GPU:
#   OUT=/path/to/results scripts/gpu-check.sh
# Builds with CUDA in build-gpu, runs the CUDA tests and the GPU benchmarks, and writes
# everything under $OUT (default ./out): gpu-check.txt (the log of every section) and the
# files sections produce (e.g. a link profile). Exits non-zero if a test section failed;
# performance targets that are missed are reported (MISSED), not failed.
#
# Each section is a function section_<name>; to add one, define it and append its name to
# SECTIONS (or name them in MHC_GPU_CHECK_SECTIONS). Sections run in order, each logged under a "== name ==" heading; a failing
# section is recorded and the next one still runs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out}
BUILD=${BUILD:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/gpu-check.txt"
: >"$LOG"
FAILED=()

log() { echo "$*" | tee -a "$LOG"; }
# Runs a command with its output appended to the log; returns its status.
logged() {
    log "\$ $*"
    set +e
    "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    set -e
    [ "$rc" -eq 0 ] || log "(exit status $rc)"
    return "$rc"
}

section_device() {
    logged nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.memory,pcie.link.gen.max,pcie.link.width.max \
        --format=csv || true
    logged nvidia-smi topo -m || true
    logged nvcc --version || logged /usr/local/cuda/bin/nvcc --version
}

section_build() {
    local arch=${CUDA_ARCH:-}
    if [ -z "$arch" ] && command -v nvidia-smi >/dev/null; then
        arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
    fi
    logged cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMHC_WITH_CUDA=ON \
        ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} -DMHC_WITH_VIEWER=OFF
    logged cmake --build "$BUILD" -j "$JOBS" --target mhc mhc_kernels_tests bench_sinkhorn bench_sinkhorn_cuda \
        bench_swap_standin mhc_record
}

section_kernels_tests() {
    # CUDA vs CPU on random inputs (poisoned outputs), swap checksums on both paths,
    # stand-ins, the CLI; the seed is printed for repeats (MHC_TEST_SEED).
    logged ctest --test-dir "$BUILD" -R kernels --output-on-failure -j 4
    logged "$BUILD/tests/kernels/mhc_kernels_tests" "[cuda]"
    if grep -q "CUDA test skipped" "$LOG"; then
        log "the CUDA tests were skipped: no CUDA device visible to the tests"
        return 1
    fi
}

section_kernels_bench_gpu() {
    logged "$BUILD/bench/kernels/bench_sinkhorn_cuda" --tokens $((16 << 20))
    logged "$BUILD/bench/kernels/bench_sinkhorn_cuda" --tokens $((64 << 20)) --reps 5
}

section_kernels_torch() {
    if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        logged python3 "$ROOT/bench/kernels/sinkhorn_torch.py" --tokens $((16 << 20))
        # torch.compile can take a while the first time; bounded so the script stays short.
        logged timeout 180 python3 "$ROOT/bench/kernels/sinkhorn_torch.py" --tokens $((16 << 20)) --compile || true
    else
        log "PyTorch with CUDA not available: comparison skipped"
    fi
}

section_kernels_swap() {
    logged "$BUILD/bench/kernels/bench_swap_standin" --cuda
    logged "$BUILD/cli/mhc" calibrate --backend cuda -o "$OUT/link-cuda.json"
    logged "$BUILD/cli/mhc" calibrate --backend cuda --path zero-copy -o "$OUT/link-cuda-zero-copy.json"
    logged cat "$OUT/link-cuda.json"
}

section_kernels_bench_cpu() {
    logged "$BUILD/bench/kernels/bench_sinkhorn" --reps 2
}

section_record() {
    # CUPTI recorder on a small PyTorch training loop (issue 6): trace, check, info, overhead.
    # shellcheck source=gpu/record.sh
    source "$ROOT/scripts/gpu/record.sh"
    OUT="$OUT/record" MHC="$BUILD/cli/mhc" mhc_gpu_record 2>&1 | tee -a "$LOG"
    return "${PIPESTATUS[0]}"
}

section_validate() {
    # Replay of simulated plans on the GPU (issue 7); uses the recorded trace when there is one.
    local recorded
    recorded=$(ls "$OUT"/record/*.db 2>/dev/null | head -1 || true)
    OUT="$OUT" MHC="$BUILD/cli/mhc" RECORDED_TRACE="$recorded" bash "$ROOT/scripts/gpu/validate.sh" 2>&1 | tee -a "$LOG"
    return "${PIPESTATUS[0]}"
}

SECTIONS=(device build kernels_tests kernels_bench_gpu kernels_torch kernels_swap record validate kernels_bench_cpu)
# MHC_GPU_CHECK_SECTIONS="build kernels_tests" runs a subset (e.g. to repeat one).
if [ -n "${MHC_GPU_CHECK_SECTIONS:-}" ]; then read -r -a SECTIONS <<<"$MHC_GPU_CHECK_SECTIONS"; fi

log "mhc gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
for s in "${SECTIONS[@]}"; do
    log ""
    log "== $s =="
    start=$(date +%s)
    if ! "section_$s"; then
        FAILED+=("$s")
        log "== $s: FAILED =="
        [ "$s" = build ] && break  # nothing else can run without a build
    fi
    log "($s took $(($(date +%s) - start)) s)"
done
log ""
if [ ${#FAILED[@]} -eq 0 ]; then
    log "gpu-check: all sections passed; results in $OUT"
else
    log "gpu-check: FAILED sections: ${FAILED[*]}; results in $OUT"
    exit 1
fi
