// Identity on the public traces (tests/data/public), imported with the importer library:
// at unlimited capacity every kernel keeps its recorded start and end, with no stalls and
// no traffic, for every policy and prefetcher; at a tight capacity a run completes within
// the invariants or stops with a clean OOM.
#include <catch2/catch.hpp>

#if defined(MHC_HAVE_IMPORT)
#include <algorithm>
#include <filesystem>

#include "helpers.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/import/import.hpp"

using namespace mhc;
namespace imp = mhc::trace::import;

namespace {
struct PublicTrace { std::string file, kineto; };

void check_identity_and_limits(const std::string& name, const trace::TraceData& t) {
    auto p = sim::prepare(t);
    for (std::string ev : {"lru", "largest", "belady", "dtr", "cost_aware"})
        for (std::string pf : {"none", "lookahead:8", "periodic", "capuchin", "forecast"}) {
            INFO(name << " " << ev << "+" << pf);
            sim::Config c;
            c.eviction = ev;
            c.prefetch = pf;
            c.check_invariants = true;
            auto r = sim::simulate(*p, c);
            CHECK(r.invariant_violation.empty());
            CHECK_FALSE(r.oom.happened);
            CHECK(r.stall_time == 0);
            CHECK(r.swap_in_bytes + r.swap_out_bytes == 0);
            CHECK(r.evict_clean_count + r.drop_count + r.early_evictions == 0);
            CHECK(simtest::kernels_off_recorded_time(t, r) == 0);   // every kernel, at its recorded time
            CHECK(r.simulated_makespan == r.baseline_makespan);
            CHECK(r.simulated_peak == r.baseline_peak);
            for (double f : {0.9, 0.5}) {
                c.capacity.fraction = f;
                auto tight = sim::simulate(*p, c);
                INFO("capacity " << f);
                CHECK(tight.invariant_violation.empty());
                if (tight.oom.happened) {
                    CHECK_FALSE(tight.oom.where.empty());
                    CHECK(tight.oom.bytes_needed > 0);
                } else {
                    CHECK(tight.simulated_peak <= tight.capacity);
                    CHECK(tight.simulated_makespan >= tight.baseline_makespan);
                }
            }
        }
}
}  // namespace

TEST_CASE("identity on every public trace, imported", "[sim][identity][public]") {
    const std::string root = mhc::test::public_datasets();
    std::vector<PublicTrace> traces{
        {"torch-snapshot/stanford-cs336-training-step.pickle", ""},
        {"torch-snapshot/mosaic-synthetic.pickle", ""},
        {"kineto/simple_add_trace.json.gz", ""},
        {"kineto/nccl_data.json.gz", ""},
        {"kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz", ""},
        {"kineto/hta-df-index-resolver.json.gz", ""},
        {"kineto/tracelens-mi300x-normalization-layer-test.json.gz", ""},
        {"nsys/con_kernel.sqlite", ""},
        {"chakra/simple_add_et.json.gz", "kineto/simple_add_trace.json.gz"},
        {"chakra/chakra-1.0.2-et.json.gz", ""},
    };
    for (const auto& pt : traces) {
        std::string in = root + "/" + pt.file;
        // The public traces are part of the repository (tests/data/public): missing is a failure.
        REQUIRE(std::filesystem::exists(in));
        imp::Options opt;
        opt.warn = false;
        if (!pt.kineto.empty()) opt.kineto_path = root + "/" + pt.kineto;
        std::string out = simtest::temp_path(std::filesystem::path(pt.file).stem().string() + ".db");
        imp::import_file(in, out, opt);
        auto t = trace::load_trace(out);
        INFO(pt.file << ": " << t.allocations.size() << " allocations, " << t.kernels.size() << " kernels");
        REQUIRE(t.allocations.size() + t.kernels.size() > 0);
        // the host's pinned buffers (device -1, nsys/ET) are never the default device
        CHECK(sim::device_of(*sim::prepare(t)) >= 0);
        check_identity_and_limits(pt.file, t);
        std::filesystem::remove(out);
    }
}
TEST_CASE("the caching model on a Kineto trace starts from the profiler's reserved bytes",
          "[sim][allocator][kineto][public]") {
    // HTA's trace: Total Reserved is 12,782,141,440 B at GPU 1's first [memory] event and never
    // changes; Total Allocated peaks at 6,629,508,096 B. From an empty cache the model reserved
    // 6,866,075,648 B (x0.537, before 2026-12-04); started from the recorded figure, its segments
    // (6.39 GiB at most) all come from the bytes held, so it reserves the recorded figure, and it
    // says where that comes from.
    const std::string in = std::string(mhc::test::public_datasets()) + "/kineto/hta-df-index-resolver.json.gz";
    imp::Options opt;
    opt.warn = false;
    const std::string out = simtest::temp_path("hta-df-index-resolver-reserved.db");
    imp::import_file(in, out, opt);
    auto data = trace::load_trace(out);
    auto prepared = sim::prepare(data);
    REQUIRE(sim::device_of(*prepared) == 1);
    sim::Config config;
    config.allocator = "caching";
    const auto run = sim::simulate(*prepared, config);
    const int64_t recorded = 12782141440;
    CHECK(run.baseline_peak == recorded);
    CHECK(run.simulated_peak == recorded);
    CHECK(std::any_of(run.warnings.begin(), run.warnings.end(), [](const std::string& said) {
        return said.rfind("the caching allocator model starts from the 11.90 GiB the profiler recorded reserved", 0) ==
                   0 &&
               said.find("from an empty cache the model reserves 6.39 GiB (x0.537)") != std::string::npos;
    }));
    // Under a capacity the held bytes change no decision: a segment is made whenever one would be
    // from an empty cache, and a failed one gives them back first. The same runs without the first
    // event's figure evict, stall and stop alike (the capacities: 6.39 GiB from an empty cache x 0.9,
    // 0.7, 0.5, 0.3).
    trace::TraceData cold = data;
    cold.meta.erase("kineto.reserved_first.device1");
    auto cold_prepared = sim::prepare(cold);
    for (double share : {0.9, 0.7, 0.5, 0.3}) {
        config.capacity.bytes = static_cast<int64_t>(share * 6866075648.0);
        const auto warm_run = sim::simulate(*prepared, config);
        const auto cold_run = sim::simulate(*cold_prepared, config);
        INFO("capacity " << config.capacity.bytes);
        CHECK(warm_run.oom.happened == cold_run.oom.happened);
        CHECK(warm_run.swap_out_count == cold_run.swap_out_count);
        CHECK(warm_run.swap_in_bytes == cold_run.swap_in_bytes);
        CHECK(warm_run.simulated_makespan == cold_run.simulated_makespan);
        CHECK(warm_run.simulated_peak >= cold_run.simulated_peak);
    }
    std::filesystem::remove(out);
}
#endif
