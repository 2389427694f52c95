#!/usr/bin/env bash
# The release's GPU check in its dry run (the PyTorch sections on the CPU), timed: the sections
# the pytest entry runs (python/tests/test_gpu_check.py), from a folder laid out as the release
# is. Prints the wall time, the CPU time of everything it started, and each section's seconds.
#   bench/ci/gpu_check_dry.sh MHC PYTHON [GPU_CHECK]      (GPU_CHECK: default package/gpu-check)
# Two variants side by side on one machine compare under the same load, e.g. the last commit's
# script against this one, or OMP_NUM_THREADS=1 against the default:
#   git show HEAD:package/gpu-check >/tmp/gpu-check.old
#   bench/ci/gpu_check_dry.sh build/cli/mhc .venv/bin/python /tmp/gpu-check.old &
#   OMP_NUM_THREADS=1 bench/ci/gpu_check_dry.sh build/cli/mhc .venv/bin/python; wait
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mhc=$(realpath "$1") python=$2 check=$(realpath "${3:-$root/package/gpu-check}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/release/bin" "$tmp/release/libexec" "$tmp/release/share/mhc-toolkit"
ln -s "$mhc" "$tmp/release/bin/mhc"
cp "$check" "$tmp/release/libexec/gpu-check"
chmod +x "$tmp/release/libexec/gpu-check"
ln -s "$root/package/gpu" "$tmp/release/share/mhc-toolkit/gpu"
ln -s "$root/python" "$tmp/release/share/mhc-toolkit/python"
env -u PYTHONPATH MHC_PYTHON="$python" OUT="$tmp/out" TMPDIR="$tmp" \
    /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$tmp/release/libexec/gpu-check" --dry-run \
    --sections "device record captured_vs_real advise mhc_overhead" >"$tmp/log" 2>&1 || true
read -r wall user sys < <(tail -n 1 "$tmp/time")
echo "gpu-check dry run ($check, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}): ${wall} s wall, ${user} s user + ${sys} s system CPU"
sed 's/^/  /' "$tmp/out/summary.txt"
