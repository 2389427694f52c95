#!/usr/bin/env bash
# Every way a coupled run ends, in one process and under mpirun -n 2 and -n 3 (when mpirun is
# there): a rank out of memory seen through another (exit 3, naming it), a send-receive
# without accesses (exit 0), a refusal before the simulation (exit 2, one line), a refusal
# inside one process's simulation (exit 2, one line): the same exit status and output as one
# process, no process left behind (each run under a timeout that fails instead of hanging).
set -u
mhc=$1
write_jobs=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp" || exit 1
"$write_jobs" . || fail "write_jobs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

oom3="--ranks oom3.rank0.db oom3.rank1.db oom3.rank2.db --capacity 1500B --allocator ideal --no-store"
p2p="--ranks p2p.rank0.db p2p.rank1.db --capacity unlimited --allocator ideal --no-store"
mismatch="--ranks mismatch.rank0.db mismatch.rank1.db --capacity 90% --no-store"
slow="--ranks slow.rank0.db slow.rank1.db --capacity 8TiB --allocator ideal --d2h-bandwidth 1kB/s --no-store"

# run NAME LAUNCH... : runs `mhc simulate` with the named job's options into NAME.out/.err/.rc
run() {
    local name=$1 opts=$2
    shift 2
    timeout 120 "$@" "$mhc" simulate $opts >"$name.out" 2>"$name.err"
    echo $? >"$name.rc"
    [ "$(cat "$name.rc")" != 124 ] || fail "$name: still running after 120 s (a process waits for ever): $(cat "$name.err")"
}
# mhc's own lines on stderr (mpirun adds its own banners when a process exits non-zero)
mhc_lines() { grep -c '^mhc: ' "$1"; }

check_job() {   # check_job SUFFIX LAUNCH...
    local s=$1
    shift
    run "oom3$s" "$oom3" "$@"
    [ "$(cat oom3$s.rc)" = 3 ] || fail "oom3$s: exit $(cat oom3$s.rc), not 3 (out of memory): $(cat oom3$s.err)"
    grep -q "^out of memory  rank 2: allocation 1: " "oom3$s.out" || fail "oom3$s: rank 2 not named: $(cat oom3$s.out)"
    [ "$(grep -c STOPPED "oom3$s.out")" = 2 ] || fail "oom3$s: ranks 0 and 1 not shown stopped: $(cat oom3$s.out)"
    [ "$(mhc_lines "oom3$s.err")" = 0 ] || fail "oom3$s: $(cat oom3$s.err)"
    run "oom3j$s" "$oom3 --json" "$@"
    [ "$(cat oom3j$s.rc)" = 3 ] || fail "oom3j$s: exit $(cat oom3j$s.rc): $(cat oom3j$s.err)"
    [ "$(mhc_lines "oom3j$s.err")" = 1 ] && grep -q "^mhc: out of memory on rank 2: " "oom3j$s.err" \
        || fail "oom3j$s: not one line naming rank 2: $(cat oom3j$s.err)"
    python3 - "oom3j$s.out" <<'PY' || fail "oom3j$s: $(cat oom3j$s.out)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["job"]["oom_rank"] == 2 and r["job"]["throughput_loss"] is None, r["job"]
assert [x["stopped"] for x in r["ranks"]] == [True, True, False], r["ranks"]
assert [x["simulated_makespan"] for x in r["ranks"]] == [20, 40, 0], r["ranks"]
PY

    run "p2p$s" "$p2p --json" "$@"
    [ "$(cat p2p$s.rc)" = 0 ] || fail "p2p$s: exit $(cat p2p$s.rc): $(cat p2p$s.err)"

    run "mismatch$s" "$mismatch" "$@"
    [ "$(cat mismatch$s.rc)" = 2 ] || fail "mismatch$s: exit $(cat mismatch$s.rc): $(cat mismatch$s.err)"
    [ "$(mhc_lines "mismatch$s.err")" = 1 ] || fail "mismatch$s: not printed once: $(cat mismatch$s.err)"
    grep -q "communicator dp" "mismatch$s.err" || fail "mismatch$s: $(cat mismatch$s.err)"
    run "capacity$s" "--ranks p2p.rank0.db p2p.rank1.db --capacity 70 --no-store" "$@"
    [ "$(cat capacity$s.rc)" = 2 ] && [ "$(mhc_lines "capacity$s.err")" = 1 ] \
        || fail "capacity$s: exit $(cat capacity$s.rc): $(cat capacity$s.err)"
    run "missing$s" "--ranks p2p.rank0.db nonesuch.db --capacity 90%" "$@"
    [ "$(cat missing$s.rc)" = 2 ] && [ "$(mhc_lines "missing$s.err")" = 1 ] \
        || fail "missing$s: exit $(cat missing$s.rc): $(cat missing$s.err)"

    run "slow$s" "$slow" "$@"
    [ "$(cat slow$s.rc)" = 2 ] || fail "slow$s: exit $(cat slow$s.rc): $(cat slow$s.err)"
    [ "$(mhc_lines "slow$s.err")" = 1 ] && grep -q "past the simulator's time range" "slow$s.err" \
        || fail "slow$s: not one line: $(cat slow$s.err)"
}

check_job ""
# Stored: rank 2's run is out of memory, ranks 0 and 1 did not finish (no loss), the job has
# no loss.
for r in 0 1 2; do cp oom3.rank$r.db stored.rank$r.db; done
"$mhc" simulate --ranks stored.rank0.db stored.rank1.db stored.rank2.db --capacity 1500B --allocator ideal \
    >/dev/null 2>&1
q="select r.status || ' ' || (select count(*) from run_metrics m where m.run = r.id and m.key in
   ('throughput_loss', 'job_throughput_loss', 'peak_reduction')) from runs r"
[ "$(sqlite3 stored.rank0.db "$q"),$(sqlite3 stored.rank1.db "$q"),$(sqlite3 stored.rank2.db "$q")" = \
  "incomplete 0,incomplete 0,oom 0" ] || fail "stored runs: $(sqlite3 stored.rank0.db "$q"),$(sqlite3 stored.rank2.db "$q")"
command -v mpirun >/dev/null || { echo "one process ok; skipped: mpirun not found (openmpi-bin)"; exit 77; }
# A build without MPI runs every process of mpirun as a whole job of its own.
[ "${MHC_BUILT_WITH_MPI:-1}" = 1 ] || { echo "one process ok; skipped: this build has no MPI (MHC_WITH_MPI)"; exit 77; }
for n in 2 3; do
    check_job ".$n" mpirun -n "$n" --oversubscribe
    for job in oom3 oom3j p2p; do
        cmp -s "$job.out" "$job.$n.out" || fail "$job under mpirun -n $n differs: $(diff "$job.out" "$job.$n.out" | head -5)"
    done
    for job in mismatch capacity missing slow; do
        cmp -s <(grep '^mhc: ' "$job.err") <(grep '^mhc: ' "$job.$n.err") \
            || fail "$job under mpirun -n $n says otherwise: $(cat "$job.$n.err")"
    done
done
echo ok
