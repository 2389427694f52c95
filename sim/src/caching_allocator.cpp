#include "mhc/sim/allocator.hpp"

#include <algorithm>

namespace mhc::sim {

int64_t CachingAllocator::round_size(int64_t bytes) {
    if (bytes < kMinBlock) return kMinBlock;
    return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

int64_t CachingAllocator::segment_size(int64_t rounded) {
    if (rounded <= kSmallSize) return kSmallBuffer;
    if (rounded < kMinLargeAlloc) return kLargeBuffer;
    return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

int32_t CachingAllocator::new_block() {
    if (!spare_.empty()) {
        int32_t b = spare_.back();
        spare_.pop_back();
        blocks_[b] = Block{};
        return b;
    }
    blocks_.push_back(Block{});
    return static_cast<int32_t>(blocks_.size() - 1);
}

CachingAllocator::Key CachingAllocator::key(int32_t b) const {
    const Block& x = blocks_[b];
    return {x.size, x.segment, x.offset, b};
}

int32_t CachingAllocator::try_pool(bool small, int64_t size) {
    auto& pool = small ? free_small_ : free_large_;
    auto it = pool.lower_bound(Key{size, INT32_MIN, INT64_MIN, -1});
    if (it == pool.end()) return -1;
    int32_t b = it->block;
    pool.erase(it);
    Block& blk = blocks_[b];
    int64_t rest = blk.size - size;
    bool split = small ? rest >= kMinBlock : rest > kSmallSize;
    if (split) {
        int32_t r = new_block();
        Block& blk2 = blocks_[b];   // blocks_ may have moved
        Block& rb = blocks_[r];
        rb.size = rest;
        rb.offset = blk2.offset + size;
        rb.segment = blk2.segment;
        rb.small = small;
        rb.alive = true;
        rb.prev = b;
        rb.next = blk2.next;
        if (blk2.next >= 0) blocks_[blk2.next].prev = r;
        blk2.next = r;
        blk2.size = size;
        pool.insert(key(r));
    }
    blocks_[b].in_use = true;
    allocated_ += blocks_[b].size;
    return b;
}

bool CachingAllocator::add_segment(bool small, int64_t size) {
    int64_t seg = small ? kSmallBuffer : segment_size(size);
    if (reserved_ + seg > capacity_) return false;
    int32_t b = new_block();
    Block& blk = blocks_[b];
    blk.size = seg;
    blk.offset = 0;
    blk.segment = segments_made_++;
    blk.small = small;
    blk.alive = true;
    reserved_ += seg;
    ++live_segments_;
    (small ? free_small_ : free_large_).insert(key(b));
    return true;
}

void CachingAllocator::release_free_segments() {
    for (auto* pool : {&free_small_, &free_large_}) {
        for (auto it = pool->begin(); it != pool->end();) {
            const Block& b = blocks_[it->block];
            if (b.prev < 0 && b.next < 0) {   // the block is its whole segment
                reserved_ -= b.size;
                --live_segments_;
                blocks_[it->block].alive = false;
                spare_.push_back(it->block);
                it = pool->erase(it);
            } else {
                ++it;
            }
        }
    }
}

int32_t CachingAllocator::allocate(int64_t bytes) {
    int64_t size = round_size(bytes);
    bool small = size <= kSmallSize;
    int32_t b = try_pool(small, size);
    if (b >= 0) return b;
    if (!add_segment(small, size)) {
        release_free_segments();   // PyTorch: free cached blocks and retry cudaMalloc
        if (!add_segment(small, size)) return -1;
    }
    return try_pool(small, size);
}

void CachingAllocator::free(int32_t b) {
    Block& blk = blocks_[b];
    allocated_ -= blk.size;
    blk.in_use = false;
    auto& pool = blk.small ? free_small_ : free_large_;
    // Merge with free neighbours in the same segment.
    for (int32_t nb : {blocks_[b].prev, blocks_[b].next}) {
        if (nb < 0 || blocks_[nb].in_use) continue;
        pool.erase(key(nb));
        Block& x = blocks_[b];
        Block& y = blocks_[nb];
        if (nb == x.prev) {
            x.offset = y.offset;
            x.prev = y.prev;
            if (y.prev >= 0) blocks_[y.prev].next = b;
        } else {
            x.next = y.next;
            if (y.next >= 0) blocks_[y.next].prev = b;
        }
        x.size += y.size;
        y.alive = false;
        spare_.push_back(nb);
    }
    pool.insert(key(b));
}

int64_t CachingAllocator::largest_free_block() const {
    int64_t m = 0;
    if (!free_small_.empty()) m = std::max(m, free_small_.rbegin()->size);
    if (!free_large_.empty()) m = std::max(m, free_large_.rbegin()->size);
    return m;
}

}  // namespace mhc::sim
