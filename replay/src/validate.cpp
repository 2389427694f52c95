// mhc validate: each configuration predicted, replayed and compared (the verdicts, the load probe
// and the two report formats are in validate_verdict.cpp, validate_load.cpp, validate_text.cpp
// and validate_json.cpp).
#include "mhc/replay/validate.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <thread>

#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/kernels/swap.hpp"
#include "mhc/replay/arena.hpp"
#include "mhc/replay/host_memory.hpp"
#include "mhc/replay/pages.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/runs.hpp"
#include "validate_load.hpp"

namespace mhc::replay {

sim::LinkModel scaled_link(const sim::LinkModel& link, double scale) {
    sim::LinkModel l = link;
    for (sim::Direction* d : {&l.h2d, &l.d2h}) {
        d->bandwidth_Bps *= scale;
        d->latency_s /= scale;
    }
    if (scale != 1.0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " x%g", scale);
        l.name += buf;
    }
    return l;
}

namespace {
// A time scale that takes the replay's link past the simulator's bounds on a bandwidth (pcie4
// x1e5 moves 2.5e15 B/s): said as the time scale's fault, with the range this link allows; it
// was said as "link pcie4 x100000: field 'h2d.bandwidth_Bps': must be a number in [1e3, 1e15]
// B/s", a field of a file the user never wrote.
void refuse_scale_past_bounds(const sim::LinkModel& unscaled, double scale) {
    for (const auto& [name, direction] : {std::pair{"H2D", &unscaled.h2d}, std::pair{"D2H", &unscaled.d2h}}) {
        const double rate = direction->bandwidth_Bps * scale;
        if (rate >= sim::kMinBandwidthBps && rate <= sim::kMaxBandwidthBps) continue;
        char why[512];
        std::snprintf(
            why, sizeof why,
            "--time-scale: at x%g the replay's link %s moves %s at %.3g B/s, outside the [1e3, 1e15] B/s a "
            "link may have; with this link the time scale must be in [%.3g, %.3g]",
            scale, unscaled.name.c_str(), name, rate,
            std::max(1e-3, sim::kMinBandwidthBps / std::min(unscaled.h2d.bandwidth_Bps, unscaled.d2h.bandwidth_Bps)),
            std::min(1e6, sim::kMaxBandwidthBps / std::max(unscaled.h2d.bandwidth_Bps, unscaled.d2h.bandwidth_Bps)));
        throw Error(why);
    }
}
}   // namespace

sim::LinkModel link_at_chunk(const sim::LinkModel& link, int64_t chunk) {
    const auto& rows = link.by_chunk;
    if (rows.empty() || chunk <= 0) return link;
    sim::LinkModel l = link;
    // Interpolate in log(chunk size) between the measured rows around `chunk`; beyond the
    // ends, the end row.
    auto at = [&](double sim::LinkModel::Chunk::*rate) {
        if (chunk <= rows.front().bytes) return rows.front().*rate;
        for (size_t i = 1; i < rows.size(); ++i)
            if (chunk <= rows[i].bytes) {
                if (chunk == rows[i].bytes) return rows[i].*rate;
                const double x0 = std::log(static_cast<double>(rows[i - 1].bytes));
                const double x1 = std::log(static_cast<double>(rows[i].bytes));
                const double w = (std::log(static_cast<double>(chunk)) - x0) / (x1 - x0);
                // A rate of 0 is "not measured": no rate between it and a measured one (it gave a
                // fraction of the measured rate, down to below 1 kB/s); the profile's own then.
                if (rows[i - 1].*rate == 0 || rows[i].*rate == 0) return 0.0;
                return rows[i - 1].*rate + w * (rows[i].*rate - rows[i - 1].*rate);
            }
        return rows.back().*rate;
    };
    const double h = at(&sim::LinkModel::Chunk::h2d_Bps), d = at(&sim::LinkModel::Chunk::d2h_Bps);
    if (h > 0) l.h2d.bandwidth_Bps = h;
    if (d > 0) l.d2h.bandwidth_Bps = d;
    l.name += " @" + format_bytes(chunk) + " chunks";
    return l;
}

double estimated_replay_seconds(const std::vector<int64_t>& makespans_ns, double time_scale, int repeat) {
    double seconds = 0;
    for (size_t i = 0; i < makespans_ns.size(); ++i) {
        const int reps = i == 0 && repeat >= 2 ? 2 * repeat - 1 : std::max(repeat, 1);
        seconds += reps * 1e-9 * static_cast<double>(makespans_ns[i]) * time_scale;
    }
    return seconds;
}

double estimated_replay_seconds(const std::vector<sim::Result>& predictions, double time_scale, int repeat) {
    std::vector<int64_t> makespans;
    makespans.reserve(predictions.size());
    for (const sim::Result& prediction : predictions) makespans.push_back(prediction.simulated_makespan);
    return estimated_replay_seconds(makespans, time_scale, repeat);
}

WindowPrediction predict_window(const trace::TraceData& trace_data, const sim::Result& run, int32_t first_kernel, int64_t t_begin) {
    WindowPrediction window;
    const auto first = static_cast<size_t>(first_kernel);
    const int64_t id = trace_data.kernels.id[first];
    const auto started = std::find_if(run.kernel_times.begin(), run.kernel_times.end(),
                                      [&](const trace::RunKernelTime& kernel) { return kernel.kernel == id; });
    if (started == run.kernel_times.end()) return window;
    window.reached = true;
    window.start_ns = started->t_start;
    window.shift_ns = window.start_ns - trace_data.kernels.t_start[first];
    window.makespan_ns = run.simulated_makespan - (window.start_ns - t_begin);
    window.baseline_ns = run.baseline_makespan - (trace_data.kernels.t_start[first] - t_begin);
    window.loss = window.baseline_ns > 0 ? static_cast<double>(window.makespan_ns) / static_cast<double>(window.baseline_ns) - 1.0 : 0.0;
    for (const trace::RunEvent& event : run.events)
        if ((event.kind == trace::EventKind::SwapIn || event.kind == trace::EventKind::SwapOut) && event.t_start < window.start_ns &&
            event.t_end > window.start_ns)
            ++window.transfers_in_flight;
    for (const trace::RunKernelTime& kernel : run.kernel_times)
        if (kernel.t_start < window.start_ns && kernel.t_end > window.start_ns) ++window.kernels_running;
    return window;
}

namespace {

trace::Run replay_run(const Row& row, const sim::Config& c, const Options& o, int64_t base_makespan) {
    const Measured& m = row.measured;
    const sim::Result& p = row.predicted;
    trace::Run run;
    run.kind = trace::RunKind::Replayed;
    run.name = row.name + "/" + to_string(o.backend);
    run.status = m.status;
    run.config = sim::to_map(c);
    run.config["backend"] = to_string(o.backend);
    run.config["time_scale"] = std::to_string(o.time_scale);
    if (!m.failure.empty()) run.config["failure"] = m.failure;
    if (m.oom) run.config["oom_where"] = m.oom_where;
    auto& x = run.metrics;
    x["capacity_bytes"] = static_cast<double>(m.capacity);
    x["measured_peak_bytes"] = static_cast<double>(m.peak);
    x["predicted_peak_bytes"] = static_cast<double>(predicted_arena_peak(p));
    x["arena_high_water_bytes"] = static_cast<double>(m.high_water);
    x["page_map_seconds"] = m.map_seconds;
    x["page_map_with_copies_seconds"] = 1e-9 * static_cast<double>(m.paused_with_copies_ns);
    x["peak_error"] = row.peak_error;
    x["measured_makespan_ns"] = static_cast<double>(m.makespan_ns);
    x["measured_baseline_makespan_ns"] = static_cast<double>(base_makespan);
    // Over a window (--replay-steps) the makespans and losses are the window's, as compared.
    x["predicted_makespan_ns"] = static_cast<double>(row.predicted_makespan());
    // A run out of memory has no throughput loss (absent, as from a simulated run's metrics).
    if (!m.oom) x["measured_throughput_loss"] = row.measured_loss;
    if (!p.oom.happened) x["predicted_throughput_loss"] = row.predicted_loss();
    if (row.windowed) {
        x["window_predicted_start_ns"] = static_cast<double>(row.window.start_ns);
        x["whole_run_predicted_makespan_ns"] = static_cast<double>(p.simulated_makespan);
        if (!p.oom.happened) x["whole_run_predicted_throughput_loss"] = p.throughput_loss;
    }
    if (!m.oom && !p.oom.happened) x["loss_error_pp"] = row.loss_error_pp;
    x["stall_ns"] = static_cast<double>(m.stall_ns);
    x["stalls"] = static_cast<double>(m.stalls);
    x["swap_in_bytes"] = static_cast<double>(m.swap_in_bytes);
    x["swap_ins"] = static_cast<double>(m.swap_ins);
    x["swap_out_bytes"] = static_cast<double>(m.swap_out_bytes);
    x["swap_outs"] = static_cast<double>(m.swap_outs);
    x["clean_evictions"] = static_cast<double>(m.evict_clean);
    x["drops"] = static_cast<double>(m.drops);
    x["recomputations"] = static_cast<double>(m.recomputes);
    x["checksums"] = static_cast<double>(m.checksums);
    x["checksum_mismatches"] = static_cast<double>(m.mismatches);
    x["diverged_allocations"] = static_cast<double>(m.diverged_allocations);
    x["kernel_overruns"] = static_cast<double>(m.overruns);
    x["kernel_overrun_ns"] = static_cast<double>(m.overrun_ns);
    x["sinkhorn_kernels"] = static_cast<double>(m.sinkhorn_kernels);
    x["late_transfers"] = static_cast<double>(m.late_transfers);
    x["late_ns"] = static_cast<double>(m.late_ns);
    x["link_h2d_Bps"] = m.link_h2d_Bps;
    x["link_d2h_Bps"] = m.link_d2h_Bps;
    x["replay_seconds"] = m.seconds;
    x["kernels_reached"] = static_cast<double>(m.kernel_times.size());   // every kernel it ran is in run_kernels
    if (m.oom) {
        x["oom"] = 1;
        x["oom_bytes_short"] = static_cast<double>(m.oom_short);
        x["oom_fragmentation"] = m.oom_fragmentation ? 1 : 0;
    }
    run.events = m.events;
    run.kernel_times = m.kernel_times;
    run.memory = m.memory;
    return run;
}

// "3.2 h", "14 min", "42 s", "0.11 s", "6e-08 s" (below 10 s, two digits: --max-replay-minutes
// 1e-9 was refused as "at least 0 s ... more than the 0 s allowed").
std::string human_seconds(double s) {
    char b[64];
    if (s >= 3600) std::snprintf(b, sizeof b, "%.1f h", s / 3600);
    else if (s >= 60) std::snprintf(b, sizeof b, "%.0f min", s / 60);
    else if (s >= 10) std::snprintf(b, sizeof b, "%.0f s", s);
    else std::snprintf(b, sizeof b, "%.2g s", s);
    return b;
}

// A backend that does not emulate the link runs its copies with their own latency: a link that
// claims much more would be predicted and never measured.
void refuse_unhonoured_latency(const ValidateSpec& spec) {
    const sim::LinkModel& l = spec.base.link;
    const double latency = std::max(l.h2d.latency_s, l.d2h.latency_s);
    if (spec.link_measured_here || latency <= kMaxNativeLatencyS) return;
    const bool cuda = spec.replay.backend == Backend::Cuda;
    throw Error("link " + l.name + ": a per-transfer latency of " + format_ns(static_cast<int64_t>(latency * 1e9)) +
                " would be predicted but not measured: the " +
                (cuda ? std::string("cuda backend's copies have the GPU link's own latency")
                      : std::string("unpaced host replay's copies have the host's own latency (the paced replay, "
                                    "without --unpaced, emulates it)")) +
                "; at most " + format_ns(static_cast<int64_t>(kMaxNativeLatencyS * 1e9)) + " is taken as the link's own");
}

// Refuses replays estimated to run past spec.max_replay_seconds, and says so in one line when
// they will take long.
// makespans: each prediction's over what is replayed (the window with --replay-steps), as the
// estimate counts them; the slowest is named by it.
void check_replay_duration(const std::string& path, const ValidateSpec& spec, const std::vector<sim::Result>& predicted,
                           const std::vector<int64_t>& makespans, double seconds) {
    size_t slowest = 0;
    for (size_t i = 1; i < makespans.size(); ++i)
        if (makespans[i] > makespans[slowest]) slowest = i;
    char why[512];
    const int reps = std::max(spec.repeat, 1);
    std::snprintf(why, sizeof why, "%zu configurations, %d replay%s each%s, at time scale x%g; the slowest, %s, is predicted at %s",
                  predicted.size(), reps, reps == 1 ? "" : "s", reps >= 2 ? (" (the baseline " + std::to_string(2 * reps - 1) + ")").c_str() : "",
                  spec.replay.time_scale,
                  slowest == 0 ? "the baseline" : sim::run_name(predicted[slowest].config).c_str(),
                  format_ns(makespans[slowest]).c_str());
    if (spec.max_replay_seconds > 0 && seconds > spec.max_replay_seconds)
        throw Error(path + ": the replays would take at least " + human_seconds(seconds) + " (" + why + "), more than the " +
                    human_seconds(spec.max_replay_seconds) + " allowed: a faster --link, a smaller --time-scale or fewer "
                    "--capacity values, or a larger --max-replay-minutes");
    if (seconds > kLongReplaySeconds && spec.warn)
        spec.warn("the replays will take at least " + human_seconds(seconds) + " (" + why + ")");
}

// This process's CPU time so far, every thread, in seconds.
double process_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The host arena: anonymous memory faulted in by the kernel at mmap (MAP_POPULATE: 1.6 s
// for 4 GiB on the 2-core VM, where new[] + memset took 3.0 s), not in a timed transfer.
struct Unmap {
    size_t bytes = 0;
    void operator()(unsigned char* p) const { ::munmap(p, bytes); }
};

// One validation, by stage: set up the predictions' link and the replay's options, predict every
// configuration on the recorded trace, then per configuration predict, plan, replay (with its
// repeats) and judge; last the load and the verdicts, and the runs stored.
class Validation {
public:
    Validation(const std::string& path, const ValidateSpec& spec, const std::function<void(const std::string&)>& note)
        : path_(path), spec_(spec), note_(note) {}

    Report run() {
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
        for (Row& x : rep_.rows) x.verdict = verdict(x, spec_.target_pp, rep_.load);
        set_stop_note("");   // from here a signal waits for the store (cmd_validate's StorePhase)
        if (spec_.before_store) spec_.before_store(rep_);
        if (spec_.store) store();
        return std::move(rep_);
    }

private:
    // Closes the phase that ran since the last one (the page pool and host arena, allocated
    // inside the replays' phases, are a phase of their own: rep_.pool_seconds).
    void end_phase(const char* name) {
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
    void begin() {
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

    // The window begins at the first kernel of the last steps at which no prediction on the
    // recorded trace has a transfer in flight or a kernel running (the replay begins it with
    // none); -1 (the whole trace) when there is no such kernel.
    void choose_window_start() {
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
        for (int32_t candidate : candidates) {
            const bool quiet = std::all_of(on_recorded_.begin(), on_recorded_.end(), [&](const sim::Result& run) {
                const WindowPrediction window = predict_window(t_, run, candidate, 0);
                return run.oom.happened ? (!window.reached || window.quiescent()) : window.quiescent();
            });
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

    // What each configuration is predicted to do on the recorded trace: the replays' duration is
    // estimated from it before any replay, and it is the prediction of every configuration
    // predicted on the recorded clock (the baseline; all of them with --recorded-timing).
    void predict_on_recorded() {
        for (size_t i = 0; i <= spec_.capacities.size(); ++i) {
            sim::Config c = base_;
            c.capacity = i == 0 ? sim::Capacity{} : spec_.capacities[i - 1];
            on_recorded_.push_back(sim::simulate(*prepared_, c));
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

    // A --time-limit that leaves the first limited configuration no replay validates nothing:
    // the baseline's first replay and that configuration's take at least their predicted
    // makespans x the time scale (the configurations run in order, and the first that does not
    // fit stops them all). Below that it is refused before any replay; it was said as "not run"
    // after the baseline's, with exit status 0.
    // The predictions alone decide (not the time spent so far), so that the same command is
    // refused or not whatever the machine's load; a limit they allow and the replays' real cost
    // exceeds is said after them (the command line's exit status 2).
    void check_time_limit(const std::vector<int64_t>& makespans) const {
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

    // Storing: each replayed run is begun ("incomplete") before its replay, so that an
    // interruption leaves exactly that behind; everything else is stored after every replay
    // (and after spec.before_store). A store that fails stops storing, never the validation.
    void store_failed(const std::exception& e) {
        if (rep_.store_error.empty()) rep_.store_error = e.what();
    }

    void say(const std::string& what) const {
        if (note_)
            note_("configuration " + std::to_string(config_no_) + "/" + std::to_string(1 + spec_.capacities.size()) + ": " +
                  what);
    }

    // One page pool for every configuration: allocated and populated once (the baseline's, the
    // largest), mapped and unmapped by each replay; the host arena likewise (host backend):
    // allocated and zeroed once, grown when needed. The replay's options point at both.
    Options shared_memory_for(const Plan& plan) {
        const int64_t cap_bytes = replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
        const size_t host_bytes = static_cast<size_t>(host_arena_bytes(*timed_, plan));
        reserve_shared_memory(cap_bytes, has_swaps(plan) ? cap_bytes : cap_bytes / 2, host_bytes,
                              static_cast<size_t>(host_arena_populated_bytes(*timed_, plan)));
        Options ro = replay_options_;
        ro.mapper = pool_.get();
        ro.host_memory = host_mem_.get();
        ro.host_memory_bytes = host_mem_bytes_;
        return ro;
    }

    // Before the first replay: the pool for the largest device capacity (the baseline's) and the
    // host arena for the largest host need of the plans predicted on the recorded trace, both at
    // once (page tables and zeroing are the kernel's work, one core each). Pages with memory of
    // their own only as many as the largest run that swaps needs: the baseline reads nothing
    // back, so its pages beyond those alias them (4.1 of gpt2-small's 13.1 GB at 70%). A
    // retimed plan that needs more grows the pool or the arena later.
    void reserve_shared_memory_up_front() {
        int64_t cap_bytes = 0, distinct_bytes = 0, host_bytes = 0, host_populate = 0;
        for (size_t i = 0; i < on_recorded_.size(); ++i) {
            const Plan plan = make_plan(t_, on_recorded_[i]);
            const int64_t cap = replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
            cap_bytes = std::max(cap_bytes, cap);
            if (has_swaps(plan)) distinct_bytes = std::max(distinct_bytes, cap);
            if (i > 0) {
                host_bytes = std::max(host_bytes, host_arena_bytes(t_, plan));
                host_populate = std::max(host_populate, host_arena_populated_bytes(t_, plan));
            }
        }
        // At most half the pages alias (none when nothing swaps): stand-ins writing the same
        // few cache lines of a small pool from several threads would time something else.
        distinct_bytes = distinct_bytes > 0 ? std::max(distinct_bytes, cap_bytes / 2) : cap_bytes;
        reserve_shared_memory(cap_bytes, distinct_bytes, static_cast<size_t>(host_bytes), static_cast<size_t>(host_populate));
    }

    // Makes the pool hold `cap_bytes` (`distinct_bytes` of them with memory of their own) and the
    // host arena `host_bytes` (host backend; its first `host_populate` bytes faulted in), allocating
    // what is missing; the two allocations run in parallel.
    void reserve_shared_memory(int64_t cap_bytes, int64_t distinct_bytes, size_t host_bytes, size_t host_populate) {
        if (!shared_pool_) return;
        const bool new_pool = !pool_ || pool_->pool_pages() < Arena::pool_pages(cap_bytes) ||
                              pool_->va_bytes() < Arena::default_va(cap_bytes) ||
                              pool_->distinct_pages() < Arena::pool_pages(distinct_bytes);
        // A grown pool keeps the old one's size and aliases at least.
        if (new_pool && pool_) {
            cap_bytes = std::max(cap_bytes, pool_->pool_pages() * PageMapper::kPage);
            distinct_bytes = std::max(distinct_bytes, pool_->distinct_pages() * PageMapper::kPage);
        }
        // Both backends: the CUDA engine pinned (and unpinned) an arena of GiBs in every replay,
        // outside the replay's clock: on the H200 the cost_aware slice's replays cost about 2 s
        // each beyond their makespans, the likely reason the lru slices ran past gpu-check's 60 s.
        const bool new_host = host_bytes > host_mem_bytes_;
        if (!new_pool && !new_host) return;
        check_host_memory(new_pool ? distinct_bytes : 0, new_host ? host_bytes : 0, new_host ? host_populate : 0);
        const auto t_pool = std::chrono::steady_clock::now();
        const double cpu_pool = process_cpu_seconds();
        std::exception_ptr host_error;
        std::thread host_thread;
        if (new_host) {
            host_mem_.reset();
            host_mem_bytes_ = 0;
        }
        if (new_host &&
            spec_.replay.backend == Backend::Cuda) {   // pinned, before the pool (one thread drives the GPU)
            host_mem_ = kernels::pinned_host_memory(host_bytes);
            host_mem_bytes_ = host_bytes;
        } else if (new_host) {
            host_thread = std::thread([&] {
                try {
                    host_mem_ = populated_host_memory(host_bytes, std::min(host_populate, host_bytes));
                    host_mem_bytes_ = host_bytes;
                } catch (...) {
                    host_error = std::current_exception();
                }
            });
        }
        std::exception_ptr pool_error;
        if (new_pool) {
            sample_resident();   // the old pool's aliases, before they go
            pool_.reset();
            try {
                pool_ = spec_.replay.backend == Backend::Cuda
                            ? make_cuda_mapper(Arena::pool_pages(cap_bytes), Arena::default_va(cap_bytes), true)
                            : make_host_mapper(Arena::pool_pages(cap_bytes), Arena::default_va(cap_bytes), true,
                                               std::max<int64_t>(Arena::pool_pages(distinct_bytes), 1));
            } catch (...) {
                pool_error = std::current_exception();
            }
        }
        if (host_thread.joinable()) host_thread.join();
        if (pool_error) std::rethrow_exception(pool_error);
        if (host_error) std::rethrow_exception(host_error);
        rep_.pool_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pool).count();
        rep_.pool_cpu_seconds += process_cpu_seconds() - cpu_pool;
    }

    // What the pool (its pages with memory of their own, host backend) and the host arena (the
    // host backend's populated part, the CUDA backend's pinned whole) are about to take from this
    // host, against what this process may still take (MemAvailable, or less under a memory
    // cgroup's limit: a container's, a systemd unit's; host_memory.hpp), less what this
    // validation gives back first: past it the kernel's OOM killer ends the process with SIGKILL
    // and no word (a 24.39 GiB snapshot on a 23 GiB machine was killed after 13 s), so it is
    // refused first.
    void check_host_memory(int64_t pool_distinct, size_t host_bytes, size_t host_populate) const {
        const HostMemory host = available_host_memory();
        const int64_t available = host.available;
        if (available < 0) return;   // no /proc/meminfo and no cgroup limit: nothing to check against
        const bool host_backend = spec_.replay.backend != Backend::Cuda;
        const int64_t pool = host_backend ? pool_distinct : 0;
        const int64_t arena = static_cast<int64_t>(host_backend ? host_populate : host_bytes);
        int64_t released = 0;   // the pool and arena replaced are freed before the new ones are made
        if (pool > 0 && pool_) released += pool_->distinct_pages() * PageMapper::kPage;
        if (arena > 0 && !host_backend) released += static_cast<int64_t>(host_mem_bytes_);
        if (pool + arena <= available + released) return;
        throw Error(
            path_ + ": the replay needs " + format_bytes(pool + arena) + " of this host's memory (" +
                (host_backend ? "the device pool " + format_bytes(pool) + ", the host arena " + format_bytes(arena)
                              : "the pinned host arena " + format_bytes(arena)) +
                "), more than the " + format_bytes(available + released) + " available" +
                (host.limited_by.empty() ? "" : " under " + host.limited_by) +
                ": replay on a machine with more memory, or a trace whose peak fits",
            Error::Kind::BadInput);
    }

    // `bytes` of anonymous memory, the first `populate` of them faulted in now (the rest, room
    // for the first-fit arena's fragmentation, only if a replay ever places a copy there).
    static std::shared_ptr<unsigned char> populated_host_memory(size_t bytes, size_t populate) {
        auto failed = [&](const char* what) {
            return Error(std::string("the replay's host arena: ") + what + " of " + format_bytes(static_cast<int64_t>(bytes)) + ": " +
                         std::strerror(errno));
        };
        void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) throw failed("mmap");
        std::shared_ptr<unsigned char> out{static_cast<unsigned char*>(mem), Unmap{bytes}};
        if (populate > 0 && ::mmap(mem, populate, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0) == MAP_FAILED)
            throw failed("populating");
        return out;
    }

    // Repeats: the run with the median makespan stands for the configuration (a failing or
    // mismatching one instead, so that no failure is averaged away). The baseline's noise is in
    // every loss, multiplied by 1 + loss (4-7 at the losses of transfer-bound slices), and its
    // replay is the cheapest: it gets 2N - 1 repeats.
    void replay_repeats(const Plan& plan, const Options& ro, const Row* baseline, Row& row) {
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
            runs.push_back(replay(t_, plan, ro));
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
        std::sort(runs.begin(), runs.end(), [](const Measured& a, const Measured& b) {
            const bool fa = a.failed(), fb = b.failed();
            return fa != fb ? fa : a.makespan_ns < b.makespan_ns;
        });
        const bool any_failed = runs.front().failed();
        row.measured = std::move(runs[any_failed ? 0 : (runs.size() - 1) / 2]);
    }

    // ValidateSpec::time_limit_s: whether another replay of `row` ends within the limit, by its
    // predicted makespan x the time scale plus the largest overhead a replay has had so far.
    bool fits(const Row& row) const {
        if (spec_.time_limit_s <= 0) return true;
        const double used = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        const double need = 1e-9 * static_cast<double>(std::max<int64_t>(row.predicted_makespan(), 0)) *
                                spec_.replay.time_scale +
                            overhead_s_;
        return used + need <= spec_.time_limit_s;
    }

    // ValidateSpec::progress_line: a replay has ended.
    void tell_replay(const Row& row, int replay_no, int replays, const Measured& measured) const {
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
    void tell_measured(const Row* baseline, const Row& row) const {
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
    bool agreed(const Row* baseline, const Row& row) const {
        if (!baseline) {
            double worst = 0;
            for (size_t i = 1; i < on_recorded_.size(); ++i)
                if (!on_recorded_[i].oom.happened) worst = std::max(worst, loss_on_recorded(i));
            std::vector<int64_t> sorted = row.makespans;
            std::sort(sorted.begin(), sorted.end());
            return repeats_agree(row.makespans, sorted[(sorted.size() - 1) / 2], 1 + worst, 0, kBaselineAgreeShare * spec_.target_pp,
                                 kBaselineMinReplays);
        }
        const int64_t bm = baseline->measured.makespan_ns;
        if (bm <= 0) return false;
        const double carried = 100.0 * (1 + std::max(row.predicted_loss(), 0.0)) *
                               static_cast<double>(makespan_spread(baseline->makespans)) / static_cast<double>(bm);
        return repeats_agree(row.makespans, bm, 1, carried, kConfigAgreeShare * spec_.target_pp, kConfigMinReplays);
    }

    // The loss predicted on the recorded trace for configuration i (0: the baseline), over the window.
    double loss_on_recorded(size_t config) const {
        const WindowPrediction& window = window_on_recorded_[config];
        return window.reached ? window.loss : on_recorded_[config].throughput_loss;
    }

    // The predicted kernel times to set beside the measured ones: over a window, its kernels,
    // moved back by the run's shift when the window began (the replay starts it with none).
    static std::vector<trace::RunKernelTime> predicted_in_window(const Row& row) {
        if (!row.windowed) return row.predicted.kernel_times;
        std::vector<trace::RunKernelTime> out;
        const int64_t shift = row.window.shift_ns;
        for (const trace::RunKernelTime& kernel : row.predicted.kernel_times)
            if (kernel.t_start >= row.window.start_ns) out.push_back({kernel.kernel, kernel.t_start - shift, kernel.t_end - shift});
        return out;
    }

    // The measured loss against the baseline's, its error, its spread and the first divergence;
    // returns the baseline's makespan it was measured against.
    int64_t compare(const Row* baseline, const Plan& plan, Row& row) const {
        const int64_t bm = baseline && baseline->measured.makespan_ns > 0 ? baseline->measured.makespan_ns : row.measured.makespan_ns;
        row.measured_loss = bm > 0 ? static_cast<double>(row.measured.makespan_ns) / static_cast<double>(bm) - 1.0 : 0;
        row.loss_error_pp = 100.0 * (row.measured_loss - row.predicted_loss());
        const int64_t predicted_peak = predicted_arena_peak(row.predicted);
        row.peak_error = predicted_peak > 0
                             ? static_cast<double>(row.measured.peak - predicted_peak) / static_cast<double>(predicted_peak)
                             : 0;
        // The spread of the loss: this configuration's replays, and the baseline's (the
        // denominator), each relative to the baseline's median.
        if (bm > 0 && row.makespans.size() > 1) {
            row.spread_pp = 100.0 * static_cast<double>(makespan_spread(row.makespans)) / static_cast<double>(bm);
            if (baseline && baseline->makespans.size() > 1)
                row.spread_pp += 100.0 * (1.0 + row.measured_loss) * static_cast<double>(makespan_spread(baseline->makespans)) /
                                 static_cast<double>(bm);
        }
        // Where the measured timeline first left the predicted one by more than the noise.
        if (baseline && bm > 0) {
            const double band_pp = row.spread_pp >= 0 ? row.spread_pp : spec_.target_pp;
            row.divergence = first_divergence(*timed_, predicted_in_window(row), row.measured.kernel_times,
                                              static_cast<int64_t>(band_pp / 100.0 * static_cast<double>(bm)));
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
        return bm;
    }

    // One configuration: predicted on `timed_` (the recorded trace, or after the baseline with
    // spec.retime the trace on the baseline replay's clock), replayed on the recorded trace.
    // false: a limited configuration whose first replay would not end within --time-limit (not
    // run, nothing stored).
    bool configuration(const sim::Capacity& cap, const Row* baseline, Row& row) {
        ++config_no_;
        sim::Config c = base_;
        c.capacity = cap;
        say("simulating");
        row.predicted = timed_ == &t_ ? on_recorded_[static_cast<size_t>(config_no_ - 1)] : sim::simulate(*prepared_, c);
        if (!row.predicted.invariant_violation.empty())
            throw Error(path_ + ": the simulator failed an invariant: " + row.predicted.invariant_violation, Error::Kind::Internal);
        row.name = sim::run_name(c);
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
        const Options ro = shared_memory_for(plan);
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
        replay_repeats(plan, ro, baseline, row);
        sample_resident();
        const int64_t bm = compare(baseline, plan, row);
        tell_measured(baseline, row);
        // Runs predicted on the retimed trace say so: their times are the baseline replay's.
        const char* timing = timed_ == &t_ ? "recorded" : "baseline replay";
        row.sim_record = sim::to_run(row.predicted);
        row.sim_record.config["timing"] = timing;
        row.replay_record = replay_run(row, c, spec_.replay, bm);
        if (row.windowed) row.replay_record.config["window_first_kernel"] = std::to_string(t_.kernels.id[static_cast<size_t>(window_kernel_)]);
        row.replay_record.config["timing"] = timing;
        row.replay_run = id;
        return true;
    }

    // A signal that stops the validation before its store leaves the replayed runs begun so far
    // marked incomplete: said in the signal's line (it stopped with nothing said, exit 143).
    void note_begun(int64_t id) {
        begun_.push_back(id);
        std::string ids;
        for (size_t i = 0; i < begun_.size(); ++i)
            ids += (i == 0 ? "" : i + 1 == begun_.size() ? " and " : ", ") + std::to_string(begun_[i]);
        set_stop_note((begun_.size() == 1 ? "run " : "runs ") + ids +
                      (begun_.size() == 1 ? " (a replay begun) is" : " (replays begun) are") + " left in " +
                      (spec_.runs_db.empty() ? path_ : spec_.runs_db) + " marked incomplete");
    }

    void store() {
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
        for (Row& x : rep_.rows) store_row(x);
        rep_.stored = rep_.store_error.empty();
    }

    // The process's memory now, its pool's pages mapped twice counted once (detail::ResidentPeak).
    void sample_resident() { resident_.sample(pool_ ? pool_->aliased_host_bytes() : 0); }

    const std::string& path_;
    const ValidateSpec& spec_;
    const std::function<void(const std::string&)>& note_;
    Report rep_;
    detail::CpuSample cpu_before_;
    trace::TraceData t_;
    std::shared_ptr<const sim::Prepared> prepared_;
    sim::Config base_;
    Options replay_options_;
    std::vector<sim::Result> on_recorded_;
    std::vector<WindowPrediction> window_on_recorded_;   // of each on_recorded_ (not reached: no window)
    const trace::TraceData* timed_ = &t_;
    trace::TraceData retimed_;
    std::unique_ptr<PageMapper> pool_;
    std::shared_ptr<unsigned char> host_mem_;   // host: anonymous memory; CUDA: pinned (kernels::pinned_host_memory)
    size_t host_mem_bytes_ = 0;
    bool shared_pool_ = true;
    detail::ResidentPeak resident_;
    int config_no_ = 0;
    std::chrono::steady_clock::time_point started_;   // --time-limit counts from here
    double overhead_s_ = 0;                           // a replay's largest cost beyond its makespan x scale
    std::vector<int64_t> begun_;                      // replayed runs begun (stored "incomplete") so far
    int32_t window_kernel_ = -1;   // dense index of the window's first kernel; -1: the whole trace
    std::chrono::steady_clock::time_point phase_start_;
    double phase_cpu_start_ = 0;
    double pool_counted_ = 0, pool_cpu_counted_ = 0;   // of rep_.pool_(cpu_)seconds, what end_phase has reported
};

}  // namespace

Report validate(const std::string& path, const ValidateSpec& spec, const std::function<void(const std::string&)>& note) {
    return Validation(path, spec, note).run();
}

}  // namespace mhc::replay
