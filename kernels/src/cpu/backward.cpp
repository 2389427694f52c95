// Exact backward of the plain Sinkhorn through its iterations. The forward is recomputed
// keeping the scaling vectors after every iteration (R_k, C_k); any iterate is then
// diag(R) M0 diag(C) and each normalisation is undone with
//   B = A / (s + eps) (per row)  =>  dA_ij = (dB_ij - sum_l dB_il B_il) / (s_i + eps)
// where 1 / (s_i + eps) = R_k,i / R_k-1,i. Last, M0 = exp(H - rowmax(H)) is differentiated,
// including the (first) argmax that the shift depends on.
#include "plain_steps.hpp"

namespace mhc::kernels::cpu::MHC_ISA {

// Undoes a row normalisation (rows=true) or a column one. Rn/Ro: the vector the step
// changed, after and before; Oth: the other vector at that time. act[l] = 0 freezes lane l
// (tolerance mode: the lane had stopped before this iteration).
template <int NC>
static inline void undo_step(int n_rt, bool rows, const Lanes* M, const Lanes* Rn, const Lanes* Ro,
                             const Lanes* Oth, const Lanes act, Lanes* g) {
    const int n = NC ? NC : n_rt;
    for (int a = 0; a < n; ++a) {  // a: the row (or column) being normalised
        Lanes d = {}, inv;
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) d[l] += g[k][l] * ((M[k][l] * Rn[a][l]) * Oth[b][l]);
        }
        for (int l = 0; l < W; ++l) {
            inv[l] = Rn[a][l] / Ro[a][l];
            d[l] *= act[l];
        }
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) g[k][l] = (g[k][l] - d[l]) * inv[l];
        }
    }
}

template <int NC>
static void backward_range(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    const SinkhornOptions& o = job.opt;
    const int n = NC ? NC : o.n, nn = n * n;
    constexpr int NN = NC ? NC * NC : kSinkhornMaxN * kSinkhornMaxN;
    alignas(64) Lanes m[NN], g[NN], amax[NC ? NC : kSinkhornMaxN];
    Lanes row_err, col_err, act;
    int its[W];
    // History: Rh[k], Ch[k] = the scaling vectors after iteration k (k = 0: ones).
    Lanes* Rh = reinterpret_cast<Lanes*>(job.scratch);
    Lanes* Ch = Rh + static_cast<int64_t>(o.iters + 1) * n;
    for (int64_t b = t0; b < t1; b += W) {
        const int count = t1 - b < W ? static_cast<int>(t1 - b) : W;
        load_block(job.H, nn, b, count, m, 0.0f);
        exp_shift_rows(n, m, amax);

        // Forward, keeping every iteration's vectors.
        set_ones(n, Rh);
        set_ones(n, Ch);
        Lanes done = {}, err;
        for (int l = count; l < W; ++l) done[l] = 1.0f;
        for (int l = 0; l < W; ++l) its[l] = 0;
        int K = 0;
        for (int it = 1; it <= o.iters; ++it) {
            Lanes* R = Rh + it * n;
            Lanes* C = Ch + it * n;
            std::memcpy(R, R - n, sizeof(Lanes) * n);
            std::memcpy(C, C - n, sizeof(Lanes) * n);
            K = it;
            if (o.tol <= 0.0f) {
                iterate<NC>(n, m, R, C, o.eps, o.column_first);
                continue;
            }
            iterate<NC>(n, m, R, C, o.eps, o.column_first);
            for (int i = 0; i < n; ++i)
                for (int l = 0; l < W; ++l) {
                    R[i][l] = done[l] != 0.0f ? R[i - n][l] : R[i][l];
                    C[i][l] = done[l] != 0.0f ? C[i - n][l] : C[i][l];
                }
            scaled_errors<NC>(n, m, R, C, err);
            bool all = true;
            for (int l = 0; l < W; ++l) {
                if (done[l] == 0.0f) {
                    its[l] = it;
                    if (err[l] <= o.tol) done[l] = 1.0f;
                }
                all = all && done[l] != 0.0f;
            }
            if (all) break;
        }
        if (o.tol <= 0.0f)
            for (int l = 0; l < W; ++l) its[l] = o.iters;

        // The forward result (for the report and the optional P output).
        {
            alignas(64) Lanes p[NN];
            const Lanes* R = Rh + K * n;
            const Lanes* C = Ch + K * n;
            scale_out<NC>(n, m, R, C, p);
            marginal_errors(n, p, row_err, col_err);
            for (int l = 0; l < count; ++l) add_token(st, b + l, row_err[l], col_err[l], its[l]);
            if (job.P.data) store_block(job.P, nn, b, count, p);
        }

        // Backward through the iterations, last first.
        load_block(job.G, nn, b, count, g, 0.0f);
        for (int it = K; it >= 1; --it) {
            for (int l = 0; l < W; ++l) act[l] = its[l] >= it ? 1.0f : 0.0f;
            const Lanes *R1 = Rh + it * n, *R0 = R1 - n, *C1 = Ch + it * n, *C0 = C1 - n;
            if (o.column_first) {
                undo_step<NC>(n, true, m, R1, R0, C1, act, g);   // row step (second)
                undo_step<NC>(n, false, m, C1, C0, R0, act, g);  // column step (first)
            } else {
                undo_step<NC>(n, false, m, C1, C0, R1, act, g);
                undo_step<NC>(n, true, m, R1, R0, C0, act, g);
            }
        }
        // Through M0 = exp(H - m_i): dH_ij = g_ij M0_ij, and -sum_j of that to the argmax.
        for (int i = 0; i < n; ++i) {
            Lanes s = {};
            for (int j = 0; j < n; ++j)
                for (int l = 0; l < W; ++l) {
                    g[i * n + j][l] *= m[i * n + j][l];
                    s[l] += g[i * n + j][l];
                }
            for (int j = 0; j < n; ++j)
                for (int l = 0; l < W; ++l)
                    g[i * n + j][l] -= amax[i][l] == static_cast<float>(j) ? s[l] : 0.0f;
        }
        store_block(job.dH, nn, b, count, g);
    }
}

void backward(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    if (job.opt.n == 4)
        backward_range<4>(job, t0, t1, st);
    else
        backward_range<0>(job, t0, t1, st);
}

}  // namespace mhc::kernels::cpu::MHC_ISA
