// `mhc sweep TRACE`: policies x prefetchers x capacities x links on all cores, a table, every
// run stored, and per policy the smallest capacity within a throughput-loss budget.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "run_store.hpp"
#include "sim_options.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/text_table.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/dist/process.hpp"
#include "mhc/dist/run.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/sweep.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include <nlohmann/json.hpp>

namespace mhc::cli {
namespace {

struct SweepOptions {
    std::string trace, policies = "lru,largest,belady,dtr,cost_aware", prefetchers = "none";
    std::string capacities = "90%,70%,50%", links = "pcie4", budget = "3%";
    int jobs = 0, bisect_steps = 8;
    bool no_bisect = false, json = false;
    StoreOptions store;
    SimBaseOptions base;
};

// The options whose being given (not their value) counts: a grid point the user asked for, or a
// bisection option with --no-bisect.
struct GivenOptions {
    const CLI::Option *policies = nullptr, *prefetchers = nullptr, *links = nullptr, *budget = nullptr,
                      *bisect_steps = nullptr;
};

GivenOptions add_sweep_options(CLI::App& app, SweepOptions& options) {
    GivenOptions given;
    app.add_option("trace", options.trace, "Trace file (.db)")->required()->check(CLI::ExistingFile);
    given.policies = app.add_option("--policies", options.policies,
                                    "Eviction policies, comma-separated: " + policy_names(sim::eviction_policies()) +
                                        " (mhc help policies)")
                         ->type_name("LIST")
                         ->check(each_parsed_by(sim::parse_eviction))
                         ->default_str(options.policies);
    given.prefetchers = app.add_option("--prefetchers", options.prefetchers,
                                       "Prefetch policies, comma-separated: " + policy_names(sim::prefetch_policies()) +
                                           " (mhc help prefetch)")
                            ->type_name("LIST")
                            ->check(each_parsed_by(sim::parse_prefetch))
                            ->default_str(options.prefetchers);
    app.add_option("--capacities", options.capacities,
                   "Capacities, comma-separated: shares of the baseline peak (under --allocator), sizes (40GiB) or "
                   "unlimited")
        ->type_name("LIST")
        ->check(each_parsed_by(sim::parse_capacity))
        ->default_str(options.capacities);
    given.links = app.add_option("--links", options.links,
                                 "Links, comma-separated: presets (" + link_preset_names() +
                                     ") or link profile files (mhc help links)")
                      ->type_name("LIST")
                      ->check(each_parsed_by(check_link_name))
                      ->default_str(options.links);
    given.budget = app.add_option(
                          "--budget", options.budget,
                          "Throughput-loss budget of the bisection: a share of the recorded time (estimated loss)")
                       ->type_name("SHARE")
                       ->check(parsed_by([](const std::string& text) { parse_share(text, 1000); }))
                       ->default_str(options.budget);
    add_sim_base_options(app, options.base);
    add_allocator_conf_option(app, options.base);
    app.add_option("--jobs,-j", options.jobs, "Threads, 0 for all cores")->check(CLI::NonNegativeNumber)->default_str("0");
    given.bisect_steps = app.add_option("--bisect-steps", options.bisect_steps,
                                        "Bisection steps, 1 to 30 (resolution 1/2^steps of the baseline peak)")
                             ->check(number_in([](double count) { return count >= 1 && count <= 30; }, "in 1..30"))
                             ->default_str(std::to_string(options.bisect_steps));
    add_store_options(app, options.store);
    app.add_flag("--no-bisect", options.no_bisect,
                 "Run the grid only: no bisection, so no answers (--json: budget null, answers empty)");
    app.add_flag("--json", options.json,
                 "Print the grid and the answers as JSON (stdout), each run as mhc simulate --json prints it");
    return given;
}

// A grid that names a point twice would simulate and store it twice.
void refuse_repeated_points(const SweepOptions& options, const sim::SweepSpec& spec) {
    refuse_repeats("--policies", spec.policies, spec.policies);
    refuse_repeats("--prefetchers", spec.prefetchers, spec.prefetchers);
    std::vector<std::string> capacity_keys;
    for (const auto& capacity : spec.capacities) capacity_keys.push_back(capacity_key(capacity));
    refuse_repeats("--capacities", split_list("--capacities", options.capacities), capacity_keys);
    refuse_repeats("--links", split_list("--links", options.links), split_list("--links", options.links));
}

// Options that would be taken and do nothing: how to evict without a limit, the bisection's
// own options without a bisection.
void refuse_pointless_options(const SweepOptions& options, const GivenOptions& given, const sim::SweepSpec& spec) {
    // A grid of unlimited capacities alone, without the bisection: nothing is evicted or swapped,
    // and how to do it, given, would be stored run by run with nothing done (as simulate refuses).
    const bool all_unlimited = std::all_of(spec.capacities.begin(), spec.capacities.end(),
                                           [](const sim::Capacity& capacity) { return capacity.unlimited(); });
    if (all_unlimited && options.no_bisect)
        for (const CLI::Option* option : {given.policies, given.prefetchers, given.links})
            if (option->count() > 0)
                throw Error(option->get_name() +
                            " and --capacities unlimited with --no-bisect: nothing is evicted "
                            "or swapped without a limit; give one");
    for (const CLI::Option* option : {given.budget, given.bisect_steps})
        if (options.no_bisect && option->count() > 0)
            throw Error(option->get_name() + " and --no-bisect: " + option->get_name() +
                        " is for the bisection, and --no-bisect runs only the grid; give one");
}

// The grid and the bisection the options ask for; every refusal before the trace is loaded.
sim::SweepSpec sweep_spec(const SweepOptions& options, const GivenOptions& given) {
    sim::SweepSpec spec;
    spec.base.record_events = !options.store.no_store;
    apply_sim_base_options(options.base, spec.base, true);   // the policy list is handled below
    spec.policies = split_list("--policies", options.policies);
    if (given.policies->count() == 0 && std::getenv("MHC_EVICTION_STRATEGY")) {
        sim::Config env;
        sim::apply_environment(env, {true, false, true});
        spec.policies = {env.eviction};
    }
    spec.prefetchers = split_list("--prefetchers", options.prefetchers);
    for (const auto& item : split_list("--capacities", options.capacities))
        spec.capacities.push_back(option_value("--capacities", [&] { return sim::parse_capacity(item); }));
    for (const auto& item : split_list("--links", options.links)) spec.links.push_back(sim::link_from_spec(item));
    refuse_repeated_points(options, spec);
    // A loss can pass 100% (a run twice as slow loses 100%); past 1000% no budget means much.
    spec.budget = option_value("--budget", [&] { return parse_share(options.budget, 1000); });
    spec.jobs = options.jobs;
    spec.bisect_steps = options.bisect_steps;
    spec.bisect = !options.no_bisect;
    refuse_pointless_options(options, given, spec);
    if (spec.policies.empty() || spec.prefetchers.empty() || spec.links.empty() || spec.capacities.empty())
        throw Error("sweep: empty --policies, --prefetchers, --capacities or --links");
    for (const auto& policy : spec.policies)
        for (const auto& prefetch : spec.prefetchers) {
            sim::Config config = spec.base;
            config.eviction = policy;
            config.prefetch = prefetch;
            sim::validate(config);   // fail before loading the trace
        }
    return spec;
}

// What the trace leaves of the bisection, and which device the grid simulates where the trace
// has several with allocations (simulate names it on its run line; the sweep said nothing, and a
// trace of GPU 0 and the host's pinned buffers left it to guess). Printed by rank 0 alone.
// `say`: stdout, or stderr under --json (stdout is the JSON's alone).
void adapt_to_trace(const trace::TraceData& trace_data, const sim::Prepared& prepared, sim::SweepSpec& spec,
                    std::FILE* say) {
    const bool root = dist::is_root();
    if (root)
        for (const auto& warning : sim::trace_warnings(prepared)) std::fprintf(say, "warning: %s\n", warning.c_str());
    if (const auto devices = sim::devices_with_allocations(trace_data); devices.size() > 1 && root) {
        std::string list;
        for (int32_t number : devices) list += (list.empty() ? "" : ", ") + std::to_string(number);
        std::fprintf(say, "device %d (the trace's devices with allocations: %s; --device for another)\n",
                     sim::device_of(prepared), list.c_str());
    }
    // Order-only timing: a loss is a share of event numbers, not of time, so a capacity
    // "within the loss budget" means nothing (it printed losses of 4,848,656% and bisected
    // them); the grid's memory figures stand.
    if (trace_data.order_only() && spec.bisect) {
        spec.bisect = false;
        if (root)
            std::fprintf(say,
                "warning: no bisection: its loss budget is a share of time, and this trace's times are "
                "event numbers; the grid's peaks stand\n");
    }
    // Every event at one instant: the loss budget is a share of a zero baseline, so no capacity
    // is within it or beyond it (the trace's warning says so; the grid's peaks stand).
    if (sim::zero_duration(prepared)) spec.bisect = false;
}

// "1 simulations ... 1 grid runs" read wrong: a word's plural only past one.
std::string many(size_t count, const char* word) {
    return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

// The bisection simulates bisect-steps + 1 capacities per combination and keeps one.
void print_counts(const sim::SweepResult& result, std::FILE* say) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, " in %.2f s: ", result.seconds);
    std::string line = many(result.simulations, "simulation") + seconds + many(result.grid.size(), "grid run");
    if (!result.answers.empty())
        line += ", " + many(result.simulations - result.grid.size(), "bisection probe") + " for " +
                many(result.answers.size(), "answer");
    // Within a narrow terminal's width, as the table above it (docs/cli.md, "A narrower terminal").
    const int width = mhc::table_width();
    std::fputs((width > 0 ? mhc::wrap(line, width, 2) : line + "\n").c_str(), say);
}

// --json (docs/cli.md, "JSON"): what the table says, each run whole as mhc simulate --json prints
// it; the budget is null without a bisection. No wall time (the counts' line, on stderr, has it).
std::string sweep_json(const sim::SweepResult& result, int64_t baseline_peak, bool bisect) {
    nlohmann::json out;
    out["baseline_peak_bytes"] = baseline_peak;
    out["budget"] = bisect ? nlohmann::json(result.budget) : nlohmann::json(nullptr);
    out["grid"] = nlohmann::json::array();
    for (const auto& run : result.grid) out["grid"].push_back(nlohmann::json::parse(sim::to_json(run)));
    out["answers"] = nlohmann::json::array();
    for (const auto& answer : result.answers) {
        nlohmann::json each = {{"policy", answer.policy}, {"prefetch", answer.prefetch}, {"link", answer.link},
                               {"oracle", sim::is_oracle(answer.policy, answer.prefetch)}};
        // found and below the peak: a saving, at `capacity_share` of the baseline peak
        each["saving"] = answer.found && answer.fraction < 1.0;
        each["found"] = answer.found;
        each["capacity_share"] = answer.found ? nlohmann::json(answer.fraction) : nlohmann::json(nullptr);
        each["run"] = answer.found ? nlohmann::json::parse(sim::to_json(answer.result)) : nlohmann::json(nullptr);
        out["answers"].push_back(each);
    }
    out["simulations"] = result.simulations;
    return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Stores the grid and the answers with a saving in one transaction (all or none), then keeps
// the prepared trace; the exit status.
int store_sweep(const SweepOptions& options, const trace::TraceData& trace_data, const sim::Prepared& prepared,
                sim::SweepResult& result) {
    bool stored = true;
    std::optional<StorePhase> phase;   // a signal from here on lets the store finish first
    if (!options.store.no_store) {
        phase.emplace();
        const size_t grid_runs = result.grid.size();
        std::vector<trace::Run> runs = sim::take_runs(result, options.budget);
        std::cout.flush();
        std::fflush(stdout);
        auto ids = store_runs(options.trace, trace_data.fingerprint, runs, options.store);
        stored = ids.has_value();
        if (ids)
            std::fprintf(options.json ? stderr : stdout, "stored %s in %s:\n  the %s and %s with a saving (bisect:*)\n",
                         many(runs.size(), "run").c_str(), store_target(options.trace, options.store).c_str(),
                         many(grid_runs, "grid run").c_str(), many(runs.size() - grid_runs, "bisection answer").c_str());
    }
    if (stored) sim::keep_prepared(prepared, writes_into_trace(options.store));   // after the store, as simulate
    if (phase)
        if (int status = phase->stopped(stored, store_target(options.trace, options.store))) return status;
    for (const auto& cell : result.grid)
        if (!cell.invariant_violation.empty()) {
            mhc::say("mhc: simulator invariant violated in %s: %s\n", sim::run_name(cell.config).c_str(),
                         cell.invariant_violation.c_str());
            return kExitInternal;
        }
    return stored ? kExitOk : kExitNotStored;
}

std::function<int()> setup(CLI::App& app) {
    auto options = std::make_shared<SweepOptions>();
    const GivenOptions given = add_sweep_options(app, *options);
    return [options, given] {
        check_store_environment(options->store);
        check_runs_db_of(options->trace, options->store);
        sim::SweepSpec spec = sweep_spec(*options, given);
        trace::TraceData trace_data = trace::load_trace(options->trace);
        auto prepared = prepare_for_simulation(trace_data, options->base.device, options->trace);
        std::FILE* say = options->json ? stderr : stdout;
        adapt_to_trace(trace_data, *prepared, spec, say);
        // Under mpirun the tasks are spread over the processes, and rank 0 gathers them, prints
        // and alone stores (docs/simulator.md, "MPI").
        const bool tty = show_progress() && dist::is_root();
        auto progress = [tty](size_t done, size_t total) {
            if (tty) std::fprintf(stderr, "\rsimulating %zu/%zu", done, total);
        };
        sim::SweepResult result = dist::sweep(*prepared, spec, progress);
        if (!dist::is_root()) return kExitOk;
        if (tty) std::fprintf(stderr, "\r%40s\r", "");
        const int64_t baseline = sim::baseline_peak(*prepared, options->base.allocator);
        if (options->json) std::cout << sweep_json(result, baseline, spec.bisect);
        else std::cout << sim::to_text(result, baseline, mhc::table_width());
        std::cout.flush();
        print_counts(result, say);
        return store_sweep(*options, trace_data, *prepared, result);
    };
}

Registration reg{Command{"sweep", "Run policies x prefetchers x capacities x links and find the smallest capacity within a loss budget", setup}};

}  // namespace
}  // namespace mhc::cli
