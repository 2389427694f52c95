// The validation report as one JSON object (mhc validate --json).
#include <cmath>

#include <nlohmann/json.hpp>

#include "mhc/replay/validate.hpp"

namespace mhc::replay {

namespace {

using nlohmann::json;

json num(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

// A run out of memory has no peak reduction or throughput loss (null, as mhc simulate --json
// prints them and the text's `oom`).
json unless_oom(bool oom, double value) { return oom ? json(nullptr) : num(value); }

// What the simulator predicted for a configuration's run.
json predicted_json(const Row& row) {
    const auto& predicted = row.predicted;
    return {{"peak_bytes", predicted_arena_peak(predicted)},
            {"peak_reduction", unless_oom(predicted.oom.happened, predicted.peak_reduction)},
            {"makespan_ns", row.predicted_makespan()},
            {"loss", unless_oom(predicted.oom.happened, row.predicted_loss())},
            {"swap_in_bytes", predicted.swap_in_bytes},
            {"swap_out_bytes", predicted.swap_out_bytes},
            {"stalls", predicted.stall_count},
            {"stall_ns", predicted.stall_time},
            {"oom", predicted.oom.happened}};
}

// What the replay measured of it.
json measured_json(const Row& row) {
    const auto& measured = row.measured;
    return {{"peak_bytes", measured.peak},
            {"makespan_ns", measured.makespan_ns},
            {"loss", unless_oom(measured.oom, row.measured_loss)},
            {"swap_in_bytes", measured.swap_in_bytes},
            {"swap_out_bytes", measured.swap_out_bytes},
            {"swap_ins", measured.swap_ins},
            {"swap_outs", measured.swap_outs},
            {"stalls", measured.stalls},
            {"stall_ns", measured.stall_ns},
            {"checksums", measured.checksums},
            {"checksum_mismatches", measured.mismatches},
            {"kernel_overruns", measured.overruns},
            {"sinkhorn_kernels", measured.sinkhorn_kernels},
            {"late_transfers", measured.late_transfers},
            {"late_ns", measured.late_ns},
            {"link_h2d_Bps", num(measured.link_h2d_Bps)},
            {"link_d2h_Bps", num(measured.link_d2h_Bps)},
            {"replay_seconds", num(measured.seconds)},
            {"page_map_seconds", num(measured.map_seconds)},
            {"page_map_with_copies_seconds", num(1e-9 * static_cast<double>(measured.paused_with_copies_ns))},
            {"host_arena_bytes", measured.host_arena_bytes},
            {"host_arena_high_water_bytes", measured.host_arena_high_water},
            {"oom", measured.oom}};
}

// One configuration (or the baseline): predicted against measured, and how far apart.
json row_json(const Row& row) {
    const auto& predicted = row.predicted;
    const auto& measured = row.measured;
    json out;
    out["name"] = row.name;
    out["capacity_bytes"] = measured.capacity;
    out["status"] = std::string(to_string(measured.status));
    if (!measured.failure.empty()) out["failure"] = measured.failure;
    out["verdict"] = row.verdict;
    out["predicted"] = predicted_json(row);
    out["measured"] = measured_json(row);
    out["loss_error_pp"] = (predicted.oom.happened || measured.oom) ? json(nullptr) : num(row.loss_error_pp);
    out["peak_error"] = num(row.peak_error);
    out["repeats"] = {{"makespans_ns", row.makespans},
                      {"cut_by_time_limit", row.repeats_cut},
                      {"replay_seconds", row.replay_seconds},
                      {"page_map_seconds", row.map_seconds},
                      {"spread_pp", row.spread_pp < 0 ? json(nullptr) : num(row.spread_pp)}};
    const Divergence& divergence = row.divergence;
    out["first_divergence"] = divergence.found ? json{{"kernel", divergence.kernel},
                                                      {"name", divergence.name},
                                                      {"predicted_start_ns", divergence.predicted_ns},
                                                      {"measured_start_ns", divergence.measured_ns},
                                                      {"threshold_ns", divergence.threshold_ns}}
                                               : json(nullptr);
    if (row.windowed)
        out["window"] = {{"predicted_start_ns", row.window.start_ns},
                         {"shift_ns", row.window.shift_ns},
                         {"predicted_baseline_ns", row.window.baseline_ns},
                         {"whole_run_makespan_ns", predicted.simulated_makespan},
                         {"whole_run_loss", unless_oom(predicted.oom.happened, predicted.throughput_loss)},
                         {"transfers_in_flight", row.window.transfers_in_flight},
                         {"kernels_running", row.window.kernels_running}};
    if (row.sim_run) out["sim_run"] = row.sim_run;
    if (row.replay_run) out["replay_run"] = row.replay_run;
    return out;
}

// The link the predictions used, and where it came from.
json link_json(const Report& report) {
    return {{"name", report.link.name},
            {"h2d_Bps", num(report.link.h2d.bandwidth_Bps)},
            {"d2h_Bps", num(report.link.d2h.bandwidth_Bps)},
            {"h2d_latency_s", num(report.link.h2d.latency_s)},
            {"d2h_latency_s", num(report.link.d2h.latency_s)},
            {"duplex_factor", num(report.link.duplex_factor)},
            {"copy_engines", report.link.copy_engines},
            {"obtained", report.link_origin},
            {"source", report.link.source},
            {"notes", report.link.notes}};
}

}   // namespace

std::string to_json(const Report& report) {
    json out;
    out["trace"] = report.trace;
    out["link"] = link_json(report);
    out["time_scale"] = num(report.time_scale);
    out["time_scale_origin"] = report.time_scale_origin;
    out["target_pp"] = num(report.target_pp);
    out["repeat"] = report.repeat;
    out["repeat_adaptive"] = report.adaptive_repeat;
    out["retimed"] = report.retimed;
    out["window"] = {{"kernel", report.window_kernel >= 0 ? json(report.window_kernel) : json(nullptr)},
                     {"origin", report.window_origin}};
    out["paced"] = report.paced;
    out["process_peak_rss_bytes"] = report.process_peak_rss >= 0 ? json(report.process_peak_rss) : json(nullptr);
    out["pool_seconds"] = num(report.pool_seconds);
    out["pool_cpu_seconds"] = num(report.pool_cpu_seconds);
    out["estimated_replay_seconds"] = num(report.estimated_seconds);
    out["phases"] = json::array();
    for (const Report::Phase& phase : report.phases)
        out["phases"].push_back(
            {{"phase", phase.name}, {"seconds", num(phase.seconds)}, {"cpu_seconds", num(phase.cpu_seconds)}});
    out["load"] = {{"before", num(report.load.before)},
                   {"after", num(report.load.after)},
                   {"cores", report.load.cores},
                   {"others_share", report.load.others_share < 0 ? json(nullptr) : num(report.load.others_share)},
                   {"loaded", report.load.loaded()}};
    out["baseline"] = row_json(report.baseline);
    out["configurations"] = json::array();
    for (const Row& row : report.rows) out["configurations"].push_back(row_json(row));
    out["time_limit_s"] = report.time_limit_s > 0 ? num(report.time_limit_s) : json(nullptr);
    out["not_run"] = report.not_run;   // configurations the time limit left out
    out["ok"] = report.ok();
    return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}   // namespace mhc::replay
