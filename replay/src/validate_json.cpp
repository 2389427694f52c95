// The validation report as one JSON object (mhc validate --json).
#include <cmath>

#include <nlohmann/json.hpp>

#include "mhc/replay/validate.hpp"

namespace mhc::replay {

namespace {

using nlohmann::json;

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A run out of memory has no peak reduction or throughput loss (null, as mhc simulate --json
// prints them and the text's `oom`).
json unless_oom(bool oom, double value) { return oom ? json(nullptr) : num(value); }

// What the simulator predicted for a configuration's run.
json predicted_json(const Row& x) {
    const auto& p = x.predicted;
    return {{"peak_bytes", predicted_arena_peak(p)},
            {"peak_reduction", unless_oom(p.oom.happened, p.peak_reduction)},
            {"makespan_ns", x.predicted_makespan()},
            {"loss", unless_oom(p.oom.happened, x.predicted_loss())},
            {"swap_in_bytes", p.swap_in_bytes},
            {"swap_out_bytes", p.swap_out_bytes},
            {"stalls", p.stall_count},
            {"stall_ns", p.stall_time},
            {"oom", p.oom.happened}};
}

// What the replay measured of it.
json measured_json(const Row& x) {
    const auto& m = x.measured;
    return {{"peak_bytes", m.peak},
            {"makespan_ns", m.makespan_ns},
            {"loss", unless_oom(m.oom, x.measured_loss)},
            {"swap_in_bytes", m.swap_in_bytes},
            {"swap_out_bytes", m.swap_out_bytes},
            {"swap_ins", m.swap_ins},
            {"swap_outs", m.swap_outs},
            {"stalls", m.stalls},
            {"stall_ns", m.stall_ns},
            {"checksums", m.checksums},
            {"checksum_mismatches", m.mismatches},
            {"kernel_overruns", m.overruns},
            {"sinkhorn_kernels", m.sinkhorn_kernels},
            {"late_transfers", m.late_transfers},
            {"late_ns", m.late_ns},
            {"link_h2d_Bps", num(m.link_h2d_Bps)},
            {"link_d2h_Bps", num(m.link_d2h_Bps)},
            {"replay_seconds", num(m.seconds)},
            {"page_map_seconds", num(m.map_seconds)},
            {"page_map_with_copies_seconds", num(1e-9 * static_cast<double>(m.paused_with_copies_ns))},
            {"host_arena_bytes", m.host_arena_bytes},
            {"host_arena_high_water_bytes", m.host_arena_high_water},
            {"oom", m.oom}};
}

// One configuration (or the baseline): predicted against measured, and how far apart.
json row_json(const Row& x) {
    const auto& p = x.predicted;
    const auto& m = x.measured;
    json j;
    j["name"] = x.name;
    j["capacity_bytes"] = m.capacity;
    j["status"] = std::string(to_string(m.status));
    if (!m.failure.empty()) j["failure"] = m.failure;
    j["verdict"] = x.verdict;
    j["predicted"] = predicted_json(x);
    j["measured"] = measured_json(x);
    j["loss_error_pp"] = (p.oom.happened || m.oom) ? json(nullptr) : num(x.loss_error_pp);
    j["peak_error"] = num(x.peak_error);
    j["repeats"] = {{"makespans_ns", x.makespans},
                    {"cut_by_time_limit", x.repeats_cut},
                    {"replay_seconds", x.replay_seconds},
                    {"page_map_seconds", x.map_seconds},
                    {"spread_pp", x.spread_pp < 0 ? json(nullptr) : num(x.spread_pp)}};
    const Divergence& d = x.divergence;
    j["first_divergence"] = d.found ? json{{"kernel", d.kernel}, {"name", d.name}, {"predicted_start_ns", d.predicted_ns},
                                           {"measured_start_ns", d.measured_ns}, {"threshold_ns", d.threshold_ns}}
                                    : json(nullptr);
    if (x.windowed)
        j["window"] = {{"predicted_start_ns", x.window.start_ns}, {"shift_ns", x.window.shift_ns},
                       {"predicted_baseline_ns", x.window.baseline_ns}, {"whole_run_makespan_ns", p.simulated_makespan},
                       {"whole_run_loss", unless_oom(p.oom.happened, p.throughput_loss)}, {"transfers_in_flight", x.window.transfers_in_flight},
                       {"kernels_running", x.window.kernels_running}};
    if (x.sim_run) j["sim_run"] = x.sim_run;
    if (x.replay_run) j["replay_run"] = x.replay_run;
    return j;
}

// The link the predictions used, and where it came from.
json link_json(const Report& r) {
    return {{"name", r.link.name},
            {"h2d_Bps", num(r.link.h2d.bandwidth_Bps)},
            {"d2h_Bps", num(r.link.d2h.bandwidth_Bps)},
            {"h2d_latency_s", num(r.link.h2d.latency_s)},
            {"d2h_latency_s", num(r.link.d2h.latency_s)},
            {"duplex_factor", num(r.link.duplex_factor)},
            {"copy_engines", r.link.copy_engines},
            {"obtained", r.link_origin},
            {"source", r.link.source},
            {"notes", r.link.notes}};
}

}  // namespace

std::string to_json(const Report& r) {
    json j;
    j["trace"] = r.trace;
    j["link"] = link_json(r);
    j["time_scale"] = num(r.time_scale);
    j["time_scale_origin"] = r.time_scale_origin;
    j["target_pp"] = num(r.target_pp);
    j["repeat"] = r.repeat;
    j["repeat_adaptive"] = r.adaptive_repeat;
    j["retimed"] = r.retimed;
    j["window"] = {{"kernel", r.window_kernel >= 0 ? json(r.window_kernel) : json(nullptr)}, {"origin", r.window_origin}};
    j["paced"] = r.paced;
    j["process_peak_rss_bytes"] = r.process_peak_rss >= 0 ? json(r.process_peak_rss) : json(nullptr);
    j["pool_seconds"] = num(r.pool_seconds);
    j["pool_cpu_seconds"] = num(r.pool_cpu_seconds);
    j["estimated_replay_seconds"] = num(r.estimated_seconds);
    j["phases"] = json::array();
    for (const Report::Phase& phase : r.phases)
        j["phases"].push_back({{"phase", phase.name}, {"seconds", num(phase.seconds)}, {"cpu_seconds", num(phase.cpu_seconds)}});
    j["load"] = {{"before", num(r.load.before)}, {"after", num(r.load.after)}, {"cores", r.load.cores},
                 {"others_share", r.load.others_share < 0 ? json(nullptr) : num(r.load.others_share)},
                 {"loaded", r.load.loaded()}};
    j["baseline"] = row_json(r.baseline);
    j["configurations"] = json::array();
    for (const Row& x : r.rows) j["configurations"].push_back(row_json(x));
    j["time_limit_s"] = r.time_limit_s > 0 ? num(r.time_limit_s) : json(nullptr);
    j["not_run"] = r.not_run;   // configurations the time limit left out
    j["ok"] = r.ok();
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mhc::replay
