// Golden timelines: every eviction policy x prefetcher, with the ideal and the caching allocator,
// an unlimited and a tight host buffer, on generated traces, gives exactly the run recorded in
// tests/sim/golden/timeline_grid.json — not only its metrics (test_golden.cpp) but every event,
// kernel time, memory sample, OOM field and replay plan entry, folded into one 64-bit FNV-1a
// digest per run. The file was taken from the engine before its hot loop was restructured (the
// steps that do not repeat, before the prefetchers' windows slid), so a change of data layout
// that changes any decision, any time or any order changes a digest.
// To retake it after a deliberate change of the rules: MHC_UPDATE_GOLDEN=1 mhc_sim_tests "[timeline]".
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <string>

#include "mhc/sim/config.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "golden_file.hpp"
#include "helpers.hpp"
#include "mhc/sim/synthetic.hpp"
#include "mhc/test/paths.hpp"

namespace sim = mhc::sim;
namespace trace = mhc::trace;

namespace {

struct Digest {
    uint64_t h = 1469598103934665603ull;
    void bytes(const void* data, size_t size) {
        const auto* bytes = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    }
    void i64(int64_t value) { bytes(&value, sizeof value); }
    void f64(double value) {
        if (std::isnan(value)) return i64(0x7ff8);   // every NaN the same, whatever its bits
        bytes(&value, sizeof value);
    }
    void str(const std::string& text) { i64(static_cast<int64_t>(text.size())); bytes(text.data(), text.size()); }
    void origin(const sim::EventOrigin& origin) {
        i64(static_cast<int64_t>(origin.what));
        i64(origin.after_launch);
        i64(origin.index);
    }
};

// Everything a run produced, in one digest (sim_seconds, the wall time, left out).
std::string digest_of(const sim::Result& run) {
    Digest digest;
    for (const auto& [name, value] : sim::metrics(run))
        if (name != "sim_seconds") { digest.str(name); digest.f64(value); }
    digest.str(run.oom.where); digest.str(run.oom.why); digest.i64(run.oom.time); digest.i64(run.oom.recorded);
    digest.i64(run.oom.bytes_needed); digest.i64(run.oom.bytes_short); digest.i64(run.oom.bytes_pinned);
    digest.i64(run.oom.fragmentation); digest.i64(run.oom.largest_free_block);
    digest.str(run.invariant_violation);
    for (const auto& event : run.events) {
        digest.i64(static_cast<int64_t>(event.kind)); digest.i64(event.t_start); digest.i64(event.t_end);
        digest.i64(event.allocation); digest.i64(event.kernel); digest.i64(event.bytes);
    }
    for (const auto& origin : run.plan_log.origins) digest.origin(origin);
    for (const auto& rel : run.plan_log.releases) { digest.i64(rel.alloc); digest.i64(rel.before); digest.origin(rel.origin); digest.i64(rel.failed_allocation); }
    for (const auto& kt : run.kernel_times) { digest.i64(kt.kernel); digest.i64(kt.t_start); digest.i64(kt.t_end); }
    for (const auto& ms : run.memory) { digest.i64(ms.t); digest.i64(ms.device_bytes); digest.i64(ms.host_bytes); }
    digest.i64(run.kernels_reached); digest.i64(run.last_kernel);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest.h));
    return hex;
}

// Training steps that do not repeat: each step has its own depth (5 to 9 layers, so step
// lengths differ and a prefetcher's window meets a longer or shorter previous step) and its
// own activation sizes (live bytes change from step to step: the forecast's medians and trend).
trace::TraceData irregular_steps(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<simtest::Tensor> tensors;
    std::vector<simtest::K> kernels;
    constexpr int kMaxLayers = 9;
    tensors.reserve(kMaxLayers);
    for (int layer = 0; layer < kMaxLayers; ++layer)
        tensors.push_back({(4 + layer % 3) * simtest::MiB, 0, trace::kNoTime, trace::Category::Param});
    int64_t now = 1000;
    for (int step = 0; step < 14; ++step) {
        const int layers = 5 + static_cast<int>(rng() % 5);
        std::vector<int> acts;
        for (int layer = 0; layer < layers; ++layer) {
            acts.push_back(static_cast<int>(tensors.size()));
            tensors.push_back({(2 + static_cast<int64_t>(rng() % 12)) * simtest::MiB, now, 0, trace::Category::Activation});
            std::vector<simtest::Use> uses = {{layer, 'r'}, {acts.back(), 'w'}};
            if (layer > 0) uses.push_back({acts[static_cast<size_t>(layer) - 1], 'r'});
            const int64_t length = 20'000 + static_cast<int64_t>(rng() % 80'000);
            kernels.push_back({now + 1000, now + 1000 + length, uses, step});
            now += 2000 + length;
        }
        for (int layer = layers - 1; layer >= 0; --layer) {
            const int64_t length = 40'000 + static_cast<int64_t>(rng() % 80'000);
            kernels.push_back({now + 1000, now + 1000 + length, {{layer, 'x'}, {acts[static_cast<size_t>(layer)], 'r'}}, step});
            now += 2000 + length;
            tensors[static_cast<size_t>(acts[static_cast<size_t>(layer)])].t_free = now;
            now += 1000;
        }
    }
    return simtest::build(tensors, kernels);
}

struct Case { std::string name; trace::TraceData data; };

std::vector<Case> traces() {
    std::vector<Case> cases;
    cases.push_back({"training-a", sim::synthetic::training(11, 20'000, 8, 1)});
    cases.push_back({"training-b", sim::synthetic::training(12, 30'000, 12, 2)});
    cases.push_back({"random-reads", sim::synthetic::random_reads(13, 64, 600, 4)});
    cases.push_back({"irregular-steps", irregular_steps(14)});
    return cases;
}

}  // namespace

TEST_CASE("every policy, prefetcher and allocator gives the golden timeline", "[sim][golden][timeline]") {
    const simtest::GoldenFile golden(mhc::test::source_path("tests/sim/golden/timeline_grid.json"));
    nlohmann::json got;
    int checked = 0;
    for (auto& tc : traces()) {
        const auto prepared = sim::prepare(tc.data);
        for (const char* ev : {"lru", "largest", "belady", "dtr", "cost_aware"})
            for (const char* pf : {"none", "lookahead:8", "periodic", "capuchin", "forecast"})
                for (const char* alloc : {"ideal", "caching"})
                    for (const char* cap : {"55%", "75%"})
                        for (double host : {0.0, 1.0}) {
                            sim::Config config;
                            config.eviction = ev;
                            config.prefetch = pf;
                            config.allocator = alloc;
                            config.capacity = sim::parse_capacity(cap);
                            config.cpu_buffer_ratio = host;
                            config.link = sim::link_from_spec("pcie4");
                            config.check_invariants = true;
                            const auto result = sim::simulate(*prepared, config);
                            const std::string key = tc.name + " " + cap + " " + ev + "+" + pf + " " + alloc +
                                                    " host " + std::to_string(host).substr(0, 3);
                            const nlohmann::json run = {{"digest", digest_of(result)},
                                                        {"events", result.events.size()},
                                                        {"peak", result.simulated_peak},
                                                        {"makespan", result.simulated_makespan}};
                            golden.compare(got, checked, key, run);
                        }
    }
    golden.finish(got, checked,
                  "Digests of full simulator runs (tests/sim/test_timeline_golden.cpp): "
                          "retaken with MHC_UPDATE_GOLDEN=1; say when and why.");
}

// The forecast's early eviction samples its candidates at random once more than
// SampledSet::kSample allocations are live: 32-layer training traces keep about 80 live, where
// the grid's traces keep fewer (every one is then ranked, and the draw's random numbers decide
// nothing). Its timelines under eviction policies, capacities and horizons, taken from the code
// before the draw's remainder, random numbers and candidate bookkeeping were made faster:
// the draw, the candidates it keeps and the order it ranks them in stay the same.
TEST_CASE("forecast's sampled candidate draws give the golden timeline", "[sim][golden][timeline][forecast]") {
    const simtest::GoldenFile golden(mhc::test::source_path("tests/sim/golden/forecast_draws.json"));
    nlohmann::json got;
    int checked = 0;
    const std::vector<Case> cases = {{"training-32-layers", sim::synthetic::training(3, 60'000, 32, 2)},
                                     {"training-40-layers", sim::synthetic::training(8, 50'000, 40, 1)}};
    for (const auto& tc : cases) {
        const auto prepared = sim::prepare(tc.data);
        for (const char* ev : {"lru", "cost_aware", "belady"})
            for (const char* pf : {"forecast", "forecast:3"})
                for (const char* cap : {"40%", "60%", "80%"}) {
                    sim::Config config;
                    config.eviction = ev;
                    config.prefetch = pf;
                    config.capacity = sim::parse_capacity(cap);
                    config.link = sim::link_from_spec("pcie4");
                    config.check_invariants = true;
                    const auto result = sim::simulate(*prepared, config);
                    const std::string key = tc.name + " " + cap + " " + ev + "+" + pf;
                    const nlohmann::json run = {{"digest", digest_of(result)},
                                                {"early_evictions", result.forecast_evictions},
                                                {"peak", result.simulated_peak},
                                                {"makespan", result.simulated_makespan}};
                    golden.compare(got, checked, key, run);
                }
    }
    golden.finish(got, checked,
                  "Digests of forecast runs whose candidates are sampled (tests/sim/test_timeline_golden.cpp): "
                  "retaken with MHC_UPDATE_GOLDEN=1; say when and why.");
}
