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

using namespace kt;
namespace sk4 = mhc::kernels::sk4;

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
Result run_tokens(const k::SinkhornOptions& o, const std::vector<float>& h, const std::vector<float>& g) {
    const size_t T = h.size() / 16;
    Result r;
    r.p.resize(h.size());
    r.dh.resize(h.size());
    for (size_t t = 0; t < T; ++t) {
        float a[16], x[16];
        std::copy(&h[16 * t], &h[16 * t] + 16, a);
        std::copy(&g[16 * t], &g[16 * t] + 16, x);
        HostHist hist(o.iters);
        int amax = 0;
        const int its = sk4::forward_token<LOG, COLFIRST, TOL>(a, o.iters, o.eps, o.tol, hist, amax);
        float re, ce;
        sk4::marginals(a, re, ce);
        r.max_row = std::max<double>(r.max_row, re);
        r.max_col = std::max<double>(r.max_col, ce);
        r.its.push_back(its);
        std::copy(a, a + 16, &r.p[16 * t]);
        sk4::backward_token<LOG, COLFIRST>(a, x, its, amax, hist);
        std::copy(x, x + 16, &r.dh[16 * t]);
    }
    return r;
}

Result run_tokens(const k::SinkhornOptions& o, const std::vector<float>& h, const std::vector<float>& g) {
    const bool tol = o.tol > 0;
    if (o.log_domain) {
        if (o.column_first) return tol ? run_tokens<true, true, true>(o, h, g) : run_tokens<true, true, false>(o, h, g);
        return tol ? run_tokens<true, false, true>(o, h, g) : run_tokens<true, false, false>(o, h, g);
    }
    if (o.column_first) return tol ? run_tokens<false, true, true>(o, h, g) : run_tokens<false, true, false>(o, h, g);
    return tol ? run_tokens<false, false, true>(o, h, g) : run_tokens<false, false, false>(o, h, g);
}

double max_abs(const std::vector<float>& v, size_t from, size_t count) {
    double m = 0;
    for (size_t i = from; i < from + count; ++i) m = std::max(m, std::abs(double(v[i])));
    return m;
}

}   // namespace

TEST_CASE("kernels: the fused CUDA kernels' arithmetic matches the CPU kernels", "[kernels][sinkhorn][fused]") {
    std::mt19937_64 rng(ref::seed() + 40);
    for (int variant = 0; variant < 16; ++variant) {
        k::SinkhornOptions o;
        o.column_first = variant & 1;
        o.log_domain = variant & 2;
        o.eps = (variant & 4) ? 0.05f : 1e-6f;
        if (variant & 8) {
            o.tol = 1e-4f;
            o.iters = 60;
        }
        const int64_t T = 200;
        auto h = ref::random_logits(rng, T * 16, 2.0);
        auto g = ref::random_logits(rng, T * 16, 1.0);
        k::SinkhornReport rep;
        auto pc = fwd(o, h, &rep);
        std::vector<float> pb;
        auto dhc = bwd(o, h, g, &pb);
        auto r = run_tokens(o, h, g);
        INFO("column_first " << o.column_first << " log " << o.log_domain << " eps " << o.eps << " tol " << o.tol);
        // As the GPU tests compare: fp32 P within 2e-6 (more with a tolerance, where a token whose
        // error lands within rounding of tol may stop one iteration apart), dH within 1e-4 of
        // the largest gradient.
        const double slack = o.tol > 0 ? 5.0 * o.tol : 0.0;
        double worst_p = 0, worst_g = 0, scale = 1;
        for (float v : dhc) scale = std::max(scale, double(std::abs(v)));
        for (size_t i = 0; i < h.size(); ++i) {
            REQUIRE(std::isfinite(r.p[i]));
            REQUIRE(std::isfinite(r.dh[i]));
            worst_p = std::max(worst_p, std::abs(double(r.p[i]) - pc[i]));
            worst_g = std::max(worst_g, std::abs(double(r.dh[i]) - dhc[i]));
        }
        CHECK(worst_p <= 2e-6 + slack);
        CHECK(worst_g <= (1e-4 + 100 * slack) * scale);
        CHECK(r.max_row == Approx(rep.max_row_err).margin(2e-6 + slack));
        CHECK(r.max_col == Approx(rep.max_col_err).margin(2e-6 + slack));
        const int its_max = *std::max_element(r.its.begin(), r.its.end());
        double its_mean = 0;
        for (int v : r.its) its_mean += v;
        its_mean /= T;
        if (o.tol > 0) {
            CHECK(std::abs(its_max - rep.iters_max) <= 1);
            CHECK(its_mean == Approx(rep.iters_mean).epsilon(0.01));
            if (o.eps < 1e-3f)
                CHECK(its_mean < o.iters);   // the tolerance stopped tokens (eps 0.05 never gets within 1e-4)
        } else {
            CHECK(its_max == o.iters);
        }
    }
}

TEST_CASE("kernels: the fused CUDA kernels' backward matches the float64 reference", "[kernels][sinkhorn][fused]") {
    std::mt19937_64 rng(ref::seed() + 41);
    for (int variant = 0; variant < 8; ++variant) {
        k::SinkhornOptions o;
        o.column_first = variant & 1;
        o.log_domain = variant & 2;
        o.eps = (variant & 4) ? 0.05f : 1e-6f;
        const int T = 50;
        auto h = ref::random_logits(rng, T * 16, 1.5);
        auto g = ref::random_logits(rng, T * 16, 1.0);
        auto r = run_tokens(o, h, g);
        double worst = 0;
        for (int t = 0; t < T; ++t) {
            auto want = ref::backward(to_ref(o), &h[t * 16], &g[t * 16]);
            worst = std::max(worst, max_abs_diff(&r.dh[t * 16], want) / std::max(1.0, kt::max_abs(want)));
        }
        INFO("column_first " << o.column_first << " log " << o.log_domain << " eps " << o.eps);
        CHECK(worst < 2e-4);   // the CPU kernels' own bound (test_sinkhorn_backward.cpp)
    }
}

TEST_CASE("kernels: the fused log-domain backward's rescaling holds on extreme logits", "[kernels][sinkhorn][fused]") {
    // Logits spread over hundreds: exp underflows in fp32 for most entries, so P' rebuilt step
    // by step must neither overflow nor lose the entries that matter.
    std::mt19937_64 rng(ref::seed() + 42);
    for (int variant = 0; variant < 2; ++variant) {
        k::SinkhornOptions o;
        o.log_domain = true;
        o.column_first = variant & 1;
        const int T = 100;
        auto h = ref::random_logits(rng, T * 16, 60.0);
        auto g = ref::random_logits(rng, T * 16, 1.0);
        auto dhc = bwd(o, h, g);
        auto pc = fwd(o, h);
        auto r = run_tokens(o, h, g);
        INFO("column_first " << o.column_first);
        for (int t = 0; t < T; ++t) {
            const double scale = std::max(1.0, max_abs(dhc, 16 * t, 16));
            for (int k = 0; k < 16; ++k) {
                REQUIRE(std::isfinite(r.dh[16 * t + k]));
                CHECK(std::abs(double(r.p[16 * t + k]) - pc[16 * t + k]) <= 1e-4);
                CHECK(std::abs(double(r.dh[16 * t + k]) - dhc[16 * t + k]) <= 1e-3 * scale);
            }
        }
    }
}

TEST_CASE("kernels: MHC_CUDA_SINKHORN chooses the CUDA kernels a default call runs", "[kernels][sinkhorn][fused]") {
    const char* before = std::getenv("MHC_CUDA_SINKHORN");
    const std::string saved = before ? before : "";
    using K = k::CudaSinkhornKernels;
    ::unsetenv("MHC_CUDA_SINKHORN");
    CHECK(k::resolve_cuda_kernels(K::Default) == K::Fused);
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
