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

MHC_SK4 float rcp(float val) {
#if defined(__CUDA_ARCH__)
    float res;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(res) : "f"(val));   // val = s + eps >= eps
    return res;
#else
    return 1.0f / val;
#endif
}

// 2^val; results below 2^-126 flush to zero on the device.
MHC_SK4 float ex2(float val) {
#if defined(__CUDA_ARCH__)
    float res;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(res) : "f"(val));
    return res;
#else
    return std::exp2(val);
#endif
}

// log2(val) for val in [1, 4] (a logsumexp's sum: its largest term is 1).
MHC_SK4 float lg2(float val) {
#if defined(__CUDA_ARCH__)
    float res;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(res) : "f"(val));
    return res;
#else
    return std::log2(val);
#endif
}

MHC_SK4 float exp_acc(float val) {
#if defined(__CUDA_ARCH__)
    return expf(val);
#else
    return std::exp(val);
#endif
}

MHC_SK4 float max2(float lhs, float rhs) {
#if defined(__CUDA_ARCH__)
    return fmaxf(lhs, rhs);
#else
    return std::fmax(lhs, rhs);
#endif
}

// Element `pos` of row (ROWS) or column `line`.
template <bool ROWS> MHC_SK4 constexpr int at(int line, int pos) { return ROWS ? 4 * line + pos : 4 * pos + line; }

// No history (the forward kernel).
struct NoHist {
    MHC_SK4 void put(int, const float*, const float*) {}
};

// Row shift of H in place: exp(H - rowmax) (EXP, the plain variant) or H - rowmax (log).
// Returns the first argmax of each row, 2 bits per row.
template <bool EXP> MHC_SK4 int shift(float* mat) {
    int amax = 0;
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) {
        float mx = mat[4 * i];
        int am = 0;
        MHC_SK4_UNROLL
        for (int j = 1; j < 4; ++j)
            if (mat[4 * i + j] > mx) {
                mx = mat[4 * i + j];
                am = j;
            }
        MHC_SK4_UNROLL
        for (int j = 0; j < 4; ++j) mat[4 * i + j] = EXP ? exp_acc(mat[4 * i + j] - mx) : mat[4 * i + j] - mx;
        amax |= am << (2 * i);
    }
    return amax;
}

// Through the shift: g_ij -= sum_j g_ij at each row's argmax (the CPU's order of the sum).
MHC_SK4 void shift_grad(float* grad, int amax) {
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float sum = ((grad[4 * i] + grad[4 * i + 1]) + grad[4 * i + 2]) + grad[4 * i + 3];
        const int am = (amax >> (2 * i)) & 3;
        MHC_SK4_UNROLL
        for (int j = 0; j < 4; ++j)
            if (j == am) grad[4 * i + j] -= sum;
    }
}

// Largest |row sum - 1| and |column sum - 1|; a NaN anywhere reports as infinity.
MHC_SK4 void marginals(const float* mat, float& re, float& ce) {
    re = 0;
    ce = 0;
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float row = ((mat[4 * i] + mat[4 * i + 1]) + mat[4 * i + 2]) + mat[4 * i + 3];
        const float col = ((mat[i] + mat[4 + i]) + mat[8 + i]) + mat[12 + i];
        const float dr = std::fabs(row - 1.0f), dc = std::fabs(col - 1.0f);
        re = max2(re, dr != dr ? INFINITY : dr);
        ce = max2(ce, dc != dc ? INFINITY : dc);
    }
}

// ---- plain variant ----

// Normalises the rows (ROWS) or columns of mat: s = ((a0 + a1) + a2) + a3 + eps, a *= 1/s.
// back[x] = s, what the backward multiplies by to undo the step.
template <bool ROWS> MHC_SK4 void plain_step(float* mat, float eps, float* back) {
    MHC_SK4_UNROLL
    for (int x = 0; x < 4; ++x) {
        const float sum = (((mat[at<ROWS>(x, 0)] + mat[at<ROWS>(x, 1)]) + mat[at<ROWS>(x, 2)]) + mat[at<ROWS>(x, 3)]) +
                          eps;
        const float inv = rcp(sum);
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) mat[at<ROWS>(x, y)] *= inv;
        back[x] = sum;
    }
}

// The iterations on M0 in place; returns how many ran. Each iteration's two steps' back
// vectors go to hist.put(it, first step's, second step's).
template <bool COLFIRST, bool TOL, class Hist>
MHC_SK4 int plain_iterations(float* mat, int iters, float eps, float tol, Hist& hist) {
    for (int it = 0; it < iters; ++it) {
        float q0[4], q1[4];
        plain_step<!COLFIRST>(mat, eps, q0);
        plain_step<COLFIRST>(mat, eps, q1);
        hist.put(it, q0, q1);
        if constexpr (TOL) {
            float re, ce;
            marginals(mat, re, ce);
            if (max2(re, ce) <= tol) return it + 1;
        }
    }
    return iters;
}

// Undoes one step along rows (ROWS) or columns: `iter` is the iterate after it (before it on
// return), `carry` is X = g ∘ iter (see the top).
template <bool ROWS> MHC_SK4 void plain_undo(float* iter, float* carry, const float* back) {
    MHC_SK4_UNROLL
    for (int r = 0; r < 4; ++r) {
        const float dot = ((carry[at<ROWS>(r, 0)] + carry[at<ROWS>(r, 1)]) + carry[at<ROWS>(r, 2)]) +
                          carry[at<ROWS>(r, 3)];
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) {
            const int idx = at<ROWS>(r, y);
            carry[idx] -= dot * iter[idx];
            iter[idx] *= back[r];
        }
    }
}

// iter: the forward's result (consumed); carry: dL/dP in, dL/dL0 out (before the shift's
// term), i.e. dL/dM0 ∘ M0. its iterations, their back vectors from hist.get(it, q0, q1).
template <bool COLFIRST, class Hist> MHC_SK4 void plain_backward(float* iter, float* carry, int its, const Hist& hist) {
    MHC_SK4_UNROLL
    for (int k = 0; k < 16; ++k) carry[k] *= iter[k];
    float q0[4], q1[4];
    hist.get(its - 1, q0, q1);
    for (int it = its - 1; it >= 0; --it) {
        float n0[4], n1[4];   // the previous iteration's, loaded one iteration ahead (iteration 0's again at the end)
        hist.get(it > 0 ? it - 1 : 0, n0, n1);
        plain_undo<COLFIRST>(iter, carry, q1);   // the second step: rows when columns go first
        plain_undo<!COLFIRST>(iter, carry, q0);
        MHC_SK4_UNROLL
        for (int v = 0; v < 4; ++v) {
            q0[v] = n0[v];
            q1[v] = n1[v];
        }
    }
}

// ---- log domain (natural units, as the CPU; exponentials through ex2) ----

// upd[x] = -logsumexp_y(logits(x, y) + oth[y]).
template <bool ROWS> MHC_SK4 void lse_step(const float* logits, float* upd, const float* oth) {
    MHC_SK4_UNROLL
    for (int x = 0; x < 4; ++x) {
        float shifted[4];
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) shifted[y] = logits[at<ROWS>(x, y)] + oth[y];
        const float mx = max2(max2(shifted[0], shifted[1]), max2(shifted[2], shifted[3]));
        float sum = 0;
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) sum += ex2((shifted[y] - mx) * kLog2e);
        upd[x] = -(mx + lg2(sum) * kLn2);
    }
}

// out = exp(logits + fv_i + gv_j).
MHC_SK4 void log_exp(const float* logits, const float* fv, const float* gv, float* out) {
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) MHC_SK4_UNROLL
    for (int j = 0; j < 4; ++j) out[4 * i + j] = ex2(((logits[4 * i + j] + fv[i]) + gv[j]) * kLog2e);
}

// The iterations on L0 (= H - rowmax); fv, gv out. hist.put(it, first step's vector, second's).
template <bool COLFIRST, bool TOL, class Hist>
MHC_SK4 int log_iterations(const float* logits, float* fv, float* gv, int iters, float tol, Hist& hist) {
    MHC_SK4_UNROLL
    for (int i = 0; i < 4; ++i) fv[i] = gv[i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
        if constexpr (COLFIRST) {
            lse_step<false>(logits, gv, fv);
            lse_step<true>(logits, fv, gv);
            hist.put(it, gv, fv);
        } else {
            lse_step<true>(logits, fv, gv);
            lse_step<false>(logits, gv, fv);
            hist.put(it, fv, gv);
        }
        if constexpr (TOL) {
            float mat[16], re, ce;
            log_exp(logits, fv, gv, mat);
            marginals(mat, re, ce);
            if (max2(re, ce) <= tol) return it + 1;
        }
    }
    return iters;
}

// Undoes one logsumexp step along rows (ROWS) or columns: mat is the matrix after it, cur the
// step's vector and prev the same vector before it; mat becomes the matrix before the step.
template <bool ROWS> MHC_SK4 void log_undo(float* mat, float* grad, const float* cur, const float* prev) {
    MHC_SK4_UNROLL
    for (int r = 0; r < 4; ++r) {
        const float sum = ((grad[at<ROWS>(r, 0)] + grad[at<ROWS>(r, 1)]) + grad[at<ROWS>(r, 2)]) + grad[at<ROWS>(r, 3)];
        const float back = ex2((prev[r] - cur[r]) * kLog2e);
        MHC_SK4_UNROLL
        for (int y = 0; y < 4; ++y) {
            const int idx = at<ROWS>(r, y);
            grad[idx] -= mat[idx] * sum;
            mat[idx] *= back;
        }
    }
}

// mat: the forward's result (consumed); grad: dL/dP in, dL/dL0 out (before the shift's term).
template <bool COLFIRST, class Hist> MHC_SK4 void log_backward(float* mat, float* grad, int its, const Hist& hist) {
    MHC_SK4_UNROLL
    for (int k = 0; k < 16; ++k) grad[k] *= mat[k];
    float c0[4], c1[4];
    hist.get(its - 1, c0, c1);
    for (int it = its - 1; it >= 0; --it) {
        float p0[4] = {0, 0, 0, 0}, p1[4] = {0, 0, 0, 0};
        if (it > 0) hist.get(it - 1, p0, p1);
        log_undo<COLFIRST>(mat, grad, c1, p1);   // the second step: rows when columns go first
        log_undo<!COLFIRST>(mat, grad, c0, p0);
        MHC_SK4_UNROLL
        for (int v = 0; v < 4; ++v) {
            c0[v] = p0[v];
            c1[v] = p1[v];
        }
    }
}

// ---- a whole token, as the kernels run it ----

// mat: H in, P out. Returns the iterations run; amax: each row's first argmax (2 bits a row).
template <bool LOG, bool COLFIRST, bool TOL, class Hist>
MHC_SK4 int forward_token(float* mat, int iters, float eps, float tol, Hist& hist, int& amax) {
    int its;
    if constexpr (LOG) {
        amax = shift<false>(mat);
        float fv[4], gv[4], out[16];
        its = log_iterations<COLFIRST, TOL>(mat, fv, gv, iters, tol, hist);
        log_exp(mat, fv, gv, out);
        MHC_SK4_UNROLL
        for (int k = 0; k < 16; ++k) mat[k] = out[k];
    } else {
        (void)tol;
        amax = shift<true>(mat);
        its = plain_iterations<COLFIRST, TOL>(mat, iters, eps, tol, hist);
    }
    return its;
}

// mat: forward_token's result (consumed); grad: dL/dP in, dL/dH out.
template <bool LOG, bool COLFIRST, class Hist>
MHC_SK4 void backward_token(float* mat, float* grad, int its, int amax, const Hist& hist) {
    if constexpr (LOG) log_backward<COLFIRST>(mat, grad, its, hist);
    else plain_backward<COLFIRST>(mat, grad, its, hist);
    shift_grad(grad, amax);
}

}   // namespace mhc::kernels::sk4
