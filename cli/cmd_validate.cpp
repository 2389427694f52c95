// `mhc validate TRACE`: simulate, replay each plan on a backend, compare (docs/validation.md).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <cstdint>
#include <optional>
#include <limits>
#include <string>

#include "command.hpp"
#include "run_store.hpp"
#include "sim_options.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/units.hpp"
#include "mhc/replay/validate.hpp"
#include "mhc/sim/link.hpp"

namespace mhc::cli {
namespace {

// --repeat auto: at most this many replays per configuration (the baseline 2N - 1).
constexpr int kAutoRepeatMost = 3;

// The whole of `text` as an int in the options' grammar (whole_number_refusal), or nullopt.
std::optional<int> whole_int(const std::string& text) {
    if (!mhc::whole_number_refusal(text, true).empty()) return std::nullopt;
    return parse_integer<int>(text);
}

// --repeat N: an integer in 1..99.
int parse_repeat(const std::string& text) {
    const std::optional<int> count = whole_int(text);
    if (!count || *count < 1 || *count > 99) throw Error(quoted_value(text) + ": auto or a whole number in 1..99");
    return *count;
}

// --replay-steps N|all: the last N training steps (all: 0, every step).
int parse_replay_steps(const std::string& text) {
    if (text == "all") return 0;
    const std::optional<int> count = whole_int(text);
    // Past a 32-bit count no trace has that many steps: said as the range, not as "at least 1".
    if (!count || *count < 1)
        throw Error(quoted_value(text) + ": all or a number of steps in 1.." + std::to_string(INT32_MAX));
    return *count;
}

// An item of --capacity: a limit. The baseline is replayed anyway: 'unlimited' replayed it a
// second time, stored it as another run and judged its noise as a loss (-41% on a tiny trace).
sim::Capacity limited_capacity(const std::string& item) {
    const sim::Capacity capacity = sim::parse_capacity(item);
    if (capacity.unlimited())
        throw Error(quoted_value(item) + ": the unlimited baseline, which validate always replays; give limits (60%, 40GiB)");
    return capacity;
}

// --time-scale X: the number, or 0 for auto.
double fixed_time_scale_of(const std::string& text) {
    if (text == "auto") return 0;
    const double scale = mhc::decimal_refusal(text).empty() ? std::strtod(text.c_str(), nullptr) : -1;
    if (!(scale >= 1e-3 && scale <= 1e6)) throw Error(quoted_value(text) + ": auto or a number in [0.001, 1e6]");
    return scale;
}

struct ValOptions {
    std::string trace, capacity = "60%", policy = "lru", prefetch = "none", link = "auto", model_link = "pcie4";
    std::string backend = "host", chunk = "2MiB", time_scale = "auto";
    // Durations as typed (parse_limits reads them), then in seconds.
    std::string max_age = "24h", max_replay_time = "1h", max_replay_minutes, time_limit = "none";
    double max_age_s = 0, max_replay_s = 0, time_limit_s = 0;
    int copy_threads = 1;
    std::string repeat = "auto", replay_steps = "all";
    bool recalibrate = false, unpaced = false;
    SimBaseOptions base;
    StoreOptions store;
    double target_pp = 5;
    bool json = false, no_sinkhorn = false, recorded_timing = false;
};

// The options whose being given matters beyond their value.
struct GivenOptions {
    CLI::Option* policy = nullptr;
    CLI::Option* model_link = nullptr;
    CLI::Option* max_age = nullptr;
    CLI::Option* max_replay_time = nullptr;
};

// How long the validation may run and what of each replay is measured: the limits, repeats and
// steps (after the rest, in the help's order).
void add_measure_options(CLI::App& app, ValOptions& options, GivenOptions& given) {
    given.max_replay_time =
        app.add_option("--max-replay-time", options.max_replay_time,
                       "Refuse to start when the replays are estimated to take longer (predicted makespans x time "
                       "scale x replays): a duration (30min, 2h), or none")
            ->type_name("DURATION")
            ->default_str(options.max_replay_time);
    // Its name before 2026-12-06, bare minutes: kept for scripts, out of the help.
    app.add_option("--max-replay-minutes", options.max_replay_minutes)->group("");
    app.add_option("--time-limit", options.time_limit,
                   "How long the validation may take (a duration: 50s, 10min; a bare number is seconds): a replay "
                   "that would end past it (its predicted makespan x time scale, plus the most a replay cost beyond "
                   "that so far) is not started; the configurations measured are reported and the ones left out "
                   "named; none: no limit")
        ->type_name("DURATION")
        ->default_str(options.time_limit);
    app.add_option("--repeat", options.repeat,
                   "Replay each configuration this many times (the baseline, whose noise every loss carries, 2N-1 "
                   "times) and use the one with the median makespan (the host is noisy; their spread decides "
                   "whether a result is conclusive); auto: at most 3 (5), stopping once the replays agree within "
                   "a share of --target")
        ->type_name("N|auto")
        ->check(parsed_by([](const std::string& text) {
            if (text != "auto") parse_repeat(text);
        }))
        ->default_str(options.repeat);
    app.add_option("--replay-steps", options.replay_steps,
                   "Replay and measure the last N training steps, each prediction restricted to them (the steps "
                   "before run at once, unmeasured, to bring the replay to the state its run had); all: every step")
        ->type_name("N|all")
        ->check(parsed_by(parse_replay_steps))
        ->default_str(options.replay_steps);
    app.add_flag("--recorded-timing", options.recorded_timing,
                 "Predict the limited runs with the recorded kernel times, not the baseline replay's "
                 "(the default moves the trace onto the replay machine's clock first)");
}

GivenOptions add_options(CLI::App& app, ValOptions& options) {
    GivenOptions given;
    app.add_option("trace", options.trace, "Trace file (.db)")->required()->check(CLI::ExistingFile);
    app.add_option("--capacity", options.capacity,
                   "Limited capacities, comma-separated: shares of the baseline peak (60%,70%) or sizes (40GiB); the "
                   "unlimited baseline is always run")
        ->type_name("LIST")
        ->check(each_parsed_by(limited_capacity))
        ->default_str(options.capacity);
    given.policy = add_policy_options(app, options.policy, options.prefetch);
    app.add_option("--link", options.link,
                   "The replay machine's link: auto (measured under the replay's own conditions, cached per "
                   "machine), a preset (" + link_preset_names() + "), or a profile from mhc calibrate (mhc help links)")
        ->type_name("LINK")
        ->check(parsed_by([](const std::string& link) {
            if (link != "auto") check_link_name(link);
        }))
        ->default_str(options.link);
    given.model_link =
        app.add_option("--model-link", options.model_link,
                       "The link the trace's machine had (a preset or profile, as --link): --time-scale auto gives "
                       "the replay its compute/transfer ratio")
            ->type_name("LINK")
            ->check(link_name())
            ->default_str(options.model_link);
    app.add_flag("--recalibrate", options.recalibrate,
                 "--link auto: measure again even when a fresh calibration is cached");
    given.max_age = app.add_option("--calibration-max-age", options.max_age,
                                   "--link auto: the age (a duration: 12h, 90min; a bare number is hours) after "
                                   "which a cached calibration is measured again; none: at no age (a change of the "
                                   "load average still measures again)")
                        ->type_name("DURATION")
                        ->default_str(options.max_age);
    add_sim_base_options(
        app, options.base,
        " (replay places caching segments in 2 MiB pages as on a GPU; ideal's page rounding may not fit)");
    add_allocator_conf_option(app, options.base);   // the replay's arena follows the same settings
    app.add_option("--backend", options.backend, "Where to replay: host or cuda")
        ->check(mhc::cli::one_of({"host", "cuda"}))
        ->type_name("BACKEND")
        ->default_str(options.backend);
    app.add_option("--time-scale", options.time_scale,
                   "Run kernels and gaps this many times slower (the prediction uses the link times this); auto: "
                   "the modelled link's bandwidth over the replay link's")
        ->type_name("X|auto")
        ->check(parsed_by(fixed_time_scale_of))
        ->default_str(options.time_scale);
    app.add_option("--chunk", options.chunk, "Swap chunk size, at least 4KiB")
        ->type_name("SIZE")
        ->check(parsed_by([](const std::string& text) { parse_size(text, 4096); }))
        ->default_str(options.chunk);
    app.add_option("--copy-threads", options.copy_threads, "Host backend, --unpaced: copy threads per direction")
        ->check(CLI::Range(1, 64))
        ->default_str(std::to_string(options.copy_threads));
    app.add_flag("--unpaced", options.unpaced,
                 "Host backend: copy as fast as the host lets them instead of emulating the link at its rates "
                 "(the rate then varies with what shares the cores; predictions use the calibrated medians)");
    add_store_options(app, options.store);
    app.add_flag("--json", options.json, "Print the report as JSON (stdout); verdicts and warnings stay in it");
    app.add_option("--target", options.target_pp,
                   "Loss error target in percentage points: a configuration within it is validated, one whose "
                   "repeats spread more is inconclusive")
        ->check(finite_number())
        ->check(CLI::Range(0.0, 1000.0))
        ->type_name("POINTS")
        ->capture_default_str();
    app.add_flag("--no-sinkhorn", options.no_sinkhorn, "Stand-ins for Sinkhorn-Knopp kernels too");
    add_measure_options(app, options, given);
    return given;
}

// The durations into seconds: a limit's none (or 0) is no limit; a bare number is read in the unit
// the option's help named before it took durations (docs/cli.md, "Numbers"). A calibration's age
// reads none as every limit does, no limit (it never goes stale), but its 0 is an age too: stale
// at once, measured every time.
void parse_limits(ValOptions& options, const GivenOptions& given) {
    const auto seconds = [](const std::string& option, const std::string& text, std::string_view bare_unit) {
        if (text == "none")
            return option == "--calibration-max-age" ? std::numeric_limits<double>::infinity() : 0.0;
        const double secs = option_value(option, [&] { return parse_seconds(text, bare_unit); });
        if (secs > 1e9) throw Error(refused_value(option, text, "at most 1e9 s (31 years)"));
        return secs;
    };
    options.max_age_s = seconds("--calibration-max-age", options.max_age, "h");
    options.time_limit_s = seconds("--time-limit", options.time_limit, "s");
    options.max_replay_s = seconds("--max-replay-time", options.max_replay_time, "");
    if (!options.max_replay_minutes.empty()) {
        const double old = seconds("--max-replay-minutes", options.max_replay_minutes, "min");
        if (given.max_replay_time->count() > 0)
            throw Error("--max-replay-minutes and --max-replay-time: the same limit (its old name); give one");
        options.max_replay_s = old;
    }
}

// Options that the others given leave with nothing to do: refused, as --copy-threads without --unpaced is.
void check_option_combinations(const ValOptions& options, const GivenOptions& given) {
    if (options.link != "auto") {
        if (options.recalibrate)
            throw Error("--recalibrate and --link " + options.link + ": only --link auto measures the link; give one");
        if (given.max_age->count() > 0)
            throw Error("--calibration-max-age and --link " + options.link +
                        ": only --link auto caches a measured link; give one");
    }
    if (options.recalibrate && given.max_age->count() > 0)
        throw Error(
            "--calibration-max-age and --recalibrate: --recalibrate measures again whatever the cached "
            "calibration's age; give one");
    if (options.time_scale != "auto" && given.model_link->count() > 0)
        throw Error("--model-link and --time-scale " + options.time_scale +
                    ": the modelled link only sets --time-scale auto; give one");
    if (options.unpaced && options.backend == "cuda")
        throw Error("--unpaced and --backend cuda: only the host backend paces its copies; give one");
}

// --capacity: the limited capacities, each once; never the unlimited baseline.
std::vector<sim::Capacity> capacities_of(const std::string& list) {
    std::vector<sim::Capacity> capacities;
    std::vector<std::string> capacity_keys;
    for (const auto& item : split_list("--capacity", list)) {
        capacities.push_back(option_value("--capacity", [&] { return limited_capacity(item); }));
        capacity_keys.push_back(capacity_key(capacities.back()));
    }
    refuse_repeats("--capacity", split_list("--capacity", list), capacity_keys);   // replayed and stored twice
    if (capacities.empty()) throw Error("validate: --capacity '" + list + "' names no capacity");
    return capacities;
}

// The replay's own options (--backend ... --time-limit) into `spec`; the fixed --time-scale, or 0.
double set_replay_options(const ValOptions& options, replay::ValidateSpec& spec) {
    spec.replay.backend = replay::parse_backend(options.backend);
    const double scale = option_value("--time-scale", [&] { return fixed_time_scale_of(options.time_scale); });
    spec.replay.chunk_bytes = static_cast<size_t>(
        option_value("--chunk", [&] { return parse_size(options.chunk, 4096); }));
    spec.replay.copy_threads = options.copy_threads;
    spec.replay.real_sinkhorn = !options.no_sinkhorn;
    spec.store = !options.store.no_store;
    spec.runs_db = options.store.runs_db;
    spec.target_pp = options.target_pp;
    spec.retime = !options.recorded_timing;
    spec.replay_steps = option_value("--replay-steps", [&] { return parse_replay_steps(options.replay_steps); });
    spec.adaptive_repeat = options.repeat == "auto";
    spec.repeat =
        spec.adaptive_repeat ? kAutoRepeatMost : option_value("--repeat", [&] { return parse_repeat(options.repeat); });
    spec.pace = !options.unpaced;
    spec.link_measured_here = options.link == "auto";
    spec.max_replay_seconds = options.max_replay_s;
    spec.time_limit_s = options.time_limit_s;
    spec.warn = [](const std::string& line) { mhc::say("mhc: warning: %s\n", line.c_str()); };
    if (spec.pace && options.copy_threads > 1 && spec.replay.backend == replay::Backend::Host)
        throw Error("--copy-threads " + std::to_string(options.copy_threads) +
                    ": more copy threads are for --unpaced (the emulated link copies with one thread per direction)");
    return scale;
}

// The replay machine's link, measured under the replay's conditions (cached) or given, and the
// time scale: given, or the modelled link's over the replay's.
void set_link_and_time_scale(const ValOptions& options, const sim::LinkModel& modelled, double fixed_scale,
                             replay::ValidateSpec& spec) {
    if (options.link == "auto") {
        if (show_progress()) std::fprintf(stderr, "\r\033[Kmhc: calibrating the replay's link");
        replay::measure_replay_link_for(spec, options.recalibrate, options.max_age_s);
    } else {
        spec.link_origin = "--link " + options.link +
                           (std::filesystem::is_regular_file(options.link) ? " (profile)" : " (preset)");
    }
    if (options.time_scale == "auto") {
        replay::set_auto_time_scale(spec, modelled);
    } else {
        spec.replay.time_scale = fixed_scale;
        spec.time_scale_origin = "--time-scale " + options.time_scale;
    }
}

// Progress on a terminal only (the phase and configuration i/N, then the replay's share of
// actions done, rewritten in place), each measured row on stderr, and the report printed once the
// replays are done (before the store: runs that cannot be stored must not cost the replays).
// Returns the phase note validate() calls.
std::function<void(const std::string&)> attach_output(const std::shared_ptr<ValOptions>& options,
                                                      replay::ValidateSpec& spec,
                                                      const std::shared_ptr<std::optional<StorePhase>>& store_phase) {
    const bool tty = show_progress();
    auto phase = std::make_shared<std::string>();
    if (tty)
        spec.replay.progress = [phase](size_t done, size_t total) {
            std::fprintf(stderr, "\r\033[Kmhc: %s %3.0f%%", phase->c_str(), total ? 100.0 * done / total : 100.0);
        };
    // Each replay and each configuration's rows as soon as they are measured, on stderr (stdout
    // keeps the report alone): a validation stopped by a timeout has said what it measured.
    spec.progress_line = [tty](const std::string& line) {
        std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", line.c_str());
        std::fflush(stderr);
    };
    // A signal once the replays are done lets the store finish first.
    spec.before_store = [options, tty, store_phase](const replay::Report& report) {
        if (tty) std::fprintf(stderr, "\r\033[K");
        if (options->json) std::cout << replay::to_json(report) << "\n";
        else std::cout << replay::to_text(report);
        std::cout.flush();
        if (!options->store.no_store) store_phase->emplace();
        if (report.load.loaded())
            mhc::say(
                         "mhc: warning: the machine was loaded during the validation (%s): "
                         "measured times include other work\n",
                         report.load.text().c_str());
    };
    return [tty, phase](const std::string& line) {
        *phase = line;
        if (tty) std::fprintf(stderr, "\r\033[Kmhc: %s", line.c_str());
    };
}

// After the report: where the runs went, and the exit status.
int conclude(const ValOptions& options, const replay::ValidateSpec& spec, const replay::Report& report,
             std::optional<StorePhase>& store_phase) {
    if (spec.store && report.stored && !options.json) {
        std::cout << "stored runs (simulated -> replayed):";
        auto ids = [&](const replay::Row& row) { std::cout << " " << row.sim_run << "->" << row.replay_run; };
        ids(report.baseline);
        for (const auto& row : report.rows) ids(row);
        std::cout << " in " << store_target(options.trace, options.store) << "\n";
    }
    if (spec.store && !report.stored)
        mhc::say(
                     "mhc: the runs were not stored (%s); the results above are complete: rerun with "
                     "--no-store, or --runs-db FILE to store them in another file\n",
                     report.store_error.c_str());
    if (store_phase)
        if (int status = store_phase->stopped(report.stored, store_target(options.trace, options.store))) return status;
    if (!report.ok()) {
        mhc::say("mhc: validation failed (see the status column)\n");
        return kExitInternal;
    }
    // A --time-limit that cut every limited configuration (the up-front estimate allowed the
    // first, the replays took longer): the baseline alone was measured, nothing was validated.
    if (report.rows.empty() && !report.not_run.empty()) {
        mhc::say(
                     "mhc: --time-limit %g s: no limited configuration was replayed (%s's first replay "
                     "would have ended past it): nothing was validated; give a longer limit, or 0 for none\n",
                     options.time_limit_s, report.not_run.front().c_str());
        return kExitBadInput;
    }
    if (spec.store && !report.stored) return kExitNotStored;
    return kExitOk;
}

int run(const std::shared_ptr<ValOptions>& options, const GivenOptions& given) {
    parse_limits(*options, given);
    check_store_environment(options->store);
    check_runs_db_of(options->trace, options->store);
    check_option_combinations(*options, given);
    replay::ValidateSpec spec;
    sim::Config& config = spec.base;
    config.eviction = options->policy;
    config.prefetch = options->prefetch;
    config.link = sim::link_from_spec(
        options->link == "auto" ? "pcie4" : options->link);   // auto: replaced once the input is checked
    const sim::LinkModel modelled = sim::link_from_spec(options->model_link);
    apply_sim_base_options(options->base, config, given.policy->count() > 0);
    sim::validate(config);
    spec.capacities = capacities_of(options->capacity);
    const double fixed_scale = set_replay_options(*options, spec);
    // Nothing to limit, nothing to replay: refuse as simulate does (before any replay).
    replay::check_replayable(options->trace, spec.warn);
    set_link_and_time_scale(*options, modelled, fixed_scale, spec);
    auto store_phase = std::make_shared<std::optional<StorePhase>>();
    const auto note = attach_output(options, spec, store_phase);
    const replay::Report report = replay::validate(options->trace, spec, note);
    return conclude(*options, spec, report, *store_phase);
}

std::function<int()> setup(CLI::App& app) {
    auto options = std::make_shared<ValOptions>();
    const GivenOptions given = add_options(app, *options);
    return [options, given] { return run(options, given); };
}

Registration reg{Command{"validate", "Replay simulated plans on a backend and compare predicted with measured", setup}};

}  // namespace
}  // namespace mhc::cli
