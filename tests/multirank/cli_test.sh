#!/usr/bin/env bash
# Multi-rank from the command line: per-rank files, a coupled run with the identity at
# unlimited capacity, --json, and ranks whose collectives do not match (one line, exit 2).
set -u
mhc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp" || exit 1

"$mhc" -q generate --preset gpt2-small --layers 4 --seq 256 --pp 2 --dp 2 --micro-batches 3 --steps 1 \
    --all-ranks -o job.db >gen.out || fail "generate --all-ranks: $(cat gen.out)"
for r in 0 1 2 3; do [ -f job.rank$r.db ] || fail "job.rank$r.db missing"; done
[ "$(ls | grep -c '\.db$')" = 4 ] || fail "unexpected files: $(ls)"
# The same layout again without --force is refused before anything is written.
"$mhc" -q generate --preset gpt2-small --layers 4 --seq 256 --pp 2 --dp 2 --micro-batches 3 --steps 1 \
    --all-ranks -o job.db >/dev/null 2>err && fail "overwrote job.rank*.db without --force"
grep -q "exists" err || fail "refusal does not say why: $(cat err)"
# One rank alone (the whole pipeline is generated for its timing) is the same trace.
"$mhc" -q generate --preset gpt2-small --layers 4 --seq 256 --pp 2 --dp 2 --micro-batches 3 --steps 1 \
    --pp-stage 1 --dp-rank 1 -o one.db >/dev/null || fail "generate --pp-stage 1 --dp-rank 1"
[ "$(sqlite3 one.db 'select count(*), sum(t_end) from kernels')" = "$(sqlite3 job.rank3.db 'select count(*), sum(t_end) from kernels')" ] \
    || fail "--pp-stage 1 --dp-rank 1 differs from rank 3 of --all-ranks"
[ "$(ls | grep -c 'unused')" = 0 ] || fail "temporary stage files left: $(ls)"

"$mhc" simulate --ranks job.rank0.db job.rank1.db job.rank2.db job.rank3.db --capacity unlimited --json \
    --no-store >unl.json || fail "coupled unlimited run failed"
python3 - unl.json <<'PY' || fail "identity: $(cat unl.json)"
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["ranks"]) == 4
for x in r["ranks"]:
    assert x["simulated_makespan"] == x["baseline_makespan"], x
    assert x["simulated_peak"] == x["baseline_peak"], x
    assert x["coupled_wait_time"] == 0 and x["stall_time"] == 0, x
assert r["job"]["throughput_loss"] == 0 and r["job"]["cross_events"] > 0
PY
"$mhc" simulate --ranks job.rank0.db job.rank1.db job.rank2.db job.rank3.db --capacity 60% --policy dtr \
    >lim.out || fail "coupled 60% run failed: $(cat lim.out)"
grep -q "^limiting rank" lim.out || fail "no limiting rank: $(cat lim.out)"
[ "$(sqlite3 job.rank2.db "select count(*) from runs where name like '% coupled'")" = 1 ] || fail "run not stored in rank 2"

# A rank from another job: its job identity says so (rank and field named).
"$mhc" -q generate --preset gpt2-small --layers 4 --seq 256 --pp 2 --dp 2 --micro-batches 2 --steps 1 \
    --pp-stage 0 --dp-rank 1 -o other.db >/dev/null || fail "generate other"
"$mhc" simulate --ranks job.rank0.db other.db job.rank2.db job.rank3.db --capacity 60% --no-store >out 2>err
rc=$?
[ "$rc" = 2 ] || fail "ranks of another job exited $rc: $(cat err)"
[ "$(wc -l <err)" = 1 ] || fail "refusal is not one line: $(cat err)"
grep -q "other.db (rank 1)" err && grep -q "job.id" err || fail "refusal does not name rank and field: $(cat err)"
# The same rank claiming this job's identity: its collectives do not match.
sqlite3 other.db "UPDATE meta SET value = '$(sqlite3 job.rank0.db "SELECT value FROM meta WHERE key = 'job.id'")' WHERE key = 'job.id'"
"$mhc" simulate --ranks job.rank0.db other.db job.rank2.db job.rank3.db --capacity 60% --no-store >out 2>err
rc=$?
[ "$rc" = 2 ] || fail "mismatched ranks exited $rc: $(cat err)"
[ "$(wc -l <err)" = 1 ] || fail "mismatch is not one line: $(cat err)"
grep -q "rank 1" err && grep -q "communicator" err || fail "mismatch does not name rank and collective: $(cat err)"
# One rank of the job alone is not the whole job (it was simulated as a job of one before 2026-12-06).
"$mhc" simulate --ranks job.rank2.db --capacity unlimited --no-store >out 2>err
rc=$?
[ "$rc" = 2 ] || fail "one rank of 4 alone exited $rc: $(cat err)"
grep -q "job.rank2.db (rank 2): meta world_size is 4 but 1 rank traces were given" err || fail "one rank alone: $(cat err)"
"$mhc" simulate --ranks job.rank0.db --capacity 60% job.rank1.db >/dev/null 2>err && fail "trace and --ranks together accepted"
echo ok
