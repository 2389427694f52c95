// Golden metrics: the generator's gpt2-small and mhc-27b presets (2 steps) under every eviction
// policy and prefetcher at 80% and 60% give exactly the metrics recorded in
// tests/sim/golden/prefetch_grid.json (taken from `mhc simulate --json` before the prefetchers
// moved behind their interface). A refactoring that changes any decision changes a number here.
#include <catch2/catch.hpp>

#ifdef MHC_HAVE_DATASETS
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/paths.hpp"

using namespace mhc;

TEST_CASE("every policy and prefetcher gives the golden metrics on two presets", "[sim][golden]") {
    std::ifstream in(mhc::test::source_path("tests/sim/golden/prefetch_grid.json"));
    REQUIRE(in.good());
    const auto golden = nlohmann::json::parse(in).at("runs");
    REQUIRE(golden.size() == 80);
    std::map<std::string, std::shared_ptr<const sim::Prepared>> prepared;
    std::vector<trace::TraceData> traces;
    traces.reserve(2);
    for (std::string name : {"gpt2-small", "mhc-27b"}) {
        auto cfg = datasets::preset(name);
        cfg.steps = 2;
        const std::string path = simtest::temp_path("golden-" + name + ".db");
        datasets::generate_file(cfg, path);
        traces.push_back(trace::load_trace(path));
        prepared[name] = sim::prepare(traces.back());
    }
    int checked = 0;
    for (const auto& [key, want] : golden.items()) {
        // key: "<preset> <capacity> <eviction>+<prefetch>"
        std::istringstream ks(key);
        std::string preset, capacity, policies;
        ks >> preset >> capacity >> policies;
        sim::Config c;
        c.capacity = sim::parse_capacity(capacity);
        c.eviction = policies.substr(0, policies.find('+'));
        c.prefetch = policies.substr(policies.find('+') + 1);
        c.link = sim::link_from_spec("pcie4");
        c.allocator = "caching";   // the command line's default
        const auto r = sim::simulate(*prepared.at(preset), c);
        std::map<std::string, double> got;
        for (const auto& [k, v] : sim::metrics(r))
            if (k != "sim_seconds") got[k] = v;
        INFO(key);
        CHECK(got.size() == want.size());
        for (const auto& [k, v] : want.items()) {
            INFO(k);
            REQUIRE(got.count(k) == 1);
            CHECK(got[k] == v.get<double>());
        }
        ++checked;
    }
    CHECK(checked == 80);
}
#endif
