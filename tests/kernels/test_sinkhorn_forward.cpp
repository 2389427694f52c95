// Forward Sinkhorn against float64 references on fresh random inputs.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/kernels/eigen_reference.hpp"

using namespace kt;

namespace {
// Stated tolerance: fp32 result vs float64 reference, for logits of moderate scale.
constexpr double kFp32Tol = 2e-5;
}  // namespace

TEST_CASE("kernels: forward matches the float64 reference on every CPU code path", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed());
    for (const std::string& isa : k::available_cpu_isas()) {
        k::set_cpu_isa(isa);
        for (int n : {2, 3, 4, 5, 8, 16})
            for (int variant = 0; variant < 4; ++variant) {
                k::SinkhornOptions o;
                o.n = n;
                o.column_first = variant & 1;
                o.log_domain = variant & 2;
                const int64_t T = 37;  // not a multiple of the 16-token block
                auto h = ref::random_logits(rng, T * n * n, 2.0);
                k::SinkhornReport rep;
                auto p = fwd(o, h, &rep);
                double worst = 0;
                for (int64_t t = 0; t < T; ++t)
                    worst = std::max(worst, max_abs_diff(&p[t * n * n], ref::forward(to_ref(o), &h[t * n * n])));
                INFO("isa " << isa << " n " << n << " column_first " << o.column_first << " log " << o.log_domain);
                CHECK(worst < kFp32Tol);
                // The report is the marginal error of what was written.
                auto [re, ce] = marginals(n, p);
                CHECK(rep.max_row_err == Approx(re).margin(2e-6));
                CHECK(rep.max_col_err == Approx(ce).margin(2e-6));
                CHECK(rep.iters_max == 20);
                CHECK(rep.tokens == T);
                CHECK(rep.worst_token >= 0);
                CHECK(rep.worst_token < T);
            }
    }
    k::set_cpu_isa(k::available_cpu_isas().front());
}

TEST_CASE("kernels: every code path and thread count gives the same bits", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed() + 1);
    for (int n : {4, 7}) {
        k::SinkhornOptions o;
        o.n = n;
        auto h = ref::random_logits(rng, 5000 * n * n, 1.5);
        k::set_cpu_isa("generic");
        o.threads = 1;
        auto base = fwd(o, h);
        for (const std::string& isa : k::available_cpu_isas()) {
            k::set_cpu_isa(isa);
            for (int threads : {1, 2, 3}) {
                o.threads = threads;
                auto p = fwd(o, h);
                double d = 0;
                for (size_t i = 0; i < p.size(); ++i) d = std::max(d, double(std::abs(p[i] - base[i])));
                INFO("isa " << isa << " threads " << threads);
                CHECK(d < 1e-6);  // ISAs differ only by fused multiply-adds
                if (isa == "generic") CHECK(d == 0);
            }
        }
    }
    k::set_cpu_isa(k::available_cpu_isas().front());
}

TEST_CASE("kernels: doubly stochastic after convergence", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed() + 2);
    for (int n : {2, 4, 9, 16})
        for (bool log : {false, true}) {
            k::SinkhornOptions o;
            o.n = n;
            o.iters = 2000;
            o.tol = 1e-5f;
            o.log_domain = log;
            auto h = ref::random_logits(rng, 100 * n * n, 1.0);
            k::SinkhornReport rep;
            auto p = fwd(o, h, &rep);
            auto [re, ce] = marginals(n, p);
            INFO("n " << n << " log " << log << " iterations mean " << rep.iters_mean << " max " << rep.iters_max);
            CHECK(re <= 1.2e-5);
            CHECK(ce <= 1.2e-5);
            CHECK(rep.iters_max < o.iters);
            CHECK(rep.iters_mean <= rep.iters_max);
            for (float x : p) CHECK(x >= 0.0f);
        }
}

TEST_CASE("kernels: tolerance mode stops each token at its own iteration", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed() + 3);
    const int n = 4, T = 24;
    auto h = ref::random_logits(rng, T * n * n, 2.0);
    for (bool log : {false, true}) {
        k::SinkhornOptions o;
        o.log_domain = log;
        o.iters = 60;
        o.tol = 1e-4f;
        k::SinkhornReport rep;
        auto p = fwd(o, h, &rep);
        CHECK(rep.iters_max <= 60);
        CHECK(rep.iters_mean < rep.iters_max + 1e-9);
        // Each token equals a fixed-iteration run with some count, whose error is <= tol
        // while the run one iteration shorter is not yet.
        for (int t = 0; t < T; ++t) {
            std::vector<float> ht(h.begin() + t * n * n, h.begin() + (t + 1) * n * n);
            std::vector<float> pt(p.begin() + t * n * n, p.begin() + (t + 1) * n * n);
            int found = -1;
            k::SinkhornOptions f = o;
            f.tol = 0;
            for (int it = 1; it <= o.iters && found < 0; ++it) {
                f.iters = it;
                if (fwd(f, ht) == pt) found = it;
            }
            INFO("token " << t << " log " << log);
            REQUIRE(found > 0);
            f.iters = found;
            k::SinkhornReport r1;
            fwd(f, ht, &r1);
            CHECK((std::max(r1.max_row_err, r1.max_col_err) <= 1.01e-4 || found == o.iters));
        }
    }
}

TEST_CASE("kernels: bf16 inputs and outputs", "[kernels][sinkhorn][bf16]") {
    std::mt19937_64 rng(ref::seed() + 4);
    const int n = 4, T = 300;
    auto h = ref::random_logits(rng, T * n * n, 2.0);
    std::vector<k::bf16> hb(h.size());
    std::vector<float> hr(h.size());
    for (size_t i = 0; i < h.size(); ++i) {
        hb[i] = k::float_to_bf16(h[i]);
        hr[i] = k::bf16_to_float(hb[i]);
    }
    for (bool log : {false, true}) {
        k::SinkhornOptions o;
        o.log_domain = log;
        std::vector<float> pb(h.size()), pr(h.size()), p = fwd(o, h);
        std::vector<k::bf16> pbb(h.size());
        k::sinkhorn_forward(o, T, k::view(hb.data()), k::view(pb.data()));
        k::sinkhorn_forward(o, T, k::view(hb.data()), k::view(pbb.data()));
        pr = fwd(o, hr);
        // bf16 input is exactly the fp32 path on the rounded logits.
        CHECK(pb == pr);
        // bf16 output is the fp32 result rounded to nearest even.
        for (size_t i = 0; i < h.size(); ++i) REQUIRE(pbb[i].bits == k::float_to_bf16(pb[i]).bits);
        // Stated tolerance vs the unrounded fp32 path: rounding logits of |H| <~ 8 to 8 bits
        // moves P by at most ~4e-3 (dP/dH <= 1/4 per unit, |dH| <= |H| 2^-9).
        double d = 0;
        for (size_t i = 0; i < h.size(); ++i) d = std::max(d, double(std::abs(pb[i] - p[i])));
        CHECK(d < 4e-3);
    }
}

TEST_CASE("kernels: bf16 conversion rounds to nearest even", "[kernels][bf16]") {
    auto bits = [](float f) { return k::float_to_bf16(f).bits; };
    CHECK(bits(1.0f) == 0x3f80);
    CHECK(bits(-2.0f) == 0xc000);
    float tie_even = std::bit_cast<float>(0x3f808000u);  // halfway, lower mantissa even
    float tie_odd = std::bit_cast<float>(0x3f818000u);   // halfway, lower mantissa odd
    CHECK(bits(tie_even) == 0x3f80);
    CHECK(bits(tie_odd) == 0x3f82);
    CHECK(bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
    CHECK(bits(INFINITY) == 0x7f80);
    CHECK(bits(3.4e38f) == 0x7f80);  // rounds up past the largest bf16
    CHECK(std::isnan(k::bf16_to_float(k::float_to_bf16(NAN))));
    CHECK(std::isnan(k::bf16_to_float(k::float_to_bf16(std::bit_cast<float>(0x7f800001u)))));
    for (uint32_t b = 0; b < 0x10000; b += 7) {
        k::bf16 v{static_cast<uint16_t>(b)};
        float f = k::bf16_to_float(v);
        if (!std::isnan(f)) REQUIRE(k::float_to_bf16(f).bits == v.bits);
    }
}

TEST_CASE("kernels: the straightforward baseline agrees", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed() + 5);
    for (bool cf : {false, true}) {
        k::SinkhornOptions o;
        o.column_first = cf;
        const int n = 4, T = 1000;
        auto h = ref::random_logits(rng, T * n * n, 2.0);
        std::vector<float> p(h.size());
        k::sinkhorn_forward_naive(o, T, h.data(), p.data());
        double worst = 0;
        for (int t = 0; t < T; ++t) worst = std::max(worst, max_abs_diff(&p[t * 16], ref::forward(to_ref(o), &h[t * 16])));
        CHECK(worst < kFp32Tol);
    }
}

TEST_CASE("kernels: the Eigen reference agrees, n = 4 and other n, both orders", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed() + 9);
    for (int n : {4, 3, 7}) {
        for (bool cf : {false, true}) {
            k::SinkhornOptions o;
            o.n = n;
            o.column_first = cf;
            const int T = 500, nn = n * n;
            auto h = ref::random_logits(rng, int64_t{T} * nn, 2.0);
            std::vector<float> p(h.size());
            k::sinkhorn_forward_eigen(o, T, h.data(), p.data());
            double worst = 0;
            for (int t = 0; t < T; ++t)
                worst = std::max(worst, max_abs_diff(&p[size_t(t) * nn], ref::forward(to_ref(o), &h[size_t(t) * nn])));
            INFO("n " << n << " column_first " << cf);
            CHECK(worst < kFp32Tol);
        }
    }
}

TEST_CASE("kernels: plain loses accuracy where log-domain does not", "[kernels][sinkhorn][log]") {
    // Column 3 sits 200 below the rest of each row: exp(-200) underflows to 0 in fp32 (and
    // is far below eps even in float64), so the plain variant can never fill that column,
    // while the exact Sinkhorn limit is a doubly stochastic matrix like any other.
    const int n = 4;
    std::mt19937_64 rng(ref::seed() + 6);
    auto h = ref::random_logits(rng, n * n, 0.5);
    for (int i = 0; i < n; ++i) h[i * n + 3] -= 200.0f;
    k::SinkhornOptions plain, logd;
    plain.iters = logd.iters = 200;
    logd.log_domain = true;
    ref::Opts truth = to_ref(logd);  // float64 logsumexp, no eps
    auto exact = ref::forward(truth, h.data());
    k::SinkhornReport rp, rl;
    auto pp = fwd(plain, h, &rp);
    auto pl = fwd(logd, h, &rl);
    CHECK(max_abs_diff(pl.data(), exact) < 1e-5);
    CHECK(rl.max_col_err < 1e-5);
    CHECK(max_abs_diff(pp.data(), exact) > 0.1);
    CHECK(rp.max_col_err > 0.5);  // the report shows it: a column sums to ~0
}

TEST_CASE("kernels: extreme inputs", "[kernels][sinkhorn]") {
    std::mt19937_64 rng(ref::seed() + 7);
    for (bool log : {false, true})
        for (int n : {2, 4, 16}) {
            k::SinkhornOptions o;
            o.n = n;
            o.log_domain = log;
            const int nn = n * n;
            INFO("n " << n << " log " << log);
            SECTION("all equal -> uniform") {
                std::vector<float> h(3 * nn, 7.5f);
                auto p = fwd(o, h);
                for (float x : p) CHECK(x == Approx(1.0 / n).margin(2e-6));
            }
            SECTION("very large and very negative logits") {
                for (float scale : {1e30f, -1e30f, 1e4f}) {
                    auto h = ref::random_logits(rng, 5 * nn, 1.0);
                    for (auto& x : h) x = scale < 0 ? scale + x : x * scale;
                    k::SinkhornReport rep;
                    auto p = fwd(o, h, &rep);
                    for (float x : p) REQUIRE(std::isfinite(x));
                    ref::Opts r = to_ref(o);
                    r.fp32_m0 = true;
                    for (int t = 0; t < 5; ++t) CHECK(max_abs_diff(&p[t * nn], ref::forward(r, &h[t * nn])) < kFp32Tol);
                }
            }
            SECTION("one token") {
                auto h = ref::random_logits(rng, nn, 3.0);
                k::SinkhornReport rep;
                auto p = fwd(o, h, &rep);
                CHECK(rep.tokens == 1);
                CHECK(rep.worst_token == 0);
                CHECK(max_abs_diff(p.data(), ref::forward(to_ref(o), h.data())) < kFp32Tol);
            }
        }
    // No tokens at all is a valid, empty call.
    k::SinkhornOptions o;
    auto rep = k::sinkhorn_forward(o, 0, k::view(static_cast<const float*>(nullptr)), k::view(static_cast<float*>(nullptr)));
    CHECK(rep.tokens == 0);
}

TEST_CASE("kernels: options are validated", "[kernels][sinkhorn]") {
    std::vector<float> h(16, 0.0f), p(16);
    auto call = [&](k::SinkhornOptions o) { k::sinkhorn_forward(o, 1, k::view(h.data()), k::view(p.data())); };
    k::SinkhornOptions o;
    o.n = 1;
    CHECK_THROWS_AS(call(o), mhc::Error);
    o.n = 17;
    CHECK_THROWS_WITH(call(o), Catch::Contains("2..16"));
    o = {};
    o.iters = 0;
    CHECK_THROWS_AS(call(o), mhc::Error);
    o = {};
    o.eps = 0;
    CHECK_THROWS_WITH(call(o), Catch::Contains("eps"));
    o.log_domain = true;  // logsumexp needs no eps
    CHECK_NOTHROW(call(o));
    o = {};
    o.tol = -1;
    CHECK_THROWS_AS(call(o), mhc::Error);
    CHECK_THROWS_AS(k::set_cpu_isa("sse9"), mhc::Error);
}

TEST_CASE("kernels: non-finite inputs are located", "[kernels][sinkhorn]") {
    std::vector<float> h(10 * 16, 1.0f);
    CHECK(k::first_nonfinite_token(4, 10, k::view(h.data())) == -1);
    h[7 * 16 + 5] = NAN;
    h[9 * 16] = INFINITY;
    CHECK(k::first_nonfinite_token(4, 10, k::view(h.data())) == 7);
    std::vector<k::bf16> b(32, k::float_to_bf16(1.0f));
    b[20] = k::float_to_bf16(-INFINITY);
    CHECK(k::first_nonfinite_token(4, 2, k::view(b.data())) == 1);
}

TEST_CASE("kernels: the register-resident n = 4 forward equals the general steps", "[kernels][sinkhorn]") {
    // The forward's n = 4 fixed-iteration path (fixed_n4.hpp) and the backward's recomputed
    // forward (plain_steps.hpp) are separate code; the same arithmetic in the same order must
    // give the same bits where no fused multiply-add can differ (generic), and agree within
    // fp32 rounding elsewhere. T = 1000 leaves a tail of 8 tokens after the 32-token blocks.
    std::mt19937_64 rng(ref::seed() + 7);
    const int n = 4;
    const int64_t T = 1000;
    auto h = ref::random_logits(rng, T * n * n, 3.0);
    auto g = ref::random_logits(rng, T * n * n, 1.0);
    for (const std::string& isa : k::available_cpu_isas()) {
        k::set_cpu_isa(isa);
        for (bool column_first : {false, true}) {
            k::SinkhornOptions o;
            o.n = n;
            o.column_first = column_first;
            auto p = fwd(o, h);
            std::vector<float> dh(h.size()), pb(h.size(), -1.0f);
            k::sinkhorn_backward(o, T, k::view(h.data()), k::view(g.data()), k::view(dh.data()), k::view(pb.data()));
            double d = 0;
            for (size_t i = 0; i < p.size(); ++i) d = std::max(d, double(std::abs(p[i] - pb[i])));
            INFO("isa " << isa << " column_first " << column_first);
            if (isa == "generic")
                CHECK(d == 0);
            else
                CHECK(d < 1e-6);
        }
    }
    k::set_cpu_isa(k::available_cpu_isas().front());
}
