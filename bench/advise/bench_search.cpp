// The search's first answer against every combination, and what the exact search costs
// (docs/advise.md "Search", docs/results.md "The search's first answer against every combination").
//
// For each captured step: every combination the planner may answer (each global setting it tries,
// every available choice per block, each allocator setting the search tries: search_allocator_confs)
// predicted exactly; then, at every distinct reserved peak among them as the capacity (the capacities
// where the fastest fitting combination can change; at most MAX of them, evenly spaced, when there
// are more), the fastest fitting combination as the product judges it now: it runs at the capacity
// (the caching model with the capacity as the GPU's limit, PyTorch's free-and-retry included; certain
// where the reserved peak without a limit is within it), ranked by its time at the capacity (the step's
// and what giving cached memory back costs in a steady step: time_at_capacity). Against it, in the same
// run: the planner's first answer with single moves only and with pair moves too
// (PlannerOptions::pair_moves), and two earlier readings of the fastest fitting combination: "by the
// reserved peak" (fits when the reserved peak without a limit is within the capacity, ranked by the
// step time alone: this bench before) and "by the capture's cost" (runs at the capacity, ranked by the
// step time plus the whole capture's cost: mhc advise before the steady step). Prints per step:
// combinations, capacities, misses of each mode (the first few written out), each mode's evaluations
// and CPU seconds with the pair/single ratio; the capacities where each earlier reading finds an
// answer and where its pick is slower at the capacity than the product's, with the ratio of their
// summed times at the capacity (the earlier pick's over the product's, both judged as now).
//
// With --cost F,F,... (percent of the captured step's reserved peak) nothing is enumerated (a step of
// many blocks has too many combinations): the planner runs in both modes at those capacities and
// prints each answer (its time at the capacity, and the capture's and a steady step's cost of giving
// memory back), evaluations and seconds, and the ratio.
//
//   bench_advise_search [--link pcie5] [--max N] [--cost 90,75,60] TRACE.db...
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
using mhc::advise::time_as_captured;
using mhc::advise::time_at_capacity;
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
    const bool fused = base.optimizer_impl == "foreach" && base.info.adam_optimizer();
    if (!base.opt_first.empty() && base.opt_first[0] >= 0 && !grads_read_late) {
        globals.emplace_back();
        globals.back().optimizer_on_host = true;
        if (fused) globals.back().optimizer_impl = OptimizerImpl::Fused;   // the host's step fused too
    }
    if (fused) {
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
            bool offloads = false;   // then once per offload mode the planner searches (one set of hooks each)
            for (size_t k = 0, rest = code; k < nb; ++k, rest /= kinds) {
                per[k] = static_cast<BlockChoice>(rest % kinds);
                offloads |= per[k] == BlockChoice::Offload || per[k] == BlockChoice::FullOffload;
            }
            for (const mhc::advise::OffloadMode mode : opts.offload_modes) {
                mhc::advise::OffloadSetting offload = opts.offload;
                offload.mode = mode;
                if (mode == mhc::advise::OffloadMode::Sync) offload.prefetch = -1;
                for (const std::string& conf : confs) {
                    Setting setting = combine(base, global, per, offload);
                    setting.allocator = conf;
                    try {
                        const Prediction pred = ev.predict(setting);
                        out.push_back({pred.memory.reserved, pred.step_time, to_json(setting), setting});
                    } catch (const mhc::Error&) {   // mHC recompute without HcMaps, and the like
                    }
                }
                if (!offloads) break;
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

// An earlier reading of the fastest fitting combination: answers found, picks slower at the
// capacity than the product's, and the summed times at the capacity of both picks where both found
// one (judged as now).
struct Reading {
    const char* name;
    int found = 0, slower = 0;
    double time = 0, product_time = 0;
};

struct BenchOptions {
    std::string link = "pcie5";
    int64_t max_caps = 200;
    std::vector<std::string> traces;
    std::vector<double> fractions;   // --cost: of the captured reserved peak
};

BenchOptions read_options(const mhc::bench::Args& args) {
    BenchOptions bench;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args.word(i) == "--link") bench.link = args.value_after(i);
        else if (args.word(i) == "--cost") {
            const std::string& list = args.value_after(i);
            for (size_t at = 0; at < list.size();) {
                size_t end = list.find(',', at);
                if (end == std::string::npos) end = list.size();
                bench.fractions.push_back(args.whole(list.substr(at, end - at), "--cost (percent)", 1, 1000) / 100.0);
                at = end + 1;
            }
        } else if (args.word(i) == "--max") bench.max_caps = args.whole(args.value_after(i), "--max", 1, 1000000);
        else bench.traces.push_back(args.word(i));
    }
    if (bench.traces.empty()) args.refuse("no trace given");
    return bench;
}

// --cost: the earlier readings' first answer among the settings this search predicted: by the
// reserved peak without a limit and the step time, and by the capture's cost; each timed at the
// capacity as now.
void print_earlier_readings(const Advice& advice, int64_t capacity, double fraction) {
    const mhc::advise::Candidate* picks[2] = {nullptr, nullptr};
    for (const mhc::advise::Candidate& cand : advice.all) {
        if (!cand.within_budget) continue;
        const Prediction& pred = cand.prediction;
        if (pred.memory.reserved <= capacity &&
            (picks[0] == nullptr || pred.step_time < picks[0]->prediction.step_time))
            picks[0] = &cand;
        if (cand.fits && (picks[1] == nullptr || time_as_captured(pred) < time_as_captured(picks[1]->prediction)))
            picks[1] = &cand;
    }
    const char* names[2] = {"by the reserved peak", "by the capture's cost"};
    const double now = static_cast<double>(time_at_capacity(advice.ranked[0].prediction));
    for (int r = 0; r < 2; ++r)
        std::printf("  %3.0f%% %-22s %s, at the capacity x%.4f of the answer's time\n", fraction * 100, names[r],
                    picks[r] ? to_json(picks[r]->setting).c_str() : "nothing",
                    picks[r] ? static_cast<double>(time_at_capacity(picks[r]->prediction)) / now : 0.0);
}

// --cost: the planner in both modes at each fraction of the captured reserved peak, each answer
// printed; nothing enumerated.
void bench_costs(const std::string& path, const Base& base, const Evaluator& ev, PlannerOptions& opts,
                 const std::vector<double>& fractions) {
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
            std::string said = "nothing";
            if (!advice.ranked.empty()) {
                const Prediction& first = advice.ranked[0].prediction;
                said = to_json(advice.ranked[0].setting) + " " + std::to_string(time_at_capacity(first)) +
                       " ns at the capacity (giving memory back: " + std::to_string(first.memory.retry_cost) +
                       " ns in the capture, " + std::to_string(first.memory.steady_cost) + " in steady steps)";
            }
            std::printf("  %3.0f%% %-16s %s, evaluations %lld (rounds %lld, with pairs %lld), %.2f s CPU\n",
                        fraction * 100, pairs ? "pair moves" : "single moves", said.c_str(),
                        static_cast<long long>(advice.evaluations), static_cast<long long>(advice.refine_rounds),
                        static_cast<long long>(advice.pair_rounds), cpu);
            if (pairs != 0 && !advice.ranked.empty()) print_earlier_readings(advice, opts.capacity, fraction);
            std::fflush(stdout);
        }
    }
    std::printf("  pair/single: evaluations x%.2f, seconds x%.2f\n",
                static_cast<double>(evals[1]) / static_cast<double>(std::max<int64_t>(1, evals[0])),
                sums[1] / std::max(1e-9, sums[0]));
}

// Every distinct reserved peak (at most max_caps of them, evenly spaced), after one byte below the
// least: nothing fits there.
std::vector<int64_t> capacities(const std::vector<Combination>& all, int64_t max_caps) {
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
    caps.insert(caps.begin(), caps.front() - 1);
    return caps;
}

// The fastest fitting combination at one capacity, as the product judges it, and the earlier
// readings' picks with their times at the capacity as now.
struct Picks {
    const Combination* best = nullptr;   // the product's: runs there, by the steady time
    int64_t best_time = 0;
    const Combination* readings[2] = {nullptr, nullptr};   // by the reserved peak, by the capture's cost
    int64_t reading_times[2] = {0, 0};
};

Picks pick_at(const Evaluator& ev, const std::vector<Combination>& all, int64_t cap) {
    // each combination at the capacity: whether it runs, its time there (a steady step's cost of
    // giving memory back) and with the capture's cost
    struct At {
        bool runs = false;
        int64_t steady = 0, captured = 0;
    };
    std::vector<At> at(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
        if (all[i].reserved <= cap) {
            at[i] = {true, all[i].time, all[i].time};   // nothing fails: nothing given back
            continue;
        }
        const Prediction pred = ev.predict(all[i].parsed, cap);
        at[i] = {pred.memory.fits, time_at_capacity(pred), time_as_captured(pred)};
    }
    Picks picks;
    const Combination*& by_reserved = picks.readings[0];
    const Combination*& by_capture = picks.readings[1];
    int64_t capture_time = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        const Combination& comb = all[i];
        if (at[i].runs && (picks.best == nullptr || at[i].steady < picks.best_time)) {
            picks.best = &comb;
            picks.best_time = at[i].steady;
        }
        if (comb.reserved <= cap && (by_reserved == nullptr || comb.time < by_reserved->time)) {
            by_reserved = &comb;
            picks.reading_times[0] = at[i].steady;
        }
        if (at[i].runs && (by_capture == nullptr || at[i].captured < capture_time)) {
            by_capture = &comb;
            capture_time = at[i].captured;
        }
    }
    // by_capture's time above is the capture's: judged as now, its steady time
    for (size_t i = 0; i < all.size(); ++i)
        if (&all[i] == by_capture) capture_time = at[i].steady;
    picks.reading_times[1] = capture_time;
    return picks;
}

// The planner's first answer in one mode at one capacity against the fastest fitting combination.
void search_at(const Evaluator& ev, PlannerOptions& opts, int64_t cap, const Picks& picks, Mode& mode) {
    opts.capacity = cap;
    opts.pair_moves = mode.pairs;
    const std::clock_t c0 = std::clock();
    Advice advice = advise(ev, opts);
    mode.seconds += static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    mode.evaluations += advice.evaluations;
    const bool found = !advice.ranked.empty();
    if (found == (picks.best != nullptr) &&
        (!found || time_at_capacity(advice.ranked[0].prediction) == picks.best_time))
        return;
    ++mode.misses;
    if (!found) ++mode.nothing;
    if (mode.examples.size() < 4)
        mode.examples.push_back(
            std::to_string(cap) + " B: first " +
            (found ? to_json(advice.ranked[0].setting) + " " +
                         std::to_string(time_at_capacity(advice.ranked[0].prediction)) + " ns"
                   : std::string("nothing")) +
            "; fastest fitting " +
            (picks.best ? picks.best->setting + " " + std::to_string(picks.best_time) + " ns" : std::string("none")));
}

void print_search_report(const std::string& path, const Base& base, const std::vector<std::string>& confs,
                         size_t combinations, double enum_s, size_t capacity_count, const Mode (&modes)[2],
                         int product_found, const Reading (&readings)[2]) {
    std::string said;
    for (const std::string& conf : confs) said += (said.empty() ? "" : ", ") + (conf.empty() ? "as captured" : conf);
    std::printf("%s: %zu blocks, %zu combinations predicted (%.1f s), %zu capacities\n", path.c_str(),
                base.info.block_name.size(), combinations, enum_s, capacity_count);
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
    std::printf(
        "  the fastest fitting combination (runs at the capacity, time with a steady step's cost): "
        "found at %d of %zu capacities\n",
        product_found, capacity_count);
    for (const Reading& reading : readings)
        std::printf(
            "  %-22s found at %d (x%.2f of the product's), slower at the capacity at %d, "
            "time there x%.4f of the product's pick\n",
            reading.name, reading.found, static_cast<double>(reading.found) / std::max(1, product_found),
            reading.slower, reading.time / std::max(1.0, reading.product_time));
}

// Every combination predicted, then at each capacity the product's fastest fitting one against the
// planner's first answer in both modes and the earlier readings' picks.
void bench_search(const std::string& path, const Base& base, const Evaluator& ev, PlannerOptions& opts,
                  int64_t max_caps) {
    auto t0 = std::chrono::steady_clock::now();
    int64_t trials = 0;
    const std::vector<std::string> confs = mhc::advise::search_allocator_confs(ev, opts, trials);
    const std::vector<Combination> all = every_combination(ev, opts, confs);
    const double enum_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<int64_t> caps = capacities(all, max_caps);
    Mode modes[] = {{"single moves", false, 0, 0, 0, 0, {}}, {"pair moves", true, 0, 0, 0, 0, {}}};
    Reading readings[] = {{"by the reserved peak", 0, 0, 0, 0}, {"by the capture's cost", 0, 0, 0, 0}};
    int product_found = 0;
    for (int64_t cap : caps) {
        const Picks picks = pick_at(ev, all, cap);
        product_found += picks.best != nullptr;
        for (int r = 0; r < 2; ++r) {
            if (picks.readings[r] == nullptr) continue;
            ++readings[r].found;
            readings[r].slower += picks.reading_times[r] > picks.best_time;
            readings[r].time += static_cast<double>(picks.reading_times[r]);
            readings[r].product_time += static_cast<double>(picks.best_time);
        }
        for (Mode& mode : modes) search_at(ev, opts, cap, picks, mode);
    }
    print_search_report(path, base, confs, all.size(), enum_s, caps.size(), modes, product_found, readings);
}

int run_benchmark(int argc, char** argv) {
    const mhc::bench::Args args(argc, argv, "[--link NAME] [--max N] TRACE.db...");
    const BenchOptions bench = read_options(args);
    for (const std::string& path : bench.traces) {
        auto data = mhc::trace::load_checked_trace(path);
        Base base = make_base(data);
        Evaluator ev(base, mhc::sim::link_from_spec(bench.link));
        PlannerOptions opts;
        opts.top = 1;
        if (!bench.fractions.empty()) bench_costs(path, base, ev, opts, bench.fractions);
        else bench_search(path, base, ev, opts, bench.max_caps);
        std::fflush(stdout);
    }
    return 0;
}

}   // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_advise_search", [&] { return run_benchmark(argc, argv); });
}
