#pragma once
// The plain (non-log) Sinkhorn steps for the per-ISA units, on the matrix itself:
//   row step: s_i = sum_j A_ij,  inv_i = 1 / (s_i + eps),  A_ij *= inv_i
// (column step alike). Keeping the matrix rather than scaling vectors diag(R) M0 diag(C)
// matters at the edges: an entry of 1e-35 must be scaled up by 1e35, which no fp32 scale
// factor can hold, while the matrix form simply grows it step by step (as a chain of array
// operations does). The backward keeps the inv vectors and undoes the steps with them.
// NC is the compile-time n (0: use the runtime n).
#include "isa_common.hpp"

namespace mhc::kernels::cpu::MHC_ISA {

// Normalises rows (rows=true) or columns of A; writes the factors to inv[n] if given.
// act[l] = 0 leaves lane l untouched (tolerance mode: the lane has stopped).
template <int NC>
static inline void norm_step(int n_rt, bool rows, Lanes* A, float eps, Lanes* inv, const float* act) {
    const int n = NC ? NC : n_rt;
    for (int a = 0; a < n; ++a) {
        Lanes s = {}, f;
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) s[l] += A[k][l];
        }
        for (int l = 0; l < W; ++l) f[l] = 1.0f / (s[l] + eps);
        if (act)
            for (int l = 0; l < W; ++l) f[l] = act[l] != 0.0f ? f[l] : 1.0f;
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) A[k][l] *= f[l];
        }
        if (inv)
            for (int l = 0; l < W; ++l) inv[a][l] = f[l];
    }
}

// One iteration in the configured order; inv (2n vectors: rows then columns) if given.
template <int NC>
static inline void iterate(int n, Lanes* A, float eps, bool column_first, Lanes* inv, const float* act) {
    Lanes* ri = inv ? inv : nullptr;
    Lanes* ci = inv ? inv + n : nullptr;
    if (column_first) {
        norm_step<NC>(n, false, A, eps, ci, act);
        norm_step<NC>(n, true, A, eps, ri, act);
    } else {
        norm_step<NC>(n, true, A, eps, ri, act);
        norm_step<NC>(n, false, A, eps, ci, act);
    }
}

// Runs the iterations on one block in place; per-lane iteration counts in its[]. With
// hist, the inv vectors of iteration k go to hist + 2n(k-1). Returns the iterations run.
// Tolerance mode stops a lane (freezes its matrix) once its marginal error is <= tol.
template <int NC>
static inline int run_plain(const SinkhornOptions& o, int n, int count, Lanes* A, int* its, Lanes* hist) {
    if (o.tol <= 0.0f) {
        for (int it = 0; it < o.iters; ++it)
            iterate<NC>(n, A, o.eps, o.column_first, hist ? hist + 2 * n * it : nullptr, nullptr);
        for (int l = 0; l < W; ++l) its[l] = o.iters;
        return o.iters;
    }
    Lanes act, re, ce;
    for (int l = 0; l < W; ++l) {
        act[l] = l < count ? 1.0f : 0.0f;
        its[l] = 0;
    }
    int it = 0;
    while (it < o.iters) {
        iterate<NC>(n, A, o.eps, o.column_first, hist ? hist + 2 * n * it : nullptr, act);
        ++it;
        marginal_errors(n, A, re, ce);
        bool any = false;
        for (int l = 0; l < W; ++l) {
            if (act[l] != 0.0f) {
                its[l] = it;
                if (maxf(re[l], ce[l]) <= o.tol) act[l] = 0.0f;
            }
            any = any || act[l] != 0.0f;
        }
        if (!any) break;
    }
    return it;
}

}  // namespace mhc::kernels::cpu::MHC_ISA
