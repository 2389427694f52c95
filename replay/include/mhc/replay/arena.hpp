#pragma once
// Placement of allocations in one arena of a fixed size (the run's capacity). The simulator's
// `ideal` model only counts bytes; a real arena must also place them, so replay uses a best-fit
// free list and reports what placement costs (fragmentation). The `caching` model is the
// simulator's own CachingAllocator, its segments laid out in the arena by the same free list
// (standing in for cudaMalloc).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/sim/allocator.hpp"

namespace mhc::replay {

// Best fit over [0, size): the smallest free range that fits, lowest offset among equals;
// freed ranges merge with free neighbours. Sizes are rounded up to `align`.
class FreeList {
public:
    FreeList(int64_t size, int64_t align);
    // Offset, or -1. from_top: the highest free range that fits, placed at its top (long-lived
    // allocations gather at the top, short-lived ones best-fit from the bottom).
    int64_t allocate(int64_t bytes, bool from_top = false);
    void free(int64_t offset);
    int64_t size() const { return size_; }
    int64_t used() const { return used_; }                  // bytes in placed ranges
    int64_t high_water() const { return high_water_; }      // highest end ever placed
    int64_t largest_free() const;
    int64_t round(int64_t bytes) const { return (bytes + align_ - 1) / align_ * align_; }

private:
    int64_t size_, align_, used_ = 0, high_water_ = 0;
    std::map<int64_t, int64_t> free_by_off_;           // offset -> size
    std::set<std::pair<int64_t, int64_t>> free_by_size_;  // (size, offset)
    std::unordered_map<int64_t, int64_t> placed_;      // offset -> size
};

// The device arena as the run's allocator model manages it.
class Arena {
public:
    Arena(const std::string& model, int64_t capacity, int64_t align = 16);
    // Offset of the placed allocation (caller's handle `key`), or -1 when it does not fit.
    // long_lived: alive to the end of the trace (parameters, optimizer states).
    int64_t allocate(int32_t key, int64_t bytes, bool long_lived = false);
    void free(int32_t key);
    int64_t in_use() const;       // ideal: placed bytes; caching: reserved segment bytes
    int64_t peak() const { return peak_; }
    int64_t high_water() const { return list_.high_water(); }
    int64_t largest_free() const;
    int64_t capacity() const { return list_.size(); }
    // Whether the last failed allocate() had the bytes but no place (fragmentation).
    bool last_failure_fragmentation() const { return frag_; }

private:
    bool caching_;
    FreeList list_;
    sim::CachingAllocator ca_;
    std::unordered_map<int32_t, int64_t> off_;      // ideal: key -> offset
    std::unordered_map<int32_t, int32_t> block_;    // caching: key -> block
    std::vector<int64_t> seg_off_;                  // caching: segment -> arena offset (-1 gone)
    std::vector<int32_t> seg_live_;                 // caching: live blocks per segment
    int64_t peak_ = 0;
    bool frag_ = false;
    void sync_segments();
};

}  // namespace mhc::replay
