#pragma once
// Device memory as a GPU driver hands it out: a pool of physical memory in 2 MiB pages and a
// reserved virtual range much larger than the pool. A segment (caching model) or allocation
// (ideal model) is a virtual range whose pages are mapped from anywhere in the pool, so the
// pool never fragments between segments: what PyTorch's expandable segments and
// cuMemCreate + cuMemMap do. Host: a memfd of the pool's size, mapped with mmap(MAP_FIXED |
// MAP_SHARED) into a PROT_NONE reservation. CUDA: one cuMemCreate handle per page, mapped with
// cuMemMap into a cuMemAddressReserve range.
#include <cstdint>
#include <memory>

namespace mhc::replay {

class PageMapper {
public:
    static constexpr int64_t kPage = 2 << 20;
    virtual ~PageMapper() = default;
    virtual unsigned char* base() = 0;          // start of the reserved virtual range
    virtual int64_t va_bytes() const = 0;       // its size (a multiple of kPage)
    virtual int64_t pool_pages() const = 0;     // pages (physical, unless aliased: distinct_pages)
    // Pages with memory of their own: pool pages from this on share it with the pages below
    // (page p shows the memory of p mod distinct_pages), for replays that never read back what
    // they wrote (no swaps: nothing is checksummed); their counts and placement are unchanged.
    virtual int64_t distinct_pages() const { return pool_pages(); }
    // Maps pool pages pages[0..n) at base + va_off, in order (va_off page-aligned, the range
    // unmapped). Throws mhc::Error when the system refuses.
    virtual void map(int64_t va_off, const int32_t* pages, int64_t n) = 0;
    // Returns [va_off, va_off + n pages) to the reservation (data in the pages is kept). Both
    // mappers leave the old mapping in place until the range is mapped to other pages
    // (pages_host.cpp, pages_cuda.cpp say why); a range may not be mapped twice without an unmap between.
    virtual void unmap(int64_t va_off, int64_t n) = 0;
    virtual int64_t mapped_pages() const = 0;   // pages currently mapped (all ranges)
    // The pool page the mapping at base + va_off shows now, mapped or not (-1: none, or not
    // known): an arena that takes that page when it is free spares the mapper a remapping.
    virtual int32_t shown_page(int64_t /*va_off*/) const { return -1; }
    // Pages whose page tables map() had to build (the host mapper's mmap calls; 0 where not counted).
    virtual int64_t pages_remapped() const { return 0; }
    // Host memory mapped at more than one virtual page now, counted once per extra mapping: the
    // kernel's resident set (RSS, ru_maxrss) counts a page once per page-table entry, so a pool
    // page shown by two virtual pages (an alias of distinct_pages, or a freed range left mapped
    // beside the range that took its page) is counted twice there. 0 for device memory.
    virtual int64_t aliased_host_bytes() const { return 0; }
};

// Throws mhc::Error when the kernel refuses (memfd_create, ftruncate, mmap). `premap`: the
// start of the virtual range shows the pool in order from the start (page tables built now,
// not by the first replay's mappings: an unlimited caching replay then maps nothing).
// `distinct_pages` (0: all): the pages with memory of their own (PageMapper::distinct_pages).
std::unique_ptr<PageMapper> make_host_mapper(int64_t pool_pages, int64_t va_bytes, bool premap = false,
                                             int64_t distinct_pages = 0);
// Throws mhc::Error without a CUDA build, without a GPU, or when the driver refuses. Like the
// host mapper, it keeps a freed range's pages mapped until the virtual pages are needed for
// others (shown_page). `premap`: virtual page i shows pool page i from the start.
std::unique_ptr<PageMapper> make_cuda_mapper(int64_t pool_pages, int64_t va_bytes, bool premap = false);

}  // namespace mhc::replay
