// Properties over generated traces: identity at unlimited capacity, capacity never exceeded,
// Belady's theorem and the stack property of LRU and Belady.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/sim/synthetic.hpp"

using namespace simtest;
using namespace mhc;

namespace {
void check_identity(const trace::TraceData& t, const std::string& eviction, const std::string& prefetch) {
    sim::Config c;
    c.eviction = eviction;
    c.prefetch = prefetch;
    c.check_invariants = true;
    auto r = sim::simulate(t, c);
    INFO(eviction << "+" << prefetch);
    CHECK(r.invariant_violation.empty());
    CHECK_FALSE(r.oom.happened);
    CHECK(r.stall_time == 0);
    CHECK(r.swap_in_count + r.swap_out_count + r.evict_clean_count + r.drop_count == 0);
    CHECK(simtest::kernels_off_recorded_time(t, r) == 0);   // every kernel, at its recorded time
    CHECK(r.simulated_makespan == r.baseline_makespan);
    CHECK(r.simulated_peak == r.baseline_peak);
}
}  // namespace

TEST_CASE("identity: unlimited capacity reproduces the recorded timeline", "[sim][identity]") {
    auto t1 = sim::synthetic::training(7, 20000, 8, 2);
    auto t2 = sim::synthetic::random_reads(3, 20, 500, 3);
    for (const auto* t : {&t1, &t2})
        for (std::string ev : {"lru", "largest", "belady", "dtr", "cost_aware"})
            for (std::string pf : {"none", "lookahead:4", "periodic", "capuchin", "forecast"})
                check_identity(*t, ev, pf);
}

TEST_CASE("capacity is never exceeded and every kernel starts with its operands", "[sim][invariants]") {
    auto t = sim::synthetic::training(11, 30000, 12, 1);
    auto p = sim::prepare(t);
    int64_t peak = sim::baseline_peak(*p, "ideal");
    for (std::string ev : {"lru", "largest", "belady", "dtr", "cost_aware"})
        for (std::string pf : {"none", "lookahead:8", "periodic:4", "capuchin", "forecast:8"})
            for (double f : {0.9, 0.6, 0.4}) {
                sim::Config c;
                c.eviction = ev;
                c.prefetch = pf;
                c.capacity.fraction = f;
                c.check_invariants = true;
                c.cpu_buffer_ratio = 1.0;
                auto r = sim::simulate(*p, c);
                INFO(ev << "+" << pf << "@" << f);
                CHECK(r.invariant_violation.empty());
                if (!r.oom.happened) {
                    CHECK(r.simulated_peak <= static_cast<int64_t>(f * peak));
                    CHECK(r.host_peak <= r.host_capacity);
                    CHECK(r.throughput_loss >= 0);
                }
            }
}

TEST_CASE("Belady never swaps in more than LRU, more capacity never swaps in more", "[sim][belady]") {
    for (uint64_t seed = 1; seed <= 12; ++seed) {
        auto t = sim::synthetic::random_reads(seed, 16, 400, 1, MiB);
        auto p = sim::prepare(t);
        int64_t prev_lru = INT64_MAX, prev_bel = INT64_MAX;
        for (int slots = 2; slots <= 16; ++slots) {
            auto lru = sim::simulate(*p, config("lru", slots * MiB));
            auto bel = sim::simulate(*p, config("belady", slots * MiB));
            INFO("seed " << seed << " slots " << slots);
            REQUIRE_FALSE(lru.oom.happened);
            REQUIRE_FALSE(bel.oom.happened);
            CHECK(bel.swap_in_count <= lru.swap_in_count);
            CHECK(lru.swap_in_count <= prev_lru);
            CHECK(bel.swap_in_count <= prev_bel);
            prev_lru = lru.swap_in_count;
            prev_bel = bel.swap_in_count;
        }
        CHECK(prev_lru == 0);   // 16 slots hold everything
    }
}

TEST_CASE("Belady's miss count equals an independent MIN computation", "[sim][belady]") {
    // Reference: textbook MIN on the request sequence (allocations, then reads) in float-free
    // integer arithmetic, written independently of the engine.
    for (uint64_t seed = 20; seed < 26; ++seed) {
        const int n = 10, slots = 4;
        auto t = sim::synthetic::random_reads(seed, n, 300, 1, MiB);
        std::vector<int> req;
        for (int i = 0; i < n; ++i) req.push_back(i);
        for (size_t k = 0; k < t.kernels.size(); ++k) req.push_back(t.accesses.allocation[t.kernels.access_begin[k]]);
        std::vector<int> cache;
        int misses = 0;
        for (size_t i = 0; i < req.size(); ++i) {
            if (std::find(cache.begin(), cache.end(), req[i]) != cache.end()) continue;
            if (i >= static_cast<size_t>(n)) ++misses;   // the first n are allocations
            if (static_cast<int>(cache.size()) == slots) {
                size_t far = 0, victim = 0;
                for (size_t c = 0; c < cache.size(); ++c) {
                    size_t nu = req.size() + static_cast<size_t>(n - cache[c]);   // never: lowest index first
                    for (size_t j = i + 1; j < req.size(); ++j)
                        if (req[j] == cache[c]) { nu = j; break; }
                    if (nu > far) { far = nu; victim = c; }
                }
                cache.erase(cache.begin() + static_cast<long>(victim));
            }
            cache.push_back(req[i]);
        }
        auto r = sim::simulate(t, config("belady", slots * MiB));
        INFO("seed " << seed);
        CHECK(r.swap_in_count == misses);
    }
}
