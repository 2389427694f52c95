// Host page mapper: memfd pool + PROT_NONE reservation (pages.hpp says why).
#include <cerrno>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include "mhc/common/error.hpp"
#include "mhc/replay/pages.hpp"

namespace mhc::replay {

namespace {

std::string sys_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

class HostMapper final : public PageMapper {
public:
    HostMapper(int64_t pages, int64_t va) : pages_(pages), va_(va) {
        if (pages <= 0 || va <= 0 || va % kPage) throw Error("page pool: bad sizes", Error::Kind::Internal);
        fd_ = memfd_create("mhc-replay-pool", MFD_CLOEXEC);
        if (fd_ < 0) throw Error(sys_error("page pool: memfd_create"));
        // Allocate the pool's memory now (not during a timed transfer), as cuMemCreate does.
        if (ftruncate(fd_, pages * kPage) != 0 || fallocate(fd_, 0, 0, pages * kPage) != 0) {
            std::string e = sys_error("page pool: allocating the memfd");
            close(fd_);
            throw Error(e + " (" + std::to_string(pages * kPage) + " bytes)");
        }
        void* p = mmap(nullptr, static_cast<size_t>(va), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            std::string e = sys_error("page pool: reserving the virtual range");
            close(fd_);
            throw Error(e);
        }
        base_ = static_cast<unsigned char*>(p);
    }
    ~HostMapper() override {
        munmap(base_, static_cast<size_t>(va_));
        close(fd_);
    }
    unsigned char* base() override { return base_; }
    int64_t va_bytes() const override { return va_; }
    int64_t pool_pages() const override { return pages_; }
    int64_t mapped_pages() const override { return mapped_; }

    void map(int64_t va_off, const int32_t* pages, int64_t n) override {
        check(va_off, n);
        // One mmap per run of consecutive pool pages; MAP_POPULATE builds the page tables now.
        for (int64_t i = 0; i < n;) {
            int64_t j = i + 1;
            while (j < n && pages[j] == pages[j - 1] + 1) ++j;
            if (pages[i] < 0 || pages[j - 1] >= pages_) throw Error("page pool: page outside the pool", Error::Kind::Internal);
            void* at = base_ + va_off + i * kPage;
            void* p = mmap(at, static_cast<size_t>((j - i) * kPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                           fd_, static_cast<off_t>(pages[i]) * kPage);
            if (p != at) throw Error(sys_error("page pool: mapping pages"));
            i = j;
        }
        mapped_ += n;
    }
    void unmap(int64_t va_off, int64_t n) override {
        check(va_off, n);
        // Back to PROT_NONE (not munmap: nothing else may land in the reservation).
        void* at = base_ + va_off;
        if (mmap(at, static_cast<size_t>(n * kPage), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != at)
            throw Error(sys_error("page pool: unmapping pages"));
        mapped_ -= n;
    }

private:
    void check(int64_t va_off, int64_t n) const {
        if (va_off < 0 || va_off % kPage || n < 0 || va_off + n * kPage > va_)
            throw Error("page pool: virtual range outside the reservation", Error::Kind::Internal);
    }
    int64_t pages_, va_, mapped_ = 0;
    int fd_ = -1;
    unsigned char* base_ = nullptr;
};

}  // namespace

std::unique_ptr<PageMapper> make_host_mapper(int64_t pool_pages, int64_t va_bytes) {
    return std::make_unique<HostMapper>(pool_pages, va_bytes);
}

}  // namespace mhc::replay
