// Host page mapper: memfd pool + PROT_NONE reservation (pages.hpp says why).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include "mhc/common/error.hpp"
#include "mhc/replay/pages.hpp"
#include "live_pages.hpp"

namespace mhc::replay {

namespace {

std::string sys_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

class HostMapper final : public PageMapper {
public:
    HostMapper(int64_t pages, int64_t va, bool premap, int64_t distinct)
        : pages_(pages), distinct_(distinct > 0 ? std::min(distinct, pages) : pages), va_(va) {
        if (pages <= 0 || va <= 0 || va % kPage) throw Error("page pool: bad sizes", Error::Kind::Internal);
        fd_ = memfd_create("mhc-replay-pool", MFD_CLOEXEC);
        if (fd_ < 0) throw Error(sys_error("page pool: memfd_create"));
        // Allocate the pool's memory now (not during a timed transfer), as cuMemCreate does; a
        // premapped pool (validate's, GiBs) in two halves at once: the kernel zeroes them, one
        // core each.
        if (ftruncate(fd_, distinct_ * kPage) != 0 || !allocate(premap ? 2 : 1)) {
            std::string e = sys_error("page pool: allocating the memfd");
            close(fd_);
            throw Error(e + " (" + std::to_string(distinct_ * kPage) + " bytes)");
        }
        void* p = mmap(nullptr, static_cast<size_t>(va), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            std::string e = sys_error("page pool: reserving the virtual range");
            close(fd_);
            throw Error(e);
        }
        base_ = static_cast<unsigned char*>(p);
        shown_.assign(static_cast<size_t>(va / kPage), -1);
        live_.assign(static_cast<size_t>(va / kPage));
        if (premap) premap_identity();
    }
    ~HostMapper() override {
        munmap(base_, static_cast<size_t>(va_));
        close(fd_);
    }
    unsigned char* base() override { return base_; }
    int64_t va_bytes() const override { return va_; }
    int64_t pool_pages() const override { return pages_; }
    int64_t distinct_pages() const override { return distinct_; }
    int64_t mapped_pages() const override { return live_.mapped(); }
    int64_t pages_remapped() const override { return remapped_; }
    // Virtual pages showing a pool page less the distinct memfd pages they show (pages.hpp).
    int64_t aliased_host_bytes() const override {
        std::vector<uint8_t> seen(static_cast<size_t>(distinct_), 0);
        int64_t shown = 0, distinct = 0;
        for (const int32_t page : shown_) {
            if (page < 0) continue;
            ++shown;
            uint8_t& once = seen[static_cast<size_t>(physical(page))];
            distinct += once == 0;
            once = 1;
        }
        return (shown - distinct) * kPage;
    }
    int32_t shown_page(int64_t va_off) const override {
        return va_off >= 0 && va_off < va_ ? shown_[static_cast<size_t>(va_off / kPage)] : -1;
    }

    // Page tables are what costs here (this host's shmem has no huge pages: 512 entries per
    // 2 MiB page, built by MAP_POPULATE and torn down by every unmap). So unmap only marks the
    // range free and leaves its pages mapped; map then calls mmap only for the virtual pages
    // that do not already show the requested pool page. A replay's segments often come back at
    // the same place with the same pages (best fit, lowest pages first), and a repeat replays
    // the very same sequence. The price: a stale range still reaches its old pages instead of
    // faulting; the checksums of every transfer and end to end catch misplaced data.
    void map(int64_t va_off, const int32_t* pages, int64_t n) override {
        check(va_off, n);
        const size_t v0 = static_cast<size_t>(va_off / kPage);
        live_.check_map(v0, pages, n, pages_);
        // One mmap per run of virtual pages that need it and whose pool pages are consecutive.
        for (int64_t i = 0; i < n;) {
            if (shown_[v0 + static_cast<size_t>(i)] == pages[i]) { ++i; continue; }
            int64_t j = i + 1;
            while (j < n && physical(pages[j]) == physical(pages[j - 1]) + 1 && shown_[v0 + static_cast<size_t>(j)] != pages[j]) ++j;
            void* at = base_ + va_off + i * kPage;
            void* p = mmap(at, static_cast<size_t>((j - i) * kPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                           fd_, static_cast<off_t>(physical(pages[i])) * kPage);
            if (p != at) throw Error(sys_error("page pool: mapping pages"));
            for (int64_t k = i; k < j; ++k) shown_[v0 + static_cast<size_t>(k)] = pages[k];
            remapped_ += j - i;
            i = j;
        }
        live_.map(v0, n);
    }
    void unmap(int64_t va_off, int64_t n) override {
        check(va_off, n);
        live_.unmap(static_cast<size_t>(va_off / kPage), n);
    }

private:
    // Virtual page i shows pool page i, page tables built now: an arena that takes virtual
    // ranges and pool pages lowest first and never gives them back (an unlimited caching run
    // keeps its segments) then maps nothing itself.
    void premap_identity() {
        const int64_t count = std::min(pages_, va_ / kPage);
        // Page tables for GiBs: two threads, each a half (page faults take the mmap lock shared).
        const int64_t half = count / 2;
        bool ok_low = true;
        std::thread low([&] { ok_low = map_identity(0, half); });
        const bool ok_high = map_identity(half, count);
        low.join();
        if (!ok_low || !ok_high) {
            std::string why = sys_error("page pool: mapping the pool");
            munmap(base_, static_cast<size_t>(va_));
            close(fd_);
            throw Error(why);
        }
        for (int64_t i = 0; i < count; ++i) shown_[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    }

    // Virtual pages [from, to) show pool pages [from, to): one mmap per run of consecutive memfd
    // pages (the aliases start again from the memfd's start).
    bool map_identity(int64_t from, int64_t to) const {
        for (int64_t i = from; i < to;) {
            const int64_t len = std::min(distinct_ - physical(static_cast<int32_t>(i)), to - i);
            void* at = base_ + i * kPage;
            void* got = mmap(at, static_cast<size_t>(len * kPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                             fd_, static_cast<off_t>(physical(static_cast<int32_t>(i))) * kPage);
            if (got != at) return false;
            i += len;
        }
        return true;
    }

    // The memfd's pages, allocated (and zeroed by the kernel) in `parts` ranges at once.
    bool allocate(int parts) const {
        const int64_t bytes = distinct_ * kPage, cut = parts > 1 ? distinct_ / 2 * kPage : bytes;
        bool ok_low = true;
        std::thread low;
        if (cut < bytes) low = std::thread([&] { ok_low = fallocate(fd_, 0, 0, cut) == 0; });
        else ok_low = fallocate(fd_, 0, 0, bytes) == 0;
        const bool ok_high = cut >= bytes || fallocate(fd_, 0, cut, bytes - cut) == 0;
        if (low.joinable()) low.join();
        return ok_low && ok_high;
    }

    // The memfd page behind a pool page: itself, or for an alias the distinct page it shares.
    int64_t physical(int32_t page) const { return page % distinct_; }

    void check(int64_t va_off, int64_t n) const {
        if (va_off < 0 || va_off % kPage || n < 0 || va_off + n * kPage > va_)
            throw Error("page pool: virtual range outside the reservation", Error::Kind::Internal);
    }
    int64_t pages_, distinct_, va_, remapped_ = 0;
    std::vector<int32_t> shown_;   // per virtual page: the pool page its mapping shows, -1: PROT_NONE
    detail::LivePages live_;
    int fd_ = -1;
    unsigned char* base_ = nullptr;
};

}  // namespace

std::unique_ptr<PageMapper> make_host_mapper(int64_t pool_pages, int64_t va_bytes, bool premap, int64_t distinct_pages) {
    return std::make_unique<HostMapper>(pool_pages, va_bytes, premap, distinct_pages);
}

}  // namespace mhc::replay
