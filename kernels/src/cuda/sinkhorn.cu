// CUDA Sinkhorn: one thread per token, its matrix in registers (n = 4 specialised; other n
// in per-thread local arrays). The same formulas as the CPU kernels (src/cpu/*): plain
// variant on the matrix with inv = 1 / (s + eps), log-domain with scaling vectors f, g.
// The backward recomputes the forward, keeping each iteration's inv (or f, g) vectors in a
// global scratch laid out [vector element][token] so that a warp's accesses coalesce; it
// runs over chunks of tokens so the scratch stays bounded.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../cuda_backend.hpp"
#include "check.hpp"
#include "sinkhorn_steps.cuh"

namespace mhc::kernels::cuda_impl {

namespace {

using namespace sk;
constexpr int kThreads = 256;

struct Args {
    const void* H;
    const void* G;
    void* P;
    void* dH;
    bool h_bf16, out_bf16;
    int64_t t_begin, t_end;  // token range of this launch
    int n, iters;
    float eps, tol;
    bool column_first;
    float* hist;             // backward: [iters * 2n][chunk] floats
    int64_t chunk;
    Stats* stats;
};

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

template <bool LOG>
void launch(bool backward, const Args& a, cudaStream_t s) {
    const int64_t count = a.t_end - a.t_begin;
    const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
    if (a.n == 4) {
        if (backward) backward_kernel<4, LOG><<<blocks, kThreads, 0, s>>>(a);
        else forward_kernel<4, LOG><<<blocks, kThreads, 0, s>>>(a);
    } else {
        if (backward) backward_kernel<0, LOG><<<blocks, kThreads, 0, s>>>(a);
        else forward_kernel<0, LOG><<<blocks, kThreads, 0, s>>>(a);
    }
    MHC_CUDA_CHECK_LAUNCH("sinkhorn kernel");
}

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

SinkhornReport run(const SinkhornOptions& o, int64_t T, ConstTensor H, ConstTensor G, Tensor P, Tensor dH,
                   bool backward) {
    SinkhornReport rep;
    rep.tokens = T;
    rep.backend = "cuda";
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
    a.n = o.n;
    a.iters = o.iters;
    a.eps = o.eps;
    a.tol = o.tol;
    a.column_first = o.column_first;
    a.stats = r.stats;
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
        if (o.log_domain) launch<true>(backward, a, r.stream);
        else launch<false>(backward, a, r.stream);
    }
    MHC_CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
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
