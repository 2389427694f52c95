#pragma once
// What a run that ran out of memory reports: the bytes short and, in words, where and why
// (docs/simulator.md rule 7).
#include <cstdint>

#include "mhc/sim/allocator.hpp"
#include "mhc/sim/result.hpp"
#include "prepared.hpp"

namespace mhc::sim {

// The device's state when the request failed.
struct OomFigures {
    int64_t need;       // the request's bytes
    int64_t live;       // bytes of the allocations on the GPU (the caching model: their blocks)
    int64_t pinned;     // of those, the bytes running kernels hold
    int64_t used;       // device bytes held (the ideal model)
    int64_t capacity;
};

// Fills oom's bytes and text for allocation `alloc`, placed by itself (seq < 0) or needed by
// kernel seq;
// `caching`: the caching allocator's state, null under the ideal model.
void explain_oom(Oom& oom, const Prepared& prep, int32_t alloc, int32_t seq, const OomFigures& figures,
                 const CachingAllocator* caching);

}  // namespace mhc::sim
