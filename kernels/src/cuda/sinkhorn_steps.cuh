#pragma once
// Per-thread building blocks of the CUDA Sinkhorn kernels (sinkhorn.cu): element loads and
// stores (bf16/fp32, n = 4 with 16-byte vectors), the rowmax shift, plain and logsumexp
// normalisation steps, marginal errors and the per-warp statistics merge. NC is the
// compile-time n (0: runtime n, arrays sized for kSinkhornMaxN).
//
// Loops over a row or a column unroll fully for NC = 4 and by 4 for runtime n: the runtime-n
// arrays are indexed by i * n + j with n unknown, so they live in local memory however far the
// loop unrolls, and unrolling all 16 x 16 steps (with the exits for i, j >= n) cost about 90%
// of the kernels' compile time for 128-242 registers a thread (now 40-64).
#include <cuda_bf16.h>

#include <cstdint>

#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::kernels::cuda_impl::sk {

constexpr int kMaxN = kSinkhornMaxN;

struct Stats {
    unsigned int row_bits, col_bits;       // non-negative floats order like their bits
    unsigned long long worst;              // (error bits << 32) | token index within 32 bits
    unsigned long long iter_sum;
    int iter_max;
};

__device__ __forceinline__ float ld(const void* p, bool bf16, int64_t i) {
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void st(void* p, bool bf16, int64_t i, float v) {
    if (bf16)
        static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    else
        static_cast<float*>(p)[i] = v;
}

// Loads token t's n*n values; n = 4 with 16-byte vector loads (buffers are cudaMalloc'd).
template <int NC>
__device__ __forceinline__ void load_mat(const void* p, bool bf16, int64_t t, int n, float* a) {
    if constexpr (NC == 4) {
        if (bf16) {
            const uint4* q = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p) + t * 16);
            uint4 v[2] = {__ldg(q), __ldg(q + 1)};
            const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(v);
            for (int k = 0; k < 8; ++k) {
                float2 f = __bfloat1622float2(b[k]);
                a[2 * k] = f.x;
                a[2 * k + 1] = f.y;
            }
        } else {
            const float4* q = reinterpret_cast<const float4*>(static_cast<const float*>(p) + t * 16);
            for (int k = 0; k < 4; ++k) {
                float4 f = __ldg(q + k);
                a[4 * k] = f.x;
                a[4 * k + 1] = f.y;
                a[4 * k + 2] = f.z;
                a[4 * k + 3] = f.w;
            }
        }
    } else {
        const int nn = n * n;
        for (int k = 0; k < nn; ++k) a[k] = ld(p, bf16, t * nn + k);
    }
}

template <int NC>
__device__ __forceinline__ void store_mat(void* p, bool bf16, int64_t t, int n, const float* a) {
    if constexpr (NC == 4) {
        if (bf16) {
            uint4 v[2];
            __nv_bfloat162* b = reinterpret_cast<__nv_bfloat162*>(v);
            for (int k = 0; k < 8; ++k) b[k] = __floats2bfloat162_rn(a[2 * k], a[2 * k + 1]);
            uint4* q = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p) + t * 16);
            __stcs(q, v[0]);  // streaming: the output is not read again by this kernel
            __stcs(q + 1, v[1]);
        } else {
            float4* q = reinterpret_cast<float4*>(static_cast<float*>(p) + t * 16);
            for (int k = 0; k < 4; ++k) __stcs(q + k, make_float4(a[4 * k], a[4 * k + 1], a[4 * k + 2], a[4 * k + 3]));
        }
    } else {
        const int nn = n * n;
        for (int k = 0; k < nn; ++k) st(p, bf16, t * nn + k, a[k]);
    }
}

// exp(H - rowmax) (plain) or H - rowmax (log) in place; amax receives each row's argmax.
template <int NC, bool LOG>
__device__ __forceinline__ void shift_rows(int n, float* a, int* amax) {
#pragma unroll (NC ? NC : 4)
    for (int i = 0; i < (NC ? NC : kMaxN); ++i) {
        if (!NC && i >= n) break;
        int am = 0;
        float m = a[i * n];
#pragma unroll (NC ? NC : 4)
        for (int j = 1; j < (NC ? NC : kMaxN); ++j) {
            if (!NC && j >= n) break;
            if (a[i * n + j] > m) { m = a[i * n + j]; am = j; }
        }
#pragma unroll (NC ? NC : 4)
        for (int j = 0; j < (NC ? NC : kMaxN); ++j) {
            if (!NC && j >= n) break;
            a[i * n + j] = LOG ? a[i * n + j] - m : expf(a[i * n + j] - m);
        }
        if (amax) amax[i] = am;
    }
}

__device__ __forceinline__ float fast_rcp(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));  // x = s + eps >= eps: never subnormal
    return r;
}

// Plain normalisation of rows (ROWS) or columns; factors to inv[] when given.
template <int NC, bool ROWS>
__device__ __forceinline__ void norm_step(int n, float* a, float eps, float* inv) {
#pragma unroll (NC ? NC : 4)
    for (int x = 0; x < (NC ? NC : kMaxN); ++x) {
        if (!NC && x >= n) break;
        float s = 0;
#pragma unroll (NC ? NC : 4)
        for (int y = 0; y < (NC ? NC : kMaxN); ++y) {
            if (!NC && y >= n) break;
            s += a[ROWS ? x * n + y : y * n + x];
        }
        const float f = fast_rcp(s + eps);
#pragma unroll (NC ? NC : 4)
        for (int y = 0; y < (NC ? NC : kMaxN); ++y) {
            if (!NC && y >= n) break;
            a[ROWS ? x * n + y : y * n + x] *= f;
        }
        if (inv) inv[x] = f;
    }
}

// logsumexp step: upd[x] = -lse_y(L(x,y) + oth[y]).
template <int NC, bool ROWS>
__device__ __forceinline__ void lse_step(int n, const float* L, float* upd, const float* oth) {
#pragma unroll (NC ? NC : 4)
    for (int x = 0; x < (NC ? NC : kMaxN); ++x) {
        if (!NC && x >= n) break;
        float m = -3.0e38f, s = 0;
#pragma unroll (NC ? NC : 4)
        for (int y = 0; y < (NC ? NC : kMaxN); ++y) {
            if (!NC && y >= n) break;
            m = fmaxf(m, L[ROWS ? x * n + y : y * n + x] + oth[y]);
        }
#pragma unroll (NC ? NC : 4)
        for (int y = 0; y < (NC ? NC : kMaxN); ++y) {
            if (!NC && y >= n) break;
            s += expf(L[ROWS ? x * n + y : y * n + x] + oth[y] - m);
        }
        upd[x] = -(m + logf(s));
    }
}

template <int NC>
__device__ __forceinline__ void log_exp(int n, const float* L, const float* f, const float* g, float* p) {
#pragma unroll (NC ? NC : 4)
    for (int i = 0; i < (NC ? NC : kMaxN); ++i) {
        if (!NC && i >= n) break;
#pragma unroll (NC ? NC : 4)
        for (int j = 0; j < (NC ? NC : kMaxN); ++j) {
            if (!NC && j >= n) break;
            p[i * n + j] = expf(L[i * n + j] + f[i] + g[j]);
        }
    }
}

template <int NC>
__device__ __forceinline__ void marginals(int n, const float* p, float& re, float& ce) {
    re = 0;
    ce = 0;
#pragma unroll (NC ? NC : 4)
    for (int i = 0; i < (NC ? NC : kMaxN); ++i) {
        if (!NC && i >= n) break;
        float r = 0, c = 0;
#pragma unroll (NC ? NC : 4)
        for (int j = 0; j < (NC ? NC : kMaxN); ++j) {
            if (!NC && j >= n) break;
            r += p[i * n + j];
            c += p[j * n + i];
        }
        float dr = fabsf(r - 1.0f), dc = fabsf(c - 1.0f);
        re = fmaxf(re, dr != dr ? __int_as_float(0x7f800000) : dr);  // NaN shows as inf
        ce = fmaxf(ce, dc != dc ? __int_as_float(0x7f800000) : dc);
    }
}

__device__ inline void add_stats(Stats* s, bool valid, int64_t t, float re, float ce, int its) {
    const unsigned lane = threadIdx.x & 31;
    unsigned rb = valid ? __float_as_uint(re) : 0, cb = valid ? __float_as_uint(ce) : 0;
    unsigned long long key =
        valid ? (static_cast<unsigned long long>(__float_as_uint(fmaxf(re, ce))) << 32) | static_cast<uint32_t>(t) : 0;
    unsigned long long isum = valid ? its : 0;
    int imax = valid ? its : 0;
    for (int o = 16; o > 0; o >>= 1) {
        rb = max(rb, __shfl_down_sync(0xffffffffu, rb, o));
        cb = max(cb, __shfl_down_sync(0xffffffffu, cb, o));
        key = max(key, __shfl_down_sync(0xffffffffu, key, o));
        isum += __shfl_down_sync(0xffffffffu, isum, o);
        imax = max(imax, __shfl_down_sync(0xffffffffu, imax, o));
    }
    if (lane == 0) {
        atomicMax(&s->row_bits, rb);
        atomicMax(&s->col_bits, cb);
        atomicMax(&s->worst, key);
        atomicAdd(&s->iter_sum, isum);
        atomicMax(&s->iter_max, imax);
    }
}

}  // namespace mhc::kernels::cuda_impl::sk
