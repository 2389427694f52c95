#!/usr/bin/env bash
# pytest over the PyTorch bridge's tests (python/tests), in the virtual environment that
# `scripts/setup --torch` makes ($MHC_VENV, default .venv at the repository's root), against
# the mhc just built. Without such an environment: exit 77, which ctest shows as skipped.
#   pytest.sh MHC BASETEMP [pytest arguments...]
set -u
mhc=$1 basetemp=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${MHC_VENV:-$root/.venv}
case $venv in /*) ;; *) venv=$root/$venv ;; esac
py=$venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c "import pytest, mhc_torch" 2>/dev/null; then
    echo "skipped: no virtual environment with mhc_torch at $venv (scripts/setup --torch makes one)"
    exit 77
fi
cd "$root" || exit 1
# ctest runs two entries at once on CI's two cores: torch's CPU work (the GPU check's dry-run
# loops, the host optimizer step) on one thread, not on one per core beside the other entry
# (docs/results.md, "Building and testing"). OMP_NUM_THREADS set by the caller stays.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Each test's CPU seconds into BASETEMP.cputime.tsv (bench/ci/pytest_cputime.py): the table that
# packs the parts is written again from a ctest run's files by
#   bench/ci/pytest_costs.sh build/tests/python/pytest-part-*.cputime.tsv >tests/python/pytest-costs.tsv
rm -f "$basetemp.cputime.tsv"
export PYTHONPATH=$root/bench/ci${PYTHONPATH:+:$PYTHONPATH} CPUTIME_OUT=$basetemp.cputime.tsv
# Each ctest entry its own temporary folder: two pytest sessions run side by side.
MHC_EXE=$mhc exec "$py" -m pytest -q -p no:cacheprovider -p pytest_cputime --basetemp="$basetemp" "$@"
