// Configuration parsing: capacities, links, link profile files, environment variables.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/coupled.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/model.hpp"

using namespace mhc;

TEST_CASE("capacities parse as bytes or shares and reject nonsense", "[sim][config]") {
    CHECK(sim::parse_capacity("60%").fraction == Approx(0.6));
    CHECK(sim::parse_capacity("40GiB").bytes == 40LL << 30);
    CHECK(sim::parse_capacity("unlimited").unlimited());
    CHECK_THROWS_AS(sim::parse_capacity("-5GiB"), Error);
    CHECK_THROWS_AS(sim::parse_capacity("-5%"), Error);
    CHECK_THROWS_AS(sim::parse_capacity("0"), Error);
    CHECK_THROWS_AS(sim::parse_capacity("abc%"), Error);
}

TEST_CASE("a capacity without a unit and one above 100% are refused with hints that are accepted", "[sim][config]") {
    // "--capacity 70" meant 70% or 70 GiB, not 70 bytes; "--capacity 500" cannot mean 500%.
    for (const char* bare : {"70", "1000", "1048576", "60.5", "100", "100.5"}) {
        INFO(bare);
        try {
            sim::parse_capacity(bare);
            FAIL("accepted a bare number");
        } catch (const Error& e) {
            std::string msg = e.what();
            CHECK(msg.rfind("'" + std::string(bare) + "': a capacity needs a unit: ", 0) == 0);
            // Every suggestion is accepted.
            const bool share = std::stod(bare) <= 100;
            CHECK((msg.find(std::string(bare) + "%") != std::string::npos) == share);
            if (share) CHECK(sim::parse_capacity(std::string(bare) + "%").fraction == Approx(std::stod(bare) / 100));
            CHECK(sim::parse_capacity(std::string(bare) + "GiB").bytes > 0);
            CHECK(sim::parse_capacity(std::string(bare) + "GB").bytes > 0);
        }
    }
    CHECK(sim::parse_capacity("70 %").fraction == Approx(0.7));   // the size grammar's spaces and case
    CHECK(sim::parse_capacity("80 gib").bytes == 80LL << 30);
    CHECK(sim::parse_capacity("80gb").bytes == 80'000'000'000LL);
    CHECK(sim::parse_capacity("Unlimited").unlimited());
    CHECK_THROWS_WITH(sim::parse_capacity("0%"), Catch::Contains("must be positive"));
    CHECK_THROWS_WITH(sim::parse_capacity("0B"), Catch::Contains("must be positive"));
    CHECK(sim::parse_capacity("70B").bytes == 70);            // explicit bytes mean what they say
    CHECK(sim::parse_capacity("70GB").bytes == 70'000'000'000LL);
    CHECK(sim::parse_capacity("100%").fraction == Approx(1.0));
    CHECK_THROWS_WITH(sim::parse_capacity("150%"), Catch::Contains("more than 100%"));
    CHECK_THROWS_AS(sim::parse_capacity("100.5%"), Error);
}

TEST_CASE("link presets carry docs/design.md's figures", "[sim][config]") {
    auto p4 = sim::link_from_spec("pcie4");
    CHECK(p4.h2d.bandwidth_Bps == Approx(25e9));
    CHECK(p4.duplex_factor == Approx(0.5));
    auto p5 = sim::link_from_spec("pcie5");
    CHECK(p5.h2d.bandwidth_Bps * p5.duplex_factor == Approx(52e9));
    CHECK(sim::link_from_spec("nvlink4-peer").h2d.bandwidth_Bps >= 370e9);
    CHECK_THROWS_WITH(sim::link_from_spec("pcie9"), Catch::Contains("pcie4"));
}

TEST_CASE("link profile files: the calibrate format, and errors naming the field", "[sim][config]") {
    std::string path = simtest::temp_path("link.json");
    {
        std::ofstream f(path);
        f << R"({"name": "a100-box", "h2d": {"bandwidth_Bps": 2.4e10, "latency_s": 5e-6},
                 "d2h": {"bandwidth_Bps": 2.5e10, "latency_s": 6e-6}, "copy_engines": 2,
                 "duplex_factor": 0.52, "source": "mhc calibrate",
                 "by_chunk": [{"bytes": 1048576, "h2d_Bps": 2e10, "d2h_Bps": 2.1e10}]})";
    }
    auto l = sim::link_from_spec(path);
    CHECK(l.name == "a100-box");
    CHECK(l.h2d.bandwidth_Bps == Approx(2.4e10));
    CHECK(l.d2h.latency_s == Approx(6e-6));
    CHECK(l.duplex_factor == Approx(0.52));
    CHECK(l.by_chunk.size() == 1);
    {
        std::ofstream f(path);
        f << R"({"name": "x", "h2d": {"latency_s": 5e-6}, "d2h": {"bandwidth_Bps": 1e9, "latency_s": 0},
                 "copy_engines": 2, "duplex_factor": 1})";
    }
    CHECK_THROWS_WITH(sim::load_link_profile(path), Catch::Contains(path) && Catch::Contains("h2d.bandwidth_Bps"));
    {
        std::ofstream f(path);
        f << R"({"name": "x", "h2d": {"bandwidth_Bps": 1e9, "latency_s": 0}, "d2h": {"bandwidth_Bps": 1e9, "latency_s": 0},
                 "copy_engines": 2, "duplex_factor": 1.5})";
    }
    CHECK_THROWS_WITH(sim::load_link_profile(path), Catch::Contains("duplex_factor"));
    {
        std::ofstream f(path);
        f << "{not json";
    }
    CHECK_THROWS_WITH(sim::load_link_profile(path), Catch::Contains("not valid JSON"));
}

TEST_CASE("environment variables fill options that were not given", "[sim][config]") {
    setenv("MHC_CPU_BUFFER_RATIO", "2.5", 1);
    setenv("MHC_EVICTION_STRATEGY", "belady", 1);
    setenv("MHC_MAX_SWAP_OPS_PER_SEC", "1000", 1);
    sim::Config c;
    sim::apply_environment(c, {});
    CHECK(c.cpu_buffer_ratio == 2.5);
    CHECK(c.eviction == "belady");
    CHECK(c.max_swap_ops_per_sec == 1000);
    sim::Config d;
    d.eviction = "dtr";
    sim::apply_environment(d, {true, true, true});   // options win
    CHECK(d.eviction == "dtr");
    CHECK(d.cpu_buffer_ratio == 0);
    setenv("MHC_EVICTION_STRATEGY", "fifo", 1);
    sim::Config e;
    CHECK_THROWS_WITH(sim::apply_environment(e, {}), Catch::Contains("MHC_EVICTION_STRATEGY"));
    unsetenv("MHC_CPU_BUFFER_RATIO");
    unsetenv("MHC_EVICTION_STRATEGY");
    unsetenv("MHC_MAX_SWAP_OPS_PER_SEC");
}

TEST_CASE("validate rejects unknown policies and bad windows", "[sim][config]") {
    sim::Config c;
    c.eviction = "fifo";
    CHECK_THROWS_WITH(sim::validate(c), Catch::Contains("'fifo': not an eviction policy"));
    c.eviction = "lru";
    c.prefetch = "lookahead:0";
    CHECK_THROWS_AS(sim::validate(c), Error);
    c.prefetch = "lookahead:16";
    CHECK_NOTHROW(sim::validate(c));
    c.allocator = "buddy";
    CHECK_THROWS_WITH(sim::validate(c), Catch::Contains("allocator"));
}

TEST_CASE("a set cancel flag stops simulate() with sim::Cancelled, a clear one changes nothing", "[sim][config]") {
    using namespace simtest;
    // 10000 kernels: the engine checks the flag every 4096 events, from the first.
    std::vector<Tensor> ts{{MiB, 0, mhc::trace::kNoTime}};
    std::vector<K> ks;
    for (int i = 0; i < 10000; ++i) ks.push_back({(2 * i + 1) * ms / 10, (2 * i + 2) * ms / 10, {{0, 'x'}}});
    auto t = build(ts, ks);
    std::atomic<bool> flag{true};
    auto c = config("lru", 4 * MiB);
    c.cancel = &flag;
    CHECK_THROWS_AS(mhc::sim::simulate(t, c), mhc::sim::Cancelled);
    flag = false;
    auto r = mhc::sim::simulate(t, c);
    CHECK(r.config.cancel == nullptr);   // the result does not keep the caller's flag
    c.cancel = nullptr;
    auto plain = mhc::sim::simulate(t, c);
    CHECK(r.simulated_makespan == plain.simulated_makespan);
    CHECK(r.events.size() == plain.events.size());
}

TEST_CASE("policy and allocator names parse into one kind each, unknown names are refused in one line", "[sim][config]") {
    std::vector<sim::EvictionKind> kinds;
    for (const auto& p : sim::eviction_policies()) kinds.push_back(sim::parse_eviction(p.name));
    CHECK(kinds == std::vector<sim::EvictionKind>{sim::EvictionKind::Lru, sim::EvictionKind::Largest,
                                                  sim::EvictionKind::Belady, sim::EvictionKind::Dtr,
                                                  sim::EvictionKind::CostAware});
    CHECK(sim::parse_allocator("ideal") == sim::AllocatorKind::Ideal);
    CHECK(sim::parse_allocator("caching") == sim::AllocatorKind::Caching);
    CHECK_THROWS_WITH(sim::parse_eviction("cost-aware"), "'cost-aware': not an eviction policy; use one of lru, largest, "
                                                         "belady, dtr, cost_aware; did you mean cost_aware?");
    CHECK_THROWS_WITH(sim::parse_allocator("cachin"), Catch::StartsWith("'cachin': not an allocator model; use one of ideal, caching"));
    // A run never falls back to another policy: an unknown name is refused where it starts.
    using namespace simtest;
    auto t = build({{MiB, 0, mhc::trace::kNoTime}}, {{1 * ms, 2 * ms, {{0, 'w'}}}});
    auto c = config("lru", 4 * MiB);
    c.eviction = "fifo";
    CHECK_THROWS_WITH(sim::simulate(t, c), Catch::StartsWith("'fifo': not an eviction policy"));
    sim::RankTrace rank{"r.db", &t, sim::prepare(t)};
    sim::JobPlan plan = sim::plan_job({rank});
    CHECK_THROWS_WITH(sim::make_runner(*rank.prepared, c, plan, 0), Catch::StartsWith("'fifo': not an eviction policy"));
}

TEST_CASE("a share of the peak is exact in bytes when the share divides it", "[sim][config]") {
    // One tensor of 176,686,080 B: the peak. 70% of it is 123,680,256 B exactly (x 7 / 10); the
    // double 0.7 is 0.69999999999999996, and floor(0.7 x peak) gave 123,680,255. 1/3 of 3 MiB + 1 B
    // is 1,048,576.33: rounded down. The host buffer (--cpu-buffer-ratio) is a share of the capacity.
    const int64_t peak = 176'686'080;
    auto one = simtest::build({{peak, 0, 10}}, {{1, 2, {{0, 'w'}}}});
    auto cfg = simtest::config("lru", 0);
    cfg.allocator = "ideal";
    cfg.capacity = sim::parse_capacity("70%");
    cfg.cpu_buffer_ratio = 0.7;
    auto run = sim::simulate(one, cfg);
    CHECK(run.capacity == 123'680'256);
    CHECK(run.host_capacity == 86'576'179);   // 0.7 x 123,680,256 = 86,576,179.2
    auto odd = simtest::build({{3 * simtest::MiB + 1, 0, 10}}, {{1, 2, {{0, 'w'}}}});
    cfg.capacity.fraction = 1.0 / 3;
    cfg.cpu_buffer_ratio = 0;
    CHECK(sim::simulate(odd, cfg).capacity == 1'048'576);
}
