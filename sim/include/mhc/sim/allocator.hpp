#pragma once
// Model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp and
// CUDAAllocatorConfig.cpp; docs/simulator.md "The caching allocator" states every rule with its
// source). Requests are rounded up to 512 bytes (or to a power-of-two division with
// roundup_power2_divisions); requests <= 1 MiB are served from the small pool, larger ones from
// the large pool, each pool per stream (a block freed on one stream is not reused by another).
// Best fit: the smallest free block of the stream's pool that fits. Without a fit a segment is
// created: 2 MiB (small), 20 MiB (large requests under 10 MiB), else the request rounded up to
// 2 MiB; with expandable_segments, one segment per stream and pool grows by mapping pages of
// 2 MiB (small pool) or 20 MiB (large pool) instead. A block is split when the rest is >= 512 B
// (small pool, or expandable segments) or > 1 MiB (large pool) and the request is under
// max_split_size; free blocks merge with free neighbours. When a segment cannot be added, free
// oversize blocks (max_split_size) and then every fully free segment (and the free pages of
// expandable segments) are given back and the segment retried.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/trace/limits.hpp"
#include "mhc/trace/torch_sizes.hpp"

namespace mhc::trace {
struct TraceData;
}

namespace mhc::sim {

// The settings of PYTORCH_CUDA_ALLOC_CONF the model follows.
struct AllocatorSettings {
    static constexpr int64_t kNoLimit = INT64_MAX;
    static constexpr int kIntervals = trace::torch::kRoundupIntervals;   // [1,2) MiB (and below), [2,4), ... [32 GiB, ...)
    bool expandable_segments = false;
    int64_t max_split_size = kNoLimit;              // bytes; blocks this size or larger are not split
    int64_t max_non_split_rounding = 20 << 20;      // an oversize block serves requests this much smaller
    std::array<int32_t, kIntervals> roundup_power2_divisions{};   // 0 or 1: plain 512-byte rounding
    double garbage_collection_threshold = 0;        // 0: off; else a fraction of the capacity

    int32_t divisions_for(int64_t size) const;
    bool is_default() const { return conf().empty(); }
    // The settings in PYTORCH_CUDA_ALLOC_CONF syntax, only what differs from the defaults
    // ("" when nothing does); parse_allocator_conf(conf()) gives the same settings back.
    std::string conf() const;
    bool operator==(const AllocatorSettings& o) const { return conf() == o.conf(); }
};

// Parses PYTORCH_CUDA_ALLOC_CONF text ("expandable_segments:True,max_split_size_mb:128") over
// `base`. Bad syntax or a value PyTorch refuses throws mhc::Error "<what>: <key>: <why>"; keys of
// PyTorch's that do not change block placement (pinned_*, release_lock_on_cudamalloc, ...) are
// accepted and ignored; backend:cudaMallocAsync is refused (not this allocator).
AllocatorSettings parse_allocator_conf(std::string_view text, const std::string& what,
                                       const AllocatorSettings& base = {});
// The settings a run of the caching model uses: those the trace recorded (meta
// "allocator.conf", written by the snapshot importer and mhc-torch), then `override_conf`
// (--allocator-conf) over them. Throws mhc::Error naming the trace's file and meta key
// ("t.db: meta allocator.conf: ...", as `mhc check` says it) or --allocator-conf.
AllocatorSettings allocator_settings_for(const trace::TraceData& t, const std::string& override_conf);

class CachingAllocator {
public:
    static constexpr int64_t kMinBlock = trace::torch::kMinBlock;            // 512 B
    static constexpr int64_t kSmallSize = trace::torch::kSmallSize;          // 1 MiB
    static constexpr int64_t kSmallBuffer = trace::torch::kSmallBuffer;      // 2 MiB
    static constexpr int64_t kLargeBuffer = trace::torch::kLargeBuffer;      // 20 MiB
    static constexpr int64_t kMinLargeAlloc = trace::torch::kMinLargeAlloc;  // 10 MiB
    static constexpr int64_t kRoundLarge = trace::torch::kRoundLarge;        // 2 MiB

    explicit CachingAllocator(int64_t capacity, AllocatorSettings settings = {});

    // Default rounding (no roundup_power2_divisions) and segment size of a rounded request.
    static int64_t round_size(int64_t bytes);
    static int64_t segment_size(int64_t rounded);
    // Rounding under this allocator's settings.
    int64_t rounded(int64_t bytes) const;
    // The least new device memory a rounded request makes this allocator take: the segment it
    // would cudaMalloc, or with expandable segments whole pages of its pool.
    int64_t growth_for(int64_t rounded) const;

    // Returns a block handle >= 0, or -1 when no block fits and no segment can be added
    // (after giving back the cached memory PyTorch gives back before it reports an OOM).
    // `pool`: 0 the default pool; any other number a private pool (a CUDA graph's, a
    // torch.cuda.MemPool's; the caller numbers them). A private pool's blocks come only from its
    // own segments (per stream, small and large, cudaMalloc'd or expandable as the default pool),
    // which empty_cache, an out-of-memory retry and garbage collection never give back: they
    // release the default pool's memory only (release_cached_blocks frees a private pool only once
    // the program has let go of it, which a trace does not say); max_split_size's release does
    // give back the request's own pool's oversize blocks, as PyTorch's does.
    int32_t allocate(int64_t bytes, int64_t stream = 0, int64_t pool = 0);
    void free(int32_t block);
    // torch.cuda.empty_cache(): every fully free segment and free expandable page of the default
    // pool is given back.
    void empty_cache() { release_cached(0); }
    // A private pool let go of (a CUDA graph or torch.cuda.MemPool destroyed: releasePool, then
    // release_cached_blocks frees the pool's free blocks, graph_pools_freeable): its fully free
    // segments and free expandable pages are given back, as empty_cache gives the default pool's.
    // Blocks of it still in use stay. `pool` > 0.
    void release_pool(int64_t pool) { release_cached(pool); }
    // A private pool the recording gave back during the trace (PrivatePools::given_back_at): it is
    // given back (release_pool) at the first allocation or free recorded after `recorded_time`,
    // which the caller announces with pools_due(its recorded time); true when that gave one back.
    void give_back_at(int64_t pool, int64_t recorded_time) { give_back_.emplace(recorded_time, pool); }
    bool pools_due(int64_t recorded_time);
    // Reserved bytes of private pools (included in reserved()).
    int64_t reserved_private() const;

    // A warm start: a free cudaMalloc'd segment the allocator already holds (a recording's
    // segments from before it began); counts in reserved(), not in device_allocs(). Returns
    // its segment number. `small`: the small pool's (PyTorch makes small-pool segments of 2 MiB).
    int32_t add_cached_segment(int64_t bytes, int64_t stream, bool small, int64_t pool = 0);
    // A warm start from a figure alone (a Kineto trace's Total Reserved at its first memory event,
    // with no segments): when fewer than `bytes` are reserved, the rest, up to the capacity, is
    // held: reserved, in no segment of the model's, free. New segments (cudaMalloc, or the pages
    // expandable segments map) take held bytes first and only the rest from the capacity; the held
    // bytes are given back first when memory is released (release_cached: a failed cudaMalloc,
    // empty_cache; garbage collection). So at unlimited capacity the reserved bytes are at every
    // moment the larger of `bytes` and the model's own segments. Returns the bytes added.
    int64_t top_up(int64_t bytes);
    int64_t held() const { return held_; }
    // A block of `bytes` (rounded) at `offset` of a segment made by add_cached_segment, where a
    // recording had it; -1 when that range is not free.
    int32_t allocate_at(int32_t segment, int64_t offset, int64_t bytes);

    int64_t reserved() const { return reserved_; }       // segment bytes held from the GPU
    int64_t allocated() const { return allocated_; }     // bytes in blocks in use (rounded)
    int64_t capacity() const { return capacity_; }
    int64_t largest_free_block() const;
    int64_t block_size(int32_t b) const { return blocks_[static_cast<std::size_t>(b)].size; }
    // Placement (replay/ lays segments out in a real arena): a block's segment (numbered in
    // creation order) and its offset inside that segment.
    int32_t block_segment(int32_t b) const { return blocks_[static_cast<std::size_t>(b)].segment; }
    int64_t block_offset(int32_t b) const { return blocks_[static_cast<std::size_t>(b)].offset; }
    std::size_t segments() const { return live_segments_; }
    const AllocatorSettings& settings() const { return set_; }

    // cudaMalloc + cuMemMap calls, cudaFree + cuMemUnmap calls so far.
    int64_t device_allocs() const { return device_allocs_; }
    int64_t device_frees() const { return device_frees_; }
    // Their bytes: a segment's, or the pages a map or unmap covers.
    int64_t device_alloc_bytes() const { return device_alloc_bytes_; }
    int64_t device_free_bytes() const { return device_free_bytes_; }
    // Requests that found no block and no room for a segment: the full release PyTorch makes then
    // (release_cached_blocks, which synchronises the device first), and those served only after a
    // release of either kind (release_available_cached_blocks or release_cached_blocks) gave
    // cached memory back (garbage collection's frees aside).
    int64_t full_releases() const { return full_releases_; }
    int64_t retried_requests() const { return retried_requests_; }
    // Each cudaMalloc/cudaFree (expandable false) or map/unmap of pages (true), when a log is set.
    struct SegmentEvent {
        bool alloc;
        bool expandable;
        int64_t bytes, stream, offset;
        int32_t segment;
        int64_t pool = 0;   // 0: the default pool; else the caller's private pool number
    };
    void set_log(std::vector<SegmentEvent>* log) { log_ = log; }

private:
    struct Block {
        int64_t size = 0, offset = 0, stream = 0, gc_base = 0;
        int32_t segment = -1, prev = -1, next = -1;
        bool small = false, in_use = false, alive = false, mapped = true;
    };
    struct Segment {
        int64_t stream = 0, page = 0;   // stream: the lane (see lane())
        bool small = false, expandable = false, alive = false;
        int64_t pool = 0;               // 0: default pool; else a private pool's number
    };
    struct Key {   // best fit: by stream, size, then segment and offset (deterministic)
        int64_t stream, size; int32_t segment; int64_t offset; int32_t block;
        bool operator<(const Key& o) const {
            if (stream != o.stream) return stream < o.stream;
            if (size != o.size) return size < o.size;
            if (segment != o.segment) return segment < o.segment;
            return offset < o.offset;
        }
    };
    using KeySet = std::set<Key>;
    // Into / out of a set, reusing the nodes of erased keys (no heap call per split or merge).
    void put(KeySet& set, const Key& entry);
    void take(KeySet& set, const Key& entry);
    int32_t new_block();
    // A new segment of `size` bytes on `stream`'s pool p, as one alive block covering it.
    int32_t new_segment_block(int p, int64_t stream, int64_t size, int64_t page, bool expandable);
    void drop_block(int32_t b);
    Key key(int32_t b) const;
    void to_pool(int32_t b);
    KeySet& pool_of(int32_t block) { return free_[blocks_[static_cast<std::size_t>(block)].small ? 1 : 0]; }
    KeySet& unmapped_of(int32_t block) { return unmapped_[blocks_[static_cast<std::size_t>(block)].small ? 1 : 0]; }
    bool free_here(int32_t b) const;   // exists, not in use
    bool whole(int32_t block) const;   // a whole segment, not expandable: cudaFree can give it back
    void pool_erase(int32_t block);    // out of its free pool (and of whole_)
    int32_t get_free_block(int p, int64_t stream, int64_t size);
    bool should_split(int32_t b, int64_t size) const;
    int32_t split_off(int32_t b, int64_t size);
    void split(int32_t b, int64_t size);
    bool draw(int64_t bytes);   // new device memory for a segment: held bytes first, the rest within the capacity
    int32_t alloc_block(int p, int64_t stream, int64_t size, int64_t alloc_size);
    int32_t try_allocate_expandable(int p, int64_t stream, int64_t size);
    int32_t find_expandable_block(int p, int64_t stream, int64_t size);
    bool map_block(int32_t b, int64_t size);
    void unmap_block(int32_t b);
    int32_t merge(int32_t dst, int32_t src);   // src into dst when both free and alike; returns dst
    bool release_available(int p, int64_t stream, int64_t size);
    void release_block(int32_t b);
    void release_cached(int64_t pool);   // the default pool's (0, with the held bytes) or one private pool's
    void garbage_collect();
    void log(bool alloc, int32_t seg, int64_t offset, int64_t bytes);
    // A lane is what best fit keys free blocks by: the stream itself in the default pool; a
    // number below kPrivateLane per (stream, private pool), so that no pool sees another's blocks.
    static constexpr int64_t kPrivateLane = INT64_MIN / 2;
    static_assert(kPrivateLane / 2 < -trace::limits::kMaxAbsStream, "a trace's stream is never a private lane");
    int64_t lane(int64_t stream, int64_t pool);
    bool private_lane(int64_t lane) const { return lane < kPrivateLane / 2; }
    int64_t pool_of_lane(int64_t lane) const;
    int64_t stream_of_lane(int64_t lane) const;
    std::map<std::pair<int64_t, int64_t>, int64_t> lanes_;   // (stream, pool) -> lane
    std::vector<std::pair<int64_t, int64_t>> lane_keys_;     // lane - kPrivateLane -> (stream, pool)

    int64_t capacity_;
    AllocatorSettings set_;
    int64_t reserved_ = 0, allocated_ = 0;
    int64_t held_ = 0;   // reserved bytes in no segment (top_up)
    std::size_t live_segments_ = 0;
    std::vector<Block> blocks_;
    std::vector<int32_t> spare_;
    std::vector<Segment> segs_;
    KeySet free_[2];       // [0] large pool, [1] small pool: free mapped blocks
    KeySet whole_[2];      // the free blocks of free_ that are whole(), in the same order
    KeySet unmapped_[2];   // unmapped ranges of expandable segments (size field: 0; ordered by address)
    int64_t gc_calls_[2] = {0, 0};
    int64_t device_allocs_ = 0, device_frees_ = 0, device_alloc_bytes_ = 0, device_free_bytes_ = 0;
    int64_t full_releases_ = 0, retried_requests_ = 0;
    bool many_streams_ = false;
    int64_t first_stream_ = 0;
    bool any_alloc_ = false;
    std::vector<SegmentEvent>* log_ = nullptr;
    std::multimap<int64_t, int64_t> give_back_;   // recorded time -> pool to give back after it
    std::vector<KeySet::node_type> nodes_;   // nodes of erased keys, for put()
};

}  // namespace mhc::sim
