// The CUDA page mapper's driver calls, counted on a stand-in driver (no GPU needed): it keeps a
// freed range's pages mapped, so a replay that places a range where one was, with the same
// pages, calls nothing, and freeing a range neither unmaps nor waits for the device. Before, each
// unmap called cuCtxSynchronize on the replay's stood-still clock (copies in flight finished
// for free) and every replay mapped all its pages anew (on the H200, 0.16-0.32 s of stood-still
// clock per replay of the llama slice, longer than its makespan).
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/replay/arena.hpp"
#include "pages_cuda.hpp"

namespace {

using mhc::replay::PageMapper;

// What the stand-in driver was asked, and its state: which handle each virtual page shows.
struct Calls {
    int maps = 0, unmaps = 0, syncs = 0, access = 0;
    std::map<CUdeviceptr, CUmemGenericAllocationHandle> mapped;
    CUmemGenericAllocationHandle next_handle = 1;
};
Calls calls;
constexpr CUdeviceptr kBase = CUdeviceptr{1} << 40;
constexpr size_t kPage = PageMapper::kPage;

CUresult ok_ctx_current(CUcontext* ctx) {
    *ctx = reinterpret_cast<CUcontext>(16);
    return CUDA_SUCCESS;
}
CUresult ok_ctx_device(CUdevice* dev) {
    *dev = 0;
    return CUDA_SUCCESS;
}
CUresult sync() {
    ++calls.syncs;
    return CUDA_SUCCESS;
}
CUresult attribute(int* value, CUdevice_attribute, CUdevice) {
    *value = 1;
    return CUDA_SUCCESS;
}
CUresult error_name(CUresult, const char** name) {
    *name = "CUDA_ERROR_STAND_IN";
    return CUDA_SUCCESS;
}
CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult address_free(CUdeviceptr, size_t) { return CUDA_SUCCESS; }
CUresult address_reserve(CUdeviceptr* at, size_t, size_t, CUdeviceptr, unsigned long long) {
    *at = kBase;
    return CUDA_SUCCESS;
}
CUresult create(CUmemGenericAllocationHandle* handle, size_t, const CUmemAllocationProp*, unsigned long long) {
    *handle = calls.next_handle++;
    return CUDA_SUCCESS;
}
CUresult granularity(size_t* bytes, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
    *bytes = kPage;
    return CUDA_SUCCESS;
}
// As the driver: a virtual page already mapped cannot be mapped again, one not mapped not unmapped.
CUresult map(CUdeviceptr at, size_t bytes, size_t, CUmemGenericAllocationHandle handle, unsigned long long) {
    ++calls.maps;
    if (bytes != kPage || calls.mapped.count(at)) return CUDA_ERROR_INVALID_VALUE;
    calls.mapped[at] = handle;
    return CUDA_SUCCESS;
}
CUresult release(CUmemGenericAllocationHandle) { return CUDA_SUCCESS; }
CUresult set_access(CUdeviceptr at, size_t bytes, const CUmemAccessDesc*, size_t) {
    ++calls.access;
    for (size_t off = 0; off < bytes; off += kPage)
        if (!calls.mapped.count(at + off)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
CUresult unmap(CUdeviceptr at, size_t) {
    ++calls.unmaps;
    return calls.mapped.erase(at) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

mhc::replay::detail::CudaDriver stand_in_driver() {
    mhc::replay::detail::CudaDriver table;
    table.cuCtxGetCurrent = ok_ctx_current;
    table.cuCtxGetDevice = ok_ctx_device;
    table.cuCtxSynchronize = sync;
    table.cuDeviceGetAttribute = attribute;
    table.cuGetErrorName = error_name;
    table.cuInit = init;
    table.cuMemAddressFree = address_free;
    table.cuMemAddressReserve = address_reserve;
    table.cuMemCreate = create;
    table.cuMemGetAllocationGranularity = granularity;
    table.cuMemMap = map;
    table.cuMemRelease = release;
    table.cuMemSetAccess = set_access;
    table.cuMemUnmap = unmap;
    return table;
}

// The handle virtual page `page` shows (0: none).
CUmemGenericAllocationHandle shows(int64_t page) {
    auto it = calls.mapped.find(kBase + static_cast<CUdeviceptr>(page) * kPage);
    return it == calls.mapped.end() ? 0 : it->second;
}

}   // namespace

TEST_CASE("replay: the CUDA page mapper keeps freed ranges mapped and waits for the device only to remap",
          "[replay][pages][cuda]") {
    calls = Calls{};
    const auto driver = stand_in_driver();
    {
        auto mapper = mhc::replay::detail::make_cuda_mapper(driver, 8, 64 * static_cast<int64_t>(kPage), false);
        const std::vector<int32_t> first{2, 3, 4};
        mapper->map(0, first.data(), 3);
        CHECK(calls.maps == 3);
        CHECK(calls.access == 1);   // one run of pages
        CHECK(mapper->mapped_pages() == 3);
        // Freed: the pages stay where they are; nothing is unmapped, nothing waits.
        mapper->unmap(0, 3);
        CHECK(calls.unmaps == 0);
        CHECK(calls.syncs == 0);
        CHECK(mapper->mapped_pages() == 0);
        CHECK(mapper->shown_page(kPage) == 3);
        // The same range with the same pages (a repeat replay): no driver call at all.
        mapper->map(0, first.data(), 3);
        CHECK(calls.maps == 3);
        CHECK(calls.unmaps == 0);
        CHECK(mapper->pages_remapped() == 3);
        CHECK_THROWS_AS(mapper->map(0, first.data(), 1), mhc::Error);   // still in use
        mapper->unmap(0, 3);
        // Other pages at virtual pages 1 and 2: those two are unmapped once the device is idle
        // and mapped again; page 0 keeps its own.
        const std::vector<int32_t> other{2, 5, 6};
        mapper->map(0, other.data(), 3);
        CHECK(calls.syncs == 1);
        CHECK(calls.unmaps == 2);
        CHECK(calls.maps == 5);
        CHECK(shows(0) == 3);   // handle of pool page 2 (handles are 1-based)
        CHECK(shows(1) == 6);
        CHECK(shows(2) == 7);
        // Virtual pages never shown before: mapped without waiting.
        const std::vector<int32_t> fresh{0, 1};
        mapper->map(10 * static_cast<int64_t>(kPage), fresh.data(), 2);
        CHECK(calls.syncs == 1);
        CHECK(calls.maps == 7);
    }
    CHECK(calls.mapped.empty());   // the mapper's end unmaps what it showed
}

TEST_CASE("replay: an arena on a premapped CUDA pool maps nothing in a replay or its repeat", "[replay][pages][cuda]") {
    calls = Calls{};
    const auto driver = stand_in_driver();
    const int64_t capacity = 16 * static_cast<int64_t>(kPage);
    auto mapper = mhc::replay::detail::make_cuda_mapper(driver, mhc::replay::Arena::pool_pages(capacity),
                                                        mhc::replay::Arena::default_va(capacity), true);
    const int before = calls.maps;
    CHECK(before == 16);   // virtual page i shows pool page i, before any replay
    for (int replay = 0; replay < 2; ++replay) {
        mhc::replay::Arena arena("caching", capacity, mapper.get());
        // Segments of 4, 2 and 6 MiB (caching: large blocks get their own segment), one freed and
        // placed again.
        CHECK(arena.allocate(1, 4 << 20) >= 0);
        CHECK(arena.allocate(2, 2 << 20) >= 0);
        CHECK(arena.allocate(3, 6 << 20) >= 0);
        arena.free(2);
        CHECK(arena.allocate(4, 2 << 20) >= 0);
    }   // each arena's end frees its ranges
    CHECK(calls.maps == before);
    CHECK(calls.unmaps == 0);
    CHECK(calls.syncs == 0);
}
