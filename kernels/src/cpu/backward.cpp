// Exact backward of the plain Sinkhorn through its iterations. The forward is recomputed
// keeping each step's factors inv = 1 / (s + eps); walking back from the output, a step
// B = A * inv (per row) is undone with
//   dA_ij = (dB_ij - sum_l dB_il B_il) * inv_i,   A_ij = B_ij / inv_i
// so no iterate needs to be stored. Last, M0 = exp(H - rowmax(H)) is differentiated,
// including the (first) argmax that the shift depends on.
#include "plain_steps.hpp"

namespace mhc::kernels::cpu::MHC_ISA {

template <int NC>
static inline void undo_step(int n_rt, bool rows, Lanes* A, const Lanes* inv, const float* act, Lanes* g) {
    const int n = NC ? NC : n_rt;
    for (int a = 0; a < n; ++a) {  // a: the row (or column) that was normalised
        Lanes d = {};
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) d[l] += g[k][l] * A[k][l];
        }
        // A lane that had stopped (tolerance mode) kept inv = 1: g passes through unchanged.
        for (int l = 0; l < W; ++l) d[l] *= act[l];
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) {
                g[k][l] = (g[k][l] - d[l]) * inv[a][l];
                A[k][l] = A[k][l] / inv[a][l];
            }
        }
    }
}

template <int NC>
static void backward_range(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    const SinkhornOptions& o = job.opt;
    const int n = NC ? NC : o.n, nn = n * n;
    constexpr int NN = NC ? NC * NC : kSinkhornMaxN * kSinkhornMaxN;
    alignas(64) Lanes m0[NN], a[NN], g[NN], amax[NC ? NC : kSinkhornMaxN];
    Lanes row_err, col_err, act;
    int its[W];
    Lanes* hist = reinterpret_cast<Lanes*>(job.scratch);  // 2n inv vectors per iteration
    for (int64_t b = t0; b < t1; b += W) {
        const int count = t1 - b < W ? static_cast<int>(t1 - b) : W;
        load_block(job.H, nn, b, count, m0, 0.0f);
        exp_shift_rows(n, m0, amax);
        std::memcpy(a, m0, sizeof(Lanes) * nn);
        const int K = run_plain<NC>(o, n, count, a, its, hist);
        marginal_errors(n, a, row_err, col_err);
        for (int l = 0; l < count; ++l) add_token(st, b + l, row_err[l], col_err[l], its[l]);
        if (job.P.data) store_block(job.P, nn, b, count, a);

        load_block(job.G, nn, b, count, g, 0.0f);
        for (int it = K - 1; it >= 0; --it) {
            const Lanes* ri = hist + 2 * n * it;
            const Lanes* ci = ri + n;
            for (int l = 0; l < W; ++l) act[l] = its[l] > it ? 1.0f : 0.0f;
            if (o.column_first) {
                undo_step<NC>(n, true, a, ri, act, g);
                undo_step<NC>(n, false, a, ci, act, g);
            } else {
                undo_step<NC>(n, false, a, ci, act, g);
                undo_step<NC>(n, true, a, ri, act, g);
            }
        }
        // Through M0 = exp(H - m_i): dH_ij = g_ij M0_ij, and -sum_j of that to the argmax.
        for (int i = 0; i < n; ++i) {
            Lanes s = {};
            for (int j = 0; j < n; ++j)
                for (int l = 0; l < W; ++l) {
                    g[i * n + j][l] *= m0[i * n + j][l];
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
