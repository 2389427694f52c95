// Coupled simulation speed: generates a pp x dp job (gpt2-small shape, --layers/--steps from
// the command line), then simulates it coupled under a few policies and prints ranks x events
// per second next to the same ranks simulated one by one (the cost of the coupling).
//   bench_multirank [pp] [dp] [micro_batches] [layers] [steps] [dir] [preset]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/sim/coupled.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc;

namespace {

int run_benchmark(int argc, char** argv) {
    const bench::Args args(argc, argv, "[pp] [dp] [micro_batches] [layers] [steps] [dir] [preset]");
    args.at_most(7);
    int pp = static_cast<int>(args.count(0, "pp", 4, 1, 1024)), dp = static_cast<int>(args.count(1, "dp", 2, 1, 1024));
    int mb = static_cast<int>(args.count(2, "micro_batches", 8, 1, 1024));
    int layers = static_cast<int>(args.count(3, "layers", 8, 1, 1024));
    int steps = static_cast<int>(args.count(4, "steps", 2, 1, 1024));
    std::string dir = args.text(5, (std::filesystem::temp_directory_path() / "mhc-bench-multirank").string());
    std::filesystem::create_directories(dir);
    datasets::GeneratorConfig cfg = datasets::preset(argc > 7 ? argv[7] : "gpt2-small");
    cfg.pp = pp; cfg.dp = dp; cfg.tp = 1; cfg.micro_batches = mb; cfg.layers = layers; cfg.steps = steps;
    std::vector<datasets::RankFile> files;
    for (int s = 0; s < pp; ++s)
        for (int d = 0; d < dp; ++d)
            files.push_back({s, d, 0, dir + "/job.rank" + std::to_string(datasets::global_rank(cfg, s, d, 0)) + ".db"});
    auto g0 = std::chrono::steady_clock::now();
    datasets::generate_ranks(cfg, files);
    double gen = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
    std::vector<trace::TraceData> traces;
    traces.reserve(files.size());
    std::vector<sim::RankTrace> ranks;
    int64_t rows = 0;
    for (auto& f : files) {
        traces.push_back(trace::load_trace(f.path));
        ranks.push_back({f.path, &traces.back(), sim::prepare(traces.back())});
    }
    sim::JobPlan plan = sim::plan_job(ranks);
    std::printf("job %s: pp %d x dp %d, %d micro-batches, %d layers, %d steps: %zu ranks, %zu cross-rank events; generated in %.2f s\n",
                cfg.preset.c_str(), pp, dp, mb, layers, steps, ranks.size(), plan.cross_events(), gen);
    std::printf("%-12s %-9s %12s %10s %14s %12s %10s %9s\n", "policy", "capacity", "events", "coupled s", "events/s",
                "uncoupled s", "overhead", "job loss");
    for (const char* pol : {"lru", "dtr", "cost_aware"})
        for (const char* cap : {"unlimited", "70%"}) {
            sim::Config c;
            c.eviction = pol;
            c.capacity = sim::parse_capacity(cap);
            c.record_events = false;
            c.check_invariants = false;
            double best = 1e30, alone_best = 1e30;
            sim::CoupledResult r;
            for (int rep = 0; rep < 3; ++rep) {
                auto t0 = std::chrono::steady_clock::now();
                r = sim::simulate_coupled(ranks, plan, c);
                best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                auto t1 = std::chrono::steady_clock::now();
                for (auto& rk : ranks) (void)sim::simulate(*rk.prepared, c);
                alone_best = std::min(alone_best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
            }
            rows = r.events;
            std::printf("%-12s %-9s %12lld %10.3f %14.3g %12.3f %9.1f%% %8.2f%%\n", pol, cap, (long long)rows, best,
                        double(rows) / best, alone_best, (best / alone_best - 1) * 100, r.job_loss * 100);
        }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_multirank", [&] { return run_benchmark(argc, argv); });
}
