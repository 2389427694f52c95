#!/usr/bin/env bash
# MPI's libraries are loaded only when an MPI launcher started mhc: a plain run (--version, a
# command that reads a trace, one that runs a sweep) loads neither libmpi nor libmhc_mpi.so
# (the loader's own list, LD_DEBUG=libs), and a run under `mpirun -n 1` loads both.
# Usage: mpi_loaded_test.sh MHC TRACE. Skipped (77) without mpirun.
set -u
mhc=$1 trace=$2
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$trace" "$tmp/t.db" || exit 1
# What the loader opened for one run of mhc with the given words (its lines, on stderr).
loaded() { LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -E 'calling init: .*(libmpi|libmhc_mpi)' ; }
for words in "--version" "info $tmp/t.db" "sweep $tmp/t.db --capacities 50%,80% --policies lru --no-store"; do
    # shellcheck disable=SC2086
    got=$(loaded env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK "$mhc" $words)
    [ -z "$got" ] || fail "mhc $words (no launcher) loaded MPI: $got"
    # shellcheck disable=SC2086
    "$mhc" $words >/dev/null 2>"$tmp/err" || fail "mhc $words: $(cat "$tmp/err")"
done
command -v mpirun >/dev/null || { echo "skipped: mpirun not found (openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
got=$(timeout 120 mpirun -n 1 env LD_DEBUG=libs "$mhc" --version 2>&1 >/dev/null | grep -E 'calling init: ')
grep -q 'calling init: .*/libmhc_mpi\.so' <<<"$got" || fail "mpirun -n 1 mhc --version did not load libmhc_mpi.so"
grep -q 'calling init: .*/libmpi\.so' <<<"$got" || fail "mpirun -n 1 mhc --version did not load libmpi"
echo "ok: MPI loaded under mpirun only"
