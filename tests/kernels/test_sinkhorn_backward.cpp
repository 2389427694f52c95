// Backward Sinkhorn against an unrolled float64 reference and float64 finite differences.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace kt;

namespace {
// Relative to the largest gradient entry of the token.
constexpr double kGradTol = 2e-4;
}  // namespace

TEST_CASE("kernels: float64 reference backward matches finite differences", "[kernels][sinkhorn][backward]") {
    std::mt19937_64 rng(ref::seed() + 10);
    for (int variant = 0; variant < 4; ++variant)
        for (int n : {2, 3, 4}) {
            ref::Opts o;
            o.n = n;
            o.iters = 10;
            o.eps = 0.05;  // a large eps makes its terms (and the rowmax shift) visible
            o.column_first = variant & 1;
            o.log_domain = variant & 2;
            auto h = ref::random_logits(rng, n * n, 1.5);
            auto g = ref::random_logits(rng, n * n, 1.0);
            auto an = ref::backward(o, h.data(), g.data());
            auto fd = ref::finite_diff(o, h.data(), g.data());
            double d = 0;
            for (int q = 0; q < n * n; ++q) d = std::max(d, std::abs(an[q] - fd[q]));
            INFO("n " << n << " variant " << variant);
            CHECK(d < 1e-7 * std::max(1.0, max_abs(fd)));
        }
}

TEST_CASE("kernels: backward matches the unrolled float64 reference", "[kernels][sinkhorn][backward]") {
    std::mt19937_64 rng(ref::seed() + 11);
    for (const std::string& isa : k::available_cpu_isas()) {
        k::set_cpu_isa(isa);
        for (int n : {2, 4, 5, 16})
            for (int variant = 0; variant < 8; ++variant) {
                k::SinkhornOptions o;
                o.n = n;
                o.column_first = variant & 1;
                o.log_domain = variant & 2;
                o.eps = (variant & 4) ? 0.05f : 1e-6f;
                const int T = 21;
                auto h = ref::random_logits(rng, T * n * n, 1.5);
                auto g = ref::random_logits(rng, T * n * n, 1.0);
                std::vector<float> p;
                auto dh = bwd(o, h, g, &p);
                auto pf = fwd(o, h);
                CHECK(p == pf);  // the recomputed forward is the forward
                double worst = 0;
                for (int t = 0; t < T; ++t) {
                    auto r = ref::backward(to_ref(o), &h[t * n * n], &g[t * n * n]);
                    worst = std::max(worst, max_abs_diff(&dh[t * n * n], r) / std::max(1.0, max_abs(r)));
                }
                INFO("isa " << isa << " n " << n << " variant " << variant);
                CHECK(worst < kGradTol);
            }
    }
    k::set_cpu_isa(k::available_cpu_isas().front());
}

TEST_CASE("kernels: backward matches float64 finite differences", "[kernels][sinkhorn][backward]") {
    std::mt19937_64 rng(ref::seed() + 12);
    for (int variant = 0; variant < 4; ++variant) {
        k::SinkhornOptions o;
        o.n = 4;
        o.iters = 20;
        o.eps = 0.01f;
        o.column_first = variant & 1;
        o.log_domain = variant & 2;
        auto h = ref::random_logits(rng, 16, 1.0);
        auto g = ref::random_logits(rng, 16, 1.0);
        auto dh = bwd(o, h, g);
        auto fd = ref::finite_diff(to_ref(o), h.data(), g.data());
        INFO("variant " << variant);
        CHECK(max_abs_diff(dh.data(), fd) < kGradTol * std::max(1.0, max_abs(fd)));
    }
}

TEST_CASE("kernels: backward in tolerance mode follows each token's stopping point", "[kernels][sinkhorn][backward]") {
    std::mt19937_64 rng(ref::seed() + 13);
    const int n = 4, T = 20;
    auto h = ref::random_logits(rng, T * n * n, 2.0);
    auto g = ref::random_logits(rng, T * n * n, 1.0);
    for (bool log : {false, true}) {
        k::SinkhornOptions o;
        o.log_domain = log;
        o.iters = 50;
        o.tol = 1e-4f;
        std::vector<float> p;
        auto dh = bwd(o, h, g, &p);
        for (int t = 0; t < T; ++t) {
            std::vector<float> ht(h.begin() + t * 16, h.begin() + (t + 1) * 16);
            std::vector<float> gt(g.begin() + t * 16, g.begin() + (t + 1) * 16);
            std::vector<float> pt(p.begin() + t * 16, p.begin() + (t + 1) * 16);
            k::SinkhornOptions f = o;
            f.tol = 0;
            int found = -1;
            for (int it = 1; it <= o.iters && found < 0; ++it) {
                f.iters = it;
                if (fwd(f, ht) == pt) found = it;
            }
            REQUIRE(found > 0);
            f.iters = found;
            auto r = ref::backward(to_ref(f), ht.data(), gt.data());
            INFO("token " << t << " iterations " << found << " log " << log);
            CHECK(max_abs_diff(&dh[t * 16], r) < kGradTol * std::max(1.0, max_abs(r)));
        }
    }
}

TEST_CASE("kernels: backward with bf16 tensors", "[kernels][sinkhorn][backward][bf16]") {
    std::mt19937_64 rng(ref::seed() + 14);
    const int T = 50;
    auto h = ref::random_logits(rng, T * 16, 1.5);
    auto g = ref::random_logits(rng, T * 16, 1.0);
    std::vector<k::bf16> hb(h.size()), gb(h.size()), db(h.size());
    std::vector<float> hr(h.size()), gr(h.size());
    for (size_t i = 0; i < h.size(); ++i) {
        hb[i] = k::float_to_bf16(h[i]);
        gb[i] = k::float_to_bf16(g[i]);
        hr[i] = k::bf16_to_float(hb[i]);
        gr[i] = k::bf16_to_float(gb[i]);
    }
    k::SinkhornOptions o;
    k::sinkhorn_backward(o, T, k::view(hb.data()), k::view(gb.data()), k::view(db.data()));
    auto dr = bwd(o, hr, gr);
    for (size_t i = 0; i < h.size(); ++i) REQUIRE(db[i].bits == k::float_to_bf16(dr[i]).bits);
}

TEST_CASE("kernels: backward on extreme inputs stays finite", "[kernels][sinkhorn][backward]") {
    for (bool log : {false, true})
        for (int n : {2, 16}) {
            k::SinkhornOptions o;
            o.n = n;
            o.log_domain = log;
            std::vector<float> h(2 * n * n, 3.0f), g(2 * n * n, 1.0f);
            for (int q = 0; q < n * n; ++q) h[n * n + q] = (q % 3) * 1e30f - 1e30f;
            auto dh = bwd(o, h, g);
            for (float x : dh) CHECK(std::isfinite(x));
            // A constant upstream gradient on a doubly stochastic output has ~no effect.
            for (int q = 0; q < n * n; ++q) CHECK(std::abs(dh[q]) < 1e-4);
        }
}

// A NaN logit (a replayed buffer's bytes, or -inf - -inf in a row of -inf) reached vexp, whose
// float-to-int cast of a NaN is undefined (UBSan in the replay tests, 2026-12-06): the token's
// result is NaN, every other token's is what it is without the NaN, on every ISA and width.
TEST_CASE("kernels: a NaN logit leaves its token NaN and the other tokens as they were",
          "[kernels][sinkhorn][backward]") {
    std::mt19937_64 rng(ref::seed() + 17);
    for (const std::string& isa : k::available_cpu_isas()) {
        k::set_cpu_isa(isa);
        for (int streams : {2, 4, 5, 16})
            for (bool log : {false, true}) {
                k::SinkhornOptions opts;
                opts.n = streams;
                opts.log_domain = log;
                const int tokens = 19, nn = streams * streams;
                auto logits = ref::random_logits(rng, tokens * nn, 1.5);
                auto grad = ref::random_logits(rng, tokens * nn, 1.0);
                std::vector<float> p_clean, p_nan;
                auto dh_clean = bwd(opts, logits, grad, &p_clean);
                auto bad = logits;
                bad[7 * nn + 1] = NAN;
                bad[18 * nn] = -INFINITY;   // a row of -inf: -inf - -inf is NaN
                for (int j = 1; j < streams; ++j) bad[18 * nn + j] = -INFINITY;
                auto dh_nan = bwd(opts, bad, grad, &p_nan);
                auto pf = fwd(opts, bad);
                INFO("isa " << isa << " n " << streams << " log " << log);
                bool nan7 = false;
                for (int q = 0; q < nn; ++q) nan7 |= std::isnan(dh_nan[7 * nn + q]) || std::isnan(p_nan[7 * nn + q]);
                CHECK(nan7);   // not swallowed into a finite answer
                for (int t = 0; t < tokens; ++t) {
                    if (t == 7 || t == 18) continue;
                    for (int q = 0; q < nn; ++q) {
                        REQUIRE(dh_nan[t * nn + q] == dh_clean[t * nn + q]);
                        REQUIRE(p_nan[t * nn + q] == p_clean[t * nn + q]);
                        REQUIRE(pf[t * nn + q] == p_clean[t * nn + q]);
                    }
                }
            }
    }
}
