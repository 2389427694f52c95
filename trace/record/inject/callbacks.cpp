// CUPTI callbacks: activity buffers, allocations seen by driver callbacks, and kernel
// launches whose arguments are gathered for access inference (docs/recording.md).
#include "callbacks.hpp"

#include <cuda.h>   // cupti.h brings the generated *_params structs

#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mhc/record/params.hpp"
#include "recorder.hpp"

namespace mhc::record::inject {

namespace {

using Layout = std::vector<ParamSlot>;
using LayoutPtr = std::shared_ptr<const Layout>;

// The runtime call around the current driver call (kernel records may carry its id).
thread_local uint32_t tls_runtime_corr = 0;
// Parameter layouts per function: a per-thread cache in front of a shared one, so that the
// steady state takes no lock.
thread_local std::unordered_map<CUfunction, LayoutPtr> tls_layouts;
std::mutex g_layout_mu;
std::unordered_map<CUfunction, LayoutPtr>* g_layouts = new std::unordered_map<CUfunction, LayoutPtr>();
thread_local std::unordered_map<CUcontext, uint32_t> tls_devices;

uint64_t now() {
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return t;
}

uint32_t device_of(CUcontext ctx) {
    auto it = tls_devices.find(ctx);
    if (it != tls_devices.end()) return it->second;
    uint32_t dev = 0;
    if (ctx && cuptiGetDeviceId(ctx, &dev) != CUPTI_SUCCESS) dev = 0;
    tls_devices.emplace(ctx, dev);
    return dev;
}

uint64_t stream_of(CUcontext ctx, CUstream s, bool per_thread) {
    uint32_t id = 0;
    if (!ctx || cuptiGetStreamIdEx(ctx, s, per_thread ? 1 : 0, &id) != CUPTI_SUCCESS) return 0;
    return id;
}

Layout query_layout(CUfunction f) {
    Layout l;
    constexpr size_t kMaxParams = 4096;   // 32 KiB of parameters at one byte each
    for (size_t i = 0; i < kMaxParams; ++i) {
        size_t off = 0, size = 0;
        CUresult r = cuFuncGetParamInfo(f, i, &off, &size);
        if (r != CUDA_SUCCESS && i == 0 && r != CUDA_ERROR_INVALID_VALUE) {
            // cuLaunchKernel also accepts a CUkernel in place of a CUfunction.
            r = cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), i, &off, &size);
            if (r == CUDA_SUCCESS) {
                l.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
                for (size_t j = 1; j < kMaxParams; ++j) {
                    if (cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), j, &off, &size) !=
                        CUDA_SUCCESS)
                        break;
                    l.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
                }
            }
            return l;
        }
        if (r != CUDA_SUCCESS) break;   // CUDA_ERROR_INVALID_VALUE: past the last parameter
        l.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
    }
    return l;
}

const Layout& layout_of(CUfunction f) {
    auto it = tls_layouts.find(f);
    if (it != tls_layouts.end()) return *it->second;
    LayoutPtr p;
    {
        std::lock_guard<std::mutex> lk(g_layout_mu);
        auto g = g_layouts->find(f);
        if (g != g_layouts->end()) p = g->second;
    }
    if (!p) {
        p = std::make_shared<const Layout>(query_layout(f));
        std::lock_guard<std::mutex> lk(g_layout_mu);
        g_layouts->emplace(f, p);
    }
    return *tls_layouts.emplace(f, p).first->second;
}

void on_launch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
    CUfunction f = nullptr;
    void** params = nullptr;
    void** extra = nullptr;
    switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
            const auto* p = static_cast<const cuLaunchKernel_params*>(cb->functionParams);
            f = p->f, params = p->kernelParams, extra = p->extra;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
            const auto* p = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams);
            f = p->f, params = p->kernelParams, extra = p->extra;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
            const auto* p = static_cast<const cuLaunchCooperativeKernel_params*>(cb->functionParams);
            f = p->f, params = p->kernelParams;
            break;
        }
        default: return;
    }
    if (!f) return;
    const Layout& layout = layout_of(f);
    LaunchEvent e;
    e.correlation = cb->correlationId;
    e.runtime_correlation = tls_runtime_corr;
    e.t = now();
    e.device = device_of(cb->context);
    if (params) {
        gather_words(layout.data(), layout.size(), params, e.words);
    } else if (extra) {
        const void* buf = nullptr;
        size_t size = 0;
        for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
                size = *static_cast<const size_t*>(extra[i + 1]);
        }
        gather_words_packed(layout.data(), layout.size(), buf, size, e.words);
    }
    Recorder::get().push(std::move(e));
}

void on_memory(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
    const void* fp = cb->functionParams;
    const uint64_t t_enter = cb->correlationData ? *cb->correlationData : 0;
    AllocEvent a;
    a.t = now();
    a.t_enter = t_enter ? t_enter : a.t;
    a.device = device_of(cb->context);
    // The ids CUPTI's memory record of this operation will carry (the driver call's or the runtime
    // call's around it): how the translator pairs the record with this callback.
    a.correlation = cb->correlationId;
    a.runtime_correlation = tls_runtime_corr;
    FreeEvent fr;
    fr.t = a.t;
    fr.device = a.device;
    fr.correlation = a.correlation;
    fr.runtime_correlation = a.runtime_correlation;
    bool is_alloc = true;
    switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
            const auto* p = static_cast<const cuMemAlloc_v2_params*>(fp);
            a.address = *p->dptr, a.bytes = p->bytesize, a.api = "cuMemAlloc";
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
            const auto* p = static_cast<const cuMemAllocPitch_v2_params*>(fp);
            a.address = *p->dptr, a.bytes = *p->pPitch * p->Height, a.api = "cuMemAllocPitch";
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
            const auto* p = static_cast<const cuMemAllocManaged_params*>(fp);
            a.address = *p->dptr, a.bytes = p->bytesize, a.api = "cuMemAllocManaged";
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
            const auto* p = static_cast<const cuMemAllocAsync_params*>(fp);
            a.address = *p->dptr, a.bytes = p->bytesize, a.api = "cuMemAllocAsync", a.pool = true;
            a.stream = stream_of(cb->context, p->hStream,
                                 cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
            const auto* p = static_cast<const cuMemAllocFromPoolAsync_params*>(fp);
            a.address = *p->dptr, a.bytes = p->bytesize, a.api = "cuMemAllocFromPoolAsync";
            a.pool = true;
            a.stream = stream_of(cb->context, p->hStream,
                                 cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
            const auto* p = static_cast<const cuMemMap_params*>(fp);
            a.address = p->ptr, a.bytes = p->size, a.api = "cuMemMap", a.source = AllocSource::Vmm;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
            is_alloc = false;
            fr.address = static_cast<const cuMemFree_v2_params*>(fp)->dptr;
            break;
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
            const auto* p = static_cast<const cuMemFreeAsync_params*>(fp);
            is_alloc = false;
            fr.address = p->dptr;
            fr.stream = stream_of(cb->context, p->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
            const auto* p = static_cast<const cuMemUnmap_params*>(fp);
            is_alloc = false;
            fr.address = p->ptr, fr.bytes = p->size, fr.source = AllocSource::Vmm;
            break;
        }
        default: return;
    }
    if (is_alloc) Recorder::get().push(a);
    else Recorder::get().push(fr);
}

bool is_memory(CUpti_CallbackId cbid) {
    switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
        case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: return true;
        default: return false;
    }
}

constexpr CUpti_CallbackId kLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000};
constexpr CUpti_CallbackId kMemory[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap};
// Runtime calls around the memory calls: their correlation id, which the memory record may carry.
constexpr CUpti_CallbackId kRuntimeMemory[] = {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
                                               CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020};
constexpr CUpti_CallbackId kFlushPoints[] = {
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2};

}  // namespace

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    Recorder& rec = Recorder::get();
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;   // as many as fit
    if (!rec.active()) return;   // CUPTI counts what it cannot store as dropped
    void* p = nullptr;
    size_t n = rec.config().buffer_bytes;
    if (posix_memalign(&p, 8, n) != 0) return;
    *buffer = static_cast<uint8_t*>(p);
    *size = n;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
    Recorder& rec = Recorder::get();
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        rec.add_dropped(dropped);
    if (!buffer) return;
    if (valid == 0) {
        std::free(buffer);
        return;
    }
    rec.push(ActivityBuffer{buffer, valid});   // frees it when not recording
}

bool enable_callbacks(CUpti_SubscriberHandle sub, bool accesses) {
    auto enable = [sub](CUpti_CallbackDomain d, CUpti_CallbackId id) {
        CUptiResult r = cuptiEnableCallback(1, sub, d, id);
        if (r == CUPTI_SUCCESS) return true;
        const char* s = nullptr;
        cuptiGetResultString(r, &s);
        Recorder::get().fail(std::string("cuptiEnableCallback(") + std::to_string(id) +
                             "): " + (s ? s : "error"));
        return false;
    };
    for (CUpti_CallbackId id : kMemory)
        if (!enable(CUPTI_CB_DOMAIN_DRIVER_API, id)) return false;
    for (CUpti_CallbackId id : kFlushPoints)
        if (!enable(CUPTI_CB_DOMAIN_DRIVER_API, id)) return false;
    // Not needed to record: without them a memory record is paired by the driver call's id or by
    // address and time.
    for (CUpti_CallbackId id : kRuntimeMemory) cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
    if (!enable(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020))
        return false;
    if (accesses) {
        for (CUpti_CallbackId id : kLaunches)
            if (!enable(CUPTI_CB_DOMAIN_DRIVER_API, id)) return false;
        for (CUpti_CallbackId id : kRuntimeLaunches)
            if (!enable(CUPTI_CB_DOMAIN_RUNTIME_API, id)) return false;
    }
    return true;
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                     const void* data) {
    Recorder& rec = Recorder::get();
    if (!rec.active() || !data) return;
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    const bool enter = cb->callbackSite == CUPTI_API_ENTER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
            if (enter) flush_activity("cudaDeviceReset");   // before the context goes away
            return;
        }
        tls_runtime_corr = enter ? cb->correlationId : 0;
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2 ||
        cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2) {
        if (enter) flush_activity(cb->functionName ? cb->functionName : "context reset");
        return;
    }
    if (enter) {
        if (is_memory(cbid) && cb->correlationData) *cb->correlationData = now();
        return;
    }
    const auto* ret = static_cast<const CUresult*>(cb->functionReturnValue);
    if (!ret || *ret != CUDA_SUCCESS) return;   // failed calls change nothing
    if (is_memory(cbid)) on_memory(cbid, cb);
    else on_launch(cbid, cb);
}

}  // namespace mhc::record::inject
