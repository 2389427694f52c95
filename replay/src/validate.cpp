#include "mhc/replay/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/runs.hpp"

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
                const double x0 = std::log(static_cast<double>(rows[i - 1].bytes));
                const double x1 = std::log(static_cast<double>(rows[i].bytes));
                const double w = (std::log(static_cast<double>(chunk)) - x0) / (x1 - x0);
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

bool Report::ok() const {
    auto good = [](const Row& r) { return r.measured.status != "failed" && r.measured.mismatches == 0; };
    if (!good(baseline)) return false;
    for (const Row& r : rows)
        if (!good(r)) return false;
    return true;
}

namespace {

trace::Run replay_run(const Row& row, const sim::Config& c, const Options& o, int64_t base_makespan) {
    const Measured& m = row.measured;
    const sim::Result& p = row.predicted;
    trace::Run run;
    run.kind = "replayed";
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
    x["predicted_peak_bytes"] = static_cast<double>(p.simulated_peak);
    x["arena_high_water_bytes"] = static_cast<double>(m.high_water);
    x["page_map_seconds"] = m.map_seconds;
    x["peak_error"] = row.peak_error;
    x["measured_makespan_ns"] = static_cast<double>(m.makespan_ns);
    x["measured_baseline_makespan_ns"] = static_cast<double>(base_makespan);
    x["predicted_makespan_ns"] = static_cast<double>(p.simulated_makespan);
    x["measured_throughput_loss"] = row.measured_loss;
    x["predicted_throughput_loss"] = p.throughput_loss;
    x["loss_error_pp"] = row.loss_error_pp;
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
    x["link_h2d_Bps"] = m.link_h2d_Bps;
    x["link_d2h_Bps"] = m.link_d2h_Bps;
    x["replay_seconds"] = m.seconds;
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

}  // namespace

Report validate(const std::string& path, const ValidateSpec& spec,
                const std::function<void(const std::string&)>& note) {
    Report rep;
    rep.trace = path;
    trace::TraceData t = trace::load_trace(path);
    auto prepared = sim::prepare(t, spec.base.device);
    sim::Config base = spec.base;
    // Replay copies in chunks of spec.replay.chunk_bytes: a calibrated profile's rate for that
    // chunk size is the rate to predict with, not its best one.
    base.link = scaled_link(link_at_chunk(spec.base.link, static_cast<int64_t>(spec.replay.chunk_bytes)),
                            spec.replay.time_scale);
    // Replay runs NCCL and memcpy kernels as stand-ins, which do not load the link: the
    // prediction of a replay must not take bandwidth away for them (a prediction of the real
    // training run does, with the profile's shares).
    base.link.nccl_share = 0;
    base.link.memcpy_share = 0;
    base.record_events = true;
    rep.link = base.link;

    // The limited runs are predicted and replayed on `timed`: the recorded trace, or (after the
    // baseline, with spec.retime) the trace on the baseline replay's clock.
    const trace::TraceData* timed = &t;
    trace::TraceData retimed;
    auto one = [&](const sim::Capacity& cap, int64_t base_makespan, Row& row) {
        sim::Config c = base;
        c.capacity = cap;
        row.predicted = sim::simulate(*prepared, c);
        if (!row.predicted.invariant_violation.empty())
            throw Error(path + ": the simulator failed an invariant: " + row.predicted.invariant_violation, Error::Kind::Internal);
        row.name = sim::run_name(c);
        if (note) note("replaying " + row.name);
        Plan plan = make_plan(*timed, row.predicted);
        int64_t id = spec.store ? trace::begin_run(path, "replayed", row.name + "/" + to_string(spec.replay.backend)) : 0;
        // Repeats: the run with the median makespan stands for the configuration (a failing
        // or mismatching one instead, so that no failure is averaged away).
        std::vector<Measured> runs;
        for (int i = 0; i < std::max(spec.repeat, 1); ++i) {
            runs.push_back(replay(*timed, plan, spec.replay));
            const Measured& m = runs.back();
            if (m.status == "failed" || m.mismatches) break;
        }
        for (const Measured& m : runs) row.makespans.push_back(m.makespan_ns);
        std::sort(runs.begin(), runs.end(), [](const Measured& a, const Measured& b) {
            const bool fa = a.status == "failed" || a.mismatches, fb = b.status == "failed" || b.mismatches;
            return fa != fb ? fa : a.makespan_ns < b.makespan_ns;
        });
        const bool any_failed = runs.front().status == "failed" || runs.front().mismatches;
        row.measured = std::move(runs[any_failed ? 0 : (runs.size() - 1) / 2]);
        int64_t bm = base_makespan > 0 ? base_makespan : row.measured.makespan_ns;
        row.measured_loss = bm > 0 ? static_cast<double>(row.measured.makespan_ns) / static_cast<double>(bm) - 1.0 : 0;
        row.loss_error_pp = 100.0 * (row.measured_loss - row.predicted.throughput_loss);
        row.peak_error = row.predicted.simulated_peak > 0
                             ? static_cast<double>(row.measured.peak - row.predicted.simulated_peak) / static_cast<double>(row.predicted.simulated_peak)
                             : 0;
        if (row.measured.diverged_allocations > 0 && row.measured.failure.empty())
            row.measured.failure = std::to_string(row.measured.diverged_allocations) +
                                   " allocations fitted where the simulator's had failed (the allocator models diverged)";
        if (plan.oom && row.measured.oom && row.measured.oom_allocation != plan.oom_allocation)
            row.measured.failure = "OOM at another allocation than the simulator's";
        if (spec.store) {
            // Runs predicted on the retimed trace say so: their times are the baseline replay's.
            const char* timing = timed == &t ? "recorded" : "baseline replay";
            trace::Run sim_run = sim::to_run(row.predicted);
            sim_run.config["timing"] = timing;
            row.sim_run = trace::add_run(path, sim_run);
            trace::Run run = replay_run(row, c, spec.replay, bm);
            run.config["timing"] = timing;
            run.base_run = row.sim_run;
            trace::finish_run(path, id, run);
            row.replay_run = id;
        }
    };
    one(sim::Capacity{}, 0, rep.baseline);
    if (spec.retime && rep.baseline.measured.status == "complete" && !spec.capacities.empty()) {
        retimed = retime(t, rep.baseline.measured, &rep.retime);
        timed = &retimed;
        prepared = sim::prepare(retimed, spec.base.device);
        rep.retimed = true;
    }
    for (const sim::Capacity& cap : spec.capacities) {
        rep.rows.emplace_back();
        one(cap, rep.baseline.measured.makespan_ns, rep.rows.back());
    }
    return rep;
}

namespace {
// The rates the replay's transfers achieved (bytes per second of real time, while busy).
std::string link_seen(const Measured& m) {
    if (m.link_h2d_Bps <= 0 && m.link_d2h_Bps <= 0) return "";
    return "; transfers ran at H2D " + format_rate(m.link_h2d_Bps) + ", D2H " + format_rate(m.link_d2h_Bps) + " (real time)";
}
}  // namespace

// With repeats: how far the replays of one configuration were apart.
static std::string spread(const Row& x) {
    if (x.makespans.size() < 2) return "";
    auto [lo, hi] = std::minmax_element(x.makespans.begin(), x.makespans.end());
    return "; " + std::to_string(x.makespans.size()) + " replays, makespan " + format_ns(*lo) + " .. " +
           format_ns(*hi) + " (median shown)";
}

std::string to_text(const Report& r) {
    std::string out;
    char buf[1024];
    std::snprintf(buf, sizeof buf, "link (as the scaled replay sees it): %s, H2D %s, D2H %s\n", r.link.name.c_str(),
                  format_rate(r.link.h2d.bandwidth_Bps).c_str(), format_rate(r.link.d2h.bandwidth_Bps).c_str());
    out += buf;
    // The configuration column fits the longest name (a calibrated link's name can be long).
    int width = 34;
    width = std::max(width, static_cast<int>(r.baseline.name.size()));
    for (const auto& x : r.rows) width = std::max(width, static_cast<int>(x.name.size()));
    std::snprintf(buf, sizeof buf, "%-*s %10s %10s %7s | %8s %8s %7s | %10s %10s | %10s %10s | %6s %s\n", width, "configuration",
                  "peak pred", "peak meas", "err", "loss pred", "meas", "err pp", "in pred", "in meas", "out pred",
                  "out meas", "checks", "status");
    out += buf;
    auto line = [&](const Row& x) {
        const auto& p = x.predicted;
        const auto& m = x.measured;
        // A run that ran out of memory has no throughput to lose.
        char lp[16], lm[16], le[16];
        std::snprintf(lp, sizeof lp, p.oom.happened ? "oom" : "%.2f%%", 100 * p.throughput_loss);
        std::snprintf(lm, sizeof lm, m.oom ? "oom" : "%.2f%%", 100 * x.measured_loss);
        std::snprintf(le, sizeof le, p.oom.happened || m.oom ? "-" : "%+.2f", x.loss_error_pp);
        std::snprintf(buf, sizeof buf,
                      "%-*s %10s %10s %6.2f%% | %8s %8s %7s | %10s %10s | %10s %10s | %6lld %s%s%s\n",
                      width, x.name.c_str(), format_bytes(p.simulated_peak).c_str(), format_bytes(m.peak).c_str(),
                      100 * x.peak_error, lp, lm, le,
                      format_bytes(p.swap_in_bytes).c_str(), format_bytes(m.swap_in_bytes).c_str(),
                      format_bytes(p.swap_out_bytes).c_str(), format_bytes(m.swap_out_bytes).c_str(),
                      static_cast<long long>(m.checksums), m.status.c_str(),
                      m.mismatches ? " CHECKSUM MISMATCH" : "", m.failure.empty() ? "" : (": " + m.failure).c_str());
        out += buf;
        if (p.oom.happened || m.oom) {
            std::snprintf(buf, sizeof buf, "    OOM predicted: %s | measured: %s%s\n",
                          p.oom.happened ? p.oom.where.c_str() : "none", m.oom ? m.oom_where.c_str() : "none",
                          m.oom_fragmentation ? " (fragmentation)" : "");
            out += buf;
        }
        std::snprintf(buf, sizeof buf,
                      "    peak reduction pred %.1f%%; makespan pred %s meas %s; stalls pred %lld (%s) meas %lld (%s); "
                      "overruns %lld (%s); sinkhorn %lld; arena high water %s; page mapping %.2f s (clock paused)%s%s\n",
                      100 * p.peak_reduction, format_ns(p.simulated_makespan).c_str(), format_ns(m.makespan_ns).c_str(),
                      static_cast<long long>(p.stall_count), format_ns(p.stall_time).c_str(),
                      static_cast<long long>(m.stalls), format_ns(m.stall_ns).c_str(), static_cast<long long>(m.overruns),
                      format_ns(m.overrun_ns).c_str(), static_cast<long long>(m.sinkhorn_kernels),
                      format_bytes(m.high_water).c_str(), m.map_seconds, link_seen(m).c_str(), spread(x).c_str());
        out += buf;
    };
    line(r.baseline);
    if (r.retimed) {
        std::snprintf(buf, sizeof buf,
                      "  limited runs predicted on the baseline replay's clock: span %s recorded -> %s measured "
                      "(%lld kernels retimed; --recorded-timing predicts on the recorded one)\n",
                      format_ns(r.retime.span_before_ns).c_str(), format_ns(r.retime.span_after_ns).c_str(),
                      static_cast<long long>(r.retime.kernels_moved));
        out += buf;
    }
    for (const Row& x : r.rows) line(x);
    return out;
}

}  // namespace mhc::replay
