// CUDA page mapper: the pool is one cuMemCreate handle per 2 MiB page (so any page can back
// any virtual page), the virtual range one cuMemAddressReserve; a segment's pages are mapped
// with cuMemMap + cuMemSetAccess (what PyTorch's expandable segments do). Every driver call is
// checked; without a CUDA build make_cuda_mapper throws mhc::Error.
#include "mhc/common/error.hpp"
#include "mhc/replay/pages.hpp"

#ifdef MHC_REPLAY_HAVE_CUDA
#include <cuda.h>

#include <dlfcn.h>

#include <map>
#include <type_traits>
#include <string>
#include <vector>

namespace mhc::replay {

namespace {

// The driver is opened at run time, not linked: `mhc` and the tests must start on machines
// without a GPU driver (no libcuda.so.1), where only the cuda backend is unavailable.
#define MHC_STR2(x) #x
#define MHC_STR(x) MHC_STR2(x)   // expands cuda.h's versioned names (e.g. ..._v2) first
struct Driver {
    decltype(&::cuCtxGetCurrent) cuCtxGetCurrent = nullptr;
    decltype(&::cuCtxGetDevice) cuCtxGetDevice = nullptr;
    decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
    decltype(&::cuCtxSynchronize) cuCtxSynchronize = nullptr;
    decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
    decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute = nullptr;
    decltype(&::cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease = nullptr;
    decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
    decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
    decltype(&::cuInit) cuInit = nullptr;
    decltype(&::cuMemAddressFree) cuMemAddressFree = nullptr;
    decltype(&::cuMemAddressReserve) cuMemAddressReserve = nullptr;
    decltype(&::cuMemCreate) cuMemCreate = nullptr;
    decltype(&::cuMemGetAllocationGranularity) cuMemGetAllocationGranularity = nullptr;
    decltype(&::cuMemMap) cuMemMap = nullptr;
    decltype(&::cuMemRelease) cuMemRelease = nullptr;
    decltype(&::cuMemSetAccess) cuMemSetAccess = nullptr;
    decltype(&::cuMemUnmap) cuMemUnmap = nullptr;
};

const Driver& driver() {
    static const Driver d = [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) throw Error("page pool: the CUDA driver (libcuda.so.1) is not available on this machine");
        Driver t;
        auto load = [&](auto& fn, const char* sym) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, sym));
            if (!fn) throw Error(std::string("page pool: the CUDA driver lacks ") + sym);
        };
        load(t.cuCtxGetCurrent, MHC_STR(cuCtxGetCurrent));
        load(t.cuCtxGetDevice, MHC_STR(cuCtxGetDevice));
        load(t.cuCtxSetCurrent, MHC_STR(cuCtxSetCurrent));
        load(t.cuCtxSynchronize, MHC_STR(cuCtxSynchronize));
        load(t.cuDeviceGet, MHC_STR(cuDeviceGet));
        load(t.cuDeviceGetAttribute, MHC_STR(cuDeviceGetAttribute));
        load(t.cuDevicePrimaryCtxRelease, MHC_STR(cuDevicePrimaryCtxRelease));
        load(t.cuDevicePrimaryCtxRetain, MHC_STR(cuDevicePrimaryCtxRetain));
        load(t.cuGetErrorName, MHC_STR(cuGetErrorName));
        load(t.cuInit, MHC_STR(cuInit));
        load(t.cuMemAddressFree, MHC_STR(cuMemAddressFree));
        load(t.cuMemAddressReserve, MHC_STR(cuMemAddressReserve));
        load(t.cuMemCreate, MHC_STR(cuMemCreate));
        load(t.cuMemGetAllocationGranularity, MHC_STR(cuMemGetAllocationGranularity));
        load(t.cuMemMap, MHC_STR(cuMemMap));
        load(t.cuMemRelease, MHC_STR(cuMemRelease));
        load(t.cuMemSetAccess, MHC_STR(cuMemSetAccess));
        load(t.cuMemUnmap, MHC_STR(cuMemUnmap));
        return t;
    }();
    return d;
}

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    driver().cuGetErrorName(r, &name);
    throw Error(std::string("page pool: ") + what + ": " + (name ? name : "CUDA error"));
}

class CudaMapper final : public PageMapper {
public:
    CudaMapper(int64_t pages, int64_t va) : pages_(pages), va_(va) {
        check(driver().cuInit(0), "cuInit");
        CUcontext ctx = nullptr;
        check(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
        if (!ctx) {   // the runtime's primary context, so that cudart streams see the memory
            check(driver().cuDeviceGet(&dev_, 0), "cuDeviceGet");
            check(driver().cuDevicePrimaryCtxRetain(&ctx, dev_), "cuDevicePrimaryCtxRetain");
            retained_ = true;
            check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
        } else {
            check(driver().cuCtxGetDevice(&dev_), "cuCtxGetDevice");
        }
        int vmm = 0;
        check(driver().cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_), "cuDeviceGetAttribute");
        if (!vmm) throw Error("page pool: this GPU does not support virtual memory management (cuMemMap)");
        prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop_.location.id = dev_;
        size_t gran = 0;
        check(driver().cuMemGetAllocationGranularity(&gran, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
        if (gran == 0 || kPage % static_cast<int64_t>(gran)) throw Error("page pool: the GPU's granularity does not divide 2 MiB");
        try {
            check(driver().cuMemAddressReserve(&base_, static_cast<size_t>(va), static_cast<size_t>(kPage), 0, 0), "cuMemAddressReserve");
            handles_.reserve(static_cast<size_t>(pages));
            for (int64_t i = 0; i < pages; ++i) {
                CUmemGenericAllocationHandle h = 0;
                check(driver().cuMemCreate(&h, static_cast<size_t>(kPage), &prop_, 0), "cuMemCreate (the pool does not fit the GPU?)");
                handles_.push_back(h);
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
    int64_t mapped_pages() const override { return mapped_; }

    void map(int64_t va_off, const int32_t* pages, int64_t n) override {
        range(va_off, n);
        int64_t i = 0;
        struct Undo {   // a failed map leaves nothing half-mapped
            CudaMapper* m; int64_t off, *done;
            ~Undo() { for (int64_t k = 0; k < *done; ++k) driver().cuMemUnmap(m->base_ + static_cast<CUdeviceptr>(off + k * kPage), static_cast<size_t>(kPage)); }
        };
        int64_t undo_n = 0;
        Undo undo{this, va_off, &undo_n};
        for (; i < n; ++i, undo_n = i) {
            if (pages[i] < 0 || pages[i] >= pages_) throw Error("page pool: page outside the pool", Error::Kind::Internal);
            check(driver().cuMemMap(base_ + static_cast<CUdeviceptr>(va_off + i * kPage), static_cast<size_t>(kPage), 0,
                           handles_[static_cast<size_t>(pages[i])], 0),
                  "cuMemMap");
        }
        CUmemAccessDesc acc{};
        acc.location = prop_.location;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        check(driver().cuMemSetAccess(base_ + static_cast<CUdeviceptr>(va_off), static_cast<size_t>(n * kPage), &acc, 1), "cuMemSetAccess");
        undo_n = 0;
        ranges_[va_off] = n;
        mapped_ += n;
    }
    void unmap(int64_t va_off, int64_t n) override {
        range(va_off, n);
        // Work still queued on the range (copies, kernels) must finish first.
        check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
        ranges_.erase(va_off);
        for (int64_t i = 0; i < n; ++i)   // page by page, as each was mapped
            check(driver().cuMemUnmap(base_ + static_cast<CUdeviceptr>(va_off + i * kPage), static_cast<size_t>(kPage)), "cuMemUnmap");
        mapped_ -= n;
    }

private:
    void range(int64_t va_off, int64_t n) const {
        if (va_off < 0 || va_off % kPage || n < 0 || va_off + n * kPage > va_)
            throw Error("page pool: virtual range outside the reservation", Error::Kind::Internal);
    }
    void release() {   // best effort on teardown: errors here have nowhere to go
        if (base_ && !ranges_.empty()) {
            driver().cuCtxSynchronize();
            for (auto [off, n] : ranges_)
                for (int64_t i = 0; i < n; ++i) driver().cuMemUnmap(base_ + static_cast<CUdeviceptr>(off + i * kPage), static_cast<size_t>(kPage));
            ranges_.clear();
        }
        for (auto h : handles_) driver().cuMemRelease(h);
        handles_.clear();
        if (base_) driver().cuMemAddressFree(base_, static_cast<size_t>(va_));
        base_ = 0;
        if (retained_) driver().cuDevicePrimaryCtxRelease(dev_);
        retained_ = false;
    }
    int64_t pages_, va_, mapped_ = 0;
    CUdevice dev_ = 0;
    bool retained_ = false;
    CUmemAllocationProp prop_{};
    CUdeviceptr base_ = 0;
    std::vector<CUmemGenericAllocationHandle> handles_;
    std::map<int64_t, int64_t> ranges_;   // mapped: va_off -> pages
};

}  // namespace

std::unique_ptr<PageMapper> make_cuda_mapper(int64_t pool_pages, int64_t va_bytes) {
    return std::make_unique<CudaMapper>(pool_pages, va_bytes);
}

}  // namespace mhc::replay

#else

namespace mhc::replay {
std::unique_ptr<PageMapper> make_cuda_mapper(int64_t, int64_t) {
    throw Error("the cuda backend needs a CUDA build (this one has none)");
}
}  // namespace mhc::replay

#endif
