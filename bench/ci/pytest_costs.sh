#!/usr/bin/env bash
# tests/python/pytest-costs.tsv from bench/ci/pytest_cputime.py's per-test lines: each python/tests
# file's CPU seconds, summed over its tests, rounded up; the gpu check (an entry of its own) left out.
#   OMP_NUM_THREADS=1 PYTHONPATH=python:bench/ci CPUTIME_OUT=/tmp/t.tsv MHC_EXE=build/cli/mhc \
#     .venv/bin/python -m pytest -q -p no:cacheprovider -p pytest_cputime python/tests --ignore=python/tests/test_gpu_check.py
#   bench/ci/pytest_costs.sh /tmp/t.tsv >tests/python/pytest-costs.tsv
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
cat "$@" | awk -F'\t' '{ n = split($3, p, "::"); f = p[1]; sub(/.*\//, "", f); c[f] += $1 }
  END { for (f in c) { s = int(c[f]); if (s < c[f]) s++; printf "%d\t%s\n", s, f } }' | sort -k1,1nr -k2
