#pragma once
// Model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp): requests
// rounded up to 512 bytes; requests <= 1 MiB served from the small pool in 2 MiB segments;
// larger ones from the large pool: 1-10 MiB requests get 20 MiB segments, larger requests
// a segment of the request rounded up to 2 MiB; best fit (smallest free block that fits);
// a block is split when the rest is >= 512 B (small) or > 1 MiB (large); freed blocks merge
// with free neighbours; on failure every fully free segment is released and the segment
// allocation retried. Streams are not modelled (one stream's pools).
#include <cstdint>
#include <cstddef>
#include <set>
#include <vector>

namespace mhc::sim {

class CachingAllocator {
public:
    static constexpr int64_t kMinBlock = 512;
    static constexpr int64_t kSmallSize = 1 << 20;        // 1 MiB
    static constexpr int64_t kSmallBuffer = 2 << 20;      // 2 MiB
    static constexpr int64_t kLargeBuffer = 20 << 20;     // 20 MiB
    static constexpr int64_t kMinLargeAlloc = 10 << 20;   // 10 MiB
    static constexpr int64_t kRoundLarge = 2 << 20;       // 2 MiB

    explicit CachingAllocator(int64_t capacity) : capacity_(capacity) {}

    static int64_t round_size(int64_t bytes);
    static int64_t segment_size(int64_t rounded);

    // Returns a block handle >= 0, or -1 when no block fits and no segment can be added
    // (after releasing every fully free segment).
    int32_t allocate(int64_t bytes);
    void free(int32_t block);

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

private:
    struct Block {
        int64_t size = 0, offset = 0;
        int32_t segment = -1, prev = -1, next = -1;
        bool small = false, in_use = false, alive = false;
    };
    struct Key {   // best fit: by size, then segment, then offset (deterministic)
        int64_t size; int32_t segment; int64_t offset; int32_t block;
        bool operator<(const Key& o) const {
            if (size != o.size) return size < o.size;
            if (segment != o.segment) return segment < o.segment;
            return offset < o.offset;
        }
    };
    int32_t new_block();
    Key key(int32_t b) const;
    int32_t try_pool(bool small, int64_t size);
    bool add_segment(bool small, int64_t size);
    void release_free_segments();

    int64_t capacity_;
    int64_t reserved_ = 0, allocated_ = 0;
    std::size_t live_segments_ = 0;
    std::vector<Block> blocks_;
    std::vector<int32_t> spare_;
    std::set<Key> free_small_, free_large_;
    int32_t segments_made_ = 0;
};

}  // namespace mhc::sim
