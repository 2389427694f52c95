#pragma once
// The fused CUDA Sinkhorn kernels for n = 4 (docs/kernels.md "CUDA implementation"): one thread
// per token with its matrix in registers (the arithmetic in sinkhorn_token.hpp), a grid-stride
// loop over the tokens on a grid sized by the occupancy API (launch_fused_one), the convergence statistics
// reduced per thread, per block and then merged with one set of atomics per block (the first
// version's atomics per warp all hit one address: 2.6 M of them for 16 M tokens), the column
// order and the tolerance mode as template parameters (no run-time branch in the iterations).
// The backward keeps each iteration's vectors in shared memory (8 floats an iteration and
// token, thread-private), not in a global scratch: nothing but H, G in and dH (and P) out
// touches memory. Loads are 16-byte vectors when every buffer is 16-byte aligned, element
// loads otherwise. Included by sinkhorn_fused_{forward,backward}_{plain,log}.cu through
// MHC_SINKHORN_FUSED_INSTANTIATE.
#include <cuda_bf16.h>

#include "check.hpp"
#include "sinkhorn_launch.cuh"
#include "sinkhorn_token.hpp"

namespace mhc::kernels::cuda_impl::sk {

// Token t's 16 values as floats.
__device__ __forceinline__ void load16(const void* p, bool bf16, bool vec, int64_t t, float* a) {
    if (bf16) {
        const __nv_bfloat16* b = static_cast<const __nv_bfloat16*>(p) + t * 16;
        if (vec) {
            const uint4* q = reinterpret_cast<const uint4*>(b);
            const uint4 v[2] = {__ldg(q), __ldg(q + 1)};
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(v);
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const float2 f = __bfloat1622float2(h[k]);
                a[2 * k] = f.x;
                a[2 * k + 1] = f.y;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) a[k] = __bfloat162float(b[k]);
        }
    } else {
        const float* f = static_cast<const float*>(p) + t * 16;
        if (vec) {
            const float4* q = reinterpret_cast<const float4*>(f);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float4 v = __ldg(q + k);
                a[4 * k] = v.x;
                a[4 * k + 1] = v.y;
                a[4 * k + 2] = v.z;
                a[4 * k + 3] = v.w;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) a[k] = __ldg(f + k);
        }
    }
}

// Streaming stores: the outputs are not read again by the kernel.
__device__ __forceinline__ void store16(void* p, bool bf16, bool vec, int64_t t, const float* a) {
    if (bf16) {
        __nv_bfloat16* b = static_cast<__nv_bfloat16*>(p) + t * 16;
        if (vec) {
            uint4 v[2];
            __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(v);
#pragma unroll
            for (int k = 0; k < 8; ++k) h[k] = __floats2bfloat162_rn(a[2 * k], a[2 * k + 1]);
            uint4* q = reinterpret_cast<uint4*>(b);
            __stcs(q, v[0]);
            __stcs(q + 1, v[1]);
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) b[k] = __float2bfloat16_rn(a[k]);
        }
    } else {
        float* f = static_cast<float*>(p) + t * 16;
        if (vec) {
            float4* q = reinterpret_cast<float4*>(f);
#pragma unroll
            for (int k = 0; k < 4; ++k) __stcs(q + k, make_float4(a[4 * k], a[4 * k + 1], a[4 * k + 2], a[4 * k + 3]));
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) f[k] = a[k];
        }
    }
}

// Asks L2 for the line holding the start of token t's input while the current token computes
// (a token is 32 or 64 bytes: one 128-byte line on the vector path).
__device__ __forceinline__ void prefetch16(const void* p, bool bf16, int64_t t) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(t) * (bf16 ? 32 : 64);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a & ~uintptr_t{127}));
}

// A thread's statistics over its tokens.
struct Acc {
    unsigned row_bits = 0, col_bits = 0;   // non-negative floats order like their bits
    unsigned long long worst = 0, iter_sum = 0;
    int iter_max = 0;

    __device__ __forceinline__ void add(int64_t t, float re, float ce, int its) {
        row_bits = max(row_bits, __float_as_uint(re));
        col_bits = max(col_bits, __float_as_uint(ce));
        worst = max(worst,
                    (static_cast<unsigned long long>(__float_as_uint(fmaxf(re, ce))) << 32) | static_cast<uint32_t>(t));
        iter_sum += static_cast<unsigned long long>(its);
        iter_max = max(iter_max, its);
    }
};

// Block-wide merge, then one thread's atomics. Every thread of the block must call it.
__device__ __forceinline__ void flush(Acc a, Stats* s) {
    for (int o = 16; o > 0; o >>= 1) {
        a.row_bits = max(a.row_bits, __shfl_down_sync(0xffffffffu, a.row_bits, o));
        a.col_bits = max(a.col_bits, __shfl_down_sync(0xffffffffu, a.col_bits, o));
        a.worst = max(a.worst, __shfl_down_sync(0xffffffffu, a.worst, o));
        a.iter_sum += __shfl_down_sync(0xffffffffu, a.iter_sum, o);
        a.iter_max = max(a.iter_max, __shfl_down_sync(0xffffffffu, a.iter_max, o));
    }
    __shared__ Acc warps[32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) warps[warp] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < nwarps; ++w) {
            a.row_bits = max(a.row_bits, warps[w].row_bits);
            a.col_bits = max(a.col_bits, warps[w].col_bits);
            a.worst = max(a.worst, warps[w].worst);
            a.iter_sum += warps[w].iter_sum;
            a.iter_max = max(a.iter_max, warps[w].iter_max);
        }
        if (a.iter_sum == 0) return;   // no token in this block
        atomicMax(&s->row_bits, a.row_bits);
        atomicMax(&s->col_bits, a.col_bits);
        atomicMax(&s->worst, a.worst);
        atomicAdd(&s->iter_sum, a.iter_sum);
        atomicMax(&s->iter_max, a.iter_max);
    }
}

// The backward's history in shared memory: iteration it's two vectors at base[(2 it + h) * stride],
// base = this thread's column (stride = blockDim.x float4s): a warp's access is 512
// contiguous bytes, no bank conflicts beyond the four wavefronts of a 16-byte access.
struct SmemHist {
    float4* base;
    int stride;
    __device__ __forceinline__ void put(int it, const float* q0, const float* q1) {
        base[(2 * it) * stride] = make_float4(q0[0], q0[1], q0[2], q0[3]);
        base[(2 * it + 1) * stride] = make_float4(q1[0], q1[1], q1[2], q1[3]);
    }
    __device__ __forceinline__ void get(int it, float* q0, float* q1) const {
        const float4 a = base[(2 * it) * stride], b = base[(2 * it + 1) * stride];
        q0[0] = a.x, q0[1] = a.y, q0[2] = a.z, q0[3] = a.w;
        q1[0] = b.x, q1[1] = b.y, q1[2] = b.z, q1[3] = b.w;
    }
};

template <bool LOG, bool COLFIRST, bool TOL>
__global__ void __launch_bounds__(kFusedForwardThreads) fused_forward_kernel(FusedArgs A) {
    Acc acc;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < A.T; t += stride) {
        if (t + stride < A.T) prefetch16(A.H, A.h_bf16, t + stride);
        float a[16];
        load16(A.H, A.h_bf16, A.vec, t, a);
        sk4::NoHist none;
        int amax;
        const int its = sk4::forward_token<LOG, COLFIRST, TOL>(a, A.iters, A.eps, A.tol, none, amax);
        float re, ce;
        sk4::marginals(a, re, ce);
        acc.add(t, re, ce, its);
        store16(A.P, A.out_bf16, A.vec, t, a);
    }
    flush(acc, A.stats);
}

template <bool LOG, bool COLFIRST, bool TOL>
__global__ void __launch_bounds__(kFusedBackwardThreads) fused_backward_kernel(FusedArgs A) {
    extern __shared__ float4 hist_smem[];
    const SmemHist hist{hist_smem + threadIdx.x, static_cast<int>(blockDim.x)};
    SmemHist put = hist;
    Acc acc;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < A.T; t += stride) {
        if (t + stride < A.T) {
            prefetch16(A.H, A.h_bf16, t + stride);
            prefetch16(A.G, A.h_bf16, t + stride);
        }
        // G is loaded first: its latency hides behind the forward's iterations (registers
        // are plentiful here, the shared memory sets the occupancy).
        float a[16], g[16];
        load16(A.G, A.h_bf16, A.vec, t, g);
        load16(A.H, A.h_bf16, A.vec, t, a);
        int amax;
        const int its = sk4::forward_token<LOG, COLFIRST, TOL>(a, A.iters, A.eps, A.tol, put, amax);
        float re, ce;
        sk4::marginals(a, re, ce);
        acc.add(t, re, ce, its);
        if (A.P) store16(A.P, A.out_bf16, A.vec, t, a);
        sk4::backward_token<LOG, COLFIRST>(a, g, its, amax, hist);
        store16(A.dH, A.out_bf16, A.vec, t, g);
    }
    flush(acc, A.stats);
}

template <bool LOG, bool BACKWARD, bool COLFIRST, bool TOL>
void launch_fused_one(const FusedArgs& a, cudaStream_t s, cudaEvent_t start) {
    const int threads = BACKWARD ? kFusedBackwardThreads : kFusedForwardThreads;
    const size_t smem = BACKWARD ? fused_backward_smem(a.iters) : 0;
    void (*kernel)(FusedArgs) = nullptr;
    if constexpr (BACKWARD) kernel = fused_backward_kernel<LOG, COLFIRST, TOL>;
    else kernel = fused_forward_kernel<LOG, COLFIRST, TOL>;
    if (BACKWARD) {
        MHC_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        MHC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
    }
    int per_sm = 0;
    MHC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    if (per_sm < 1) throw Error("CUDA Sinkhorn: the fused kernel does not fit on this device", Error::Kind::Internal);
    // The forward's residency is set by its registers: one wave. The backward's by shared
    // memory and the carveout the driver grants: four waves, so that a block fewer per
    // multiprocessor than computed costs a fraction of a wave, not a second one.
    const int64_t needed = (a.T + threads - 1) / threads;
    const int64_t full = static_cast<int64_t>(per_sm) * a.sms * (BACKWARD ? 4 : 1);
    const unsigned blocks = static_cast<unsigned>(needed < full ? needed : full);
    // The call's timing starts here, after the host-side set-up above (tens of microseconds).
    MHC_CUDA_CHECK(cudaEventRecord(start, s));
    kernel<<<blocks, threads, smem, s>>>(a);
    MHC_CUDA_CHECK_LAUNCH("fused sinkhorn kernel");
}

template <bool LOG, bool BACKWARD> void launch_fused(const FusedArgs& a, cudaStream_t s, cudaEvent_t start) {
    const bool tol = a.tol > 0.0f;
    if (a.column_first)
        tol ? launch_fused_one<LOG, BACKWARD, true, true>(a, s, start)
            : launch_fused_one<LOG, BACKWARD, true, false>(a, s, start);
    else
        tol ? launch_fused_one<LOG, BACKWARD, false, true>(a, s, start)
            : launch_fused_one<LOG, BACKWARD, false, false>(a, s, start);
}

}   // namespace mhc::kernels::cuda_impl::sk

#define MHC_SINKHORN_FUSED_INSTANTIATE(LOG, BACKWARD)                       \
    template void mhc::kernels::cuda_impl::sk::launch_fused<LOG, BACKWARD>( \
        const mhc::kernels::cuda_impl::sk::FusedArgs&, cudaStream_t, cudaEvent_t)
