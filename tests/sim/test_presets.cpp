// The generator's presets (datasets/): identity at unlimited capacity for every policy and
// prefetcher, and the invariants at a tight capacity. Small overrides keep them quick.
#include <catch2/catch.hpp>

#ifdef MHC_HAVE_DATASETS
#include "helpers.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/sim/simulate.hpp"

using namespace mhc;

TEST_CASE("identity and invariants on every generator preset", "[sim][identity][presets]") {
    for (const auto& name : datasets::preset_names()) {
        auto cfg = datasets::preset(name);
        cfg.steps = 3;
        cfg.layers = std::min(cfg.layers, 4 * cfg.pp);
        cfg.micro_batches = std::min(cfg.micro_batches, 2);
        cfg.seq = std::min<int64_t>(cfg.seq, 512);
        std::string path = simtest::temp_path(name + ".db");
        datasets::generate_file(cfg, path);
        auto t = trace::load_trace(path);
        auto p = sim::prepare(t);
        for (std::string ev : {"lru", "largest", "belady", "dtr", "cost_aware"})
            for (std::string pf : {"none", "lookahead:8", "periodic", "capuchin", "forecast"}) {
                sim::Config c;
                c.eviction = ev;
                c.prefetch = pf;
                c.check_invariants = true;
                auto r = sim::simulate(*p, c);
                INFO(name << " " << ev << "+" << pf);
                CHECK(r.invariant_violation.empty());
                CHECK(r.stall_time == 0);
                CHECK(r.swap_in_count + r.swap_out_count + r.evict_clean_count + r.drop_count == 0);
                CHECK(simtest::kernels_off_recorded_time(t, r) == 0);
                CHECK(r.simulated_makespan == r.baseline_makespan);
                c.capacity.fraction = 0.6;
                auto tight = sim::simulate(*p, c);
                CHECK(tight.invariant_violation.empty());
                if (!tight.oom.happened) CHECK(tight.simulated_peak <= static_cast<int64_t>(0.6 * tight.baseline_peak));
            }
        {
            sim::Config c;
            c.allocator = "caching";
            c.check_invariants = true;
            auto r = sim::simulate(*p, c);
            INFO(name << " caching");
            CHECK(r.invariant_violation.empty());
            CHECK(r.stall_time == 0);
            CHECK(r.simulated_peak == r.baseline_peak);
        }
    }
}
#endif
