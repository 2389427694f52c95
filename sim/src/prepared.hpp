#pragma once
// Per-trace tables the engine reads: built once by prepare(), shared read-only by every run
// (sweeps run many configurations on threads over one Prepared).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "mhc/sim/allocator.hpp"
#include "mhc/sim/event_order.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::sim {

inline constexpr int32_t kNever = INT32_MAX;

// Range maximum over a fixed array (iterative segment tree: 2n values, O(log n) query).
struct MaxTree {
    size_t n = 0;
    std::vector<int64_t> t;
    void build(const std::vector<int64_t>& v);
    int64_t max(size_t lo, size_t hi) const;   // over [lo, hi] inclusive; INT64_MIN if empty
};

// Sorted, merged [begin, end) intervals of recorded time; lookups by binary search.
struct Intervals {
    std::vector<int64_t> begin, end;
    void build(std::vector<std::pair<int64_t, int64_t>> v);
    bool contains(int64_t t) const;
    // The same answer, looking first at the interval where the previous lookup ended
    // (`hint`, kept by the caller): the engine's lookups mostly move forward in time.
    bool contains(int64_t time, size_t& hint) const {
        const size_t count = begin.size();
        // hint = how many intervals begin at or before `time`
        if (!((hint == 0 || begin[hint - 1] <= time) && (hint == count || time < begin[hint]))) {
            if (hint < count && begin[hint] <= time && (hint + 1 == count || time < begin[hint + 1])) ++hint;
            else hint = static_cast<size_t>(std::upper_bound(begin.begin(), begin.end(), time) - begin.begin());
        }
        return hint > 0 && time < end[hint - 1];
    }
};

// The event streams (korder, kstart, kend, kend_order, alloc_order, free_order) come from
// event_streams(), the one definition of the event order that replay shares.
struct Prepared : EventStreams {
    const trace::TraceData* t = nullptr;
    int32_t device = 0;
    int32_t requested_device = kAutoDevice;   // what prepare_cached was asked for: the cache's key
    bool from_cache = false;                  // read from the trace file's cache (keep_prepared: nothing to write)
    bool assumed_accesses = false;
    int64_t t_begin = 0, t_end = 0;     // recorded span of this device's rows
    int64_t rows = 0;

    // Accesses by seq (CSR), restricted to allocations of the device.
    std::vector<int64_t> acc_begin;     // size korder+1
    std::vector<int32_t> acc_alloc;
    std::vector<uint8_t> acc_write;     // 1 if the mode writes
    std::vector<uint8_t> acc_read;      // 1 if the mode reads (a recomputation needs it back)
    std::vector<int32_t> next_use;      // per access: seq of the next access to it, kNever
    std::vector<int32_t> first_use;     // per allocation: seq of its first access, kNever
    // Per seq: the earliest t_free among the allocations the kernel accesses, which one that
    // is, and the earliest among the others (recompute feasibility: can the kernel rerun
    // at time T for an output a? yes iff the earliest free other than a's is after T).
    std::vector<int64_t> operand_free1, operand_free2;
    std::vector<int32_t> operand_free1_alloc;

    std::vector<uint8_t> on_device;     // per allocation
    // Per allocation: the caching model's private pool it is made in (0: the default pool), from
    // meta snapshot.segment_pools by private_pools() (allocator_compare.hpp), as mhc allocator
    // reads it; empty when the device has no allocation in a private pool (every one in pool 0).
    std::vector<int32_t> alloc_pool;
    int64_t pool_of(int32_t allocation) const {
        return alloc_pool.empty() ? 0 : alloc_pool[static_cast<size_t>(allocation)];
    }
    // Per pool number: when the recording gave the pool back (PrivatePools::given_back_at; the
    // caching model gives it back at the first allocation or free recorded after it:
    // CachingAllocator::give_back_at), trace::kNoTime for any other. Empty without private pools.
    std::vector<int64_t> pool_given_back_at;
    void give_pools_back(CachingAllocator& ca) const {
        for (size_t q = 1; q < pool_given_back_at.size(); ++q)
            if (pool_given_back_at[q] != trace::kNoTime)
                ca.give_back_at(static_cast<int64_t>(q), pool_given_back_at[q]);
    }
    // The trace's host allocations (device -1) when a GPU is simulated: (recorded time, +bytes
    // at an allocation, -bytes at a free), by time, frees before allocations at one instant.
    std::vector<std::pair<int64_t, int64_t>> host_events;

    // Steps (dense 0..S-1 by first appearance), -1 where unknown.
    std::vector<int32_t> step_of;       // per seq
    std::vector<int32_t> step_begin;    // first seq of each step; size S+1 (last: korder size)
    std::vector<int32_t> alloc_step;    // per allocation: step it was allocated in, -1 before
    std::vector<int32_t> alloc_ordinal; // per allocation: its rank among its step's allocations
    std::vector<int64_t> step_allocs_begin;   // CSR over steps
    std::vector<int32_t> step_allocs;          // allocations of each step in allocation order
    std::vector<int64_t> live_at;       // per seq: live bytes (ideal) when the kernel starts
    MaxTree live_max;                   // range maxima of live_at (early swap-out demand)

    Intervals nccl, h2d_busy, d2h_busy; // recorded contention on the link
    int64_t peak_ideal = 0, peak_caching = 0;
    // A Kineto trace's Total Reserved at its first memory event (meta kineto.reserved_first.deviceN),
    // which the caching model starts from (warm_start); -1: the trace does not record it.
    int64_t reserved_start = -1;
    // Where the trace records a reserved peak (meta kineto.reserved_peak.deviceN), the caching
    // peaks that modelled_reserved_warning compares with it: from an empty cache (no warm start)
    // and with expandable_segments:True over the recorded settings; -1 where not computed.
    int64_t peak_caching_cold = -1, peak_expandable = -1;
};

// The caching model's warm start: before the first allocation recorded after the trace's start
// (the rows at t = 0 are the bytes live before recording), the reserved bytes are topped up to
// what the profiler recorded at its first event (CachingAllocator::top_up). Returns true once it
// has acted (or has nothing to do).
inline bool warm_start(const Prepared& prepared, CachingAllocator& ca, int64_t t_alloc) {
    if (prepared.reserved_start <= 0) return true;
    if (t_alloc <= 0) return false;
    ca.top_up(prepared.reserved_start);
    return true;
}

}  // namespace mhc::sim
