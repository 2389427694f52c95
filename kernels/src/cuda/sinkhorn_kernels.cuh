#pragma once
// The CUDA Sinkhorn kernels: one thread per token, its matrix in registers (n = 4
// specialised; other n in per-thread local arrays). The same formulas as the CPU kernels
// (src/cpu/*): plain variant on the matrix with inv = 1 / (s + eps), log-domain with scaling
// vectors f, g. The backward recomputes the forward, keeping each iteration's inv (or f, g)
// vectors in a global scratch laid out [vector element][token] so that a warp's accesses
// coalesce. Included by the four translation units that instantiate them
// (sinkhorn_{forward,backward}_{plain,log}.cu), each through MHC_SINKHORN_INSTANTIATE: one
// file held all eight kernels and was the longest step of the build.
#include "check.hpp"
#include "sinkhorn_launch.cuh"

namespace mhc::kernels::cuda_impl::sk {

// Runs the plain iterations on a (per-thread); hist (backward) gets 2n inv per iteration.
template <int NC>
__device__ __forceinline__ int plain_iterations(const Args& A, int n, float* a, int64_t hi) {
    float inv[NC ? 2 * NC : 2 * kMaxN];
    for (int it = 0; it < A.iters; ++it) {
        float* ri = A.hist ? inv : nullptr;
        float* ci = A.hist ? inv + n : nullptr;
        if (A.column_first) {
            norm_step<NC, false>(n, a, A.eps, ci);
            norm_step<NC, true>(n, a, A.eps, ri);
        } else {
            norm_step<NC, true>(n, a, A.eps, ri);
            norm_step<NC, false>(n, a, A.eps, ci);
        }
        if (A.hist)
            for (int v = 0; v < 2 * n; ++v) A.hist[(static_cast<int64_t>(it) * 2 * n + v) * A.chunk + hi] = inv[v];
        if (A.tol > 0.0f) {
            float re, ce;
            marginals<NC>(n, a, re, ce);
            if (fmaxf(re, ce) <= A.tol) return it + 1;
        }
    }
    return A.iters;
}

template <int NC>
__device__ __forceinline__ int log_iterations(const Args& A, int n, const float* L, float* f, float* g, int64_t hi) {
    for (int i = 0; i < n; ++i) f[i] = g[i] = 0.0f;
    float p[NC ? NC * NC : kMaxN * kMaxN];
    for (int it = 0; it < A.iters; ++it) {
        if (A.column_first) {
            lse_step<NC, false>(n, L, g, f);
            lse_step<NC, true>(n, L, f, g);
        } else {
            lse_step<NC, true>(n, L, f, g);
            lse_step<NC, false>(n, L, g, f);
        }
        if (A.hist)
            for (int v = 0; v < n; ++v) {
                A.hist[(static_cast<int64_t>(it) * 2 * n + v) * A.chunk + hi] = f[v];
                A.hist[(static_cast<int64_t>(it) * 2 * n + n + v) * A.chunk + hi] = g[v];
            }
        if (A.tol > 0.0f) {
            float re, ce;
            log_exp<NC>(n, L, f, g, p);
            marginals<NC>(n, p, re, ce);
            if (fmaxf(re, ce) <= A.tol) return it + 1;
        }
    }
    return A.iters;
}

template <int NC, bool LOG>
__global__ void __launch_bounds__(kThreads) forward_kernel(Args A) {
    const int64_t t = A.t_begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const bool valid = t < A.t_end;
    const int n = NC ? NC : A.n;
    float a[NC ? NC * NC : kMaxN * kMaxN];
    float re = 0, ce = 0;
    int its = 0;
    if (valid) {
        load_mat<NC>(A.H, A.h_bf16, t, n, a);
        shift_rows<NC, LOG>(n, a, nullptr);
        if constexpr (LOG) {
            float f[NC ? NC : kMaxN], g[NC ? NC : kMaxN], p[NC ? NC * NC : kMaxN * kMaxN];
            its = log_iterations<NC>(A, n, a, f, g, 0);
            log_exp<NC>(n, a, f, g, p);
            for (int k = 0; k < n * n; ++k) a[k] = p[k];
        } else {
            its = plain_iterations<NC>(A, n, a, 0);
        }
        marginals<NC>(n, a, re, ce);
        store_mat<NC>(A.P, A.out_bf16, t, n, a);
    }
    add_stats(A.stats, valid, t, re, ce, its);
}

template <int NC, bool LOG>
__global__ void __launch_bounds__(kThreads) backward_kernel(Args A) {
    const int64_t hi = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t t = A.t_begin + hi;
    const bool valid = t < A.t_end;
    const int n = NC ? NC : A.n;
    constexpr int NN = NC ? NC * NC : kMaxN * kMaxN;
    float a[NN], m0[NN], g[NN];
    int amax[NC ? NC : kMaxN];
    float re = 0, ce = 0;
    int its = 0;
    if (valid) {
        load_mat<NC>(A.H, A.h_bf16, t, n, m0);
        shift_rows<NC, LOG>(n, m0, amax);
        load_mat<NC>(A.G, A.h_bf16, t, n, g);
        if constexpr (LOG) {
            float f[NC ? NC : kMaxN], gg[NC ? NC : kMaxN];
            its = log_iterations<NC>(A, n, m0, f, gg, hi);
            log_exp<NC>(n, m0, f, gg, a);
            marginals<NC>(n, a, re, ce);
            if (A.P) store_mat<NC>(A.P, A.out_bf16, t, n, a);
            for (int k = 0; k < n * n; ++k) g[k] *= a[k];
            for (int it = its - 1; it >= 0; --it) {
                // Vectors after iteration it (and before: it - 1, or zeros).
                float F1[NC ? NC : kMaxN], G1[NC ? NC : kMaxN], F0[NC ? NC : kMaxN], G0[NC ? NC : kMaxN];
                for (int v = 0; v < n; ++v) {
                    F1[v] = A.hist[(static_cast<int64_t>(it) * 2 * n + v) * A.chunk + hi];
                    G1[v] = A.hist[(static_cast<int64_t>(it) * 2 * n + n + v) * A.chunk + hi];
                    F0[v] = it ? A.hist[(static_cast<int64_t>(it - 1) * 2 * n + v) * A.chunk + hi] : 0.0f;
                    G0[v] = it ? A.hist[(static_cast<int64_t>(it - 1) * 2 * n + n + v) * A.chunk + hi] : 0.0f;
                }
                // Undo (rows) with f = fr, other = og: g -= exp(L + fr + og) * sum(g over the row).
                auto undo = [&](bool rows, const float* fr, const float* og) {
                    for (int x = 0; x < n; ++x) {
                        float d = 0;
                        for (int y = 0; y < n; ++y) d += g[rows ? x * n + y : y * n + x];
                        for (int y = 0; y < n; ++y) {
                            const int k = rows ? x * n + y : y * n + x;
                            g[k] -= expf(m0[k] + fr[x] + og[y]) * d;
                        }
                    }
                };
                if (A.column_first) {
                    undo(true, F1, G1);
                    undo(false, G1, F0);
                } else {
                    undo(false, G1, F1);
                    undo(true, F1, G0);
                }
            }
            for (int i = 0; i < n; ++i) {
                float s = 0;
                for (int j = 0; j < n; ++j) s += g[i * n + j];
                g[i * n + amax[i]] -= s;
            }
        } else {
            for (int k = 0; k < n * n; ++k) a[k] = m0[k];
            its = plain_iterations<NC>(A, n, a, hi);
            marginals<NC>(n, a, re, ce);
            if (A.P) store_mat<NC>(A.P, A.out_bf16, t, n, a);
            for (int it = its - 1; it >= 0; --it) {
                const float* base = A.hist;
                auto undo = [&](bool rows, int vec0) {
                    for (int x = 0; x < n; ++x) {
                        const float inv = base[(static_cast<int64_t>(it) * 2 * n + vec0 + x) * A.chunk + hi];
                        float d = 0;
                        for (int y = 0; y < n; ++y) {
                            const int k = rows ? x * n + y : y * n + x;
                            d += g[k] * a[k];
                        }
                        const float back = 1.0f / inv;
                        for (int y = 0; y < n; ++y) {
                            const int k = rows ? x * n + y : y * n + x;
                            g[k] = (g[k] - d) * inv;
                            a[k] *= back;
                        }
                    }
                };
                if (A.column_first) {
                    undo(true, 0);
                    undo(false, n);
                } else {
                    undo(false, n);
                    undo(true, 0);
                }
            }
            for (int i = 0; i < n; ++i) {
                float s = 0;
                for (int j = 0; j < n; ++j) {
                    g[i * n + j] *= m0[i * n + j];
                    s += g[i * n + j];
                }
                g[i * n + amax[i]] -= s;
            }
        }
        store_mat<NC>(A.dH, A.out_bf16, t, n, g);
    }
    add_stats(A.stats, valid, t, re, ce, its);
}

template <bool LOG, bool BACKWARD>
void launch(const Args& a, cudaStream_t s) {
    const int64_t count = a.t_end - a.t_begin;
    const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
    if constexpr (BACKWARD) {
        if (a.n == 4 && !a.generic) backward_kernel<4, LOG><<<blocks, kThreads, 0, s>>>(a);
        else backward_kernel<0, LOG><<<blocks, kThreads, 0, s>>>(a);
    } else {
        if (a.n == 4 && !a.generic) forward_kernel<4, LOG><<<blocks, kThreads, 0, s>>>(a);
        else forward_kernel<0, LOG><<<blocks, kThreads, 0, s>>>(a);
    }
    MHC_CUDA_CHECK_LAUNCH("sinkhorn kernel");
}

}  // namespace mhc::kernels::cuda_impl::sk

// The launch function of one direction and variant, in the translation unit that holds its
// kernels.
#define MHC_SINKHORN_INSTANTIATE(LOG, BACKWARD) \
    template void mhc::kernels::cuda_impl::sk::launch<LOG, BACKWARD>(const mhc::kernels::cuda_impl::sk::Args&, cudaStream_t)
