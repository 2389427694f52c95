#pragma once
// One token of the fused n = 4 CUDA Sinkhorn (sinkhorn_fused.cuh): the arithmetic, written once
// for the device (one thread per token, the 4x4 matrix in registers: every index below is a
// constant once the loops unroll) and for the host, where tests/kernels/test_sinkhorn_fused_math.cpp
// checks it against the float64 reference on machines without a GPU. Only the four primitives
// differ: on the device rcp/ex2/lg2 are the MUFU approximations (rcp.approx.ftz, ex2.approx.ftz,
// lg2.approx.ftz: <= 2 ulp, lg2 <= 2^-22 absolute on [1, 4] where it is used) and exp_acc is
// CUDA's expf; on the host they are the exactly rounded library functions.
//
// The formulas are the CPU kernels' (src/cpu/plain_steps.hpp, log_domain.cpp) with the sums in
// the same order; two things are arranged differently, both exact in real arithmetic:
// * plain backward: instead of the gradient g it carries X = g ∘ B (B the iterate after the
//   step being undone). Undoing a row step B = diag(1/(s+eps)) A is then
//     d_i = sum_j X_ij,  X_ij -= d_i B_ij,  A_ij = B_ij (s_i + eps)
//   (the CPU's g = (g - <g, B>) inv, times A = B / inv), with no reciprocal at all, and the
//   final g ∘ M0 is X itself. The history holds s + eps of every step (8 floats an iteration).
// * log backward: the CPU rebuilds P' = exp(L + f + g) with 16 exponentials per step; here P'
//   is carried and scaled back one step at a time, P_before = P_after * exp(f_old - f_new) per
//   row (or column), 4 exponentials per step. The factor is the row's sum before the step,
//   which is <= n (the matrix before a step is exp(L0), entries <= 1, or normalised along the
//   other axis), so nothing overflows, and an entry that underflows going back was below
//   n times an underflowed value. The history holds f, g after every iteration, as the CPU's.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MHC_SK4 __host__ __device__ __forceinline__
#else
#define MHC_SK4 inline
#endif
#if defined(__CUDA_ARCH__)
#define MHC_SK4_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define MHC_SK4_UNROLL   // nvcc's host pass: GCC would warn of either pragma
#else
#define MHC_SK4_UNROLL _Pragma("GCC unroll 16")
#endif

namespace mhc::kernels::sk4 {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;

MHC_SK4 float rcp(float x) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));   // x = s + eps >= eps
    return r;
#else
    return 1.0f / x;
#endif
}

// 2^x; results below 2^-126 flush to zero on the device.
MHC_SK4 float ex2(float x) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return std::exp2(x);
#endif
}

// log2(x) for x in [1, 4] (a logsumexp's sum: its largest term is 1).
MHC_SK4 float lg2(float x) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return std::log2(x);
#endif
}

MHC_SK4 float exp_acc(float x) {
#if defined(__CUDA_ARCH__)
    return expf(x);
#else
    return std::exp(x);
#endif
}

MHC_SK4 float max2(float a, float b) {
#if defined(__CUDA_ARCH__)
    return fmaxf(a, b);
#else
    return std::fmax(a, b);
#endif
}

// Element (x, y) of a row (ROWS) or column walk: x is the row or column normalised.
template <bool ROWS> MHC_SK4 constexpr int at(int x, int y) { return ROWS ? 4 * x + y : 4 * y + x; }

// No history (the forward kernel).
struct NoHist {
    MHC_SK4 void put(int, const float*, const float*) {}
};

// Row shift of H in place: exp(H - rowmax) (EXP, the plain variant) or H - rowmax (log).
// Returns the first argmax of each row, 2 bits per row.
template <bool EXP> MHC_SK4 int shift(float* a) {
    int amax = 0;
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) {
        float m = a[4 * i];
        int am = 0;
        MHC_SK4_UNROLL
        for (int j = 1; j < 4; ++j)
            if (a[4 * i + j] > m) {
                m = a[4 * i + j];
                am = j;
            }
        MHC_SK4_UNROLL
        for (int j = 0; j < 4; ++j) a[4 * i + j] = EXP ? exp_acc(a[4 * i + j] - m) : a[4 * i + j] - m;
        amax |= am << (2 * i);
    }
    return amax;
}

// Through the shift: g_ij -= sum_j g_ij at each row's argmax (the CPU's order of the sum).
MHC_SK4 void shift_grad(float* g, int amax) {
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float s = ((g[4 * i] + g[4 * i + 1]) + g[4 * i + 2]) + g[4 * i + 3];
        const int am = (amax >> (2 * i)) & 3;
        MHC_SK4_UNROLL
        for (int j = 0; j < 4; ++j)
            if (j == am) g[4 * i + j] -= s;
    }
}

// Largest |row sum - 1| and |column sum - 1|; a NaN anywhere reports as infinity.
MHC_SK4 void marginals(const float* p, float& re, float& ce) {
    re = 0;
    ce = 0;
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float r = ((p[4 * i] + p[4 * i + 1]) + p[4 * i + 2]) + p[4 * i + 3];
        const float c = ((p[i] + p[4 + i]) + p[8 + i]) + p[12 + i];
        const float dr = std::fabs(r - 1.0f), dc = std::fabs(c - 1.0f);
        re = max2(re, dr != dr ? INFINITY : dr);
        ce = max2(ce, dc != dc ? INFINITY : dc);
    }
}

// ---- plain variant ----

// Normalises the rows (ROWS) or columns of a: s = ((a0 + a1) + a2) + a3 + eps, a *= 1/s.
// back[x] = s, what the backward multiplies by to undo the step.
template <bool ROWS> MHC_SK4 void plain_step(float* a, float eps, float* back) {
    MHC_SK4_UNROLL
    for (int x = 0; x < 4; ++x) {
        const float s = (((a[at<ROWS>(x, 0)] + a[at<ROWS>(x, 1)]) + a[at<ROWS>(x, 2)]) + a[at<ROWS>(x, 3)]) + eps;
        const float f = rcp(s);
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) a[at<ROWS>(x, y)] *= f;
        back[x] = s;
    }
}

// The iterations on M0 in place; returns how many ran. Each iteration's two steps' back
// vectors go to hist.put(it, first step's, second step's).
template <bool COLFIRST, bool TOL, class Hist>
MHC_SK4 int plain_iterations(float* a, int iters, float eps, float tol, Hist& hist) {
    for (int it = 0; it < iters; ++it) {
        float q0[4], q1[4];
        plain_step<!COLFIRST>(a, eps, q0);
        plain_step<COLFIRST>(a, eps, q1);
        hist.put(it, q0, q1);
        if constexpr (TOL) {
            float re, ce;
            marginals(a, re, ce);
            if (max2(re, ce) <= tol) return it + 1;
        }
    }
    return iters;
}

// Undoes one step along rows (ROWS) or columns: X carries g ∘ B (see the top).
template <bool ROWS> MHC_SK4 void plain_undo(float* b, float* x, const float* back) {
    MHC_SK4_UNROLL
    for (int r = 0; r < 4; ++r) {
        const float d = ((x[at<ROWS>(r, 0)] + x[at<ROWS>(r, 1)]) + x[at<ROWS>(r, 2)]) + x[at<ROWS>(r, 3)];
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) {
            const int k = at<ROWS>(r, y);
            x[k] -= d * b[k];
            b[k] *= back[r];
        }
    }
}

// b: the forward's result (consumed); x: dL/dP in, dL/dL0 out (before the shift's term),
// i.e. dL/dM0 ∘ M0. its iterations, their back vectors from hist.get(it, q0, q1).
template <bool COLFIRST, class Hist> MHC_SK4 void plain_backward(float* b, float* x, int its, const Hist& hist) {
    MHC_SK4_UNROLL
    for (int k = 0; k < 16; ++k) x[k] *= b[k];
    for (int it = its - 1; it >= 0; --it) {
        float q0[4], q1[4];
        hist.get(it, q0, q1);
        plain_undo<COLFIRST>(b, x, q1);   // the second step: rows when columns go first
        plain_undo<!COLFIRST>(b, x, q0);
    }
}

// ---- log domain (natural units, as the CPU; exponentials through ex2) ----

// upd[x] = -logsumexp_y(L(x, y) + oth[y]).
template <bool ROWS> MHC_SK4 void lse_step(const float* L, float* upd, const float* oth) {
    MHC_SK4_UNROLL
    for (int x = 0; x < 4; ++x) {
        float t[4];
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) t[y] = L[at<ROWS>(x, y)] + oth[y];
        const float m = max2(max2(t[0], t[1]), max2(t[2], t[3]));
        float s = 0;
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) s += ex2((t[y] - m) * kLog2e);
        upd[x] = -(m + lg2(s) * kLn2);
    }
}

// p = exp(L + f_i + g_j).
MHC_SK4 void log_exp(const float* L, const float* f, const float* g, float* p) {
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) MHC_SK4_UNROLL
    for (int j = 0; j < 4; ++j) p[4 * i + j] = ex2(((L[4 * i + j] + f[i]) + g[j]) * kLog2e);
}

// The iterations on L0 (= H - rowmax); f, g out. hist.put(it, first step's vector, second's).
template <bool COLFIRST, bool TOL, class Hist>
MHC_SK4 int log_iterations(const float* L, float* f, float* g, int iters, float tol, Hist& hist) {
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) f[i] = g[i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
        if constexpr (COLFIRST) {
            lse_step<false>(L, g, f);
            lse_step<true>(L, f, g);
            hist.put(it, g, f);
        } else {
            lse_step<true>(L, f, g);
            lse_step<false>(L, g, f);
            hist.put(it, f, g);
        }
        if constexpr (TOL) {
            float p[16], re, ce;
            log_exp(L, f, g, p);
            marginals(p, re, ce);
            if (max2(re, ce) <= tol) return it + 1;
        }
    }
    return iters;
}

// Undoes one logsumexp step along rows (ROWS) or columns: p is the matrix after it, cur the
// step's vector and prev the same vector before it; p becomes the matrix before the step.
template <bool ROWS> MHC_SK4 void log_undo(float* p, float* g, const float* cur, const float* prev) {
    MHC_SK4_UNROLL
    for (int r = 0; r < 4; ++r) {
        const float d = ((g[at<ROWS>(r, 0)] + g[at<ROWS>(r, 1)]) + g[at<ROWS>(r, 2)]) + g[at<ROWS>(r, 3)];
        const float back = ex2((prev[r] - cur[r]) * kLog2e);
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) {
            const int k = at<ROWS>(r, y);
            g[k] -= p[k] * d;
            p[k] *= back;
        }
    }
}

// p: the forward's result (consumed); g: dL/dP in, dL/dL0 out (before the shift's term).
template <bool COLFIRST, class Hist> MHC_SK4 void log_backward(float* p, float* g, int its, const Hist& hist) {
    MHC_SK4_UNROLL
    for (int k = 0; k < 16; ++k) g[k] *= p[k];
    float c0[4], c1[4];
    hist.get(its - 1, c0, c1);
    for (int it = its - 1; it >= 0; --it) {
        float p0[4] = {0, 0, 0, 0}, p1[4] = {0, 0, 0, 0};
        if (it > 0) hist.get(it - 1, p0, p1);
        log_undo<COLFIRST>(p, g, c1, p1);   // the second step: rows when columns go first
        log_undo<!COLFIRST>(p, g, c0, p0);
        MHC_SK4_UNROLL
        for (int v = 0; v < 4; ++v) {
            c0[v] = p0[v];
            c1[v] = p1[v];
        }
    }
}

// ---- a whole token, as the kernels run it ----

// a: H in, P out. Returns the iterations run; amax: each row's first argmax (2 bits a row).
template <bool LOG, bool COLFIRST, bool TOL, class Hist>
MHC_SK4 int forward_token(float* a, int iters, float eps, float tol, Hist& hist, int& amax) {
    int its;
    if constexpr (LOG) {
        amax = shift<false>(a);
        float f[4], g[4], p[16];
        its = log_iterations<COLFIRST, TOL>(a, f, g, iters, tol, hist);
        log_exp(a, f, g, p);
        MHC_SK4_UNROLL
        for (int k = 0; k < 16; ++k) a[k] = p[k];
    } else {
        (void)tol;
        amax = shift<true>(a);
        its = plain_iterations<COLFIRST, TOL>(a, iters, eps, tol, hist);
    }
    return its;
}

// p: forward_token's result (consumed); g: dL/dP in, dL/dH out.
template <bool LOG, bool COLFIRST, class Hist>
MHC_SK4 void backward_token(float* p, float* g, int its, int amax, const Hist& hist) {
    if constexpr (LOG) log_backward<COLFIRST>(p, g, its, hist);
    else plain_backward<COLFIRST>(p, g, its, hist);
    shift_grad(g, amax);
}

}   // namespace mhc::kernels::sk4
