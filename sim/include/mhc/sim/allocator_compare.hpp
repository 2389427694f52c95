#pragma once
// `mhc allocator`: the caching model against a recording's own segments. The recorded
// allocations are replayed through CachingAllocator at unlimited capacity, under the settings
// the trace recorded (or --allocator-conf), starting from the segments the recording already
// held when it began (warm start); the model's segments are compared with the recorded ones.
// docs/simulator.md "Comparing with a recording" states the rules.
#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "mhc/trace/columns.hpp"
#include "mhc/trace/model.hpp"

namespace mhc::sim {

struct AllocatorComparison {
    int32_t device = 0;
    std::string settings;          // PYTORCH_CUDA_ALLOC_CONF text of the settings used ("" = defaults)
    std::string settings_source;   // where they came from
    int64_t allocations = 0;       // replayed
    int64_t seeded_segments = 0, seeded_bytes = 0;   // warm start: held before recording began
    int64_t seeded_blocks = 0;                       // pre-recording allocations placed where recorded
    // torch.cuda.empty_cache() calls seen in the recording, mirrored: a run of segment frees at
    // times when nothing is allocated, with no allocation between them, is one call (it frees
    // one segment after another: 597 segments over 53 ms in one real snapshot). The model
    // empties its cache at the call's last segment free; inside a call's span (first free to
    // last) the recording is part-way through and reserved bytes are not compared.
    int64_t empty_cache_calls = 0, empty_cache_segment_frees = 0;
    int64_t empty_cache_span_ns = 0;   // the calls' spans together
    // Allocations of the device whose bytes lie in no recorded segment alive when they were made
    // (by address): a recording whose segments cannot hold its own blocks, which no allocator
    // model can reproduce (e.g. a synthetic snapshot); 0 for a consistent recording.
    int64_t blocks_outside_segments = 0;
    // Private memory pools of the device (PrivatePools): pools, their segment rows held at the end,
    // the allocations in them (modelled in their pool), the pools the recording gave back during
    // the trace (released by the model too), and whether the trace events named the pools (exact).
    int64_t private_pools = 0, private_pool_segments = 0, private_pool_allocations = 0, private_pools_given_back = 0;
    bool private_pools_exact = false;
    // Reserved peak; segments (cudaMalloc'd segments or mapped ranges over the run, warm start
    // included); cudaMalloc/map and cudaFree/unmap calls during the trace.
    int64_t recorded_peak = 0, model_peak = 0;
    int64_t recorded_segments = 0, model_segments = 0;
    int64_t recorded_mallocs = 0, model_mallocs = 0, recorded_frees = 0, model_frees = 0;
    // Reserved bytes over time, model minus recorded, sampled after every event time outside
    // the empty_cache calls' spans.
    int64_t max_abs_diff = 0;
    double mean_abs_diff = 0;      // time-weighted over the time compared (plain mean when untimed)
    int64_t cold_peak = 0, cold_segments = 0;   // the model from an empty cache
    bool diverged = false;
    int64_t diverge_time = 0;      // ns
    int64_t diverge_allocation = 0;   // id of the allocation event there (0: none)
    std::string why;               // the first divergence in words
    // The model's reserved bytes after each event time (the viewer draws them over the recorded).
    std::vector<int64_t> sample_times, model_reserved;
    double peak_error() const;     // (model - recorded) / recorded
    double segment_error() const;
};

// Private memory pools (a CUDA graph's, a torch.cuda.MemPool's): meta snapshot.segment_pools names
// each end-state segment of a private pool ("DEVICE:FIRST,SECOND:ADDRESS:BYTES", space-separated).
// The segment rows of the device inside such a range are that pool's: those held at the end, and
// an expandable segment's mapped ranges unmapped before (its address space stays the segment's).
// An allocation is the pool's when its first byte lies in the range and it was made once the
// earliest of those rows was (a snapshot's trace entries do not say the pool per allocation, and
// a block never leaves its segment). Segments freed during the trace are not in the end state:
// their allocations stay in the default pool. Pools are numbered 1.. in the order the meta first
// names them; 0 is the default pool. The one rule: `mhc allocator` and the simulator's caching
// model (prepare: Prepared::alloc_pool) both read it here.
//
// A snapshot whose trace events name their pool (pool_id, torch 2.15) says each row's pool exactly
// (meta snapshot.pools_from "trace events ...", snapshot.allocation_pools and
// snapshot.segment_row_pools: "FIRST,SECOND:ID-ID,ID ..." of allocation and segment row ids); then
// those rows are the pools', also the rows of segments freed before the end (exact = true).
// A pool none of whose segment rows is held at the end was given back during the trace (its graph
// or MemPool let go of): given_back_at[pool] is when its last segment row was freed (else kNoTime).
struct PrivatePools {
    std::map<const trace::Segment*, int64_t> segment;   // the device's segment rows in a private pool
    std::vector<int64_t> allocation;   // per allocation row of the trace: its pool (0 off the device)
    int64_t pools = 0, segments_held = 0, allocations = 0;   // pools; their rows held at the end; allocations in them
    bool exact = false;                                      // from the trace events' pool_id
    std::vector<int64_t> given_back_at;                      // per pool number (0: the default pool, never): see above
    // Per pool number: the snapshot's pool id (FIRST, SECOND), PyTorch's MempoolId_t: a CUDA graph's
    // (n, 0), a torch.cuda.MemPool's (0, n); ids[0] = (0, 0), the default pool. What the viewer names them by.
    std::vector<std::pair<int64_t, int64_t>> ids;
};
// `segments`: the trace's segment rows of `device`. Throws mhc::Error on a malformed meta entry.
PrivatePools private_pools(const trace::TraceData& t, const std::vector<const trace::Segment*>& segments, int32_t device);
PrivatePools private_pools(const trace::TraceData& t, int32_t device);   // from t.segments

// Throws mhc::Error (bad input) when the trace has no segments on `device` (-1: the device with
// the largest recorded reserved peak) or the settings do not parse.
AllocatorComparison compare_allocator(const trace::TraceData& t, const std::vector<trace::Segment>& segments,
                                      int32_t device, const std::string& conf_override);

std::string to_text(const AllocatorComparison& c);
std::string to_json(const AllocatorComparison& c);

}  // namespace mhc::sim
