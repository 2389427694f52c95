// The link that validate's predictions use: a calibrated profile's rates at the replay's chunk
// size, scaled with the replay's time scale, and the links a replay could not honour refused.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/replay/calibrate.hpp"
#include "validation.hpp"

namespace mhc::replay {

sim::LinkModel scaled_link(const sim::LinkModel& link, double scale) {
    sim::LinkModel scaled = link;
    for (sim::Direction* direction : {&scaled.h2d, &scaled.d2h}) {
        direction->bandwidth_Bps *= scale;
        direction->latency_s /= scale;
    }
    if (scale != 1.0) {
        char suffix[64];
        std::snprintf(suffix, sizeof suffix, " x%g", scale);
        scaled.name += suffix;
    }
    return scaled;
}

sim::LinkModel link_at_chunk(const sim::LinkModel& link, int64_t chunk) {
    const auto& rows = link.by_chunk;
    if (rows.empty() || chunk <= 0) return link;
    sim::LinkModel at_chunk = link;
    // Interpolate in log(chunk size) between the measured rows around `chunk`; beyond the
    // ends, the end row.
    auto at = [&](double sim::LinkModel::Chunk::*rate) {
        if (chunk <= rows.front().bytes) return rows.front().*rate;
        for (size_t i = 1; i < rows.size(); ++i)
            if (chunk <= rows[i].bytes) {
                if (chunk == rows[i].bytes) return rows[i].*rate;
                const double log_below = std::log(static_cast<double>(rows[i - 1].bytes));
                const double log_above = std::log(static_cast<double>(rows[i].bytes));
                const double weight = (std::log(static_cast<double>(chunk)) - log_below) / (log_above - log_below);
                // A rate of 0 is "not measured": no rate between it and a measured one (it gave a
                // fraction of the measured rate, down to below 1 kB/s); the profile's own then.
                if (rows[i - 1].*rate == 0 || rows[i].*rate == 0) return 0.0;
                return rows[i - 1].*rate + weight * (rows[i].*rate - rows[i - 1].*rate);
            }
        return rows.back().*rate;
    };
    const double h2d = at(&sim::LinkModel::Chunk::h2d_Bps), d2h = at(&sim::LinkModel::Chunk::d2h_Bps);
    if (h2d > 0) at_chunk.h2d.bandwidth_Bps = h2d;
    if (d2h > 0) at_chunk.d2h.bandwidth_Bps = d2h;
    at_chunk.name += " @" + format_bytes(chunk) + " chunks";
    return at_chunk;
}

namespace detail {

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
// A backend that does not emulate the link runs its copies with their own latency: a link that
// claims much more would be predicted and never measured.
void refuse_unhonoured_latency(const ValidateSpec& spec) {
    const sim::LinkModel& link = spec.base.link;
    const double latency = std::max(link.h2d.latency_s, link.d2h.latency_s);
    if (spec.link_measured_here || latency <= kMaxNativeLatencyS) return;
    const bool cuda = spec.replay.backend == Backend::Cuda;
    throw Error("link " + link.name + ": a per-transfer latency of " + format_ns(static_cast<int64_t>(latency * 1e9)) +
                " would be predicted but not measured: the " +
                (cuda ? std::string("cuda backend's copies have the GPU link's own latency")
                      : std::string("unpaced host replay's copies have the host's own latency (the paced replay, "
                                    "without --unpaced, emulates it)")) +
                "; at most " + format_ns(static_cast<int64_t>(kMaxNativeLatencyS * 1e9)) + " is taken as the link's own");
}

}  // namespace detail

void measure_replay_link_for(ValidateSpec& spec, bool recalibrate, double max_age_s) {
    CalibrationSpec calibration_spec;
    calibration_spec.backend = spec.replay.backend;
    calibration_spec.chunk_bytes = spec.replay.chunk_bytes;
    calibration_spec.copy_threads = spec.replay.copy_threads;
    calibration_spec.paced = spec.pace;
    const auto wall_start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();   // this process's CPU time, every thread
    const LinkCalibration calibration = replay_link(calibration_spec, recalibrate, max_age_s);
    spec.calibration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    spec.calibration_cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    spec.base.link = calibration.link;
    spec.link_origin = "--link auto: " + calibration.origin;
}

void set_auto_time_scale(ValidateSpec& spec, const sim::LinkModel& modelled) {
    std::string why;
    double scale = auto_time_scale(modelled,
                                   link_at_chunk(spec.base.link, static_cast<int64_t>(spec.replay.chunk_bytes)), &why);
    if (spec.pace && spec.replay.backend == Backend::Host) scale = floor_paced_time_scale(scale, spec.base.link, &why);
    spec.replay.time_scale = scale;
    spec.time_scale_origin = why;
}

}  // namespace mhc::replay
