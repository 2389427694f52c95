// Before any replay: each prediction over the replayed window, and the replays' duration
// estimated from the predictions (refused past --max-replay-time, said when long).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "validation.hpp"

namespace mhc::replay {

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

namespace detail {

namespace {

// "3.2 h", "14 min", "42 s", "0.11 s", "6e-08 s" (below 10 s, two digits: --max-replay-time
// 1e-9 was refused as "at least 0 s ... more than the 0 s allowed").
std::string human_seconds(double seconds) {
    char text[64];
    if (seconds >= 3600) std::snprintf(text, sizeof text, "%.1f h", seconds / 3600);
    else if (seconds >= 60) std::snprintf(text, sizeof text, "%.0f min", seconds / 60);
    else if (seconds >= 10) std::snprintf(text, sizeof text, "%.0f s", seconds);
    else std::snprintf(text, sizeof text, "%.2g s", seconds);
    return text;
}

}  // namespace

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
        throw Error(path + ": the replays would take at least " + human_seconds(seconds) + " (" + why +
                    "), more than the " + human_seconds(spec.max_replay_seconds) +
                    " allowed: a faster --link, a smaller --time-scale or fewer "
                    "--capacity values, or a larger --max-replay-time");
    if (seconds > kLongReplaySeconds && spec.warn)
        spec.warn("the replays will take at least " + human_seconds(seconds) + " (" + why + ")");
}

// This process's CPU time so far, every thread, in seconds.
double process_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

}  // namespace detail

}  // namespace mhc::replay
