// Real public PyTorch memory snapshots the other snapshot tests do not cover: an end state's
// blocks pending free, a user-annotated region, segments of private memory pools. The figures were
// read from the files with Python's pickle (tests/data/public/SOURCES.md);
// tests/import/snapshot_accounting.py checks the same files against their own accounting.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

TEST_CASE("snapshot: an end state's blocks pending free are kept alive and said to be above memory_allocated",
          "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // verl's mem.pickle (a _dump_snapshot() of a Megatron + vLLM worker's GPU, no trace events): 127 segments
    // (26,189,234,176 B; pools (0,0), (0,1), (0,2)), 638 blocks: 534 active_allocated (24,916,034,560 B: the segments'
    // allocated_size, what memory_allocated() said), 9 active_pending_free (597,377,024 B), 95 inactive (Python's
    // pickle, SOURCES.md).
    TraceData trace = test::import_public(dir, "torch-snapshot/verl-megatron-vllm-end-state.pickle.gz", result);
    REQUIRE(trace.allocations.size() == 543);
    const int64_t live = std::accumulate(trace.allocations.bytes.begin(), trace.allocations.bytes.end(), int64_t{0});
    CHECK(live == 24916034560 + 597377024);   // the segments' active_size: all alive from t = 0
    CHECK(trace.meta.at("snapshot.end_state_only") == "127 segments, 638 blocks (no trace events)");
    CHECK(trace.meta.at("snapshot.end_state_pending_free").rfind("9 blocks, 597377024 B (", 0) == 0);
    CHECK(test::warned(result, "9 blocks, 597377024 B freed but still pending"));
    CHECK(test::warned(result, "imported the end state only"));
    // A snapshot whose end state holds no pending block says nothing of it.
    imp::Result other;
    TraceData plain = test::import_public(dir, "torch-snapshot/cs336-bcrafton-benchmark.pickle.gz", other);
    CHECK(plain.meta.count("snapshot.end_state_pending_free") == 0);
    CHECK_FALSE(test::warned(other, "pending"));
}

TEST_CASE("snapshot: a real snapshot's user-annotated region is a range marker", "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // bcrafton's snapshot (PyTorch of 2026): external_annotations holds Optimizer.step's
    // record_function range, START at time_us 1773270053883781 and END at 1773270053896695; its
    // earliest event is at 1773270053858957 (Python's pickle): 24,824 us and 37,738 us in, so the
    // marker runs from 24,824,000 ns to the end of the END's microsecond, 37,739,000 ns. Before
    // 2026-12-03 the region was dropped in silence (no marker). Since 2026-12-05 it also makes the
    // trace's one step (no ProfilerStep#N): from the trace's start to the end of the optimizer's.
    TraceData trace = test::import_public(dir, "torch-snapshot/cs336-bcrafton-benchmark.pickle.gz", result);
    REQUIRE(trace.markers.size() == 2);
    CHECK(trace.str(trace.markers.name[0]) == "Optimizer.step#AdamW.step");
    CHECK(trace.markers.t_start[0] == 24824000);
    CHECK(trace.markers.t_end[0] == 37739000);
    CHECK(trace.markers.kind[0] == mhc::trace::MarkerKind::Range);
    CHECK(trace.str(trace.markers.name[1]) == "step#0");
    CHECK(trace.markers.t_start[1] == 0);
    CHECK(trace.markers.t_end[1] == 37739000);
    CHECK(trace.markers.kind[1] == mhc::trace::MarkerKind::Step);
    CHECK(trace.meta.at("steps_from") == "Optimizer.step#AdamW.step ranges (no ProfilerStep#N in the trace)");
    CHECK(trace.meta.at("snapshot.annotations") ==
          "1 range markers from 2 START/END entries (record_function ranges of user scope)");
}

TEST_CASE("snapshot: segments of private memory pools (a MemPool's, a CUDA graph's) are said",
          "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // slime's Megatron RL snapshot (THUDM/slime, August 2025; Python's pickle): device_traces for
    // eight devices, events on device 3 alone (2,515: 1,065 alloc, 462 free_requested, 462
    // free_completed, 412 segment_alloc, 114 segment_free), 298 end-state segments, 297 of them
    // (34,709,962,752 B) in pool (0, 1), the torch.cuda.MemPool its offloaded weights live in, one
    // small segment (2,097,152 B) in the default pool (0, 0); 24 external_annotations. Its blocks peak
    // at 36,235,336,192 B and its reserved bytes at 38,780,534,784 B (snapshot_accounting.py). Before
    // 2026-12-05 the pools went unsaid, and mhc allocator's model (one pool per stream) reserved 5.05%
    // less with no reason given.
    TraceData slime = test::import_public(dir, "torch-snapshot/slime-megatron-mempool-device3.pickle.gz", result);
    CHECK(slime.allocations.size() == 1065);
    CHECK(test::all_are(slime.allocations.device, 3));
    CHECK(mhc::trace::live_peak(slime, 3).bytes == 36235336192);
    CHECK(slime.segments.size() == 412);
    CHECK(slime.markers.size() == 12);
    CHECK(slime.meta.at("snapshot.reserved_peak_from_segment_events") == "38780534784");
    CHECK(slime.meta.at("snapshot.private_pools") == "device 3 pool (0, 1): 297 segments, 34709962752 B");
    CHECK(test::warned(result, "the end state holds 297 segments (34709962752 B) of private memory pools"));
    // Each private-pool segment of the end state by device, pool and address (meta
    // snapshot.segment_pools), which mhc allocator's model gives its allocations' pool from.
    const std::string& sp = slime.meta.at("snapshot.segment_pools");
    CHECK(std::count(sp.begin(), sp.end(), ' ') == 296);
    CHECK(sp.find("3:0,1:46808432640") != std::string::npos);
    CHECK(sp.find("3:0,0:") == std::string::npos);
    // Its 114 segment_free events name no pool (no pool_id before torch 2.15): the segments they
    // free may have been the MemPool's, which the end state cannot tell; taken as the default
    // pool's, said and warned since 2026-12-05 (before: in silence).
    CHECK(slime.meta.at("snapshot.pools_unknown")
              .rfind("114 segment rows freed during the trace: their pool is "
                     "unknown",
                     0) == 0);
    CHECK(test::warned(result, "where one was a private pool given back"));
    // verl's end state: a CUDA graph's pool and vLLM's KV cache pool beside the default one.
    TraceData verl = test::import_public(dir, "torch-snapshot/verl-megatron-vllm-end-state.pickle.gz", result);
    CHECK(verl.meta.at("snapshot.private_pools") ==
          "device 0 pool (0, 1): 44 segments, 585105408 B, device 0 pool (0, 2): 24 segments, 21793603584 B");
    // Snapshots of the default pool alone say nothing (Stanford's training step).
    TraceData stanford = test::import_public(dir, "torch-snapshot/stanford-cs336-training-step.pickle", result);
    CHECK(stanford.meta.count("snapshot.private_pools") == 0);
    CHECK_FALSE(test::warned(result, "private pool given back"));
}

TEST_CASE("snapshot: a snapshot entry's active bytes are checked against the rows alive there",
          "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // FlexGen's OOM snapshot (PyTorch 2.0, order only) holds one trace entry, a 'snapshot' whose size
    // is the allocator's total_active then, 11,840,159,744 B (Python's pickle); its end state's
    // active blocks, alive from t = 0, add up to the same. Before 2026-12-05 nothing compared them.
    TraceData trace = test::import_public(dir, "torch-snapshot/flexgen-oom-snapshot.pickle", result);
    CHECK(trace.meta.at("snapshot.active_checked") ==
          "1 snapshot entry (the allocator's active bytes when _snapshot() was called while recording): the "
          "import's alive bytes equal at every one");
    CHECK_FALSE(test::warned(result, "snapshot entr"));
    // A snapshot without such entries says nothing of it.
    imp::Result other;
    TraceData plain = test::import_public(dir, "torch-snapshot/cs336-bcrafton-benchmark.pickle.gz", other);
    CHECK(plain.meta.count("snapshot.active_checked") == 0);
}
