// mhc validate: each configuration predicted, replayed and compared. This file: the stages in
// order (validation.hpp names the files of the others; the verdicts, the load probe and the two
// report formats are in validate_verdict.cpp, validate_load.cpp, validate_text.cpp and
// validate_json.cpp).
#include "mhc/replay/validate.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_map>
#include <utility>

#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/replay/arena.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "validation.hpp"

namespace mhc::replay {

namespace detail {

Report Validation::run() {
    started_ = std::chrono::steady_clock::now();
    rep_.time_limit_s = spec_.time_limit_s;
    if (spec_.calibration_seconds > 0)
        rep_.phases.push_back({"calibration", spec_.calibration_seconds, spec_.calibration_cpu_seconds});
    phase_start_ = std::chrono::steady_clock::now();
    phase_cpu_start_ = process_cpu_seconds();
    begin();
    end_phase("load and prepare");
    predict_on_recorded();
    end_phase("predict");
    reserve_shared_memory_up_front();
    configuration(sim::Capacity{}, nullptr, rep_.baseline);
    end_phase("baseline replays");
    if (spec_.retime && rep_.baseline.measured.status == trace::RunStatus::Complete && !spec_.capacities.empty()) {
        retimed_ = retime(t_, rep_.baseline.measured, &rep_.retime);
        timed_ = &retimed_;
        prepared_ = sim::prepare(retimed_, spec_.base.device);
        rep_.retimed = true;
        end_phase("retime");
    }
    for (const sim::Capacity& cap : spec_.capacities) {
        rep_.rows.emplace_back();
        // Out of time (--time-limit): this configuration and the ones after it are not run.
        if (rep_.not_run.empty() && configuration(cap, &rep_.baseline, rep_.rows.back())) continue;
        rep_.rows.pop_back();
        sim::Config config = base_;
        config.capacity = cap;
        rep_.not_run.push_back(sim::run_name(config));
        if (spec_.progress_line)
            spec_.progress_line("mhc: not run " + rep_.not_run.back() +
                                ": its first replay would have ended past --time-limit");
    }
    end_phase("limited replays");
    const detail::CpuSample cpu_after = detail::cpu_sample();
    rep_.load.after = detail::load_average();
    detail::measure_others_share(rep_.load, cpu_before_, cpu_after);
    sample_resident();
    rep_.process_peak_rss = resident_.bytes();
    rep_.baseline.verdict = "baseline";
    for (Row& row : rep_.rows) row.verdict = verdict(row, spec_.target_pp, rep_.load);
    set_stop_note("");   // from here a signal waits for the store (cmd_validate's StorePhase)
    if (spec_.before_store) spec_.before_store(rep_);
    if (spec_.store) store();
    return std::move(rep_);
}

// Closes the phase that ran since the last one (the page pool and host arena, allocated
// inside the replays' phases, are a phase of their own: rep_.pool_seconds).
void Validation::end_phase(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    const double cpu_now = process_cpu_seconds();
    const double wall = std::chrono::duration<double>(now - phase_start_).count(), cpu = cpu_now - phase_cpu_start_;
    const double pool = rep_.pool_seconds - pool_counted_, pool_cpu = rep_.pool_cpu_seconds - pool_cpu_counted_;
    pool_counted_ = rep_.pool_seconds;
    pool_cpu_counted_ = rep_.pool_cpu_seconds;
    if (pool > 0) rep_.phases.push_back({"page pool and host arena", pool, pool_cpu});
    rep_.phases.push_back({name, wall - pool, cpu - pool_cpu});
    phase_start_ = now;
    sample_resident();
    phase_cpu_start_ = cpu_now;
}

// The report's settings, the trace, the predictions' link and the replay's options.
void Validation::begin() {
    rep_.trace = path_;
    rep_.target_pp = spec_.target_pp;
    rep_.repeat = std::max(spec_.repeat, 1);
    rep_.adaptive_repeat = spec_.adaptive_repeat;
    rep_.time_scale = spec_.replay.time_scale;
    rep_.link_origin = spec_.link_origin;
    rep_.time_scale_origin = spec_.time_scale_origin;
    rep_.load.cores = static_cast<int>(std::thread::hardware_concurrency());
    rep_.paced = spec_.pace && spec_.replay.backend == Backend::Host;
    rep_.load.before = detail::load_average();
    cpu_before_ = detail::cpu_sample();
    t_ = trace::load_trace(path_);
    prepared_ = sim::prepare_kept(t_, spec_.base.device);   // kept before validate stores anything
    // Refused as simulate refuses it: a device without allocations replayed for minutes and
    // reported 0 B peaks (a Kineto trace with only the host's memory events).
    sim::require_allocations(t_, *prepared_, spec_.base.device, path_);
    refuse_streams_past_bound(t_, sim::device_of(*prepared_), path_);
    base_ = spec_.base;
    // Replay copies in chunks of spec.replay.chunk_bytes: a calibrated profile's rate for that
    // chunk size is the rate to predict with, not its best one.
    const sim::LinkModel at_chunk = link_at_chunk(spec_.base.link, static_cast<int64_t>(spec_.replay.chunk_bytes));
    refuse_scale_past_bounds(at_chunk, spec_.replay.time_scale);
    base_.link = scaled_link(at_chunk, spec_.replay.time_scale);
    // Replay runs NCCL and memcpy kernels as stand-ins, which do not load the link: the
    // prediction of a replay must not take bandwidth away for them (a prediction of the real
    // training run does, with the profile's shares).
    base_.link.nccl_share = 0;
    base_.link.memcpy_share = 0;
    base_.record_events = true;
    rep_.link = base_.link;
    replay_options_ = spec_.replay;
    if (spec_.pace && spec_.replay.backend == Backend::Host) {
        const sim::LinkModel real = link_at_chunk(spec_.base.link, static_cast<int64_t>(spec_.replay.chunk_bytes));
        replay_options_.pace_h2d_Bps = real.h2d.bandwidth_Bps;
        replay_options_.pace_d2h_Bps = real.d2h.bandwidth_Bps;
        replay_options_.pace_duplex = real.copy_engines >= 2 ? real.duplex_factor : 1.0;
        replay_options_.pace_h2d_latency_s = real.h2d.latency_s;
        replay_options_.pace_d2h_latency_s = real.d2h.latency_s;
    } else {
        refuse_unhonoured_latency(spec_);
    }
    // MHC_VALIDATE_POOL_PER_REPLAY=1: the old way (a pool per replay), for the "before" figure
    // of bench/replay/validate_speed.sh.
    shared_pool_ = !env_switch("MHC_VALIDATE_POOL_PER_REPLAY", false);
    window_kernel_ = window_first_kernel(t_, sim::device_of(*prepared_), spec_.replay_steps);
    if (spec_.replay_steps <= 0) rep_.window_origin = "all steps";
    else if (window_kernel_ < 0) rep_.window_origin = "all steps (the trace has no more than " + std::to_string(spec_.replay_steps) +
                                                      " step" + (spec_.replay_steps == 1 ? "" : "s") + " with step numbers)";
}

// What each configuration is predicted to do on the recorded trace: the replays' duration is
// estimated from it before any replay, and it is the prediction of every configuration
// predicted on the recorded clock (the baseline; all of them with --recorded-timing).
void Validation::predict_on_recorded() {
    for (size_t i = 0; i <= spec_.capacities.size(); ++i) {
        sim::Config config = base_;
        config.capacity = i == 0 ? sim::Capacity{} : spec_.capacities[i - 1];
        on_recorded_.push_back(sim::simulate(*prepared_, config));
    }
    choose_window_start();
    // Each prediction over the window, once: the estimate below and every replay's agreement
    // test (agree) read it.
    std::vector<int64_t> makespans;
    makespans.reserve(on_recorded_.size());
    for (const sim::Result& run : on_recorded_) {
        window_on_recorded_.push_back(window_kernel_ >= 0 ? predict_window(t_, run, window_kernel_, make_plan(t_, run).t_begin)
                                                         : WindowPrediction{});
        makespans.push_back(window_on_recorded_.back().reached ? window_on_recorded_.back().makespan_ns : run.simulated_makespan);
    }
    rep_.estimated_seconds = estimated_replay_seconds(makespans, spec_.replay.time_scale, spec_.repeat);
    check_replay_duration(path_, spec_, on_recorded_, makespans, rep_.estimated_seconds);
    check_time_limit(makespans);
}

namespace {

// predict_window(...).quiescent() of every kernel start of one prediction at once: a start is
// quiet where no transfer (swap) and no kernel of the run is running across it. Asking
// predict_window of each candidate scanned the run's kernels and events for every one: quadratic,
// 19 s for a last step of 80,000 kernels with one long kernel beside them (docs/validation.md).
class QuietStarts {
public:
    explicit QuietStarts(const sim::Result& run) {
        std::vector<std::pair<int64_t, int64_t>> busy;   // open intervals (start, end)
        for (const trace::RunEvent& event : run.events)
            if (event.kind == trace::EventKind::SwapIn || event.kind == trace::EventKind::SwapOut) busy.emplace_back(event.t_start, event.t_end);
        for (const trace::RunKernelTime& kernel : run.kernel_times) {
            busy.emplace_back(kernel.t_start, kernel.t_end);
            started_.emplace(kernel.kernel, kernel.t_start);   // the first start of an id, as predict_window finds it
        }
        std::sort(busy.begin(), busy.end());
        for (const auto& [from, to] : busy) {
            if (to <= from) continue;   // an empty interval holds no point
            if (!merged_.empty() && from < merged_.back().second) merged_.back().second = std::max(merged_.back().second, to);
            else merged_.emplace_back(from, to);
        }
    }
    // The run started kernel `id` (false: it ran out of memory before) and nothing ran across its start.
    bool reached(int64_t id) const { return started_.count(id) != 0; }
    bool quiet(int64_t id) const {
        auto it = started_.find(id);
        if (it == started_.end()) return false;
        const int64_t at = it->second;
        // the last busy interval beginning before `at`: `at` lies inside it when it ends after
        auto after = std::lower_bound(merged_.begin(), merged_.end(), at,
                                      [](const std::pair<int64_t, int64_t>& interval, int64_t time) { return interval.first < time; });
        return after == merged_.begin() || std::prev(after)->second <= at;
    }

private:
    std::unordered_map<int64_t, int64_t> started_;
    std::vector<std::pair<int64_t, int64_t>> merged_;   // disjoint, by start
};

}  // namespace

// The window begins at the first kernel of the last steps at which no prediction on the
// recorded trace has a transfer in flight or a kernel running (the replay begins it with
// none); -1 (the whole trace) when there is no such kernel.
void Validation::choose_window_start() {
    if (window_kernel_ < 0) return;
    const auto& kernels = t_.kernels;
    std::vector<int32_t> candidates;
    for (size_t k = 0; k < kernels.size(); ++k)
        if (kernels.device[k] == sim::device_of(*prepared_) && kernels.t_start[k] >= kernels.t_start[static_cast<size_t>(window_kernel_)])
            candidates.push_back(static_cast<int32_t>(k));
    std::stable_sort(candidates.begin(), candidates.end(), [&](int32_t lhs, int32_t rhs) {
        return kernels.t_start[static_cast<size_t>(lhs)] < kernels.t_start[static_cast<size_t>(rhs)];
    });
    const int32_t asked = window_kernel_;
    window_kernel_ = -1;
    std::vector<QuietStarts> starts(on_recorded_.begin(), on_recorded_.end());
    for (int32_t candidate : candidates) {
        const int64_t id = kernels.id[static_cast<size_t>(candidate)];
        bool quiet = true;
        for (size_t i = 0; i < starts.size() && quiet; ++i)
            quiet = on_recorded_[i].oom.happened ? (!starts[i].reached(id) || starts[i].quiet(id)) : starts[i].quiet(id);
        if (quiet) {
            window_kernel_ = candidate;
            break;
        }
    }
    char why[512];
    if (window_kernel_ < 0) {
        std::snprintf(why, sizeof why, "all steps (a prediction had a transfer in flight at every kernel start of the last %d step%s)",
                      spec_.replay_steps, spec_.replay_steps == 1 ? "" : "s");
    } else {
        const auto first = static_cast<size_t>(window_kernel_);
        std::snprintf(why, sizeof why, "the last %d step%s: from kernel %lld (%.60s) at %s recorded%s", spec_.replay_steps,
                      spec_.replay_steps == 1 ? "" : "s", static_cast<long long>(kernels.id[first]),
                      t_.str(kernels.name[first]).c_str(), format_ns(kernels.t_start[first] - t_.t_begin()).c_str(),
                      window_kernel_ == asked ? "" : " (the first kernel start with nothing in flight in any prediction)");
        rep_.window_kernel = kernels.id[first];
    }
    rep_.window_origin = why;
}

// A --time-limit that leaves the first limited configuration no replay validates nothing:
// the baseline's first replay and that configuration's take at least their predicted
// makespans x the time scale (the configurations run in order, and the first that does not
// fit stops them all). Below that it is refused before any replay; it was said as "not run"
// after the baseline's, with exit status 0.
// The predictions alone decide (not the time spent so far), so that the same command is
// refused or not whatever the machine's load; a limit they allow and the replays' real cost
// exceeds is said after them (the command line's exit status 2).
void Validation::check_time_limit(const std::vector<int64_t>& makespans) const {
    if (spec_.time_limit_s <= 0 || makespans.size() < 2) return;
    const double least = 1e-9 *
                         static_cast<double>(std::max<int64_t>(makespans[0], 0) +
                                             std::max<int64_t>(makespans[1], 0)) *
                         spec_.replay.time_scale;
    if (least <= spec_.time_limit_s) return;
    char why[512];
    std::snprintf(why, sizeof why,
                  "--time-limit %g s leaves no limited configuration a replay: the baseline's first replay and "
                  "%s's take at least %.3g s (predicted %s and %s at time scale x%g); nothing would be "
                  "validated: give a longer limit, or 0 for none",
                  spec_.time_limit_s, sim::run_name(on_recorded_[1].config).c_str(), least,
                  format_ns(makespans[0]).c_str(), format_ns(makespans[1]).c_str(), spec_.replay.time_scale);
    throw Error(path_ + ": " + why);
}

void Validation::say(const std::string& what) const {
    if (note_)
        note_("configuration " + std::to_string(config_no_) + "/" + std::to_string(1 + spec_.capacities.size()) + ": " +
              what);
}

// The process's memory now, its pool's pages mapped twice counted once (detail::ResidentPeak).
void Validation::sample_resident() { resident_.sample(pool_ ? pool_->aliased_host_bytes() : 0); }

}  // namespace detail

Report validate(const std::string& path, const ValidateSpec& spec, const std::function<void(const std::string&)>& note) {
    return detail::Validation(path, spec, note).run();
}

void check_replayable(const std::string& path, const std::function<void(const std::string&)>& warn) {
    const trace::Reader reader(path);
    if (reader.counts().allocations == 0)
        throw Error(path + ": no allocations: nothing to simulate or replay under a memory limit");
    // Order-only timing: kernels replay for their event numbers' nanoseconds (a makespan of 16 ns
    // predicted against 203.86 us measured was reported without a word).
    const auto meta = reader.meta();
    if (auto it = meta.find("timing"); it != meta.end() && it->second == "order-only")
        warn(path +
             ": the trace's timing is order only (its source has no timestamps): kernels replay for their event "
             "numbers' nanoseconds, so the makespans and losses say nothing of the recorded run; the peaks and "
             "bytes moved stand");
}

}  // namespace mhc::replay
