// `mhc simulate TRACE`: one simulated run under a GPU memory limit (docs/simulator.md).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "command.hpp"
#include "run_store.hpp"
#include "sim_options.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/text_table.hpp"
#include "mhc/dist/process.hpp"
#include "mhc/dist/run.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/coupled.hpp"
#include "mhc/sim/job.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/summary.hpp"

namespace mhc::cli {
int run_coupled(const std::vector<std::string>& paths, const sim::Config& c, bool json, const StoreOptions& store);
namespace {

struct SimOptions {
    std::string trace, capacity, policy = "lru", prefetch = "none", link = "pcie4";
    std::string h2d_bw, d2h_bw, latency;
    double duplex = 0, nccl_share = -1, memcpy_share = -1;
    int copy_engines = 0, samples = 4096;
    bool json = false, check = false, no_events = false;
    std::vector<std::string> ranks;
    StoreOptions store;
    SimBaseOptions base;
};

// Declares simulate's options into `o`; returns --policy's (given or not: apply_sim_base_options).
CLI::Option* add_simulate_options(CLI::App& app, SimOptions& options) {
    app.add_option("trace", options.trace, "Trace file (.db), or --ranks instead")->check(CLI::ExistingFile);
    app.add_option("--ranks", options.ranks,
                   "Coupled multi-rank run: one trace per rank (docs/simulator.md, Coupled ranks); under mpirun the "
                   "ranks are spread over the processes")
        // Without a file after it, CLI11 would read the next option (--capacity) as one.
        ->check(CLI::Validator(
            [](std::string& v) {
                return !v.empty() && v[0] == '-' ? quoted_value(v) + ": needs trace files, not an option"
                                                 : std::string();
            },
            "FILE"))
        ->type_name("FILE")
        ->check(CLI::ExistingFile);
    app.add_option("--capacity", options.capacity,
                   "GPU memory: a share of the baseline peak (60%, at most 100%; the unlimited run's peak under "
                   "--allocator), a size (40GiB, 40GB; mhc help sizes), or unlimited for the baseline [required]")
        ->type_name("SHARE|SIZE");
    CLI::Option* policy = add_policy_options(app, options.policy, options.prefetch);
    app.add_option("--link", options.link,
                   "Host link: a preset (" + link_preset_names() + ") or a link profile file (mhc help links)")
        ->check(link_name())
        ->type_name("LINK")
        ->default_str(options.link);
    add_sim_base_options(app, options.base);
    add_allocator_conf_option(app, options.base);
    app.add_option("--h2d-bandwidth", options.h2d_bw,
                   "The link's H2D bandwidth instead of its own, 1kB/s to 1000TB/s: 25GB/s")
        ->type_name("RATE");
    app.add_option("--d2h-bandwidth", options.d2h_bw,
                   "The link's D2H bandwidth instead of its own, 1kB/s to 1000TB/s: 25GB/s")
        ->type_name("RATE");
    app.add_option("--latency", options.latency,
                   "The per-transfer latency both ways instead of the link's, 0 to 10s: 6us")
        ->type_name("DURATION");
    // The link's own ranges (sim::validate of a link), said of the option given.
    app.add_option("--copy-engines", options.copy_engines, "Copy engines instead of the link's, 1 to 64 (0: the link's)")
        ->check(number_in([](double count) { return count >= 0 && count <= 64; }, "in 1..64 (0: the link's)"));
    app.add_option("--duplex-factor", options.duplex,
                   "Bandwidth factor while both directions run, in (0, 1], instead of the link's (0: the link's)")
        ->check(finite_number())
        ->check(number_in([](double value) { return value >= 0 && value <= 1; }, "in (0, 1] (0: the link's)"));
    app.add_option("--nccl-share", options.nccl_share,
                   "Bandwidth share lost while NCCL kernels run, in [0, 1) (-1: the link's)")
        ->check(finite_number())
        ->check(number_in([](double value) { return (value >= 0 && value < 1) || value == -1; }, "in [0, 1) (-1: the link's)"));
    app.add_option("--memcpy-share", options.memcpy_share,
                   "Bandwidth share lost to the trace's own memcpys, in [0, 1) (-1: the link's)")
        ->check(finite_number())
        ->check(number_in([](double value) { return (value >= 0 && value < 1) || value == -1; }, "in [0, 1) (-1: the link's)"));
    app.add_option("--memory-samples", options.samples, "Memory timeline samples stored, 1 to 1,000,000")
        ->check(number_in([](double count) { return count >= 1 && count <= sim::kMaxMemorySamples; }, "in 1..1000000"))
        ->default_str(std::to_string(options.samples));
    app.add_flag("--json", options.json, "Print the result as JSON");
    add_store_options(app, options.store);
    app.add_flag("--check", options.check, "Check the invariants while running");
    app.add_flag("--no-events", options.no_events,
                 "Store the metrics and the memory timeline, not the events or kernel times");
    return policy;
}

// The link's figures the options give instead of the preset's or profile's own.
// The link's own bounds (sim::validate), said of the option given: it was "link pcie4-custom: field
// 'h2d.bandwidth_Bps': must be a number in [1e3, 1e15] B/s", of a field the user never wrote.
double link_bandwidth(const char* option, const std::string& text) {
    const double rate = option_value(option, [&] { return parse_bandwidth(text); });
    if (rate < sim::kMinBandwidthBps || rate > sim::kMaxBandwidthBps)
        throw Error(refused_value(option, text,
                                  std::string(rate < sim::kMinBandwidthBps ? "below 1kB/s" : "above 1000TB/s") +
                                      "; a link's bandwidth is 1kB/s to 1000TB/s"));
    return rate;
}

void apply_link_options(const SimOptions& options, sim::LinkModel& link) {
    if (!options.h2d_bw.empty()) link.h2d.bandwidth_Bps = link_bandwidth("--h2d-bandwidth", options.h2d_bw);
    if (!options.d2h_bw.empty()) link.d2h.bandwidth_Bps = link_bandwidth("--d2h-bandwidth", options.d2h_bw);
    if (!options.latency.empty()) {
        const double latency = option_value("--latency", [&] { return parse_seconds(options.latency); });
        if (latency > sim::kMaxLatencyS)
            throw Error(refused_value("--latency", options.latency, "above 10s; a transfer's latency is 0 to 10s"));
        link.h2d.latency_s = link.d2h.latency_s = latency;
    }
    if (options.copy_engines != 0) link.copy_engines = options.copy_engines;
    if (options.duplex != 0) link.duplex_factor = options.duplex;
    // -1 alone means the link's; any other value is the user's, range-checked with the link (-5 is refused).
    if (options.nccl_share != -1) link.nccl_share = options.nccl_share;
    if (options.memcpy_share != -1) link.memcpy_share = options.memcpy_share;
    // Any figure of the link given (the contention shares too: two runs that differ only there had one name).
    if (!options.h2d_bw.empty() || !options.d2h_bw.empty() || !options.latency.empty() || options.copy_engines ||
        options.duplex || options.nccl_share != -1 || options.memcpy_share != -1)
        link.name += "-custom";
}

// The run the options ask for, checked (sim::validate) before any trace is read.
sim::Config simulate_config(const SimOptions& options, const CLI::App& app, const CLI::Option& policy) {
    if (options.no_events && options.store.no_store)
        throw Error("--no-events and --no-store: a run not stored keeps no timeline anyway; give one");
    // Without a limit a run says nothing, and storing it by accident clutters the trace.
    if (options.capacity.empty())
        throw Error(
            "simulate: --capacity is required: a share of the baseline peak (60%), a size (40GiB), "
            "or 'unlimited' for the baseline");
    sim::Config config;
    config.capacity = option_value("--capacity", [&] { return sim::parse_capacity(options.capacity); });
    // Without a limit nothing is evicted, so nothing is swapped or brought back: the options that
    // choose how are refused, naming the first given, rather than stored in a run they did not change.
    if (config.capacity.unlimited())
        for (const char* name : {"--policy", "--prefetch", "--link", "--h2d-bandwidth", "--d2h-bandwidth", "--latency",
                                 "--copy-engines", "--duplex-factor", "--nccl-share", "--memcpy-share",
                                 "--cpu-buffer-ratio", "--max-swap-ops-per-sec", "--no-early"})
            if (app.get_option(name)->count() > 0)
                throw Error(std::string(name) + " and --capacity " + options.capacity +
                            ": nothing is evicted or swapped without a limit; give one");
    config.eviction = options.policy;
    config.prefetch = options.prefetch;
    config.link = sim::link_from_spec(options.link);
    apply_link_options(options, config.link);
    config.memory_samples = options.samples;
    // A run that is not stored needs no timeline (the printed result and metrics do not read it), as in sweep.
    config.record_events = !options.no_events && !options.store.no_store;
    if (options.check) config.check_invariants = true;
    apply_sim_base_options(options.base, config, policy.count() > 0);
    sim::validate(config);
    return config;
}

// One trace simulated, printed, then stored; the exit status.
int run_single(const SimOptions& options, const sim::Config& config) {
    trace::TraceData trace_data = trace::load_trace(options.trace);
    auto prepared = prepare_for_simulation(trace_data, config.device, options.trace);
    sim::Result result = sim::simulate(*prepared, config);
    // The result first: a run that cannot be stored must not cost the computation.
    if (options.json) std::cout << sim::to_json(result) << "\n";
    else std::cout << sim::to_text(result);
    std::cout.flush();
    bool stored = true;
    std::optional<StorePhase> phase;   // a signal from here on lets the store finish first
    if (!options.store.no_store) {
        phase.emplace();
        std::vector<trace::Run> runs;
        runs.push_back(sim::take_run(result));   // moved in: a braced list would copy the run's millions of rows
        auto ids = store_runs(options.trace, trace_data.fingerprint, runs, options.store);
        stored = ids.has_value();
        if (ids && !options.json)
            std::cout << "stored         run " << ids->at(0) << " in " << store_target(options.trace, options.store)
                      << "\n";
    }
    // Only now: a store that failed leaves the trace as it was (docs/trace-format.md).
    if (stored) sim::keep_prepared(*prepared, writes_into_trace(options.store));
    if (phase)
        if (int status = phase->stopped(stored, store_target(options.trace, options.store))) return status;
    if (!result.invariant_violation.empty()) {
        mhc::say("mhc: simulator invariant violated: %s\n", result.invariant_violation.c_str());
        return kExitInternal;
    }
    if (!stored) return kExitNotStored;
    if (result.oom.happened) {
        // The text result opens with the OOM; with --json, stdout is for machines and the
        // one human line goes to stderr.
        if (options.json)
            mhc::say("mhc: out of memory at %s of simulated time: %s: %s\n",
                         format_ns(result.oom.time).c_str(), result.oom.where.c_str(), result.oom.why.c_str());
        return kExitOom;
    }
    return kExitOk;
}

std::function<int()> setup(CLI::App& app) {
    auto options = std::make_shared<SimOptions>();
    const CLI::Option* policy = add_simulate_options(app, *options);
    return [options, policy, &app] {
        check_store_environment(options->store);
        if (options->ranks.empty()) check_runs_db_of(options->trace, options->store);
        else check_runs_db_of_job(options->ranks, options->store);
        const sim::Config config = simulate_config(*options, app, *policy);
        if (!options->ranks.empty()) {
            if (!options->trace.empty()) throw Error("simulate: give either a trace or --ranks FILES..., not both");
            return run_coupled(options->ranks, config, options->json, options->store);
        }
        if (options->trace.empty())
            throw Error("simulate: a trace file is required (or --ranks FILES... for a coupled run)");
        if (!dist::is_root()) return kExitOk;   // under mpirun a single-trace run is rank 0's alone
        return run_single(*options, config);
    };
}

}  // namespace

// A coupled run over per-rank traces: printed (rank 0 under MPI), then each rank's run stored
// in its own trace (or --runs-db).
int run_coupled(const std::vector<std::string>& paths, const sim::Config& c, bool json, const StoreOptions& store) {
    std::vector<trace::TraceData> traces;
    traces.reserve(paths.size());
    std::vector<sim::RankTrace> ranks;
    std::vector<std::pair<std::string, std::string>> versions;
    for (const auto& p : paths) {
        traces.push_back(trace::load_trace(p));
        // Ranks wait for each other at their collectives by time; event numbers would be taken
        // for nanoseconds (a snapshot without time_us or an execution trace alone printed a job
        // loss of 4,151,658% and a makespan of 7.75 us -> 321.84 ms, without a warning).
        if (traces.back().order_only())
            throw Error(p +
                        ": its timing is order only (the source has no timestamps, times are event numbers): "
                        "--ranks couples the ranks by time; simulate it alone (mhc simulate " +
                        p + ")");
        ranks.push_back({p, &traces.back(), prepare_for_simulation(traces.back(), c.device, p)});
        // Every event at one instant: no time to couple by, and each rank's loss is a share of a
        // zero baseline (it printed "nan%").
        if (sim::zero_duration(*ranks.back().prepared))
            throw Error(p + ": every recorded event of device " +
                        std::to_string(sim::device_of(*ranks.back().prepared)) +
                        " is at one instant (the trace has no duration): --ranks couples the ranks by time; "
                        "simulate it alone (mhc simulate " +
                        p + ")");
        versions.emplace_back(p, trace::capture_versions(traces.back().meta));
    }
    // Ranks that do not belong to one job are refused; what older traces lack is said.
    std::vector<std::string> assumed = sim::check_job_identity(ranks);
    if (!assumed.empty() && dist::is_root()) {
        std::string line;
        for (const auto& a : assumed) line += (line.empty() ? "" : "; ") + a;
        mhc::say("mhc: warning: %s\n", line.c_str());
    }
    if (std::string w = trace::version_mismatch(versions); !w.empty() && dist::is_root())
        mhc::say("mhc: warning: %s\n", w.c_str());
    sim::JobPlan plan = sim::plan_job(ranks);
    sim::CoupledResult r = dist::simulate_coupled(ranks, plan, c);
    if (!dist::is_root()) return kExitOk;
    if (json) std::cout << sim::to_json(r) << "\n";
    else std::cout << sim::to_text(r, mhc::table_width());
    std::cout.flush();
    bool stored = true;
    if (!store.no_store) {
        // A job is stored whole: every rank's run, or none (docs/trace-format.md).
        std::vector<trace::JobRun> job;
        for (size_t i = 0; i < r.ranks.size(); ++i) {
            trace::Run run = sim::take_run(r.ranks[i]);
            run.name += " coupled";
            run.config["coupled.ranks"] = std::to_string(r.ranks.size());
            run.config["coupled.rank"] = std::to_string(r.global_rank[i]);
            run.metrics["coupled_wait_time"] = static_cast<double>(r.ranks[i].coupled_wait_time);
            run.metrics["coupled_wait_count"] = static_cast<double>(r.ranks[i].coupled_wait_count);
            if (r.stopped[i]) {
                // It stopped waiting for the rank out of memory: it did not finish either.
                run.status = mhc::trace::RunStatus::Incomplete;
                if (r.oom >= 0) run.config["coupled.stopped_by"] = std::to_string(r.global_rank[size_t(r.oom)]);
                run.metrics.erase("peak_reduction");
                run.metrics.erase("throughput_loss");
            }
            if (r.oom < 0) run.metrics["job_throughput_loss"] = r.job_loss;   // a job out of memory has none
            job.push_back({paths[i], traces[i].fingerprint, std::move(run)});
        }
        StorePhase phase;   // a signal from here on lets the store finish first
        auto ids = store_job_runs(job, store);
        stored = ids.has_value();
        if (ids && !json)
            for (size_t i = 0; i < ids->size(); ++i)
                std::cout << "stored         run " << ids->at(i) << " in " << store_target(paths[i], store) << "\n";
        if (int status = phase.stopped(stored, store.runs_db.empty() ? "the rank traces" : store.runs_db))
            return status;
    }
    for (const auto& x : r.ranks)
        if (!x.invariant_violation.empty()) {
            mhc::say("mhc: simulator invariant violated: %s\n", x.invariant_violation.c_str());
            return kExitInternal;
        }
    if (!stored) return kExitNotStored;
    if (r.oom >= 0) {
        if (json)
            mhc::say("mhc: out of memory on rank %d: %s: %s\n", r.global_rank[static_cast<size_t>(r.oom)],
                         r.ranks[size_t(r.oom)].oom.where.c_str(), r.ranks[size_t(r.oom)].oom.why.c_str());
        return kExitOom;
    }
    return kExitOk;
}

namespace {

Registration reg{Command{"simulate", "Simulate a trace under a GPU memory limit with eviction/prefetch policies", setup}};

}  // namespace
}  // namespace mhc::cli
