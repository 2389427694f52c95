// CUDA Sinkhorn, the host side: checks, stream, scratch and statistics of one call, and the
// choice of kernels: the fused n = 4 ones (sinkhorn_fused.cuh) or the first version's
// (sinkhorn_kernels.cuh, SinkhornOptions::cuda_kernels). The first version's backward keeps
// each iteration's inv (or f, g) vectors in a global scratch; the call runs over chunks of
// tokens so the scratch stays bounded.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../cuda_backend.hpp"
#include "check.hpp"
#include "sinkhorn_launch.cuh"

namespace mhc::kernels::cuda_impl {

namespace {

using namespace sk;

// Releases the call's CUDA resources even when a check throws midway.
struct CallResources {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    Stats* stats = nullptr;
    float* hist = nullptr;
    ~CallResources() {
        if (hist) cudaFreeAsync(hist, stream);
        if (stats) cudaFreeAsync(stats, stream);
        if (stream) cudaStreamSynchronize(stream);
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        if (stream) cudaStreamDestroy(stream);
    }
};

SinkhornReport finish(CallResources& r, int64_t T, SinkhornReport rep);

SinkhornReport run(const SinkhornOptions& o, int64_t T, ConstTensor H, ConstTensor G, Tensor P, Tensor dH,
                   bool backward) {
    SinkhornReport rep;
    rep.tokens = T;
    rep.backend = "cuda";   // named once the kernels are chosen
    if (T == 0) return rep;
    CallResources r;
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    MHC_CUDA_CHECK(cudaEventCreate(&r.start));
    MHC_CUDA_CHECK(cudaEventCreate(&r.stop));
    MHC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&r.stats), sizeof(Stats), r.stream));
    MHC_CUDA_CHECK(cudaMemsetAsync(r.stats, 0, sizeof(Stats), r.stream));

    Args a{};
    a.H = H.data;
    a.G = G.data;
    a.P = P.data;
    a.dH = dH.data;
    a.h_bf16 = H.dtype == DType::BF16;
    a.out_bf16 = (backward ? dH.dtype : P.dtype) == DType::BF16;
    if (backward && P.data && P.dtype != dH.dtype)
        throw Error("CUDA backward: P and dH must have the same element type", Error::Kind::Internal);
    if (backward && G.dtype != H.dtype)
        throw Error("CUDA backward: G and H must have the same element type", Error::Kind::Internal);
    // Vector loads need 16-byte aligned buffers (cudaMalloc gives 256); element alignment is
    // the least any load needs, and a misaligned access would end the CUDA context.
    bool vec = true;
    for (const void* p : {H.data, G.data, static_cast<const void*>(P.data), static_cast<const void*>(dH.data)}) {
        const auto addr = reinterpret_cast<uintptr_t>(p);
        if (addr % 16 != 0) vec = false;
    }
    const size_t esize_in = a.h_bf16 ? 2 : 4, esize_out = a.out_bf16 ? 2 : 4;
    for (const void* p : {H.data, G.data})
        if (reinterpret_cast<uintptr_t>(p) % esize_in != 0)
            throw Error("CUDA Sinkhorn: an input buffer is not aligned to its element size");
    for (const void* p : {static_cast<const void*>(P.data), static_cast<const void*>(dH.data)})
        if (reinterpret_cast<uintptr_t>(p) % esize_out != 0)
            throw Error("CUDA Sinkhorn: an output buffer is not aligned to its element size");
    a.generic = !vec;
    a.n = o.n;
    a.iters = o.iters;
    a.eps = o.eps;
    a.tol = o.tol;
    a.column_first = o.column_first;
    a.stats = r.stats;

    int dev = 0, sms = 0, smem_optin = 0;
    MHC_CUDA_CHECK(cudaGetDevice(&dev));
    MHC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    MHC_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    // The fused kernels: n = 4, and for the backward a history that leaves room for two
    // blocks per multiprocessor (iters <= 56 on sm_90, <= 40 on sm_80 at 64 threads a block).
    const bool fused = o.cuda_kernels != CudaSinkhornKernels::Baseline && o.n == 4 &&
                       (!backward || fused_backward_smem(o.iters) <= static_cast<size_t>(smem_optin) / 2);
    rep.backend = fused ? "cuda-fused" : "cuda-baseline";
    if (fused) {
        FusedArgs f{};
        f.H = H.data;
        f.G = G.data;
        f.P = P.data;
        f.dH = dH.data;
        f.h_bf16 = a.h_bf16;
        f.out_bf16 = a.out_bf16;
        f.vec = vec;
        f.column_first = o.column_first;
        f.T = T;
        f.iters = o.iters;
        f.eps = o.eps;
        f.tol = o.tol;
        f.sms = sms;
        f.stats = r.stats;
        if (o.log_domain)
            backward ? launch_fused<true, true>(f, r.stream, r.start) : launch_fused<true, false>(f, r.stream, r.start);
        else
            backward ? launch_fused<false, true>(f, r.stream, r.start)
                     : launch_fused<false, false>(f, r.stream, r.start);
        MHC_CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
        return finish(r, T, rep);
    }

    // Backward scratch: 2n floats per iteration and token, for at most ~256 MiB of tokens.
    int64_t chunk = T;
    if (backward) {
        const int64_t per_token = static_cast<int64_t>(o.iters) * 2 * o.n * 4;
        chunk = std::max<int64_t>(kThreads, std::min<int64_t>(T, (int64_t{256} << 20) / per_token));
        MHC_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&r.hist), per_token * chunk, r.stream));
    }
    a.hist = r.hist;
    a.chunk = chunk;

    MHC_CUDA_CHECK(cudaEventRecord(r.start, r.stream));
    for (int64_t b = 0; b < T; b += chunk) {
        a.t_begin = b;
        a.t_end = std::min(T, b + chunk);
        if (o.log_domain) backward ? launch<true, true>(a, r.stream) : launch<true, false>(a, r.stream);
        else backward ? launch<false, true>(a, r.stream) : launch<false, false>(a, r.stream);
    }
    MHC_CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
    return finish(r, T, rep);
}

// Waits for the call and fills the report from its statistics and events.
SinkhornReport finish(CallResources& r, int64_t T, SinkhornReport rep) {
    Stats s{};
    MHC_CUDA_CHECK(cudaMemcpyAsync(&s, r.stats, sizeof(Stats), cudaMemcpyDeviceToHost, r.stream));
    MHC_CUDA_CHECK(cudaStreamSynchronize(r.stream));
    float ms = 0;
    MHC_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));

    auto as_float = [](unsigned bits) {
        float f;
        std::memcpy(&f, &bits, 4);
        return static_cast<double>(f);
    };
    rep.max_row_err = as_float(s.row_bits);
    rep.max_col_err = as_float(s.col_bits);
    rep.worst_token = static_cast<int64_t>(s.worst & 0xffffffffull);
    if (T > (int64_t{1} << 32)) rep.worst_token = -1;  // the index did not fit the packed key
    rep.iters_max = s.iter_max;
    rep.iters_mean = static_cast<double>(s.iter_sum) / T;
    rep.seconds = ms * 1e-3;
    return rep;
}

}  // namespace

SinkhornReport sinkhorn_forward(const SinkhornOptions& o, int64_t T, ConstTensor H, Tensor P) {
    return run(o, T, H, {}, P, {}, false);
}

SinkhornReport sinkhorn_backward(const SinkhornOptions& o, int64_t T, ConstTensor H, ConstTensor G, Tensor dH,
                                 Tensor P) {
    return run(o, T, H, G, P, dH, true);
}

}  // namespace mhc::kernels::cuda_impl
