#!/usr/bin/env bash
# tests/python/pytest-costs.tsv from bench/ci/pytest_cputime.py's per-test lines: each python/tests
# file's CPU seconds, summed over its tests, rounded up; the gpu check (an entry of its own) left out.
# Every pytest ctest entry writes such lines (tests/python/pytest.sh), so after a ctest run:
#   bench/ci/pytest_costs.sh build/tests/python/pytest-part-*.cputime.tsv >tests/python/pytest-costs.tsv
# --check TABLE FILES...: instead, names the test files TABLE lacks or counts at under half or over
# twice what FILES measured (and 5 s apart at least), one line each; exit 1 when there is any.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
costs() {
  cat "$@" | awk -F'\t' '{ n = split($3, p, "::"); f = p[1]; sub(/.*\//, "", f); c[f] += $1 }
    END { for (f in c) if (f != "test_gpu_check.py") { s = int(c[f]); if (s < c[f]) s++; printf "%d\t%s\n", s, f } }' | sort -k1,1nr -k2
}
if [ "$1" = --check ]; then
  table=$2
  shift 2
  costs "$@" | awk -F'\t' -v table="$table" '
    FILENAME == table { t[$2] = $1; next }
    !($2 in t) { printf "%s: %s is not in it (measured %d s; counted as the default)\n", table, $2, $1; bad = 1; next }
    ($1 > 2 * t[$2] || 2 * $1 < t[$2]) && ($1 - t[$2] > 5 || t[$2] - $1 > 5) {
      printf "%s: %s counts %d s, measured %d s\n", table, $2, t[$2], $1; bad = 1 }
    END { exit bad }' "$table" -
  exit
fi
costs "$@"
