#include "mhc/replay/arena.hpp"

#include <algorithm>
#include <cassert>

namespace mhc::replay {

FreeList::FreeList(int64_t size, int64_t align) : size_(size / align * align), align_(align) {
    if (size_ > 0) {
        free_by_off_[0] = size_;
        free_by_size_.insert({size_, 0});
    }
}

int64_t FreeList::allocate(int64_t bytes, bool from_top) {
    int64_t need = std::max<int64_t>(round(bytes), align_);
    if (from_top) {
        for (auto r = free_by_off_.rbegin(); r != free_by_off_.rend(); ++r) {
            if (r->second < need) continue;
            int64_t off = r->first, sz = r->second;
            free_by_size_.erase({sz, off});
            free_by_off_.erase(off);
            if (sz > need) {
                free_by_off_[off] = sz - need;
                free_by_size_.insert({sz - need, off});
            }
            off += sz - need;
            placed_[off] = need;
            used_ += need;
            high_water_ = std::max(high_water_, off + need);
            return off;
        }
        return -1;
    }
    auto it = free_by_size_.lower_bound({need, INT64_MIN});
    if (it == free_by_size_.end()) return -1;
    auto [sz, off] = *it;
    free_by_size_.erase(it);
    free_by_off_.erase(off);
    if (sz > need) {
        free_by_off_[off + need] = sz - need;
        free_by_size_.insert({sz - need, off + need});
    }
    placed_[off] = need;
    used_ += need;
    high_water_ = std::max(high_water_, off + need);
    return off;
}

void FreeList::free(int64_t off) {
    auto p = placed_.find(off);
    assert(p != placed_.end());
    int64_t sz = p->second;
    placed_.erase(p);
    used_ -= sz;
    auto next = free_by_off_.lower_bound(off);
    if (next != free_by_off_.end() && next->first == off + sz) {
        sz += next->second;
        free_by_size_.erase({next->second, next->first});
        next = free_by_off_.erase(next);
    }
    if (next != free_by_off_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            free_by_size_.erase({prev->second, prev->first});
            off = prev->first;
            sz += prev->second;
            free_by_off_.erase(prev);
        }
    }
    free_by_off_[off] = sz;
    free_by_size_.insert({sz, off});
}

int64_t FreeList::largest_free() const { return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first; }

Arena::Arena(const std::string& model, int64_t capacity, int64_t align)
    : caching_(model == "caching"), list_(capacity, align), ca_(capacity) {}

int64_t Arena::in_use() const { return caching_ ? ca_.reserved() : list_.used(); }

int64_t Arena::largest_free() const { return caching_ ? ca_.largest_free_block() : list_.largest_free(); }

// Segments the caching model released (every fully free one, when a segment did not fit)
// leave the arena; new ones are placed in it.
void Arena::sync_segments() {
    for (size_t s = 0; s < seg_off_.size(); ++s)
        if (seg_off_[s] >= 0 && seg_live_[s] == 0) {
            list_.free(seg_off_[s]);
            seg_off_[s] = -1;
        }
}

int64_t Arena::allocate(int32_t key, int64_t bytes, bool long_lived) {
    frag_ = false;
    if (!caching_) {
        int64_t off = list_.allocate(bytes, long_lived);
        if (off < 0) {
            frag_ = list_.used() + list_.round(bytes) <= list_.size();
            return -1;
        }
        off_[key] = off;
        peak_ = std::max(peak_, list_.used());
        return off;
    }
    int64_t before = ca_.reserved();
    int32_t b = ca_.allocate(bytes);
    int64_t rounded = sim::CachingAllocator::round_size(bytes);
    bool small = rounded <= sim::CachingAllocator::kSmallSize;
    int64_t seg_bytes = small ? sim::CachingAllocator::kSmallBuffer : sim::CachingAllocator::segment_size(rounded);
    if (ca_.reserved() < before + (b >= 0 && ca_.block_segment(b) >= static_cast<int32_t>(seg_off_.size()) ? seg_bytes : 0))
        sync_segments();   // the model released its free segments
    if (b < 0) {
        frag_ = true;
        return -1;
    }
    int32_t seg = ca_.block_segment(b);
    if (seg >= static_cast<int32_t>(seg_off_.size())) {   // a new segment: cudaMalloc it
        seg_off_.resize(static_cast<size_t>(seg) + 1, -1);
        seg_live_.resize(static_cast<size_t>(seg) + 1, 0);
        int64_t off = list_.allocate(seg_bytes);
        if (off < 0) {   // the model's bytes fit the capacity, the arena's layout does not
            ca_.free(b);
            seg_live_[static_cast<size_t>(seg)] = 0;
            frag_ = true;
            return -1;
        }
        seg_off_[static_cast<size_t>(seg)] = off;
    }
    ++seg_live_[static_cast<size_t>(seg)];
    block_[key] = b;
    peak_ = std::max(peak_, ca_.reserved());
    return seg_off_[static_cast<size_t>(seg)] + ca_.block_offset(b);
}

void Arena::free(int32_t key) {
    if (!caching_) {
        auto it = off_.find(key);
        if (it == off_.end()) return;
        list_.free(it->second);
        off_.erase(it);
        return;
    }
    auto it = block_.find(key);
    if (it == block_.end()) return;
    int32_t seg = ca_.block_segment(it->second);
    ca_.free(it->second);
    --seg_live_[static_cast<size_t>(seg)];
    block_.erase(it);
}

}  // namespace mhc::replay
