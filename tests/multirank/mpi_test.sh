#!/usr/bin/env bash
# MPI: `mpirun -n 2` gives the results of one process, bit for bit (wall times aside), for a
# sweep (rank 0 alone stores) and for a coupled run. Skipped (77) without mpirun.
set -u
mhc=$1
command -v mpirun >/dev/null || { echo "skipped: mpirun not found (openmpi-bin)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp" || exit 1
# As root, OpenMPI refuses to start without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
run2() { timeout 300 mpirun -n 2 --oversubscribe "$@"; }

"$mhc" -q generate --preset gpt2-small --layers 4 --seq 256 --pp 2 --dp 2 --micro-batches 3 --steps 1 \
    --all-ranks -o job.db >/dev/null || fail generate
ranks="job.rank0.db job.rank1.db job.rank2.db job.rank3.db"
for pol in lru dtr; do
    "$mhc" simulate --ranks $ranks --capacity 60% --policy $pol --json --no-store >one.json || fail "one process $pol"
    run2 "$mhc" simulate --ranks $ranks --capacity 60% --policy $pol --json --no-store >two.json 2>err \
        || fail "mpirun -n 2 simulate --ranks ($pol): $(cat err)"
    cmp -s one.json two.json || fail "coupled $pol differs under MPI: $(diff one.json two.json | head -5)"
done
# Stored coupled runs: rank 0 writes every rank's file.
run2 "$mhc" simulate --ranks $ranks --capacity 60% --policy dtr >/dev/null 2>err || fail "stored coupled: $(cat err)"
for r in 0 1 2 3; do
    [ "$(sqlite3 job.rank$r.db "select count(*) from runs")" = 1 ] || fail "rank $r: not one stored run"
done

cp job.rank0.db a.db
cp job.rank0.db b.db
sw="--policies lru,dtr,cost_aware --prefetchers none,periodic --capacities 90%,70%,50% --bisect-steps 4"
"$mhc" sweep a.db $sw -j1 >one.txt || fail "sweep one process"
run2 "$mhc" sweep b.db $sw >two.txt 2>err || fail "mpirun -n 2 sweep: $(cat err)"
diff <(grep -v "simulations in\|^stored" one.txt) <(grep -v "simulations in\|^stored" two.txt) >/dev/null \
    || fail "sweep tables differ: $(diff one.txt two.txt | head)"
q="select r.name, m.key, m.value from run_metrics m join runs r on r.id = m.run where m.key != 'sim_seconds' order by r.id, m.key"
[ "$(sqlite3 a.db "$q" | md5sum)" = "$(sqlite3 b.db "$q" | md5sum)" ] || fail "stored sweep metrics differ"
q="select run, kind, t_start, t_end, allocation, kernel, bytes from run_events order by rowid"
[ "$(sqlite3 a.db "$q" | md5sum)" = "$(sqlite3 b.db "$q" | md5sum)" ] || fail "stored sweep events differ"
[ "$(sqlite3 a.db 'select count(*) from runs')" -gt 10 ] || fail "too few runs stored"
echo ok
