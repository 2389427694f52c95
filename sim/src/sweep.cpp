#include "mhc/sim/sweep.hpp"

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "mhc/common/text_table.hpp"
#include "mhc/common/units.hpp"
#include "mhc/common/wrap.hpp"

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

namespace {

// The grid's columns: the run's name in three (the keys, repeated in each block when a narrow
// terminal splits the table), then its figures under the names `mhc simulate`, --json and the
// viewer give them (peak reduction, throughput loss, stall time: "stall" alone was sweep's word).
// The name columns at least as wide as the answers' names under them.
TextTable grid_table(int policy_w, int prefetch_w) {
    return TextTable({{{"policy"}, true, true, policy_w},
                      {{"prefetch"}, true, true, prefetch_w},
                      {{"capacity"}, true, true, 9},
                      {{"peak"}},
                      {{"peak", "reduction"}},
                      {{"throughput", "loss"}},
                      {{"stall", "time"}},
                      {{"swap-in", "(H2D)"}},
                      {{"swap-out", "(D2H)"}}});
}

std::vector<std::string> grid_row(const Result& r) {
    const bool oracle = is_oracle(r.config.eviction, r.config.prefetch);
    // An OOM run did not finish: no peak, no peak reduction, no loss.
    std::string peak = "-", red = "-", loss = "OOM";
    if (!r.oom.happened) {
        char text[32];
        peak = format_bytes(r.simulated_peak);
        std::snprintf(text, sizeof text, "%.1f%%", r.peak_reduction * 100);
        red = text;
        // Order-only timing: the loss and stalls count event numbers, not times (as simulate says).
        // A trace without duration: a loss over a zero baseline is not defined.
        std::snprintf(text, sizeof text, "%.2f%%", r.throughput_loss * 100);
        loss = r.order_only || std::isnan(r.throughput_loss) ? std::string("-") : std::string(text);
    }
    return {r.config.eviction,
            r.config.prefetch + (oracle ? " *" : ""),
            r.config.capacity.to_string(),
            peak,
            red,
            loss,
            r.order_only ? std::string("-") : format_ns(r.stall_time),
            format_bytes(r.swap_in_bytes),
            format_bytes(r.swap_out_bytes)};
}

// A bisection's answer: its policy and prefetcher under the grid's columns, then the capacity found,
// the rest wrapped under it within `width` (0: one line).
std::string answer_line(const BisectAnswer& a, const std::string& budget, int policy_w, int prefetch_w, int width) {
    char head[320], rest[320];
    const std::string prefetch = a.prefetch + (is_oracle(a.policy, a.prefetch) ? " *" : "");
    std::snprintf(head, sizeof head, "%-*s %-*s ", policy_w, a.policy.c_str(), prefetch_w, prefetch.c_str());
    if (!a.found) {
        std::snprintf(rest, sizeof rest, "not within the %s budget even at 100%%", budget.c_str());
    } else if (a.fraction >= 1.0) {
        // Every capacity below the peak that the bisection tried lost more than the budget.
        std::snprintf(rest, sizeof rest, "no saving within the %s budget", budget.c_str());
    } else {
        std::snprintf(rest, sizeof rest, "%.1f%% = %s: peak %s, peak reduction %.1f%%, throughput loss %.2f%%",
                      a.fraction * 100, format_bytes(a.result.capacity).c_str(),
                      format_bytes(a.result.simulated_peak).c_str(), a.result.peak_reduction * 100,
                      a.result.throughput_loss * 100);
    }
    const std::string names = head;
    if (width <= 0 || static_cast<int>(names.size() + std::strlen(rest)) <= width) return names + rest + "\n";
    // Broken after a comma or colon alone: a figure stays with its words ("throughput loss 2.69%").
    std::string phrases = rest;
    const bool figures = a.found && a.fraction < 1.0;   // the other answers are words only
    for (size_t i = 1; figures && i < phrases.size(); ++i)
        if (phrases[i] == ' ' && phrases[i - 1] != ',' && phrases[i - 1] != ':') phrases[i] = '\x01';
    const auto spaced = [](std::string text) {
        std::replace(text.begin(), text.end(), '\x01', ' ');
        return text;
    };
    // Wrapped under the figures' start, or under a name too long to leave them room.
    const int indent = static_cast<int>(names.size());
    if (indent <= width / 2) return names + spaced(wrap(phrases, width, indent, indent).substr(names.size()));
    return names.substr(0, names.find_last_not_of(' ') + 1) + "\n" + spaced(wrap(phrases, width, 4, 4));
}

}   // namespace

// The grid and the answers of one link at a time (the link is the group's heading, not a
// column), with the words and units `mhc simulate` prints (peak reduction, throughput loss, stall
// time, bytes swapped in and out per direction); within `width` columns (0: no limit, each
// answer and note on one line, as a script reading a pipe wants them).
std::string to_text(const SweepResult& s, int64_t baseline_peak, int width) {
    std::ostringstream o;
    bool any_oracle = false;
    std::vector<std::string> links;
    for (const auto& r : s.grid)
        if (std::find(links.begin(), links.end(), r.config.link.name) == links.end()) links.push_back(r.config.link.name);
    for (const auto& a : s.answers)
        if (std::find(links.begin(), links.end(), a.link) == links.end()) links.push_back(a.link);
    // The answers' names under the grid's name columns (at least 10 and 15 wide).
    int policy_w = 10, prefetch_w = 15;
    auto widen = [](int& column, const std::string& text) { column = std::max(column, static_cast<int>(text.size())); };
    for (const auto& run : s.grid) {
        widen(policy_w, run.config.eviction);
        widen(prefetch_w, run.config.prefetch + (is_oracle(run.config.eviction, run.config.prefetch) ? " *" : ""));
        any_oracle |= is_oracle(run.config.eviction, run.config.prefetch);
    }
    for (const auto& answer : s.answers) {
        widen(policy_w, answer.policy);
        widen(prefetch_w, answer.prefetch + (is_oracle(answer.policy, answer.prefetch) ? " *" : ""));
        any_oracle |= is_oracle(answer.policy, answer.prefetch);
    }
    char budget[32];
    std::snprintf(budget, sizeof budget, "%g%%", s.budget * 100);
    for (const auto& link : links) {
        if (&link != &links.front()) o << "\n";
        o << "link " << link << "\n";
        TextTable table = grid_table(policy_w, prefetch_w);
        bool header = false;
        for (const auto& r : s.grid)
            if (r.config.link.name == link) {
                table.add_row(grid_row(r));
                header = true;
            }
        if (header) o << table.render(width);
        bool intro = false;
        for (const auto& a : s.answers) {
            if (a.link != link) continue;
            if (!intro) {
                const std::string head = std::string(header ? "\n" : "") +
                                         "smallest capacity within the loss budget of " + budget + " (baseline peak " +
                                         format_bytes(baseline_peak) + "):";
                o << (width > 0 ? wrap(head, width) : head + "\n");
                intro = true;
            }
            o << answer_line(a, budget, policy_w, prefetch_w, width);
        }
    }
    // What the figures are: the peaks' kind (the allocator model decides it) and that times are estimates.
    std::string notes;
    if (any_oracle)
        notes +=
            "* oracle: reads the trace's future (belady, lookahead:K): a bound, not a policy a scheduler can run\n";
    const Result* any = !s.grid.empty() ? &s.grid.front() : !s.answers.empty() ? &s.answers.front().result : nullptr;
    if (any) {
        notes += std::string("peaks: ") + peak_meaning(parse_allocator(any->config.allocator)) + "\n";
        if (!any->order_only)
            notes += "throughput loss, stall time: estimates until a GPU measures them (mhc validate --backend cuda)\n";
    }
    // Each note within the width, its lines after the first indented; a file or a pipe gets it whole.
    std::istringstream lines(notes);
    for (std::string note; std::getline(lines, note);) o << (width > 0 ? wrap(note, width, 2) : note + "\n");
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
