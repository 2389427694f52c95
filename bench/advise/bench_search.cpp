// The search's first answer against every combination, and what the exact search costs
// (docs/advise.md "Search", docs/results.md "The search's first answer against every combination").
//
// For each captured step: every combination the planner may answer (each global setting it tries,
// every available choice per block, each allocator setting the search tries: search_allocator_confs,
// so a max_split_size_mb where one reserves less) predicted exactly; then, at every distinct reserved
// peak among them as the capacity (the capacities where the fastest fitting combination can change; at
// most MAX of them, evenly spaced, when there are more), the planner's first answer with single moves
// only and with pair moves too (PlannerOptions::pair_moves), each against the fastest fitting
// combination. Fitting is the search's test: the caching model runs at the capacity (PyTorch's
// free-and-retry on a failed cudaMalloc), certain where the unlimited reserved peak is within it. Prints per step: combinations, capacities, misses of each mode (with the first few
// written out), and each mode's evaluations and CPU seconds summed over the capacities, with the ratio.
//
// With --cost F,F,... (fractions of the captured step's reserved peak) nothing is enumerated (a
// step of many blocks has too many combinations): the planner runs in both modes at those
// capacities and prints each answer, evaluations and seconds, and the ratio.
//
//   bench_advise_search [--link pcie5] [--max N] [--cost 0.9,0.75,0.6] TRACE.db...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>

#include "mhc/advise/planner.hpp"
#include "mhc/advise/transforms.hpp"
#include "mhc/bench/args.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"

using mhc::advise::Advice;
using mhc::advise::advise;
using mhc::advise::Base;
using mhc::advise::BlockChoice;
using mhc::advise::combine;
using mhc::advise::Evaluator;
using mhc::advise::grads_used_after_backward;
using mhc::advise::make_base;
using mhc::advise::OptimizerImpl;
using mhc::advise::PlannerOptions;
using mhc::advise::Prediction;
using mhc::advise::Setting;
using mhc::advise::to_json;

namespace {

struct Combination {
    int64_t reserved = 0, time = 0;
    std::string setting;
    Setting parsed;
};

// The global settings the planner tries (planner.cpp: as captured, on the host, fused), each kept
// when it predicts (a setting the step cannot take throws, as the host optimizer after a
// GradScaler's unscale does).
std::vector<Combination> every_combination(const Evaluator& ev, const PlannerOptions& opts,
                                           const std::vector<std::string>& confs) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    std::vector<Setting> globals(1);
    const bool grads_read_late = !grads_used_after_backward(base).empty() || !base.info.data_parallel.empty();
    if (!base.opt_first.empty() && base.opt_first[0] >= 0 && !grads_read_late) {
        globals.emplace_back();
        globals.back().optimizer_on_host = true;
    }
    if (base.optimizer_impl == "foreach" && base.info.adam_optimizer()) {
        globals.emplace_back();
        globals.back().optimizer_impl = OptimizerImpl::Fused;
    }
    const auto kinds = static_cast<size_t>(BlockChoice::Count);
    size_t combos = 1;
    for (size_t k = 0; k < nb; ++k) combos *= kinds;
    std::vector<Combination> out;
    for (const Setting& global : globals)
        for (size_t code = 0; code < combos; ++code) {
            std::vector<BlockChoice> per(nb);
            for (size_t k = 0, rest = code; k < nb; ++k, rest /= kinds) per[k] = static_cast<BlockChoice>(rest % kinds);
            for (const std::string& conf : confs) {
                Setting setting = combine(base, global, per, opts.offload);
                setting.allocator = conf;
                try {
                    const Prediction pred = ev.predict(setting);
                    out.push_back({pred.memory.reserved, pred.step_time, to_json(setting), setting});
                } catch (const mhc::Error&) {   // mHC recompute without HcMaps, and the like
                }
            }
        }
    return out;
}

struct Mode {
    const char* name;
    bool pairs;
    int misses = 0, nothing = 0;
    int64_t evaluations = 0;
    double seconds = 0;
    std::vector<std::string> examples;
};

}   // namespace

int main(int argc, char** argv) {
    mhc::bench::Args args(argc, argv, "[--link NAME] [--max N] TRACE.db...");
    std::string link = "pcie5";
    int64_t max_caps = 200;
    std::vector<std::string> traces;
    std::vector<double> fractions;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args.word(i) == "--link") link = args.value_after(i);
        else if (args.word(i) == "--cost") {
            const std::string& list = args.value_after(i);
            for (size_t at = 0; at < list.size();) {
                size_t end = list.find(',', at);
                if (end == std::string::npos) end = list.size();
                fractions.push_back(args.whole(list.substr(at, end - at), "--cost (percent)", 1, 1000) / 100.0);
                at = end + 1;
            }
        } else if (args.word(i) == "--max") max_caps = args.whole(args.value_after(i), "--max", 1, 1000000);
        else traces.push_back(args.word(i));
    }
    if (traces.empty()) args.refuse("no trace given");
    try {
        for (const std::string& path : traces) {
            auto data = mhc::trace::load_checked_trace(path);
            Base base = make_base(data);
            Evaluator ev(base, mhc::sim::link_from_spec(link));
            PlannerOptions opts;
            opts.top = 1;
            if (!fractions.empty()) {
                const int64_t reserved = ev.predict(Setting{}).memory.reserved;
                double sums[2] = {0, 0};
                int64_t evals[2] = {0, 0};
                std::printf("%s: %zu blocks, captured reserved %lld B\n", path.c_str(), base.info.block_name.size(),
                            static_cast<long long>(reserved));
                for (double fraction : fractions) {
                    opts.capacity = static_cast<int64_t>(static_cast<double>(reserved) * fraction);
                    for (int pairs = 0; pairs < 2; ++pairs) {
                        opts.pair_moves = pairs != 0;
                        const std::clock_t c0 = std::clock();
                        Advice advice = advise(ev, opts);
                        const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
                        sums[pairs] += cpu;
                        evals[pairs] += advice.evaluations;
                        std::printf(
                            "  %3.0f%% %-16s %s, evaluations %lld (rounds %lld, with pairs %lld), %.2f s CPU\n",
                            fraction * 100, pairs ? "pair moves" : "single moves",
                            advice.ranked.empty() ? "nothing"
                                                  : (to_json(advice.ranked[0].setting) + " " +
                                                     std::to_string(advice.ranked[0].prediction.step_time) + " ns")
                                                        .c_str(),
                            static_cast<long long>(advice.evaluations), static_cast<long long>(advice.refine_rounds),
                            static_cast<long long>(advice.pair_rounds), cpu);
                        std::fflush(stdout);
                    }
                }
                std::printf("  pair/single: evaluations x%.2f, seconds x%.2f\n",
                            static_cast<double>(evals[1]) / static_cast<double>(std::max<int64_t>(1, evals[0])),
                            sums[1] / std::max(1e-9, sums[0]));
                continue;
            }
            auto t0 = std::chrono::steady_clock::now();
            int64_t trials = 0;
            const std::vector<std::string> confs = mhc::advise::search_allocator_confs(ev, opts, trials);
            const std::vector<Combination> all = every_combination(ev, opts, confs);
            const double enum_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::set<int64_t> distinct;
            for (const Combination& comb : all) distinct.insert(comb.reserved);
            std::vector<int64_t> caps(distinct.begin(), distinct.end());
            if (static_cast<int64_t>(caps.size()) > max_caps) {
                std::vector<int64_t> kept;
                for (int64_t j = 0; j < max_caps; ++j)
                    kept.push_back(caps[static_cast<size_t>(j * static_cast<int64_t>(caps.size() - 1) /
                                                            std::max<int64_t>(1, max_caps - 1))]);
                caps = kept;
            }
            caps.insert(caps.begin(), caps.front() - 1);   // one byte below the least: nothing fits
            Mode modes[] = {{"single moves", false, 0, 0, 0, 0, {}}, {"pair moves", true, 0, 0, 0, 0, {}}};
            for (int64_t cap : caps) {
                const Combination* best = nullptr;
                for (const Combination& comb : all)
                    if (comb.reserved <= cap && (best == nullptr || comb.time < best->time)) best = &comb;
                for (const Combination& comb : all)   // above the capacity without a limit, running at it
                    if (comb.reserved > cap && (best == nullptr || comb.time < best->time) &&
                        ev.predict(comb.parsed, cap).memory.fits)
                        best = &comb;
                for (Mode& mode : modes) {
                    opts.capacity = cap;
                    opts.pair_moves = mode.pairs;
                    const std::clock_t c0 = std::clock();
                    Advice advice = advise(ev, opts);
                    mode.seconds += static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
                    mode.evaluations += advice.evaluations;
                    const bool found = !advice.ranked.empty();
                    if (found != (best != nullptr) || (found && advice.ranked[0].prediction.step_time != best->time)) {
                        ++mode.misses;
                        if (!found) ++mode.nothing;
                        if (mode.examples.size() < 4)
                            mode.examples.push_back(std::to_string(cap) + " B: first " +
                                                    (found ? to_json(advice.ranked[0].setting) + " " +
                                                                 std::to_string(advice.ranked[0].prediction.step_time) +
                                                                 " ns"
                                                           : std::string("nothing")) +
                                                    "; fastest fitting " +
                                                    (best ? best->setting + " " + std::to_string(best->time) + " ns"
                                                          : std::string("none")));
                    }
                }
            }
            std::string said;
            for (const std::string& conf : confs) said += (said.empty() ? "" : ", ") + (conf.empty() ? "as captured" : conf);
            std::printf("%s: %zu blocks, %zu combinations predicted (%.1f s), %zu capacities\n", path.c_str(),
                        base.info.block_name.size(), all.size(), enum_s, caps.size());
            std::printf("  allocator settings: %s\n", said.c_str());
            for (const Mode& mode : modes) {
                std::printf("  %-16s misses %d (nothing found %d), evaluations %lld, search %.2f s CPU\n", mode.name,
                            mode.misses, mode.nothing, static_cast<long long>(mode.evaluations), mode.seconds);
                for (const std::string& line : mode.examples) std::printf("    %s\n", line.c_str());
            }
            std::printf("  pair/single: evaluations x%.2f, seconds x%.2f\n",
                        static_cast<double>(modes[1].evaluations) /
                            static_cast<double>(std::max<int64_t>(1, modes[0].evaluations)),
                        modes[1].seconds / std::max(1e-9, modes[0].seconds));
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_advise_search: %s\n", e.what());
        return 2;
    }
    return 0;
}
