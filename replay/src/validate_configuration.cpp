// One configuration of a validation: predicted, planned, replayed with its repeats, compared
// with the baseline, told as it goes; and the runs stored at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/runs.hpp"
#include "validation.hpp"

namespace mhc::replay::detail {

namespace {

trace::Run replay_run(const Row& row, const sim::Config& config, const Options& options, int64_t base_makespan) {
    const Measured& measured = row.measured;
    const sim::Result& predicted = row.predicted;
    trace::Run run;
    run.kind = trace::RunKind::Replayed;
    run.name = row.name + "/" + to_string(options.backend);
    run.status = measured.status;
    run.config = sim::to_map(config);
    run.config["backend"] = to_string(options.backend);
    run.config["time_scale"] = std::to_string(options.time_scale);
    if (!measured.failure.empty()) run.config["failure"] = measured.failure;
    if (measured.oom) run.config["oom_where"] = measured.oom_where;
    auto& metrics = run.metrics;
    metrics["capacity_bytes"] = static_cast<double>(measured.capacity);
    metrics["measured_peak_bytes"] = static_cast<double>(measured.peak);
    metrics["predicted_peak_bytes"] = static_cast<double>(predicted_arena_peak(predicted));
    metrics["arena_high_water_bytes"] = static_cast<double>(measured.high_water);
    metrics["page_map_seconds"] = measured.map_seconds;
    metrics["page_map_with_copies_seconds"] = 1e-9 * static_cast<double>(measured.paused_with_copies_ns);
    metrics["peak_error"] = row.peak_error;
    metrics["measured_makespan_ns"] = static_cast<double>(measured.makespan_ns);
    metrics["measured_baseline_makespan_ns"] = static_cast<double>(base_makespan);
    // Over a window (--replay-steps) the makespans and losses are the window's, as compared.
    metrics["predicted_makespan_ns"] = static_cast<double>(row.predicted_makespan());
    // A run out of memory has no throughput loss (absent, as from a simulated run's metrics).
    if (!measured.oom) metrics["measured_throughput_loss"] = row.measured_loss;
    if (!predicted.oom.happened) metrics["predicted_throughput_loss"] = row.predicted_loss();
    if (row.windowed) {
        metrics["window_predicted_start_ns"] = static_cast<double>(row.window.start_ns);
        metrics["whole_run_predicted_makespan_ns"] = static_cast<double>(predicted.simulated_makespan);
        if (!predicted.oom.happened) metrics["whole_run_predicted_throughput_loss"] = predicted.throughput_loss;
    }
    if (!measured.oom && !predicted.oom.happened) metrics["loss_error_pp"] = row.loss_error_pp;
    metrics["stall_ns"] = static_cast<double>(measured.stall_ns);
    metrics["stalls"] = static_cast<double>(measured.stalls);
    metrics["swap_in_bytes"] = static_cast<double>(measured.swap_in_bytes);
    metrics["swap_ins"] = static_cast<double>(measured.swap_ins);
    metrics["swap_out_bytes"] = static_cast<double>(measured.swap_out_bytes);
    metrics["swap_outs"] = static_cast<double>(measured.swap_outs);
    metrics["clean_evictions"] = static_cast<double>(measured.evict_clean);
    metrics["drops"] = static_cast<double>(measured.drops);
    metrics["recomputations"] = static_cast<double>(measured.recomputes);
    metrics["checksums"] = static_cast<double>(measured.checksums);
    metrics["checksum_mismatches"] = static_cast<double>(measured.mismatches);
    metrics["diverged_allocations"] = static_cast<double>(measured.diverged_allocations);
    metrics["kernel_overruns"] = static_cast<double>(measured.overruns);
    metrics["kernel_overrun_ns"] = static_cast<double>(measured.overrun_ns);
    metrics["sinkhorn_kernels"] = static_cast<double>(measured.sinkhorn_kernels);
    metrics["late_transfers"] = static_cast<double>(measured.late_transfers);
    metrics["late_ns"] = static_cast<double>(measured.late_ns);
    metrics["link_h2d_Bps"] = measured.link_h2d_Bps;
    metrics["link_d2h_Bps"] = measured.link_d2h_Bps;
    metrics["replay_seconds"] = measured.seconds;
    metrics["kernels_reached"] = static_cast<double>(measured.kernel_times.size());   // every kernel it ran is in run_kernels
    if (measured.oom) {
        metrics["oom"] = 1;
        metrics["oom_bytes_short"] = static_cast<double>(measured.oom_short);
        metrics["oom_fragmentation"] = measured.oom_fragmentation ? 1 : 0;
    }
    run.events = measured.events;
    run.kernel_times = measured.kernel_times;
    run.memory = measured.memory;
    return run;
}

// The predicted kernel times to set beside the measured ones: over a window, its kernels,
// moved back by the run's shift when the window began (the replay starts it with none).
std::vector<trace::RunKernelTime> predicted_in_window(const Row& row) {
    if (!row.windowed) return row.predicted.kernel_times;
    std::vector<trace::RunKernelTime> out;
    const int64_t shift = row.window.shift_ns;
    for (const trace::RunKernelTime& kernel : row.predicted.kernel_times)
        if (kernel.t_start >= row.window.start_ns) out.push_back({kernel.kernel, kernel.t_start - shift, kernel.t_end - shift});
    return out;
}

}  // namespace

// One configuration: predicted on `timed_` (the recorded trace, or after the baseline with
// spec.retime the trace on the baseline replay's clock), replayed on the recorded trace.
// false: a limited configuration whose first replay would not end within --time-limit (not
// run, nothing stored).
bool Validation::configuration(const sim::Capacity& cap, const Row* baseline, Row& row) {
    ++config_no_;
    sim::Config config = base_;
    config.capacity = cap;
    say("simulating");
    row.predicted = timed_ == &t_ ? on_recorded_[static_cast<size_t>(config_no_ - 1)] : sim::simulate(*prepared_, config);
    if (!row.predicted.invariant_violation.empty())
        throw Error(path_ + ": the simulator failed an invariant: " + row.predicted.invariant_violation, Error::Kind::Internal);
    row.name = sim::run_name(config);
    // Predicted on `timed`, replayed on the recorded trace (on_clock_of says why).
    Plan plan = make_plan(*timed_, row.predicted);
    const int64_t t_begin = plan.t_begin;   // on the clock predicted on
    if (timed_ != &t_) plan = on_clock_of(std::move(plan), t_);
    if (window_kernel_ >= 0) {
        row.window = predict_window(*timed_, row.predicted, window_kernel_, t_begin);
        // A run that ran out of memory before the window is replayed whole, to meet it.
        row.windowed = row.window.reached;
        if (row.windowed) plan = with_window(std::move(plan), window_kernel_);
    }
    if (baseline && !fits(row)) return false;   // the baseline runs once in any case
    const Options options = shared_memory_for(plan);
    int64_t id = 0;
    if (spec_.store && rep_.store_error.empty()) {
        try {
            id = trace::begin_run(path_, trace::RunKind::Replayed, row.name + "/" + to_string(spec_.replay.backend), spec_.runs_db,
                                  t_.fingerprint);
            note_begun(id);
        } catch (const std::exception& e) {
            store_failed(e);
        }
    }
    replay_repeats(plan, options, baseline, row);
    sample_resident();
    const int64_t baseline_makespan = compare(baseline, plan, row);
    tell_measured(baseline, row);
    // Runs predicted on the retimed trace say so: their times are the baseline replay's.
    const char* timing = timed_ == &t_ ? "recorded" : "baseline replay";
    row.sim_record = sim::to_run(row.predicted);
    row.sim_record.config["timing"] = timing;
    row.replay_record = replay_run(row, config, spec_.replay, baseline_makespan);
    if (row.windowed) row.replay_record.config["window_first_kernel"] = std::to_string(t_.kernels.id[static_cast<size_t>(window_kernel_)]);
    row.replay_record.config["timing"] = timing;
    row.replay_run = id;
    return true;
}

// Repeats: the run with the median makespan stands for the configuration (a failing or
// mismatching one instead, so that no failure is averaged away). The baseline's noise is in
// every loss, multiplied by 1 + loss (4-7 at the losses of transfer-bound slices), and its
// replay is the cheapest: it gets 2N - 1 repeats.
void Validation::replay_repeats(const Plan& plan, const Options& options, const Row* baseline, Row& row) {
    std::vector<Measured> runs;
    const bool is_baseline = baseline == nullptr;
    const int reps = !is_baseline || spec_.repeat < 2 ? std::max(spec_.repeat, 1) : 2 * spec_.repeat - 1;
    for (int i = 0; i < reps; ++i) {
        if (i > 0 && !fits(row)) {   // --time-limit: the replays so far stand for it
            row.repeats_cut = true;
            break;
        }
        say("replaying " + row.name + (reps > 1 ? " (" + std::to_string(i + 1) + "/" + std::to_string(reps) + ")" : ""));
        const auto wall0 = std::chrono::steady_clock::now();
        runs.push_back(replay(t_, plan, options));
        const Measured& last = runs.back();
        // What a replay costs beyond its makespan on the replay's clock (setting up, page
        // mapping, the engine's end): the largest so far goes into every estimate.
        overhead_s_ = std::max(overhead_s_,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count() -
                                   1e-9 * static_cast<double>(last.makespan_ns) * spec_.replay.time_scale);
        row.makespans.push_back(last.makespan_ns);
        row.replay_seconds.push_back(last.seconds);
        row.map_seconds.push_back(last.map_seconds);
        tell_replay(row, i, reps, last);
        if (last.failed() || (spec_.adaptive_repeat && agreed(baseline, row))) break;
    }
    std::sort(runs.begin(), runs.end(), [](const Measured& lhs, const Measured& rhs) {
        const bool lhs_failed = lhs.failed(), rhs_failed = rhs.failed();
        return lhs_failed != rhs_failed ? lhs_failed : lhs.makespan_ns < rhs.makespan_ns;
    });
    const bool any_failed = runs.front().failed();
    row.measured = std::move(runs[any_failed ? 0 : (runs.size() - 1) / 2]);
}

// ValidateSpec::time_limit_s: whether another replay of `row` ends within the limit, by its
// predicted makespan x the time scale plus the largest overhead a replay has had so far.
bool Validation::fits(const Row& row) const {
    if (spec_.time_limit_s <= 0) return true;
    const double used = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const double need = 1e-9 * static_cast<double>(std::max<int64_t>(row.predicted_makespan(), 0)) *
                            spec_.replay.time_scale +
                        overhead_s_;
    return used + need <= spec_.time_limit_s;
}

// ValidateSpec::progress_line: a replay has ended.
void Validation::tell_replay(const Row& row, int replay_no, int replays, const Measured& measured) const {
    if (!spec_.progress_line) return;
    char line[512];
    std::snprintf(
        line, sizeof line,
        "mhc: configuration %d/%zu: replay %d/%d of %s: makespan %s (predicted %s), %.2f s (page mapping %.2f s), %s%s",
        config_no_, 1 + spec_.capacities.size(), replay_no + 1, replays, row.name.c_str(),
        format_ns(measured.makespan_ns).c_str(), format_ns(row.predicted_makespan()).c_str(), measured.seconds,
        measured.map_seconds, std::string(trace::to_string(measured.status)).c_str(),
        measured.failed() ? " (failed)" : "");
    spec_.progress_line(line);
}

// ValidateSpec::progress_line: a configuration is measured: its table lines and its verdict
// on the load so far (the report's verdict takes the load over every replay).
void Validation::tell_measured(const Row* baseline, const Row& row) const {
    if (!spec_.progress_line) return;
    const std::string head = "configuration " + std::to_string(config_no_) + "/" +
                             std::to_string(1 + spec_.capacities.size());
    spec_.progress_line("mhc: " + head + " measured (its rows of the report's table):");
    // As the report's table will say it, the header once.
    std::string lines = row_text(row);
    if (!baseline) lines = table_header() + lines;
    for (size_t at = 0; at < lines.size();) {
        const size_t end = lines.find('\n', at);
        spec_.progress_line(lines.substr(at, end - at));
        at = end == std::string::npos ? lines.size() : end + 1;
    }
    if (!baseline) return;
    Load load = rep_.load;
    load.after = detail::load_average();
    detail::measure_others_share(load, cpu_before_, detail::cpu_sample());
    spec_.progress_line("mhc: " + head + " verdict (on the load so far): " + verdict(row, spec_.target_pp, load));
}

// The adaptive repeats' rule (repeats_agree) for `row`'s replays so far: the baseline's spread
// as the largest predicted loss carries it, within a quarter of the target; a limited
// configuration's spread with the baseline's part, within half.
bool Validation::agreed(const Row* baseline, const Row& row) const {
    if (!baseline) {
        double worst = 0;
        for (size_t i = 1; i < on_recorded_.size(); ++i)
            if (!on_recorded_[i].oom.happened) worst = std::max(worst, loss_on_recorded(i));
        std::vector<int64_t> sorted = row.makespans;
        std::sort(sorted.begin(), sorted.end());
        return repeats_agree(row.makespans, sorted[(sorted.size() - 1) / 2], 1 + worst, 0, kBaselineAgreeShare * spec_.target_pp,
                             kBaselineMinReplays);
    }
    const int64_t baseline_makespan = baseline->measured.makespan_ns;
    if (baseline_makespan <= 0) return false;
    const double carried = 100.0 * (1 + std::max(row.predicted_loss(), 0.0)) *
                           static_cast<double>(makespan_spread(baseline->makespans)) / static_cast<double>(baseline_makespan);
    return repeats_agree(row.makespans, baseline_makespan, 1, carried, kConfigAgreeShare * spec_.target_pp, kConfigMinReplays);
}

// The loss predicted on the recorded trace for configuration i (0: the baseline), over the window.
double Validation::loss_on_recorded(size_t config) const {
    const WindowPrediction& window = window_on_recorded_[config];
    return window.reached ? window.loss : on_recorded_[config].throughput_loss;
}

// The measured loss against the baseline's, its error, its spread and the first divergence;
// returns the baseline's makespan it was measured against.
int64_t Validation::compare(const Row* baseline, const Plan& plan, Row& row) const {
    const int64_t baseline_makespan = baseline && baseline->measured.makespan_ns > 0 ? baseline->measured.makespan_ns : row.measured.makespan_ns;
    row.measured_loss = baseline_makespan > 0 ? static_cast<double>(row.measured.makespan_ns) / static_cast<double>(baseline_makespan) - 1.0 : 0;
    row.loss_error_pp = 100.0 * (row.measured_loss - row.predicted_loss());
    const int64_t predicted_peak = predicted_arena_peak(row.predicted);
    row.peak_error = predicted_peak > 0
                         ? static_cast<double>(row.measured.peak - predicted_peak) / static_cast<double>(predicted_peak)
                         : 0;
    // The spread of the loss: this configuration's replays, and the baseline's (the
    // denominator), each relative to the baseline's median.
    if (baseline_makespan > 0 && row.makespans.size() > 1) {
        row.spread_pp = 100.0 * static_cast<double>(makespan_spread(row.makespans)) / static_cast<double>(baseline_makespan);
        if (baseline && baseline->makespans.size() > 1)
            row.spread_pp += 100.0 * (1.0 + row.measured_loss) * static_cast<double>(makespan_spread(baseline->makespans)) /
                             static_cast<double>(baseline_makespan);
    }
    // Where the measured timeline first left the predicted one by more than the noise.
    if (baseline && baseline_makespan > 0) {
        const double band_pp = row.spread_pp >= 0 ? row.spread_pp : spec_.target_pp;
        row.divergence = first_divergence(*timed_, predicted_in_window(row), row.measured.kernel_times,
                                          static_cast<int64_t>(band_pp / 100.0 * static_cast<double>(baseline_makespan)));
    }
    if (row.measured.diverged_allocations > 0 && row.measured.failure.empty())
        row.measured.failure = std::to_string(row.measured.diverged_allocations) +
                               " allocations fitted where the simulator's had failed (the allocator models diverged)";
    if (plan.oom && row.measured.oom && row.measured.oom_allocation != plan.oom_allocation)
        row.measured.failure = "OOM at another allocation than the simulator's";
    // Traffic each way, judged as the peak is (kTrafficToleranceBytes): a replay that moved
    // other bytes than predicted did not execute the plan the prediction made.
    if (!row.measured.failed())
        if (std::string why = traffic_mismatch(row.predicted, row.measured); !why.empty()) {
            row.measured.failure = why;
            row.measured.status = trace::RunStatus::Failed;
        }
    return baseline_makespan;
}

// Storing: each replayed run is begun ("incomplete") before its replay, so that an
// interruption leaves exactly that behind; everything else is stored after every replay
// (and after spec.before_store). A store that fails stops storing, never the validation.
void Validation::store_failed(const std::exception& error) {
    if (rep_.store_error.empty()) rep_.store_error = error.what();
}

// A signal that stops the validation before its store leaves the replayed runs begun so far
// marked incomplete: said in the signal's line (it stopped with nothing said, exit 143).
void Validation::note_begun(int64_t id) {
    begun_.push_back(id);
    std::string ids;
    for (size_t i = 0; i < begun_.size(); ++i)
        ids += (i == 0 ? "" : i + 1 == begun_.size() ? " and " : ", ") + std::to_string(begun_[i]);
    set_stop_note((begun_.size() == 1 ? "run " : "runs ") + ids +
                  (begun_.size() == 1 ? " (a replay begun) is" : " (replays begun) are") + " left in " +
                  (spec_.runs_db.empty() ? path_ : spec_.runs_db) + " marked incomplete");
}

void Validation::store() {
    auto store_row = [&](Row& row) {
        if (!rep_.store_error.empty()) return;
        try {
            row.sim_run = trace::add_run(path_, row.sim_record, spec_.runs_db, t_.fingerprint);
            row.replay_record.base_run = row.sim_run;
            if (row.replay_run > 0) trace::finish_run(path_, row.replay_run, row.replay_record, spec_.runs_db, t_.fingerprint);
            else row.replay_run = trace::add_run(path_, row.replay_record, spec_.runs_db, t_.fingerprint);
        } catch (const std::exception& e) {
            store_failed(e);
        }
    };
    store_row(rep_.baseline);
    for (Row& row : rep_.rows) store_row(row);
    rep_.stored = rep_.store_error.empty();
}

}  // namespace mhc::replay::detail
