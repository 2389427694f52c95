// Fused plain Sinkhorn forward on the CPU: each block of W tokens is loaded once, iterated
// in L1 (n = 4: 16 vectors of W lanes) and stored once.
#include "fixed_n4.hpp"
#include "plain_steps.hpp"

namespace mhc::kernels::cpu::MHC_ISA {

template <int NC>
static void forward_range(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    const SinkhornOptions& o = job.opt;
    const int n = NC ? NC : o.n, nn = n * n;
    alignas(64) Lanes m[NC ? NC * NC : kSinkhornMaxN * kSinkhornMaxN];
    Lanes row_err, col_err;
    int its[W];
    for (int64_t b = t0; b < t1; b += W) {
        const int count = t1 - b < W ? static_cast<int>(t1 - b) : W;
        load_block(job.H, nn, b, count, m, 0.0f);
        exp_shift_rows(n, m, nullptr);
        run_plain<NC>(o, n, count, m, its, nullptr);
        marginal_errors(n, m, row_err, col_err);
        for (int l = 0; l < count; ++l) add_token(st, b + l, row_err[l], col_err[l], its[l]);
        store_block(job.P, nn, b, count, m);
    }
}

void forward(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
#if defined(MHC_HAVE_FIXED_N4)
    if (job.opt.n == 4 && job.opt.tol <= 0.0f)
        forward_fixed_n4(job, t0, t1, st);
    else
#endif
    if (job.opt.n == 4)
        forward_range<4>(job, t0, t1, st);
    else
        forward_range<0>(job, t0, t1, st);
}

}  // namespace mhc::kernels::cpu::MHC_ISA
