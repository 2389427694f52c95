#!/usr/bin/env bash
# What a command would refuse later for a fault in the file, `mhc check` refuses first, naming the
# file's own rows and meta. Each case spoils a copy of a real capture (tests/data/advise/tiny_mhc.db)
# or of a generated trace in one way that check passed and `mhc advise` (or a coupled simulate)
# then refused: advise's capture meta (frame holds, unpacks, checkpointing names, optimizer
# defaults, data parallelism), a kernel without kernel_info, a kernel on a second stream that
# overlaps the others (advise plans one stream, and refused with its plan's times and renumbered
# kernels: "accesses row 2271: kernel 2271 [4583897 ns, 4585897 ns] ... [access-outside-lifetime]"),
# times more than 2^62 ns apart (the plan counts from the first), a rank's job meta. Where advise
# reads the fault, it refuses with check's line.
set -u
mhc=$1
capture=$2   # tests/data/advise/tiny_mhc.db
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1

"$mhc" check "$capture" >/dev/null || fail "the capture itself does not pass check"
"$mhc" advise "$capture" --capacity 80GiB --top 1 >/dev/null 2>err || fail "advise of the capture itself: $(cat err)"

# spoiled WANT SQL [advise]: a copy of the capture changed by SQL; check exits 2 and its first
# problem says WANT; with "advise", advise exits 2 in one line, which says check's first problem.
spoiled() {
    local want=$1 sql=$2 also=${3:-}
    cp "$capture" m.db && chmod u+w m.db && sqlite3 m.db "$sql" || fail "sqlite3: $sql"
    "$mhc" check m.db >out 2>err; local rc=$?
    [ $rc = 2 ] || fail "check passed ($rc) a capture spoiled by: $sql"
    grep -qF -- "$want" <(head -1 out) || fail "check of '$sql' does not say '$want' first: $(head -3 out)"
    [ "$also" = advise ] || return 0
    "$mhc" advise m.db --capacity 80GiB --top 1 >aout 2>aerr; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <aerr)" = 1 ] || fail "advise of '$sql' exited $rc: $(head -c 300 aerr)"
    grep -qF -- "$(head -1 out)" aerr || fail "advise of '$sql' does not say check's '$(head -1 out)': $(cat aerr)"
}
meta() { echo "INSERT OR REPLACE INTO meta(key, value) VALUES ('$1', '$2')"; }

spoiled "m.db: meta capture.frame_holds: not a JSON list of [allocation id, kernel id] pairs [meta]" \
    "$(meta capture.frame_holds x)" advise
spoiled "m.db: meta capture.frame_holds: entry 2 names allocation 999999, which does not exist [meta]" \
    "$(meta capture.frame_holds '[[1,1],[999999,1]]')" advise
spoiled "m.db: meta capture.unpacks: entry 1 names kernel 999999, which does not exist [meta]" \
    "$(meta capture.unpacks '[[1,999999]]')" advise
spoiled "m.db: meta capture.unpacks: entry 1 [1] is not an [allocation id, kernel id] pair [meta]" \
    "$(meta capture.unpacks '[[1]]')" advise
spoiled "m.db: meta capture.save_unpacks: not a JSON list of kernel ids, one per entry of capture.pack_order [meta]" \
    "$(meta capture.save_unpacks '[0]')" advise
spoiled "m.db: meta capture.hf_checkpoint_layers: not a JSON list of module names [meta]" \
    "$(meta capture.hf_checkpoint_layers '["a",1]')" advise
spoiled "m.db: meta capture.hf_checkpoint_call: 'enable' is not a Hugging Face checkpointing call" \
    "$(meta capture.hf_checkpoint_layers '["a"]'); $(meta capture.hf_checkpoint_call enable)" advise
spoiled "m.db: meta capture.optimizer_defaults: not a JSON object [meta]" "$(meta capture.optimizer_defaults '[1]')" advise
spoiled "m.db: meta capture.data_parallel: 'zero3' is not ddp, fsdp2 or ddp+fsdp2 [meta]" \
    "$(meta capture.data_parallel zero3)" advise
# The data-parallel sizes advise counts with (before 2026-12-05 an int overflow and a cast past int64).
spoiled "m.db: meta capture.ddp: world 2000000000 is not a number of ranks in [0, 2^20] [meta]" \
    "$(meta capture.data_parallel ddp); $(meta capture.ddp 'world 2000000000, bucket_cap_mb 25, modules 1')" advise
spoiled "m.db: meta capture.fsdp2: shard 65536 x replicate 65536 is more than 2^20 ranks [meta]" \
    "$(meta capture.data_parallel fsdp2); $(meta capture.fsdp2 'world 4 (shard 65536 x replicate 65536), modules 3')"
# What advise reads as absent (an empty value; a call without layers) check passes too.
cp "$capture" e.db && chmod u+w e.db && sqlite3 e.db "$(meta capture.data_parallel ''); $(meta capture.unpacks '');
    $(meta capture.hf_checkpoint_layers ''); $(meta capture.hf_checkpoint_call x); $(meta capture.optimizer_defaults '')" ||
    fail "sqlite3 e.db"
"$mhc" check e.db >out || fail "check of empty capture meta: $(cat out)"
"$mhc" advise e.db --capacity 80GiB --top 1 >/dev/null 2>err || fail "advise of empty capture meta: $(cat err)"
last=$(sqlite3 "$capture" "SELECT max(kernel) FROM kernel_info")
spoiled "m.db: kernels row $last: has no kernel_info row (its module and phase); every kernel of a model capture has one [kernel-info]" \
    "DELETE FROM kernel_info WHERE kernel = $last" advise

# A kernel on stream 7 from just before kernel K to the free of an allocation A that K reads last
# (its free a nanosecond later, where nothing else happens): the plan runs it before K, and frees
# A at its end, before K runs.
overlap="
CREATE TEMP TABLE pick AS
SELECT ac.kernel AS k, ac.allocation AS a FROM accesses ac JOIN kernels k ON k.id = ac.kernel
  JOIN allocations a ON a.id = ac.allocation
WHERE a.t_free IS NOT NULL
  AND k.t_end = (SELECT max(k3.t_end) FROM accesses a3 JOIN kernels k3 ON k3.id = a3.kernel WHERE a3.allocation = a.id)
  AND NOT EXISTS (SELECT 1 FROM allocations b WHERE b.id != a.id AND b.device = a.device AND b.address = a.address
                  AND b.t_alloc BETWEEN a.t_free AND a.t_free + 1)
  AND NOT EXISTS (SELECT 1 FROM kernels k2 WHERE k2.t_end = a.t_free + 1)
ORDER BY ac.kernel LIMIT 1;
UPDATE allocations SET t_free = t_free + 1 WHERE id = (SELECT a FROM pick);
CREATE TEMP TABLE q AS SELECT * FROM kernels WHERE id = (SELECT k FROM pick);
UPDATE q SET id = (SELECT max(id) + 1 FROM kernels), stream = 7, t_start = t_start - 1,
             t_end = (SELECT t_free FROM allocations WHERE id = (SELECT a FROM pick));
INSERT INTO kernels SELECT * FROM q;
CREATE TEMP TABLE qi AS SELECT * FROM kernel_info WHERE kernel = (SELECT k FROM pick);
UPDATE qi SET kernel = (SELECT id FROM q);
INSERT INTO kernel_info SELECT * FROM qi;"
k=$(sqlite3 "$capture" "SELECT max(id) + 1 FROM kernels")
spoiled "m.db: kernels row $k: starts at " "$overlap" advise
grep -q "still runs on stream 0 (until .*): a model capture runs its kernels one after another on device 0 \[capture-overlap\]" out ||
    fail "the overlap is not said as such: $(head -2 out)"

# Times 2^63 ns apart (each within +-2^62): the last named, with the first.
spoiled "more than 2^62 ns after the trace's first time, t_alloc -4611686018427387904 of allocations row 1 [range]" \
    "UPDATE allocations SET t_alloc = -4611686018427387904 WHERE id = 1;
     UPDATE allocations SET t_free = 4611686018427387904 WHERE id = (SELECT max(id) FROM allocations)" advise

# A rank's job meta, read by `simulate --ranks` (which refused it) and checked on each file.
spoiled "m.db: meta world_size: 'two' is not a whole number >= 0 [meta]" "$(meta world_size two)"
spoiled "m.db: meta rank: 2 is not below world_size 2 [meta]" "$(meta world_size 2); $(meta rank 2)"
spoiled "m.db: meta time_origin_ns: '1e9' is not a time in ns [meta]" "$(meta time_origin_ns 1e9)"
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o r0.db >/dev/null || fail generate
cp r0.db r1.db
sqlite3 r0.db "$(meta world_size 2); $(meta rank 0)" && sqlite3 r1.db "$(meta world_size 2); $(meta rank x)" || fail sqlite3
"$mhc" simulate --ranks r0.db r1.db --capacity 90% --no-store >/dev/null 2>err && fail "simulate --ranks took rank 'x'"
"$mhc" check r1.db >out 2>/dev/null; [ $? = 2 ] && grep -qF "r1.db: meta rank: 'x' is not a whole number >= 0 [meta]" out ||
    fail "check of a rank 'x': $(cat out)"
"$mhc" check r0.db >/dev/null || fail "check of rank 0 of 2"
echo "ok: check foresees what advise and simulate --ranks refused"
