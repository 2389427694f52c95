#!/usr/bin/env bash
# The GPU checks from a source checkout, on a machine with an NVIDIA GPU and the build
# dependencies: builds the release (scripts/package), unpacks it into a temporary folder and
# runs its libexec/gpu-check there, which writes the results under $OUT (default ./out).
#   OUT=out scripts/gpu-check.sh [gpu-check arguments, e.g. --sections "device kernels_tests"]
# On a bare GPU machine carry the tarball instead and run libexec/gpu-check from it
# (README "Release"); the sections are described in package/gpu-check.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OUT=${OUT:-$ROOT/out}
"$ROOT/scripts/package" ${MHC_PACKAGE_ARGS:-}
tarball=$(ls -t "$ROOT"/dist/mhc-toolkit-*.tar.gz | head -1)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhc-release.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$tarball"
"$tmp/$(basename "$tarball" .tar.gz)/libexec/gpu-check" "$@"
