#include "mhc/replay/arena.hpp"

#include <algorithm>
#include <cassert>

#include "mhc/common/error.hpp"
#include "mhc/trace/model.hpp"

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

Arena::Arena(const std::string& model, int64_t capacity, PageMapper* mapper, sim::AllocatorSettings settings)
    : caching_(model == "caching"), capacity_(capacity), pages_(pool_pages(capacity)), mapper_(mapper),
      va_(mapper ? mapper->va_bytes() : default_va(capacity), kPage), ca_(capacity, std::move(settings)) {
    ca_.set_log(&log_);
    if (mapper && mapper->pool_pages() < pages_) throw Error("arena: the page pool is smaller than the capacity", Error::Kind::Internal);
    for (int32_t p = 0; p < pages_; ++p) free_pages_.insert(free_pages_.end(), p);
}

Arena::~Arena() {   // leave the reservation as it was (the mapper may outlive the arena)
    if (!mapper_) return;
    for (size_t s = 0; s < seg_.size(); ++s) {
        if (seg_reserved_[s] > 0) {
            for (auto [off, page] : seg_page_at_[s]) mapper_->unmap(seg_[s].va + off, 1);
        } else if (seg_[s].va >= 0) {
            mapper_->unmap(seg_[s].va, static_cast<int64_t>(seg_[s].pages.size()));
        }
    }
    for (auto& [k, r] : own_) mapper_->unmap(r.va, static_cast<int64_t>(r.pages.size()));
    for (auto& s : small_) if (s.r.va >= 0) mapper_->unmap(s.r.va, 1);
}

// A free pool page for the virtual page at va_off: the one the mapper shows there already when
// it is free (no page tables to build: a repeat, or a segment back where one was), else the
// lowest free (consecutive pages map in one call).
int32_t Arena::take_page(int64_t va_off) {
    const int32_t shown = mapper_ ? mapper_->shown_page(va_off) : -1;
    auto it = shown >= 0 ? free_pages_.find(shown) : free_pages_.end();
    if (it == free_pages_.end()) it = free_pages_.begin();
    const int32_t page = *it;
    free_pages_.erase(it);
    high_page_ = std::max<int64_t>(high_page_, page + 1);
    return page;
}

// Pages (take_page) and a virtual range.
bool Arena::map_range(int64_t bytes, Range& r) {
    const int64_t n = (bytes + kPage - 1) / kPage;
    if (n > static_cast<int64_t>(free_pages_.size())) return false;
    r.va = va_.allocate(n * kPage);
    if (r.va < 0) return false;
    r.pages.clear();
    for (int64_t i = 0; i < n; ++i) r.pages.push_back(take_page(r.va + i * kPage));
    if (mapper_) mapper_->map(r.va, r.pages.data(), n);
    peak_ = std::max(peak_, in_use());
    return true;
}

void Arena::unmap_range(Range& r) {
    if (r.va < 0) return;
    if (mapper_) mapper_->unmap(r.va, static_cast<int64_t>(r.pages.size()));
    va_.free(r.va);
    for (int32_t p : r.pages) free_pages_.insert(p);
    r.va = -1;
    r.pages.clear();
}

int64_t Arena::largest_free() const {
    return caching_ ? ca_.largest_free_block() : static_cast<int64_t>(free_pages_.size()) * kPage;
}

bool Arena::follow_log() {
    bool ok = true;
    for (const auto& e : log_) {
        const size_t s = static_cast<size_t>(e.segment);
        if (s >= seg_.size()) {
            seg_.resize(s + 1);
            seg_reserved_.resize(s + 1, 0);
            seg_page_at_.resize(s + 1);
        }
        Range& r = seg_[s];
        if (!e.expandable) {   // cudaMalloc / cudaFree of a whole segment
            if (e.alloc) ok = map_range(e.bytes, r) && ok;
            else unmap_range(r);
            continue;
        }
        // An expandable segment: its virtual range once (as large as the model's: capacity
        // + 1/8, CachingAllocator::new_expandable), then pages mapped or unmapped in place.
        if (seg_reserved_[s] == 0) {
            const int64_t want = (capacity_ + capacity_ / 8 + kPage - 1) / kPage * kPage;
            r.va = va_.allocate(want);
            if (r.va < 0)
                throw Error("replay: the arena's virtual range cannot hold another expandable segment (" +
                            std::to_string(s + 1) + " so far; one per stream and pool)", Error::Kind::Internal);
            seg_reserved_[s] = want;
        }
        auto& at = seg_page_at_[s];
        for (int64_t off = e.offset; off < e.offset + e.bytes; off += kPage) {
            if (e.alloc) {
                if (free_pages_.empty()) { ok = false; break; }
                int32_t page = take_page(r.va + off);
                at[off] = page;
                if (mapper_) mapper_->map(r.va + off, &page, 1);
            } else {
                auto it = at.find(off);
                if (it == at.end()) continue;
                if (mapper_) mapper_->unmap(r.va + off, 1);
                free_pages_.insert(it->second);
                at.erase(it);
            }
        }
        peak_ = std::max(peak_, in_use());
    }
    log_.clear();
    return ok;
}

int64_t Arena::allocate(int32_t key, int64_t bytes, int64_t stream, int64_t pool) {
    frag_ = false;
    if (!caching_) {
        const int64_t need = ideal_round(bytes);
        Placed pl{-1, -1};
        if (need <= kSmallIdeal) {   // a shared page: best fit among them, else a new one
            int64_t best = -1, best_free = INT64_MAX;
            for (size_t i = 0; i < small_.size(); ++i)
                if (small_[i].r.va >= 0) {
                    int64_t f = small_[i].list.largest_free();
                    if (f >= need && f < best_free) { best = static_cast<int64_t>(i); best_free = f; }
                }
            if (best < 0) {
                size_t slot = 0;
                while (slot < small_.size() && small_[slot].r.va >= 0) ++slot;
                if (slot == small_.size()) small_.emplace_back();
                if (!map_range(kPage, small_[slot].r)) {
                    frag_ = ideal_bytes_ + bytes <= capacity_;
                    return -1;
                }
                small_[slot].list = FreeList(kPage, kIdealAlign);
                best = static_cast<int64_t>(slot);
            }
            SmallPage& sp = small_[static_cast<size_t>(best)];
            pl.small_page = static_cast<int32_t>(best);
            pl.va = sp.r.va + sp.list.allocate(need);
        } else {
            Range r;
            if (!map_range(need, r)) {
                frag_ = ideal_bytes_ + bytes <= capacity_;
                return -1;
            }
            pl.va = r.va;
            own_[key] = std::move(r);
        }
        placed_[key] = pl;
        ideal_bytes_ += bytes;
        ideal_live_[key] = bytes;
        return pl.va;
    }
    int32_t block = ca_.allocate(bytes, stream, pool);
    // The model's cudaFrees (released cached segments) and cudaMallocs, in its order.
    const bool mapped = follow_log();
    if (block < 0) {   // the model is out of memory; fragmentation if its blocks held the bytes
        frag_ = ca_.allocated() + ca_.rounded(bytes) <= capacity_;
        return -1;
    }
    if (!mapped) {   // the model fit it but the pages did not: only a broken invariant gets here
        ca_.free(block);
        follow_log();
        frag_ = true;
        return -1;
    }
    block_[key] = block;
    const Range& segment = seg_[static_cast<size_t>(ca_.block_segment(block))];
    return segment.va + ca_.block_offset(block);
}

void Arena::give_pools_back(const std::vector<int64_t>& given_back_at) {
    if (!caching_) return;
    for (size_t q = 1; q < given_back_at.size(); ++q)
        if (given_back_at[q] != trace::kNoTime) ca_.give_back_at(static_cast<int64_t>(q), given_back_at[q]);
}

void Arena::pools_due(int64_t recorded) {
    if (caching_ && ca_.pools_due(recorded)) follow_log();   // the pools' free segments go, as simulated
}

void Arena::free(int32_t key) {
    if (!caching_) {
        auto it = placed_.find(key);
        if (it == placed_.end()) return;
        Placed pl = it->second;
        placed_.erase(it);
        ideal_bytes_ -= ideal_live_[key];
        ideal_live_.erase(key);
        if (pl.small_page >= 0) {
            SmallPage& sp = small_[static_cast<size_t>(pl.small_page)];
            sp.list.free(pl.va - sp.r.va);
            if (sp.list.used() == 0) unmap_range(sp.r);
        } else {
            auto o = own_.find(key);
            unmap_range(o->second);
            own_.erase(o);
        }
        return;
    }
    auto it = block_.find(key);
    if (it == block_.end()) return;
    ca_.free(it->second);
    follow_log();   // a free releases nothing today; should the model ever do so, follow it
    block_.erase(it);
}

}  // namespace mhc::replay
