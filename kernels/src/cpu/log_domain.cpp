// Log-domain Sinkhorn, forward and backward. Iterates are L0 + f_i + g_j with
// L0 = H - rowmax(H); a row step sets f_i = -logsumexp_j(L0_ij + g_j) (column: g likewise).
// No eps: logsumexp never divides, and nothing under- or overflows before the final exp.
// Backward of a row step L' = L - lse_row(L):  dL_ij = dL'_ij - P'_ij sum_l dL'_il,
// with P' = exp(L') rebuilt from the kept vectors.
#include "isa_common.hpp"

namespace mhc::kernels::cpu::MHC_ISA {

// a = the row (rows=true) or column index; x_b = L0 at (a, b) (or (b, a)) + oth[b].
static inline void lse_step(int n, bool rows, const Lanes* L, Lanes* upd, const Lanes* oth) {
    for (int a = 0; a < n; ++a) {
        Lanes mx, s = {};
        for (int l = 0; l < W; ++l) mx[l] = -3.0e38f;
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) mx[l] = maxf(mx[l], L[k][l] + oth[b][l]);
        }
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) s[l] += vexp(L[k][l] + oth[b][l] - mx[l]);
        }
        for (int l = 0; l < W; ++l) upd[a][l] = -(mx[l] + vlog(s[l]));
    }
}

static inline void log_iterate(int n, const Lanes* L, Lanes* F, Lanes* G, bool column_first) {
    if (column_first) {
        lse_step(n, false, L, G, F);
        lse_step(n, true, L, F, G);
    } else {
        lse_step(n, true, L, F, G);
        lse_step(n, false, L, G, F);
    }
}

static inline void shift_rows(int n, Lanes* L, Lanes* amax) {
    for (int i = 0; i < n; ++i) {
        Lanes mx, am = {};
        for (int l = 0; l < W; ++l) mx[l] = L[i * n][l];
        for (int j = 1; j < n; ++j)
            for (int l = 0; l < W; ++l) {
                bool gt = L[i * n + j][l] > mx[l];
                am[l] = gt ? static_cast<float>(j) : am[l];
                mx[l] = gt ? L[i * n + j][l] : mx[l];
            }
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) L[i * n + j][l] -= mx[l];
        for (int l = 0; l < W; ++l) amax[i][l] = am[l];
    }
}

static inline void exp_scaled(int n, const Lanes* L, const Lanes* F, const Lanes* G, Lanes* p) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) p[i * n + j][l] = vexp(L[i * n + j][l] + F[i][l] + G[j][l]);
}

// Forward with history: Fh[k], Gh[k] after iteration k (k = 0: zeros). Returns the number
// of iterations the block ran; its[l] per lane.
static int log_run(const SinkhornOptions& o, int n, int count, const Lanes* L, Lanes* Fh, Lanes* Gh,
                   bool keep, int* its) {
    const int nn = n * n;
    for (int i = 0; i < n; ++i)
        for (int l = 0; l < W; ++l) Fh[i][l] = Gh[i][l] = 0.0f;
    Lanes done = {}, re, ce;
    alignas(64) Lanes p[kSinkhornMaxN * kSinkhornMaxN];
    for (int l = count; l < W; ++l) done[l] = 1.0f;
    for (int l = 0; l < W; ++l) its[l] = o.tol > 0.0f ? 0 : o.iters;
    int K = 0;
    for (int it = 1; it <= o.iters; ++it) {
        Lanes* F = keep ? Fh + it * n : Fh;
        Lanes* G = keep ? Gh + it * n : Gh;
        if (keep) {
            std::memcpy(F, F - n, sizeof(Lanes) * n);
            std::memcpy(G, G - n, sizeof(Lanes) * n);
        }
        Lanes Fo[kSinkhornMaxN], Go[kSinkhornMaxN];
        if (o.tol > 0.0f) {
            std::memcpy(Fo, F, sizeof(Lanes) * n);
            std::memcpy(Go, G, sizeof(Lanes) * n);
        }
        log_iterate(n, L, F, G, o.column_first);
        K = it;
        if (o.tol <= 0.0f) continue;
        for (int i = 0; i < n; ++i)
            for (int l = 0; l < W; ++l) {
                F[i][l] = done[l] != 0.0f ? Fo[i][l] : F[i][l];
                G[i][l] = done[l] != 0.0f ? Go[i][l] : G[i][l];
            }
        exp_scaled(n, L, F, G, p);
        marginal_errors(n, p, re, ce);
        bool all = true;
        for (int l = 0; l < W; ++l) {
            if (done[l] == 0.0f) {
                its[l] = it;
                if (maxf(re[l], ce[l]) <= o.tol) done[l] = 1.0f;
            }
            all = all && done[l] != 0.0f;
        }
        if (all) break;
    }
    (void)nn;
    return K;
}

void log_forward(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    const SinkhornOptions& o = job.opt;
    const int n = o.n, nn = n * n;
    alignas(64) Lanes L[kSinkhornMaxN * kSinkhornMaxN], p[kSinkhornMaxN * kSinkhornMaxN];
    alignas(64) Lanes F[kSinkhornMaxN], G[kSinkhornMaxN], amax[kSinkhornMaxN];
    Lanes re, ce;
    int its[W];
    for (int64_t b = t0; b < t1; b += W) {
        const int count = t1 - b < W ? static_cast<int>(t1 - b) : W;
        load_block(job.H, nn, b, count, L, 0.0f);
        shift_rows(n, L, amax);
        log_run(o, n, count, L, F, G, false, its);
        exp_scaled(n, L, F, G, p);
        marginal_errors(n, p, re, ce);
        for (int l = 0; l < count; ++l) add_token(st, b + l, re[l], ce[l], its[l]);
        store_block(job.P, nn, b, count, p);
    }
}

// Undo one logsumexp step: rows=true for a row step. Fn/Oth: the vectors after it.
static inline void log_undo(int n, bool rows, const Lanes* L, const Lanes* Fn, const Lanes* Oth,
                            const Lanes act, Lanes* g) {
    for (int a = 0; a < n; ++a) {
        Lanes d = {};
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) d[l] += g[k][l];
        }
        for (int l = 0; l < W; ++l) d[l] *= act[l];
        for (int b = 0; b < n; ++b) {
            const int k = rows ? a * n + b : b * n + a;
            for (int l = 0; l < W; ++l) g[k][l] -= vexp(L[k][l] + Fn[a][l] + Oth[b][l]) * d[l];
        }
    }
}

void log_backward(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    const SinkhornOptions& o = job.opt;
    const int n = o.n, nn = n * n;
    alignas(64) Lanes L[kSinkhornMaxN * kSinkhornMaxN], p[kSinkhornMaxN * kSinkhornMaxN];
    alignas(64) Lanes g[kSinkhornMaxN * kSinkhornMaxN], amax[kSinkhornMaxN];
    Lanes re, ce, act;
    int its[W];
    Lanes* Fh = reinterpret_cast<Lanes*>(job.scratch);
    Lanes* Gh = Fh + static_cast<int64_t>(o.iters + 1) * n;
    for (int64_t b = t0; b < t1; b += W) {
        const int count = t1 - b < W ? static_cast<int>(t1 - b) : W;
        load_block(job.H, nn, b, count, L, 0.0f);
        shift_rows(n, L, amax);
        const int K = log_run(o, n, count, L, Fh, Gh, true, its);
        exp_scaled(n, L, Fh + K * n, Gh + K * n, p);
        marginal_errors(n, p, re, ce);
        for (int l = 0; l < count; ++l) add_token(st, b + l, re[l], ce[l], its[l]);
        if (job.P.data) store_block(job.P, nn, b, count, p);

        load_block(job.G, nn, b, count, g, 0.0f);
        for (int k = 0; k < nn; ++k)
            for (int l = 0; l < W; ++l) g[k][l] *= p[k][l];  // through P = exp(L)
        for (int it = K; it >= 1; --it) {
            for (int l = 0; l < W; ++l) act[l] = its[l] >= it ? 1.0f : 0.0f;
            const Lanes *F1 = Fh + it * n, *F0 = F1 - n, *G1 = Gh + it * n, *G0 = G1 - n;
            if (o.column_first) {
                log_undo(n, true, L, F1, G1, act, g);
                log_undo(n, false, L, G1, F0, act, g);
            } else {
                log_undo(n, false, L, G1, F1, act, g);
                log_undo(n, true, L, F1, G0, act, g);
            }
        }
        for (int i = 0; i < n; ++i) {  // through L0 = H - rowmax(H)
            Lanes s = {};
            for (int j = 0; j < n; ++j)
                for (int l = 0; l < W; ++l) s[l] += g[i * n + j][l];
            for (int j = 0; j < n; ++j)
                for (int l = 0; l < W; ++l)
                    g[i * n + j][l] -= amax[i][l] == static_cast<float>(j) ? s[l] : 0.0f;
        }
        store_block(job.dH, nn, b, count, g);
    }
}

}  // namespace mhc::kernels::cpu::MHC_ISA
