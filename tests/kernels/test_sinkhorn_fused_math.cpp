// The fused CUDA kernels' arithmetic (kernels/src/cuda/sinkhorn_token.hpp) run on the host, one
// token at a time exactly as a thread runs it, against the CPU kernels and the float64
// reference: the GPU tests (test_cuda.cpp) check the kernels themselves where a GPU is present,
// these check their formulas everywhere (the carried X = g ∘ B of the plain backward, the log
// backward's step-by-step rescaling, the history layout, the tolerance mode, the shift's
// gradient).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "cuda/sinkhorn_token.hpp"
#include "helpers.hpp"

namespace k = mhc::kernels;
namespace sk4 = mhc::kernels::sk4;
using kt::bwd;
using kt::fwd;
using kt::max_abs_diff;
using kt::to_ref;

namespace {

// The history as the kernels' shared memory holds it: 2 x 4 floats per iteration.
struct HostHist {
    std::vector<float> v;
    explicit HostHist(int iters) : v(static_cast<size_t>(iters) * 8, NAN) {}
    void put(int it, const float* q0, const float* q1) {
        for (int k = 0; k < 4; ++k) {
            v.at(8 * it + k) = q0[k];
            v.at(8 * it + 4 + k) = q1[k];
        }
    }
    void get(int it, float* q0, float* q1) const {
        for (int k = 0; k < 4; ++k) {
            q0[k] = v.at(8 * it + k);
            q1[k] = v.at(8 * it + 4 + k);
        }
    }
};

struct Result {
    std::vector<float> p, dh;
    std::vector<int> its;
    double max_row = 0, max_col = 0;
};

template <bool LOG, bool COLFIRST, bool TOL>
Result run_tokens(const k::SinkhornOptions& opt, const std::vector<float>& logits, const std::vector<float>& grad) {
    const size_t tokens = logits.size() / 16;
    Result res;
    res.p.resize(logits.size());
    res.dh.resize(logits.size());
    for (size_t t = 0; t < tokens; ++t) {
        float mat[16], carry[16];
        std::copy(&logits[16 * t], &logits[16 * t] + 16, mat);
        std::copy(&grad[16 * t], &grad[16 * t] + 16, carry);
        HostHist hist(opt.iters);
        int amax = 0;
        const int its = sk4::forward_token<LOG, COLFIRST, TOL>(mat, opt.iters, opt.eps, opt.tol, hist, amax);
        float re, ce;
        sk4::marginals(mat, re, ce);
        res.max_row = std::max<double>(res.max_row, re);
        res.max_col = std::max<double>(res.max_col, ce);
        res.its.push_back(its);
        std::copy(mat, mat + 16, &res.p[16 * t]);
        sk4::backward_token<LOG, COLFIRST>(mat, carry, its, amax, hist);
        std::copy(carry, carry + 16, &res.dh[16 * t]);
    }
    return res;
}

Result run_tokens(const k::SinkhornOptions& opt, const std::vector<float>& logits, const std::vector<float>& grad) {
    const bool tol = opt.tol > 0;
    if (opt.log_domain) {
        if (opt.column_first)
            return tol ? run_tokens<true, true, true>(opt, logits, grad)
                       : run_tokens<true, true, false>(opt, logits, grad);
        return tol ? run_tokens<true, false, true>(opt, logits, grad)
                   : run_tokens<true, false, false>(opt, logits, grad);
    }
    if (opt.column_first)
        return tol ? run_tokens<false, true, true>(opt, logits, grad)
                   : run_tokens<false, true, false>(opt, logits, grad);
    return tol ? run_tokens<false, false, true>(opt, logits, grad) : run_tokens<false, false, false>(opt, logits, grad);
}

double max_abs_of(const std::vector<float>& vals, size_t from, size_t count) {
    double largest = 0;
    for (size_t i = from; i < from + count; ++i) largest = std::max(largest, std::abs(static_cast<double>(vals[i])));
    return largest;
}

}   // namespace

TEST_CASE("kernels: the fused CUDA kernels' arithmetic matches the CPU kernels", "[kernels][sinkhorn][fused]") {
    std::mt19937_64 rng(ref::seed() + 40);
    for (int variant = 0; variant < 16; ++variant) {
        k::SinkhornOptions opt;
        opt.column_first = variant & 1;
        opt.log_domain = variant & 2;
        opt.eps = (variant & 4) ? 0.05f : 1e-6f;
        if (variant & 8) {
            opt.tol = 1e-4f;
            opt.iters = 60;
        }
        const int64_t tokens = 200;
        auto logits = ref::random_logits(rng, tokens * 16, 2.0);
        auto grad = ref::random_logits(rng, tokens * 16, 1.0);
        k::SinkhornReport rep;
        auto pc = fwd(opt, logits, &rep);
        std::vector<float> pb;
        auto dhc = bwd(opt, logits, grad, &pb);
        auto res = run_tokens(opt, logits, grad);
        INFO("column_first " << opt.column_first << " log " << opt.log_domain << " eps " << opt.eps << " tol "
                             << opt.tol);
        // As the GPU tests compare: fp32 P within 2e-6 (more with a tolerance, where a token whose
        // error lands within rounding of tol may stop one iteration apart), dH within 1e-4 of
        // the largest gradient.
        const double slack = opt.tol > 0 ? 5.0 * opt.tol : 0.0;
        double worst_p = 0, worst_g = 0, scale = 1;
        for (float val : dhc) scale = std::max(scale, static_cast<double>(std::abs(val)));
        for (size_t i = 0; i < logits.size(); ++i) {
            REQUIRE(std::isfinite(res.p[i]));
            REQUIRE(std::isfinite(res.dh[i]));
            worst_p = std::max(worst_p, std::abs(static_cast<double>(res.p[i]) - pc[i]));
            worst_g = std::max(worst_g, std::abs(static_cast<double>(res.dh[i]) - dhc[i]));
        }
        CHECK(worst_p <= 2e-6 + slack);
        CHECK(worst_g <= (1e-4 + 100 * slack) * scale);
        CHECK(res.max_row == Approx(rep.max_row_err).margin(2e-6 + slack));
        CHECK(res.max_col == Approx(rep.max_col_err).margin(2e-6 + slack));
        const int its_max = *std::max_element(res.its.begin(), res.its.end());
        double its_mean = 0;
        for (int count : res.its) its_mean += count;
        its_mean /= tokens;
        if (opt.tol > 0) {
            CHECK(std::abs(its_max - rep.iters_max) <= 1);
            CHECK(its_mean == Approx(rep.iters_mean).epsilon(0.01));
            if (opt.eps < 1e-3f)
                CHECK(its_mean < opt.iters);   // the tolerance stopped tokens (eps 0.05 never gets within 1e-4)
        } else {
            CHECK(its_max == opt.iters);
        }
    }
}

TEST_CASE("kernels: the fused CUDA kernels' backward matches the float64 reference", "[kernels][sinkhorn][fused]") {
    std::mt19937_64 rng(ref::seed() + 41);
    for (int variant = 0; variant < 8; ++variant) {
        k::SinkhornOptions opt;
        opt.column_first = variant & 1;
        opt.log_domain = variant & 2;
        opt.eps = (variant & 4) ? 0.05f : 1e-6f;
        const int tokens = 50;
        auto logits = ref::random_logits(rng, tokens * 16, 1.5);
        auto grad = ref::random_logits(rng, tokens * 16, 1.0);
        auto res = run_tokens(opt, logits, grad);
        double worst = 0;
        for (int t = 0; t < tokens; ++t) {
            auto want = ref::backward(to_ref(opt), &logits[t * 16], &grad[t * 16]);
            worst = std::max(worst, max_abs_diff(&res.dh[t * 16], want) / std::max(1.0, kt::max_abs(want)));
        }
        INFO("column_first " << opt.column_first << " log " << opt.log_domain << " eps " << opt.eps);
        CHECK(worst < 2e-4);   // the CPU kernels' own bound (test_sinkhorn_backward.cpp)
    }
}

TEST_CASE("kernels: the fused log-domain backward's rescaling holds on extreme logits", "[kernels][sinkhorn][fused]") {
    // Logits spread over hundreds: exp underflows in fp32 for most entries, so P' rebuilt step
    // by step must neither overflow nor lose the entries that matter.
    std::mt19937_64 rng(ref::seed() + 42);
    for (int variant = 0; variant < 2; ++variant) {
        k::SinkhornOptions opt;
        opt.log_domain = true;
        opt.column_first = variant & 1;
        const int tokens = 100;
        auto logits = ref::random_logits(rng, tokens * 16, 60.0);
        auto grad = ref::random_logits(rng, tokens * 16, 1.0);
        auto dhc = bwd(opt, logits, grad);
        auto pc = fwd(opt, logits);
        auto res = run_tokens(opt, logits, grad);
        INFO("column_first " << opt.column_first);
        for (int t = 0; t < tokens; ++t) {
            const double scale = std::max(1.0, max_abs_of(dhc, 16 * t, 16));
            for (int k = 0; k < 16; ++k) {
                REQUIRE(std::isfinite(res.dh[16 * t + k]));
                CHECK(std::abs(static_cast<double>(res.p[16 * t + k]) - pc[16 * t + k]) <= 1e-4);
                CHECK(std::abs(static_cast<double>(res.dh[16 * t + k]) - dhc[16 * t + k]) <= 1e-3 * scale);
            }
        }
    }
}

TEST_CASE("kernels: MHC_CUDA_SINKHORN chooses the CUDA kernels a default call runs", "[kernels][sinkhorn][fused]") {
    const char* before = std::getenv("MHC_CUDA_SINKHORN");
    const std::string saved = before ? before : "";
    using K = k::CudaSinkhornKernels;
    ::unsetenv("MHC_CUDA_SINKHORN");
    CHECK(k::resolve_cuda_kernels(K::Default) == K::Baseline);   // until a GPU has run the fused set
    ::setenv("MHC_CUDA_SINKHORN", "baseline", 1);
    CHECK(k::resolve_cuda_kernels(K::Default) == K::Baseline);
    CHECK(k::resolve_cuda_kernels(K::Fused) == K::Fused);   // an explicit choice wins
    ::setenv("MHC_CUDA_SINKHORN", "fused", 1);
    CHECK(k::resolve_cuda_kernels(K::Default) == K::Fused);
    CHECK(k::resolve_cuda_kernels(K::Baseline) == K::Baseline);
    ::setenv("MHC_CUDA_SINKHORN", "fast", 1);
    CHECK_THROWS_WITH(k::resolve_cuda_kernels(K::Default), "MHC_CUDA_SINKHORN='fast': use fused or baseline");
    if (before) ::setenv("MHC_CUDA_SINKHORN", saved.c_str(), 1);
    else ::unsetenv("MHC_CUDA_SINKHORN");
}
