// Golden timelines: every eviction policy x prefetcher, with the ideal and the caching allocator,
// an unlimited and a tight host buffer, on generated traces, gives exactly the run recorded in
// tests/sim/golden/timeline_grid.json — not only its metrics (test_golden.cpp) but every event,
// kernel time, memory sample, OOM field and replay plan entry, folded into one 64-bit FNV-1a
// digest per run. The file was taken from the engine before its hot loop was restructured, so
// a change of data layout that changes any decision, any time or any order changes a digest.
// To retake it after a deliberate change of the rules: MHC_UPDATE_GOLDEN=1 mhc_sim_tests "[timeline]".
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "mhc/sim/config.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/sim/synthetic.hpp"

using namespace mhc;

namespace {

struct Digest {
    uint64_t h = 1469598103934665603ull;
    void bytes(const void* p, size_t n) {
        const auto* c = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
    }
    void i64(int64_t v) { bytes(&v, sizeof v); }
    void f64(double v) {
        if (std::isnan(v)) return i64(0x7ff8);   // every NaN the same, whatever its bits
        bytes(&v, sizeof v);
    }
    void str(const std::string& s) { i64(static_cast<int64_t>(s.size())); bytes(s.data(), s.size()); }
    void origin(const sim::EventOrigin& o) {
        i64(static_cast<int64_t>(o.what));
        i64(o.after_launch);
        i64(o.index);
    }
};

// Everything a run produced, in one digest (sim_seconds, the wall time, left out).
std::string digest_of(const sim::Result& r) {
    Digest d;
    for (const auto& [k, v] : sim::metrics(r))
        if (k != "sim_seconds") { d.str(k); d.f64(v); }
    d.str(r.oom.where); d.str(r.oom.why); d.i64(r.oom.time); d.i64(r.oom.recorded);
    d.i64(r.oom.bytes_needed); d.i64(r.oom.bytes_short); d.i64(r.oom.bytes_pinned);
    d.i64(r.oom.fragmentation); d.i64(r.oom.largest_free_block);
    d.str(r.invariant_violation);
    for (const auto& e : r.events) {
        d.i64(static_cast<int64_t>(e.kind)); d.i64(e.t_start); d.i64(e.t_end);
        d.i64(e.allocation); d.i64(e.kernel); d.i64(e.bytes);
    }
    for (const auto& o : r.plan_log.origins) d.origin(o);
    for (const auto& x : r.plan_log.releases) { d.i64(x.alloc); d.i64(x.before); d.origin(x.origin); d.i64(x.failed_allocation); }
    for (const auto& k : r.kernel_times) { d.i64(k.kernel); d.i64(k.t_start); d.i64(k.t_end); }
    for (const auto& m : r.memory) { d.i64(m.t); d.i64(m.device_bytes); d.i64(m.host_bytes); }
    d.i64(r.kernels_reached); d.i64(r.last_kernel);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(d.h));
    return hex;
}

struct Case { std::string name; trace::TraceData trace; };

std::vector<Case> traces() {
    std::vector<Case> v;
    v.push_back({"training-a", sim::synthetic::training(11, 20'000, 8, 1)});
    v.push_back({"training-b", sim::synthetic::training(12, 30'000, 12, 2)});
    v.push_back({"random-reads", sim::synthetic::random_reads(13, 64, 600, 4)});
    return v;
}

}  // namespace

TEST_CASE("every policy, prefetcher and allocator gives the golden timeline", "[sim][golden][timeline]") {
    const std::string file = MHC_GOLDEN_DIR "/timeline_grid.json";
    const bool update = std::getenv("MHC_UPDATE_GOLDEN") != nullptr;
    nlohmann::json golden;
    if (!update) {
        std::ifstream in(file);
        REQUIRE(in.good());
        golden = nlohmann::json::parse(in).at("runs");
    }
    nlohmann::json got;
    int checked = 0;
    for (auto& tc : traces()) {
        auto p = sim::prepare(tc.trace);
        for (const char* ev : {"lru", "largest", "belady", "dtr", "cost_aware"})
            for (const char* pf : {"none", "lookahead:8", "periodic", "capuchin", "forecast"})
                for (const char* alloc : {"ideal", "caching"})
                    for (const char* cap : {"55%", "75%"})
                        for (double host : {0.0, 1.0}) {
                            sim::Config c;
                            c.eviction = ev;
                            c.prefetch = pf;
                            c.allocator = alloc;
                            c.capacity = sim::parse_capacity(cap);
                            c.cpu_buffer_ratio = host;
                            c.link = sim::link_from_spec("pcie4");
                            c.check_invariants = true;
                            const auto r = sim::simulate(*p, c);
                            const std::string key = tc.name + " " + cap + " " + ev + "+" + pf + " " + alloc +
                                                    " host " + std::to_string(host).substr(0, 3);
                            const nlohmann::json run = {{"digest", digest_of(r)},
                                                        {"events", r.events.size()},
                                                        {"peak", r.simulated_peak},
                                                        {"makespan", r.simulated_makespan}};
                            got[key] = run;
                            if (update) continue;
                            INFO(key);
                            REQUIRE(golden.contains(key));
                            CHECK(golden.at(key) == run);
                            ++checked;
                        }
    }
    if (update) {
        std::ofstream out(file);
        out << nlohmann::json{{"_about", "Digests of full simulator runs (tests/sim/test_timeline_golden.cpp): "
                                         "retaken with MHC_UPDATE_GOLDEN=1; say when and why."},
                              {"runs", got}}
                   .dump(1)
            << "\n";
        SUCCEED("golden file rewritten");
        return;
    }
    CHECK(checked == static_cast<int>(golden.size()));
}
