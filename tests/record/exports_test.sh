#!/usr/bin/env bash
# The injection library must export InitializeInjection (the driver looks it up by name)
# and keep everything else (our SQLite/trace code) hidden from the host program.
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
if ! grep -qx InitializeInjection <<<"$syms"; then
  echo "FAIL: $lib does not export InitializeInjection"; exit 1
fi
others=$(grep -vx -e InitializeInjection -e _init -e _fini <<<"$syms" || true)
if [[ -n "$others" ]]; then
  echo "FAIL: $lib exports more than InitializeInjection:"; echo "$others" | head -20; exit 1
fi
# It must be linked against CUPTI and the driver, resolved at load time.
needed=$(readelf -d "$lib" | grep NEEDED)
grep -q libcupti <<<"$needed" || { echo "FAIL: not linked against libcupti"; exit 1; }
grep -q 'libcuda\.so' <<<"$needed" || { echo "FAIL: not linked against libcuda"; exit 1; }
echo "ok: $lib exports InitializeInjection only"
