#pragma once
// The bookkeeping both page mappers (pages_host.cpp, pages_cuda.cpp) keep of their virtual pages:
// which ones map() has mapped and unmap() has not freed since, checked alike on both.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mhc/common/error.hpp"

namespace mhc::replay::detail {

class LivePages {
public:
    // `virtual_pages` pages, none mapped.
    void assign(size_t virtual_pages) { live_.assign(virtual_pages, 0); }
    void clear() { live_.clear(); }
    // How many are mapped.
    int64_t mapped() const { return mapped_; }

    // map()'s checks before it maps anything: pages[0..n) are pages of a pool of `pool_pages`,
    // and the n virtual pages from v0 are free.
    void check_map(size_t v0, const int32_t* pages, int64_t n, int64_t pool_pages) const {
        for (int64_t i = 0; i < n; ++i) {
            if (pages[i] < 0 || pages[i] >= pool_pages)
                throw Error("page pool: page outside the pool", Error::Kind::Internal);
            if (live_[v0 + static_cast<size_t>(i)])
                throw Error("page pool: virtual page mapped twice", Error::Kind::Internal);
        }
    }
    // The n virtual pages from v0, mapped.
    void map(size_t v0, int64_t n) {
        for (int64_t i = 0; i < n; ++i) live_[v0 + static_cast<size_t>(i)] = 1;
        mapped_ += n;
    }
    // The n virtual pages from v0, each of them mapped, free again.
    void unmap(size_t v0, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            if (!live_[v0 + static_cast<size_t>(i)])
                throw Error("page pool: unmapping a page not mapped", Error::Kind::Internal);
            live_[v0 + static_cast<size_t>(i)] = 0;
        }
        mapped_ -= n;
    }

private:
    std::vector<uint8_t> live_;   // per virtual page: mapped by map() and not unmapped since
    int64_t mapped_ = 0;
};

}   // namespace mhc::replay::detail
