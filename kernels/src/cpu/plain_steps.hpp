#pragma once
// The plain (non-log) Sinkhorn step in scaling form, for the per-ISA units. Every iterate
// is diag(R) M0 diag(C), so a row normalisation only updates R:
//   rowsum_i = R_i * sum_j M0_ij C_j,   R_i <- R_i / (rowsum_i + eps)
// which is n^2 multiply-adds per step instead of n^2 adds plus n^2 multiplies on the
// matrix, and it lets the backward rebuild any iterate exactly from the kept vectors.
// NC is the compile-time n (0: use the runtime n).
#include "isa_common.hpp"

namespace mhc::kernels::cpu::MHC_ISA {

// The scales stay finite: a column of M0 that underflowed to zero would push its C by
// 1/eps every step, and a zero pattern that admits no doubly stochastic scaling makes R and
// C drift apart geometrically. Capping them keeps the output finite (the affected rows or
// columns stay off, and the report shows it); inputs that get there need the log domain.
// Products are formed as (M R) C so that a zero entry never meets inf * 0.
inline constexpr float kScaleMax = 1e30f;

template <int NC>
static inline void row_step(int n_rt, const Lanes* M, Lanes* R, const Lanes* C, float eps) {
    const int n = NC ? NC : n_rt;
    for (int i = 0; i < n; ++i) {
        Lanes s = {};
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) s[l] += M[i * n + j][l] * C[j][l];
        for (int l = 0; l < W; ++l) R[i][l] = minf(R[i][l] / (R[i][l] * s[l] + eps), kScaleMax);
    }
}

template <int NC>
static inline void col_step(int n_rt, const Lanes* M, const Lanes* R, Lanes* C, float eps) {
    const int n = NC ? NC : n_rt;
    Lanes s[NC ? NC : kSinkhornMaxN] = {};
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) s[j][l] += M[i * n + j][l] * R[i][l];
    for (int j = 0; j < n; ++j)
        for (int l = 0; l < W; ++l) C[j][l] = minf(C[j][l] / (C[j][l] * s[j][l] + eps), kScaleMax);
}

// Largest marginal error of diag(R) M diag(C) per lane (for the tolerance test).
template <int NC>
static inline void scaled_errors(int n_rt, const Lanes* M, const Lanes* R, const Lanes* C, Lanes err) {
    const int n = NC ? NC : n_rt;
    Lanes cs[NC ? NC : kSinkhornMaxN] = {};
    for (int l = 0; l < W; ++l) err[l] = 0;
    for (int i = 0; i < n; ++i) {
        Lanes rs = {};
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) {
                rs[l] += M[i * n + j][l] * C[j][l];
                cs[j][l] += M[i * n + j][l] * R[i][l];
            }
        for (int l = 0; l < W; ++l) err[l] = maxf(err[l], absf(rs[l] * R[i][l] - 1.0f));
    }
    for (int j = 0; j < n; ++j)
        for (int l = 0; l < W; ++l) err[l] = maxf(err[l], absf(cs[j][l] * C[j][l] - 1.0f));
}

// One iteration in the configured order.
template <int NC>
static inline void iterate(int n, const Lanes* M, Lanes* R, Lanes* C, float eps, bool column_first) {
    if (column_first) {
        col_step<NC>(n, M, R, C, eps);
        row_step<NC>(n, M, R, C, eps);
    } else {
        row_step<NC>(n, M, R, C, eps);
        col_step<NC>(n, M, R, C, eps);
    }
}

static inline void set_ones(int n, Lanes* v) {
    for (int i = 0; i < n; ++i)
        for (int l = 0; l < W; ++l) v[i][l] = 1.0f;
}

// P = diag(R) M diag(C); the one formula for forward and backward so both give the same bits.
template <int NC>
static inline void scale_out(int n_rt, const Lanes* M, const Lanes* R, const Lanes* C, Lanes* P) {
    const int n = NC ? NC : n_rt;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) P[i * n + j][l] = (M[i * n + j][l] * R[i][l]) * C[j][l];
}

// Runs the iterations on one block; returns per-lane iteration counts in its[].
// Tolerance mode freezes a lane (keeps its R, C) once its error is <= tol.
template <int NC>
static inline void run_plain(const SinkhornOptions& o, int n, int count, const Lanes* M, Lanes* R,
                             Lanes* C, int* its) {
    set_ones(n, R);
    set_ones(n, C);
    if (o.tol <= 0.0f) {
        for (int it = 0; it < o.iters; ++it) iterate<NC>(n, M, R, C, o.eps, o.column_first);
        for (int l = 0; l < W; ++l) its[l] = o.iters;
        return;
    }
    Lanes done = {}, err, Rold[NC ? NC : kSinkhornMaxN], Cold[NC ? NC : kSinkhornMaxN];
    for (int l = count; l < W; ++l) done[l] = 1.0f;
    for (int l = 0; l < W; ++l) its[l] = 0;
    for (int it = 0; it < o.iters; ++it) {
        std::memcpy(Rold, R, sizeof(Lanes) * n);
        std::memcpy(Cold, C, sizeof(Lanes) * n);
        iterate<NC>(n, M, R, C, o.eps, o.column_first);
        for (int i = 0; i < n; ++i)
            for (int l = 0; l < W; ++l) {
                R[i][l] = done[l] != 0.0f ? Rold[i][l] : R[i][l];
                C[i][l] = done[l] != 0.0f ? Cold[i][l] : C[i][l];
            }
        scaled_errors<NC>(n, M, R, C, err);
        bool all = true;
        for (int l = 0; l < W; ++l) {
            if (done[l] == 0.0f) {
                its[l] = it + 1;
                if (err[l] <= o.tol) done[l] = 1.0f;
            }
            all = all && done[l] != 0.0f;
        }
        if (all) break;
    }
}

}  // namespace mhc::kernels::cpu::MHC_ISA
