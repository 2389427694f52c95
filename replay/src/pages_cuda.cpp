// CUDA page mapper: the pool is one cuMemCreate handle per 2 MiB page (so any page can back
// any virtual page), the virtual range one cuMemAddressReserve; a segment's pages are mapped
// with cuMemMap + cuMemSetAccess (what PyTorch's expandable segments do). Every driver call is
// checked; without a CUDA build make_cuda_mapper throws mhc::Error.
//
// Mappings are kept, as the host mapper keeps its own (pages_host.cpp): unmap only marks the
// range free, and map calls the driver only for the virtual pages that do not already show the
// page asked for; a virtual page that must show another page is unmapped once the device is
// idle (cuCtxSynchronize: work queued before its range was freed may still read it). The
// replay's clock stands still while pages are mapped, but a GPU's copies and stand-ins run on
// meanwhile, so that time must stay short: before, every replay mapped all its segments anew
// and every unmap waited for the whole device, copies in flight included (on the H200: 0.16 s
// to 0.32 s of stood-still clock per replay of the llama slice, longer than its makespan). A
// repeat now maps nothing: the same ranges come back with the same pages.
#include "mhc/common/error.hpp"
#include "mhc/replay/pages.hpp"

#ifdef MHC_REPLAY_HAVE_CUDA
#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "live_pages.hpp"
#include "pages_cuda.hpp"

namespace mhc::replay {

namespace detail {

// The driver is opened at run time, not linked: `mhc` and the tests must start on machines
// without a GPU driver (no libcuda.so.1), where only the cuda backend is unavailable.
#define MHC_STR2(x) #x
#define MHC_STR(x) MHC_STR2(x)   // expands cuda.h's versioned names (e.g. ..._v2) first
const CudaDriver& cuda_driver() {
    static const CudaDriver driver = [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) throw Error("page pool: the CUDA driver (libcuda.so.1) is not available on this machine");
        CudaDriver table;
        auto load = [&](auto& fn, const char* sym) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, sym));
            if (!fn) throw Error(std::string("page pool: the CUDA driver lacks ") + sym);
        };
        load(table.cuCtxGetCurrent, MHC_STR(cuCtxGetCurrent));
        load(table.cuCtxGetDevice, MHC_STR(cuCtxGetDevice));
        load(table.cuCtxSetCurrent, MHC_STR(cuCtxSetCurrent));
        load(table.cuCtxSynchronize, MHC_STR(cuCtxSynchronize));
        load(table.cuDeviceGet, MHC_STR(cuDeviceGet));
        load(table.cuDeviceGetAttribute, MHC_STR(cuDeviceGetAttribute));
        load(table.cuDevicePrimaryCtxRelease, MHC_STR(cuDevicePrimaryCtxRelease));
        load(table.cuDevicePrimaryCtxRetain, MHC_STR(cuDevicePrimaryCtxRetain));
        load(table.cuGetErrorName, MHC_STR(cuGetErrorName));
        load(table.cuInit, MHC_STR(cuInit));
        load(table.cuMemAddressFree, MHC_STR(cuMemAddressFree));
        load(table.cuMemAddressReserve, MHC_STR(cuMemAddressReserve));
        load(table.cuMemCreate, MHC_STR(cuMemCreate));
        load(table.cuMemGetAllocationGranularity, MHC_STR(cuMemGetAllocationGranularity));
        load(table.cuMemMap, MHC_STR(cuMemMap));
        load(table.cuMemRelease, MHC_STR(cuMemRelease));
        load(table.cuMemSetAccess, MHC_STR(cuMemSetAccess));
        load(table.cuMemUnmap, MHC_STR(cuMemUnmap));
        return table;
    }();
    return driver;
}

namespace {

class CudaMapper final : public PageMapper {
public:
    CudaMapper(const CudaDriver& driver, int64_t pages, int64_t va, bool premap)
        : drv_(driver), pages_(pages), va_(va) {
        if (pages <= 0 || va <= 0 || va % kPage) throw Error("page pool: bad sizes", Error::Kind::Internal);
        check(drv_.cuInit(0), "cuInit");
        CUcontext ctx = nullptr;
        check(drv_.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
        if (!ctx) {   // the runtime's primary context, so that cudart streams see the memory
            check(drv_.cuDeviceGet(&dev_, 0), "cuDeviceGet");
            check(drv_.cuDevicePrimaryCtxRetain(&ctx, dev_), "cuDevicePrimaryCtxRetain");
            retained_ = true;
            check(drv_.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
        } else {
            check(drv_.cuCtxGetDevice(&dev_), "cuCtxGetDevice");
        }
        int vmm = 0;
        check(drv_.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_),
              "cuDeviceGetAttribute");
        if (!vmm) throw Error("page pool: this GPU does not support virtual memory management (cuMemMap)");
        prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop_.location.id = dev_;
        size_t gran = 0;
        check(drv_.cuMemGetAllocationGranularity(&gran, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              "cuMemGetAllocationGranularity");
        if (gran == 0 || kPage % static_cast<int64_t>(gran)) throw Error("page pool: the GPU's granularity does not divide 2 MiB");
        try {
            check(drv_.cuMemAddressReserve(&base_, static_cast<size_t>(va), static_cast<size_t>(kPage), 0, 0),
                  "cuMemAddressReserve");
            handles_.reserve(static_cast<size_t>(pages));
            for (int64_t i = 0; i < pages; ++i) {
                CUmemGenericAllocationHandle h = 0;
                check(drv_.cuMemCreate(&h, static_cast<size_t>(kPage), &prop_, 0),
                      "cuMemCreate (the pool does not fit the GPU?)");
                handles_.push_back(h);
            }
            shown_.assign(static_cast<size_t>(va / kPage), -1);
            live_.assign(static_cast<size_t>(va / kPage));
            // Virtual page i shows pool page i (page tables built now, before any replay): an
            // arena that takes ranges and pages lowest first then maps nothing itself.
            if (premap) {
                std::vector<int32_t> identity(static_cast<size_t>(std::min(pages, va / kPage)));
                for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int32_t>(i);
                show(0, identity.data(), static_cast<int64_t>(identity.size()));
            }
        } catch (...) {
            release();
            throw;
        }
    }
    ~CudaMapper() override { release(); }

    unsigned char* base() override { return reinterpret_cast<unsigned char*>(base_); }
    int64_t va_bytes() const override { return va_; }
    int64_t pool_pages() const override { return pages_; }
    int64_t mapped_pages() const override { return live_.mapped(); }
    int64_t pages_remapped() const override { return remapped_; }
    int32_t shown_page(int64_t va_off) const override {
        return va_off >= 0 && va_off < va_ ? shown_[static_cast<size_t>(va_off / kPage)] : -1;
    }

    void map(int64_t va_off, const int32_t* pages, int64_t n) override {
        range(va_off, n);
        const size_t v0 = static_cast<size_t>(va_off / kPage);
        live_.check_map(v0, pages, n, pages_);
        show(va_off, pages, n);
        live_.map(v0, n);
    }
    // The range is free again; its pages stay mapped (so a stale access still reaches them instead
    // of faulting, as on the host) until map() needs the virtual pages for others.
    void unmap(int64_t va_off, int64_t n) override {
        range(va_off, n);
        live_.unmap(static_cast<size_t>(va_off / kPage), n);
    }

private:
    // Virtual pages va_off.. show pages[0..n): the driver is called only for those that show
    // another page (or none): those are unmapped once the device is idle (work queued before
    // their range was freed may still read them), then mapped, access set per run.
    void show(int64_t va_off, const int32_t* pages, int64_t n) {
        const size_t v0 = static_cast<size_t>(va_off / kPage);
        bool stale = false;
        for (int64_t i = 0; i < n; ++i) {
            const int32_t was = shown_[v0 + static_cast<size_t>(i)];
            stale = stale || (was >= 0 && was != pages[i]);
        }
        if (stale) check(drv_.cuCtxSynchronize(), "cuCtxSynchronize");
        for (int64_t i = 0; i < n;) {
            if (shown_[v0 + static_cast<size_t>(i)] == pages[i]) {
                ++i;
                continue;
            }
            int64_t end = i;
            // A run's pages without access must not look mapped: undone when a call fails.
            auto undo = [&] {
                for (int64_t k = i; k < end; ++k) {
                    drv_.cuMemUnmap(base_ + static_cast<CUdeviceptr>(va_off + k * kPage), static_cast<size_t>(kPage));
                    shown_[v0 + static_cast<size_t>(k)] = -1;
                }
            };
            try {
                for (; end < n && shown_[v0 + static_cast<size_t>(end)] != pages[end]; ++end) {
                    const CUdeviceptr at = base_ + static_cast<CUdeviceptr>(va_off + end * kPage);
                    int32_t& shown = shown_[v0 + static_cast<size_t>(end)];
                    if (shown >= 0) {
                        check(drv_.cuMemUnmap(at, static_cast<size_t>(kPage)), "cuMemUnmap");
                        shown = -1;
                    }
                    check(
                        drv_.cuMemMap(at, static_cast<size_t>(kPage), 0, handles_[static_cast<size_t>(pages[end])], 0),
                        "cuMemMap");
                    shown = pages[end];
                    ++remapped_;
                }
                CUmemAccessDesc acc{};
                acc.location = prop_.location;
                acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                const CUdeviceptr from = base_ + static_cast<CUdeviceptr>(va_off + i * kPage);
                check(drv_.cuMemSetAccess(from, static_cast<size_t>((end - i) * kPage), &acc, 1), "cuMemSetAccess");
            } catch (...) {
                undo();
                throw;
            }
            i = end;
        }
    }
    void check(CUresult result, const char* what) const {
        if (result == CUDA_SUCCESS) return;
        const char* name = nullptr;
        drv_.cuGetErrorName(result, &name);
        throw Error(std::string("page pool: ") + what + ": " + (name ? name : "CUDA error"));
    }
    void range(int64_t va_off, int64_t n) const {
        if (va_off < 0 || va_off % kPage || n < 0 || va_off + n * kPage > va_)
            throw Error("page pool: virtual range outside the reservation", Error::Kind::Internal);
    }
    void release() {   // best effort on teardown: errors here have nowhere to go
        const bool any = std::any_of(shown_.begin(), shown_.end(), [](int32_t page) { return page >= 0; });
        if (base_ && any) {
            drv_.cuCtxSynchronize();   // work queued on the range must finish first
            for (size_t v = 0; v < shown_.size(); ++v)
                if (shown_[v] >= 0)
                    drv_.cuMemUnmap(base_ + static_cast<CUdeviceptr>(v) * static_cast<CUdeviceptr>(kPage),
                                    static_cast<size_t>(kPage));
        }
        shown_.clear();
        live_.clear();
        for (auto handle : handles_) drv_.cuMemRelease(handle);
        handles_.clear();
        if (base_) drv_.cuMemAddressFree(base_, static_cast<size_t>(va_));
        base_ = 0;
        if (retained_) drv_.cuDevicePrimaryCtxRelease(dev_);
        retained_ = false;
    }
    const CudaDriver& drv_;
    int64_t pages_, va_, remapped_ = 0;
    CUdevice dev_ = 0;
    bool retained_ = false;
    CUmemAllocationProp prop_{};
    CUdeviceptr base_ = 0;
    std::vector<CUmemGenericAllocationHandle> handles_;
    std::vector<int32_t> shown_;   // per virtual page: the pool page mapped there, -1: none
    detail::LivePages live_;
};

}   // namespace

std::unique_ptr<PageMapper> make_cuda_mapper(const CudaDriver& driver, int64_t pool_pages, int64_t va_bytes,
                                             bool premap) {
    return std::make_unique<CudaMapper>(driver, pool_pages, va_bytes, premap);
}

}   // namespace detail

std::unique_ptr<PageMapper> make_cuda_mapper(int64_t pool_pages, int64_t va_bytes, bool premap) {
    return detail::make_cuda_mapper(detail::cuda_driver(), pool_pages, va_bytes, premap);
}

}  // namespace mhc::replay

#else

namespace mhc::replay {
std::unique_ptr<PageMapper> make_cuda_mapper(int64_t, int64_t, bool) {
    throw Error("the cuda backend needs a CUDA build (this one has none)");
}
}  // namespace mhc::replay

#endif
