#include "mhc/sim/sweep.hpp"

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "mhc/common/units.hpp"

namespace mhc::sim {

namespace {

int worker_count(int jobs, size_t tasks) {
    int n = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return static_cast<int>(std::min<size_t>(static_cast<size_t>(n), std::max<size_t>(tasks, 1)));
}

// Runs task(i) for i in [0, n) on `jobs` threads; exceptions are rethrown on the caller.
// next() gives each worker its next index (>= n: none left).
template <class Task, class Next>
void parallel_for(size_t n, int jobs, Task task, Next next) {
    std::mutex mu;
    std::exception_ptr error;
    auto worker = [&] {
        for (size_t i = next(); i < n; i = next()) {
            try {
                task(i);
            } catch (...) {
                std::lock_guard<std::mutex> g(mu);
                if (!error) error = std::current_exception();
            }
        }
    };
    int w = worker_count(jobs, n);
    std::vector<std::thread> threads;
    for (int i = 1; i < w; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
}

bool within(const Result& r, double budget) {
    return !r.oom.happened && r.invariant_violation.empty() && r.throughput_loss <= budget;
}

std::vector<LinkModel> sweep_links(const SweepSpec& spec) {
    return spec.links.empty() ? std::vector<LinkModel>{spec.base.link} : spec.links;
}

// The base configuration under one policy, prefetcher and link.
Config combination(const SweepSpec& spec, const std::string& pol, const std::string& pre, const LinkModel& link) {
    Config c = spec.base;
    c.eviction = pol;
    c.prefetch = pre;
    c.link = link;
    return c;
}

// The grid's configurations, in grid order: policy, prefetch, capacity, link.
std::vector<Config> grid_configs(const SweepSpec& spec) {
    std::vector<Config> grid;
    for (const auto& pol : spec.policies)
        for (const auto& pre : spec.prefetchers)
            for (const auto& cap : spec.capacities)
                for (const auto& link : sweep_links(spec)) {
                    grid.push_back(combination(spec, pol, pre, link));
                    grid.back().capacity = cap;
                    validate(grid.back());
                }
    return grid;
}

// One bisection per combination: its configuration (each probe sets the capacity) and its
// answer's heading.
std::vector<BisectAnswer> bisections(const SweepSpec& spec, std::vector<Config>& configs) {
    std::vector<BisectAnswer> out;
    if (!spec.bisect) return out;
    for (const auto& pol : spec.policies)
        for (const auto& pre : spec.prefetchers)
            for (const auto& link : sweep_links(spec)) {
                configs.push_back(combination(spec, pol, pre, link));
                BisectAnswer a;
                a.policy = pol;
                a.prefetch = pre;
                a.link = link.name;
                out.push_back(std::move(a));
            }
    return out;
}

// The smallest share of the baseline peak within the budget, by bisection over (0, 1]: every
// probe calls tick(), bisect_steps + 1 of them whatever happens.
void bisect(const Prepared& p, const SweepSpec& spec, Config c, BisectAnswer& ans, const std::function<void()>& tick) {
    auto at = [&](double f) { c.capacity = Capacity{kUnlimited, f}; Result r = simulate(p, c); tick(); return r; };
    Result hi_r = at(1.0);
    if (!within(hi_r, spec.budget)) {
        for (int k = 0; k < spec.bisect_steps; ++k) tick();
        return;
    }
    double lo = 0, hi = 1.0;
    for (int k = 0; k < spec.bisect_steps; ++k) {
        double mid = (lo + hi) / 2;
        Result r = at(mid);
        if (within(r, spec.budget)) { hi = mid; hi_r = std::move(r); } else { lo = mid; }
    }
    ans.found = true;
    ans.fraction = hi;
    ans.result = std::move(hi_r);
}

}  // namespace

void parallel_for_each(size_t n, int jobs, const std::function<void(size_t)>& task) {
    std::atomic<size_t> next{0};
    parallel_for(n, jobs, task, [&] { return next.fetch_add(1); });
}

SweepTasks sweep_tasks(const SweepSpec& spec) {
    const size_t links = sweep_links(spec).size(), combos = spec.policies.size() * spec.prefetchers.size() * links;
    return {combos * spec.capacities.size(), spec.bisect ? combos : 0};
}

SweepResult sweep(const Prepared& p, const SweepSpec& spec,
                  const std::function<void(size_t, size_t)>& progress) {
    auto t0 = std::chrono::steady_clock::now();
    SweepResult s;
    const std::vector<Config> grid = grid_configs(spec);
    std::vector<Config> bisect_configs;
    s.answers = bisections(spec, bisect_configs);
    const SweepTasks tasks{grid.size(), s.answers.size()};
    const size_t total = grid.size() + s.answers.size() * static_cast<size_t>(spec.bisect_steps + 1);
    std::atomic<size_t> done{0}, position{0};
    std::mutex mu;
    auto tick = [&] {
        size_t d = done.fetch_add(1) + 1;
        if (progress) { std::lock_guard<std::mutex> g(mu); progress(d, total); }
    };
    s.grid.resize(grid.size());
    s.budget = spec.budget;
    s.simulations = total;
    // One pool over both kinds of task, each worker taking the next position in tasks.at order.
    auto next = [&] {
        const size_t k = spec.tasks ? spec.tasks->next() : position.fetch_add(1);
        return k < tasks.count() ? tasks.at(k) : tasks.count();
    };
    parallel_for(tasks.count(), spec.jobs, [&](size_t i) {
        if (!tasks.is_bisection(i)) {
            s.grid[i] = simulate(p, grid[i]);
            tick();
            return;
        }
        bisect(p, spec, bisect_configs[i - grid.size()], s.answers[i - grid.size()], tick);
    }, next);
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
}

bool is_oracle(const std::string& eviction, const std::string& prefetch) {
    return eviction == "belady" || prefetch.rfind("lookahead", 0) == 0;
}

// The grid and the answers of one link at a time (the link is the group's heading, not a
// column): rows stay within 100 columns with the words and units `mhc simulate` prints
// (peak reduction, throughput loss, bytes swapped in and out per direction).
std::string to_text(const SweepResult& s, int64_t baseline_peak) {
    std::ostringstream o;
    char line[320];
    bool any_oracle = false;
    std::vector<std::string> links;
    for (const auto& r : s.grid)
        if (std::find(links.begin(), links.end(), r.config.link.name) == links.end()) links.push_back(r.config.link.name);
    for (const auto& a : s.answers)
        if (std::find(links.begin(), links.end(), a.link) == links.end()) links.push_back(a.link);
    // The name columns as wide as their longest entry (at least 10, 15 and 9): "lookahead:100000 *"
    // pushed its row's figures out from under their headings.
    int policy_w = 10, prefetch_w = 15, capacity_w = 9;
    auto widen = [](int& width, const std::string& text) { width = std::max(width, static_cast<int>(text.size())); };
    for (const auto& run : s.grid) {
        widen(policy_w, run.config.eviction);
        widen(prefetch_w, run.config.prefetch + (is_oracle(run.config.eviction, run.config.prefetch) ? " *" : ""));
        widen(capacity_w, run.config.capacity.to_string());
    }
    for (const auto& answer : s.answers) {
        widen(policy_w, answer.policy);
        widen(prefetch_w, answer.prefetch + (is_oracle(answer.policy, answer.prefetch) ? " *" : ""));
    }
    const char* row = "%-*s %-*s %-*s %10s %9s %8s %9s %10s %10s\n";
    for (const auto& link : links) {
        if (&link != &links.front()) o << "\n";
        o << "link " << link << "\n";
        bool header = false;
        for (const auto& r : s.grid) {
            if (r.config.link.name != link) continue;
            if (!header) {
                std::snprintf(line, sizeof line, row, policy_w, "policy", prefetch_w, "prefetch", capacity_w, "capacity",
                              "peak", "reduction", "loss", "stall", "swap-in", "swap-out");
                o << line;
                header = true;
            }
            bool oracle = is_oracle(r.config.eviction, r.config.prefetch);
            any_oracle |= oracle;
            std::string prefetch = r.config.prefetch + (oracle ? " *" : "");
            // An OOM run did not finish: no peak reduction, no loss.
            std::string peak = r.oom.happened ? std::string("-") : format_bytes(r.simulated_peak);
            char red[32], loss[32];
            if (r.oom.happened) {
                std::snprintf(red, sizeof red, "-");
                std::snprintf(loss, sizeof loss, "OOM");
            } else {
                std::snprintf(red, sizeof red, "%.1f%%", r.peak_reduction * 100);
                // Order-only timing: the loss and stalls count event numbers, not times (as simulate says).
                // A trace without duration: a loss over a zero baseline is not defined.
                if (r.order_only || std::isnan(r.throughput_loss)) std::snprintf(loss, sizeof loss, "-");
                else std::snprintf(loss, sizeof loss, "%.2f%%", r.throughput_loss * 100);
            }
            const std::string stall = r.order_only ? std::string("-") : format_ns(r.stall_time);
            std::snprintf(line, sizeof line, row, policy_w, r.config.eviction.c_str(), prefetch_w, prefetch.c_str(),
                          capacity_w, r.config.capacity.to_string().c_str(), peak.c_str(), red, loss, stall.c_str(),
                          format_bytes(r.swap_in_bytes).c_str(), format_bytes(r.swap_out_bytes).c_str());
            o << line;
        }
        bool intro = false;
        char budget[32];
        std::snprintf(budget, sizeof budget, "%g%%", s.budget * 100);
        for (const auto& a : s.answers) {
            if (a.link != link) continue;
            if (!intro) {
                o << (header ? "\n" : "") << "smallest capacity within the loss budget of " << budget << " (baseline peak "
                  << format_bytes(baseline_peak) << "):\n";
                intro = true;
            }
            bool oracle = is_oracle(a.policy, a.prefetch);
            any_oracle |= oracle;
            std::string prefetch = a.prefetch + (oracle ? " *" : "");
            if (!a.found) {
                std::snprintf(line, sizeof line, "%-*s %-*s not within the %s budget even at 100%%\n", policy_w,
                              a.policy.c_str(), prefetch_w, prefetch.c_str(), budget);
            } else if (a.fraction >= 1.0) {
                // Every capacity below the peak that the bisection tried lost more than the budget.
                std::snprintf(line, sizeof line, "%-*s %-*s no saving within the %s budget\n", policy_w,
                              a.policy.c_str(), prefetch_w, prefetch.c_str(), budget);
            } else {
                std::snprintf(line, sizeof line, "%-*s %-*s %5.1f%% = %-10s peak %s, reduction %.1f%%, loss %.2f%%\n",
                              policy_w, a.policy.c_str(), prefetch_w, prefetch.c_str(), a.fraction * 100,
                              format_bytes(a.result.capacity).c_str(), format_bytes(a.result.simulated_peak).c_str(),
                              a.result.peak_reduction * 100, a.result.throughput_loss * 100);
            }
            o << line;
        }
    }
    if (any_oracle)
        o << "* oracle: reads the trace's future (belady, lookahead:K): a bound, not a policy a scheduler can run\n";
    // What the figures are: the peaks' kind (the allocator model decides it) and that times are estimates.
    const Result* any = !s.grid.empty() ? &s.grid.front() : !s.answers.empty() ? &s.answers.front().result : nullptr;
    if (any) {
        o << "peaks: " << peak_meaning(parse_allocator(any->config.allocator)) << "\n";
        if (!any->order_only) o << "loss, stall: " << kEstimateNote << "\n";
    }
    return o.str();
}

std::vector<trace::Run> take_runs(SweepResult& result, const std::string& budget_text) {
    auto saving = [](const BisectAnswer& answer) { return answer.found && answer.fraction < 1.0; };
    std::vector<trace::Run> runs;
    runs.reserve(result.grid.size() +
                 static_cast<size_t>(std::count_if(result.answers.begin(), result.answers.end(), saving)));
    for (auto& cell : result.grid) runs.push_back(take_run(cell));
    for (auto& answer : result.answers)
        if (saving(answer)) {
            trace::Run run = take_run(answer.result);
            run.name = "bisect:" + run.name;
            run.config["bisect_budget"] = budget_text;
            runs.push_back(std::move(run));
        }
    return runs;
}

}  // namespace mhc::sim
