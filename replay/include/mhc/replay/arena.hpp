#pragma once
// The device arena as GPU memory behaves: a pool of exactly the run's capacity in 2 MiB pages
// (pages.hpp), a segment (caching model) or allocation (ideal model) taking whole pages from
// anywhere in the pool and seen as one contiguous virtual range. Memory in use is pages in use
// x 2 MiB, and an allocation fails only when pages run out, so the pool never fragments
// between segments (it does inside them, as the allocator model says).
//
// caching: the simulator's own CachingAllocator, with the run's settings (the trace's recorded
// PYTORCH_CUDA_ALLOC_CONF and --allocator-conf) and each allocation's stream, decides blocks and
// segments; the arena follows the model's own log of cudaMalloc/cudaFree (a segment gets pages
// and a virtual range, a released one gives them back) and of expandable segments' page maps
// (a segment reserves a virtual range once and maps pages at the offsets the model maps).
// Segments and expandable pages are multiples of 2 MiB, so pages in use = reserved bytes.
// ideal: the simulator counts bytes only. Allocations above 1 MiB take whole pages; smaller
// ones share pages (best fit inside pages, 512-byte granules), a page returning to the pool
// when it empties. The rounding is what the measured peak adds to the predicted one.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/replay/pages.hpp"
#include "mhc/sim/allocator.hpp"

namespace mhc::replay {

// Best fit over [0, size): the smallest free range that fits, lowest offset among equals;
// freed ranges merge with free neighbours. Sizes are rounded up to `align`.
class FreeList {
public:
    FreeList(int64_t size, int64_t align);
    // Offset, or -1. from_top: the highest free range that fits, placed at its top.
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

class Arena {
public:
    static constexpr int64_t kPage = PageMapper::kPage;
    // Pool of capacity / 2 MiB pages. mapper: maps the pages for real (nullptr: bookkeeping
    // only); its pool must hold those pages. Offsets are in the mapper's virtual range (else
    // one of default_va(capacity) bytes).
    Arena(const std::string& model, int64_t capacity, PageMapper* mapper = nullptr,
          sim::AllocatorSettings settings = {});
    ~Arena();
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    static int64_t pool_pages(int64_t capacity) { return capacity / kPage; }
    // A virtual range generous enough that placing ranges in it never fails in practice.
    static int64_t default_va(int64_t capacity) { return (pool_pages(capacity) * 8 + 64) * kPage; }

    // Offset in the virtual range of the placed allocation (caller's handle `key`), or -1
    // when it does not fit.
    // `stream`: the allocation's recorded stream (the caching model keeps a pool per stream);
    // `pool`: its private memory pool (0: the default pool), as the caching model takes it.
    int64_t allocate(int32_t key, int64_t bytes, int64_t stream = 0, int64_t pool = 0);
    void free(int32_t key);
    // Private pools the recording gave back (per pool number: its recorded time, trace::kNoTime
    // for none), given back at the first allocation or free recorded after it, as the simulator
    // does (sim::CachingAllocator::give_back_at); pools_due: an allocation or free recorded then.
    void give_pools_back(const std::vector<int64_t>& given_back_at);
    void pools_due(int64_t recorded);
    int64_t in_use() const { return (pages_ - static_cast<int64_t>(free_pages_.size())) * kPage; }
    int64_t peak() const { return peak_; }
    int64_t capacity() const { return capacity_; }
    int64_t pool_bytes() const { return pages_ * kPage; }
    // Highest pool page ever used + 1, x 2 MiB (never above the pool).
    int64_t high_water() const { return high_page_ * kPage; }
    int64_t largest_free() const;
    // The bytes the model takes for a request (caching: its rounding; ideal: the request).
    int64_t rounded(int64_t bytes) const { return caching_ ? ca_.rounded(bytes) : bytes; }
    // Whether the last failed allocate() had the bytes by the model's count but not the
    // pages (page rounding, or no virtual range).
    bool last_failure_fragmentation() const { return frag_; }

private:
    struct Range {   // a mapped virtual range and its pool pages
        int64_t va = -1;
        std::vector<int32_t> pages;
    };
    int32_t take_page(int64_t va_off);         // a free pool page for the virtual page at va_off
    bool map_range(int64_t bytes, Range& r);   // false: not enough pages or virtual range
    void unmap_range(Range& r);
    // Applies the model's segment log since the last call (cudaMalloc/cudaFree, page maps);
    // false when the pages or the virtual range ran out (a broken invariant).
    bool follow_log();

    bool caching_;
    int64_t capacity_, pages_;
    PageMapper* mapper_;
    FreeList va_;
    std::set<int32_t> free_pages_;
    int64_t peak_ = 0, high_page_ = 0;
    bool frag_ = false;
    // caching
    sim::CachingAllocator ca_;
    std::unordered_map<int32_t, int32_t> block_;   // key -> block
    std::vector<sim::CachingAllocator::SegmentEvent> log_;   // the model's, drained by follow_log
    std::vector<Range> seg_;                       // segment -> its range (va -1: gone)
    // Expandable segments: the reserved virtual range (seg_[s].va, no pages) and the pages
    // mapped at each 2 MiB offset of it.
    std::vector<int64_t> seg_reserved_;            // bytes of virtual range reserved (0: none)
    std::vector<std::map<int64_t, int32_t>> seg_page_at_;   // segment -> offset -> pool page
    // ideal
    static constexpr int64_t kIdealAlign = 512, kSmallIdeal = 1 << 20;
    static int64_t ideal_round(int64_t b) { return std::max<int64_t>((b + kIdealAlign - 1) / kIdealAlign * kIdealAlign, kIdealAlign); }
    struct Placed { int64_t va; int32_t small_page; };   // small_page -1: its own range
    std::unordered_map<int32_t, Placed> placed_;
    std::unordered_map<int32_t, Range> own_;       // allocations above 1 MiB: their pages
    std::unordered_map<int32_t, int64_t> ideal_live_;   // key -> bytes
    struct SmallPage { Range r; FreeList list{kPage, 512}; };
    std::vector<SmallPage> small_;                 // shared pages (r.va -1: free slot)
    int64_t ideal_bytes_ = 0;                      // live bytes by the model's count
};

}  // namespace mhc::replay
