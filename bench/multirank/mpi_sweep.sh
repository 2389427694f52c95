#!/usr/bin/env bash
# MPI sweep speed-up: the same sweep on one process (one thread) and on `mpirun -n 2` (one
# thread each); prints both wall times, the speed-up and the load average before and after.
#   bench/multirank/mpi_sweep.sh [build/cli/mhc] [preset] [layers] [steps]
set -eu
mhc=${1:-build/cli/mhc}
preset=${2:-llama2-7b}
layers=${3:-8}
steps=${4:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$mhc" -q generate --preset "$preset" --layers "$layers" --steps "$steps" -o "$tmp/t.db" >/dev/null
sw="--policies lru,dtr,cost_aware --prefetchers none,periodic --capacities 90%,70%,50% --no-store"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)  (nproc $(nproc))"
t0=$(date +%s.%N); /usr/bin/time -f "  1 process: CPU %U s user + %S s sys" "$mhc" -q sweep "$tmp/t.db" $sw -j1 >"$tmp/one.txt"; t1=$(date +%s.%N)
mpirun -n 2 --oversubscribe /usr/bin/time -f "  one of 2 processes: CPU %U s user + %S s sys" "$mhc" -q sweep "$tmp/t.db" $sw >"$tmp/two.txt"; t2=$(date +%s.%N)
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
diff <(grep -v "simulations in" "$tmp/one.txt") <(grep -v "simulations in" "$tmp/two.txt") >/dev/null \
    && echo "tables identical" || echo "TABLES DIFFER"
grep "simulations in" "$tmp/one.txt"
python3 -c "a=$t1-$t0; b=$t2-$t1; print(f'1 process: {a:.2f} s   mpirun -n 2: {b:.2f} s   speed-up {a/b:.2f}x')"
