#pragma once
// The order of allocations and frees at one instant (docs/trace-format.md, "Events at one
// instant"), written once for every reader that replays them: info's peak, the simulator's
// event cursor, the viewer's memory curve, `mhc allocator`.
//
// At one time t: first the frees of allocations made before t (by row), then the allocations
// made at t (by row, i.e. id order), each one freed at t (t_free == t_alloc: alive only at that
// instant) freed right after it is made. So a block reused at once is not counted twice, and a
// briefly live block counts in the peak together with everything alive when it was made.
#include <cstdint>
#include <tuple>
#include <vector>

#include "mhc/trace/columns.hpp"

namespace mhc::trace {

struct MemoryEvent {
    int64_t time = 0;
    int32_t rank = 1;   // 0: free of an allocation made earlier; 1: allocation, or free of one made at `time`
    int64_t row = 0;    // allocation row (dense index, id order)
    bool free = false;

    static MemoryEvent allocation(int64_t row, int64_t t_alloc) { return {t_alloc, 1, row, false}; }
    static MemoryEvent release(int64_t row, int64_t t_alloc, int64_t t_free) {
        return {t_free, t_alloc < t_free ? 0 : 1, row, true};
    }
    bool operator<(const MemoryEvent& o) const {
        return std::tie(time, rank, row, free) < std::tie(o.time, o.rank, o.row, o.free);
    }
};

// Every allocation and free of `device` (all devices when `all_devices`), in event order.
std::vector<MemoryEvent> memory_events(const AllocationColumns& a, int32_t device, bool all_devices = false);
// The same for rows given as parallel vectors (the viewer keeps its own columns).
std::vector<MemoryEvent> memory_events(const std::vector<int64_t>& t_alloc, const std::vector<int64_t>& t_free);

}  // namespace mhc::trace
