// The answers table of docs/results.md ("Many GPUs"): for a multi-rank job, per policy and per
// pipeline stage, the smallest capacity (share of the stage's own peak) within a 3% loss
//   - "alone": the stage's trace simulated by itself (what a single-GPU tool answers), and
//   - "coupled": only that stage's ranks limited, the others unlimited, the JOB's loss <= 3%;
// then the job loss when only the first stage offloads at its "alone" answer, and when every
// stage does. Bisection over (0, 1] in 1/2^steps of the peak, as `mhc sweep` does.
//   answers PRESET PP DP TP MICRO_BATCHES LAYERS STEPS DIR [policies...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/sim/coupled.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc;

namespace {
constexpr double kBudget = 0.03;
constexpr int kSteps = 7;

bool ok(const sim::Result& r, double loss) { return !r.oom.happened && r.invariant_violation.empty() && loss <= kBudget; }

// Smallest f in (0, 1] (resolution 1/2^kSteps) with within(f); 1.0 when even that fails
// (reported as "none").
double bisect(const std::function<bool(double)>& within, bool& found) {
    found = within(1.0);
    if (!found) return 1.0;
    double lo = 0, hi = 1.0;
    for (int k = 0; k < kSteps; ++k) {
        double mid = (lo + hi) / 2;
        if (within(mid)) hi = mid; else lo = mid;
    }
    return hi;
}

int run_benchmark(int argc, char** argv) {
    const bench::Args args(argc, argv, "PRESET PP DP TP MICRO_BATCHES LAYERS STEPS DIR [policy[+prefetch]...]");
    if (args.size() < 8) args.refuse("needs " + std::to_string(8 - args.size()) + " more argument(s)");
    datasets::GeneratorConfig cfg = datasets::preset(argv[1]);
    auto whole = [&](size_t i, const char* name) { return static_cast<int>(args.count(i, name, 0, 1, 1024)); };
    cfg.pp = whole(1, "PP"); cfg.dp = whole(2, "DP"); cfg.tp = whole(3, "TP");
    cfg.micro_batches = whole(4, "MICRO_BATCHES"); cfg.layers = whole(5, "LAYERS"); cfg.steps = whole(6, "STEPS");
    std::string dir = argv[8];
    std::vector<std::string> policies;
    for (int i = 9; i < argc; ++i) policies.push_back(argv[i]);
    if (policies.empty()) policies = {"lru", "dtr", "cost_aware", "cost_aware+periodic"};
    std::filesystem::create_directories(dir);
    std::vector<datasets::RankFile> files;
    std::vector<int> stage_of, dp_of;
    for (int s = 0; s < cfg.pp; ++s)
        for (int d = 0; d < cfg.dp; ++d)
            for (int t = 0; t < cfg.tp; ++t) {
                files.push_back({s, d, t, dir + "/job.rank" + std::to_string(datasets::global_rank(cfg, s, d, t)) + ".db"});
                stage_of.push_back(s);
                dp_of.push_back(d);
            }
    auto t0 = std::chrono::steady_clock::now();
    datasets::generate_ranks(cfg, files);
    std::vector<trace::TraceData> traces;
    traces.reserve(files.size());
    std::vector<sim::RankTrace> ranks;
    for (auto& f : files) {
        traces.push_back(trace::load_trace(f.path));
        ranks.push_back({f.path, &traces.back(), sim::prepare(traces.back())});
    }
    sim::JobPlan plan = sim::plan_job(ranks);
    std::printf("job %s: pp %d x dp %d x tp %d, %d micro-batches, %d layers, %d steps: %zu ranks, %zu cross-rank events\n",
                argv[1], cfg.pp, cfg.dp, cfg.tp, cfg.micro_batches, cfg.layers, cfg.steps, ranks.size(), plan.cross_events());
    std::printf("%-20s %5s %10s %12s %12s %16s %18s\n", "policy", "stage", "peak", "alone", "coupled", "job loss @alone",
                "dp rank 0 only");
    for (const std::string& pp : policies) {
        sim::Config base;
        size_t plus = pp.find('+');
        base.eviction = pp.substr(0, plus);
        base.prefetch = plus == std::string::npos ? "none" : pp.substr(plus + 1);
        base.record_events = false;
        base.check_invariants = false;
        auto configs_with = [&](const std::vector<double>& frac_of_stage) {
            std::vector<sim::Config> cs(ranks.size(), base);
            for (size_t r = 0; r < ranks.size(); ++r)
                cs[r].capacity = frac_of_stage[size_t(stage_of[r])] >= 1.0 ? sim::Capacity{}
                                                                        : sim::Capacity{sim::kUnlimited, frac_of_stage[size_t(stage_of[r])]};
            return cs;
        };
        std::vector<double> alone(size_t(cfg.pp), 1.0);
        for (int s = 0; s < cfg.pp; ++s) {
            const size_t r0 = size_t(s * cfg.dp * cfg.tp);   // the stage's dp 0, tp 0 rank (its peers are the same trace)
            bool fa = false, fc = false;
            double fa_v = bisect([&](double f) {
                sim::Config c = base;
                c.capacity = sim::Capacity{sim::kUnlimited, f};
                sim::Result r = sim::simulate(*ranks[r0].prepared, c);
                return ok(r, r.throughput_loss);
            }, fa);
            double fc_v = bisect([&](double f) {
                std::vector<double> fr(size_t(cfg.pp), 1.0);
                fr[size_t(s)] = f;
                sim::CoupledResult r = sim::simulate_coupled(ranks, plan, configs_with(fr));
                return r.oom < 0 && ok(r.ranks[r0], r.job_loss);
            }, fc);
            alone[size_t(s)] = fa ? fa_v : 1.0;
            std::vector<double> only(size_t(cfg.pp), 1.0);
            only[size_t(s)] = alone[size_t(s)];
            sim::CoupledResult job = sim::simulate_coupled(ranks, plan, configs_with(only));
            const int64_t peak = sim::simulate(*ranks[r0].prepared, sim::Config{}).baseline_peak;
            // The same, but only data-parallel rank 0 of the stage (with its tensor-parallel peers) limited.
            std::vector<sim::Config> first = configs_with(std::vector<double>(size_t(cfg.pp), 1.0));
            for (size_t r = 0; r < ranks.size(); ++r)
                if (stage_of[r] == s && dp_of[r] == 0 && alone[size_t(s)] < 1.0)
                    first[r].capacity = sim::Capacity{sim::kUnlimited, alone[size_t(s)]};
            sim::CoupledResult job0 = sim::simulate_coupled(ranks, plan, first);
            char a[32], c[32];
            std::snprintf(a, sizeof a, fa && fa_v < 1.0 ? "%.1f%%" : "none", fa_v * 100);
            std::snprintf(c, sizeof c, fc && fc_v < 1.0 ? "%.1f%%" : "none", fc_v * 100);
            std::printf("%-20s %5d %9.2fG %12s %12s %15.2f%% %17.2f%%\n", pp.c_str(), s, double(peak) / (1 << 30), a, c,
                        job.oom >= 0 ? -1.0 : job.job_loss * 100, job0.oom >= 0 ? -1.0 : job0.job_loss * 100);
        }
        sim::CoupledResult all = sim::simulate_coupled(ranks, plan, configs_with(alone));
        std::printf("%-20s %5s %10s %12s %12s %15.2f%%  (every stage at its 'alone' answer)\n", pp.c_str(), "all", "", "",
                    "", all.oom >= 0 ? -1.0 : all.job_loss * 100);
        std::fflush(stdout);
    }
    std::printf("took %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_multirank_answers", [&] { return run_benchmark(argc, argv); });
}
