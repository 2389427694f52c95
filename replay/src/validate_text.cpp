// The validation report as text (mhc validate): a table of predicted and measured figures per
// configuration, then the machine's load and the verdicts.
#include <algorithm>
#include <cstdio>

#include "mhc/common/units.hpp"
#include "mhc/replay/validate.hpp"

namespace mhc::replay {

namespace {
// The rates the replay's transfers achieved (bytes per second of real time, while busy).
std::string link_seen(const Measured& m) {
    if (m.link_h2d_Bps <= 0 && m.link_d2h_Bps <= 0) return "";
    std::string s = "; transfers ran at H2D " + format_rate(m.link_h2d_Bps) + ", D2H " + format_rate(m.link_d2h_Bps) + " (real time)";
    if (m.late_transfers > 0) s += ", " + std::to_string(m.late_transfers) + " late by " + format_ns(m.late_ns);
    return s;
}

// CUDA: how much of the stood-still clock had copies in flight (they ran on meanwhile), or nothing.
std::string copies_meanwhile(const Measured& measured) {
    if (measured.paused_with_copies_ns <= 0) return "";
    char text[128];
    std::snprintf(text, sizeof text, "; %.2f s of it with copies in flight, which ran on",
                  1e-9 * static_cast<double>(measured.paused_with_copies_ns));
    return text;
}

// With repeats: how far the replays of one configuration were apart.
std::string spread(const Row& x) {
    if (x.makespans.size() < 2) return "";
    auto [lo, hi] = std::minmax_element(x.makespans.begin(), x.makespans.end());
    return "; " + std::to_string(x.makespans.size()) + " replays, makespan " + format_ns(*lo) + " .. " +
           format_ns(*hi) + " (median shown)";
}

}  // namespace

int table_width(const std::vector<std::string>& names) {
    size_t width = 34;
    for (const std::string& name : names) width = std::max(width, name.size());
    return static_cast<int>(width);
}

std::string table_header(int width) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%-*s %10s %10s %7s | %8s %8s %7s | %10s %10s | %10s %10s | %6s %s\n", width,
                  "configuration", "peak pred", "peak meas", "err", "loss pred", "meas", "err pp", "in pred", "in meas",
                  "out pred", "out meas", "checks", "status");
    return buf;
}

std::string row_text(const Row& row, int width) {
    std::string out;
    char buf[1024];
    const auto& pred = row.predicted;
    const auto& meas = row.measured;
    // A run that ran out of memory has no throughput to lose.
    char lp[16], lm[16], le[16];
    std::snprintf(lp, sizeof lp, pred.oom.happened ? "oom" : "%.2f%%", 100 * row.predicted_loss());
    std::snprintf(lm, sizeof lm, meas.oom ? "oom" : "%.2f%%", 100 * row.measured_loss);
    std::snprintf(le, sizeof le, pred.oom.happened || meas.oom ? "-" : "%+.2f", row.loss_error_pp);
    std::snprintf(buf, sizeof buf, "%-*s %10s %10s %6.2f%% | %8s %8s %7s | %10s %10s | %10s %10s | %6lld %s%s%s\n",
                  width, row.name.c_str(), format_bytes(predicted_arena_peak(pred)).c_str(), format_bytes(meas.peak).c_str(),
                  100 * row.peak_error, lp, lm, le, format_bytes(pred.swap_in_bytes).c_str(),
                  format_bytes(meas.swap_in_bytes).c_str(), format_bytes(pred.swap_out_bytes).c_str(),
                  format_bytes(meas.swap_out_bytes).c_str(), static_cast<long long>(meas.checksums),
                  std::string(to_string(meas.status)).c_str(), meas.mismatches ? " CHECKSUM MISMATCH" : "",
                  meas.failure.empty() ? "" : (": " + meas.failure).c_str());
    out += buf;
    if (pred.oom.happened || meas.oom) {
        std::snprintf(buf, sizeof buf, "    OOM predicted: %s | measured: %s%s\n",
                      pred.oom.happened ? pred.oom.where.c_str() : "none", meas.oom ? meas.oom_where.c_str() : "none",
                      meas.oom_fragmentation ? " (fragmentation)" : "");
        out += buf;
    }
    char reduction[16];
    std::snprintf(reduction, sizeof reduction, pred.oom.happened ? "-" : "%.1f%%", 100 * pred.peak_reduction);
    std::snprintf(buf, sizeof buf,
                  "    peak reduction pred %s; makespan pred %s meas %s; stalls pred %lld (%s) meas %lld (%s); "
                  "overruns %lld (%s); sinkhorn %lld; arena high water %s; page mapping %.2f s (clock paused%s)%s%s\n",
                  reduction, format_ns(row.predicted_makespan()).c_str(),
                  format_ns(meas.makespan_ns).c_str(), static_cast<long long>(pred.stall_count),
                  format_ns(pred.stall_time).c_str(), static_cast<long long>(meas.stalls),
                  format_ns(meas.stall_ns).c_str(), static_cast<long long>(meas.overruns),
                  format_ns(meas.overrun_ns).c_str(), static_cast<long long>(meas.sinkhorn_kernels),
                  format_bytes(meas.high_water).c_str(), meas.map_seconds, copies_meanwhile(meas).c_str(),
                  link_seen(meas).c_str(), spread(row).c_str());
    out += buf;
    return out;
}

std::string to_text(const Report& r) {
    std::string out;
    char buf[1024];
    std::snprintf(buf, sizeof buf, "link (as the scaled replay sees it): %s, H2D %s, D2H %s, duplex factor %.2f\n", r.link.name.c_str(),
                  format_rate(r.link.h2d.bandwidth_Bps).c_str(), format_rate(r.link.d2h.bandwidth_Bps).c_str(), r.link.duplex_factor);
    out += buf;
    if (!r.link_origin.empty()) out += "  obtained: " + r.link_origin + "\n";
    if (!r.link.source.empty()) out += "  source: " + r.link.source + "\n";
    if (r.paced) out += "  the host replay's copies are paced to this link (an emulated link; --unpaced: as fast as they go)\n";
    std::snprintf(buf, sizeof buf, "time scale x%g%s%s\n", r.time_scale, r.time_scale_origin.empty() ? "" : ": ",
                  r.time_scale_origin.c_str());
    out += buf;
    if (!r.window_origin.empty())
        out += "replayed and measured: " + r.window_origin + (r.window_kernel >= 0 ? " (the steps before run at once, unmeasured; "
                                                                                     "peak, traffic and checksums cover them too)\n" : "\n");
    // The configuration column fits the longest name (a calibrated link's name can be long).
    std::vector<std::string> names{r.baseline.name};
    for (const auto& row : r.rows) names.push_back(row.name);
    const int width = table_width(names);
    out += table_header(width);
    auto line = [&](const Row& row) { out += row_text(row, width); };
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
    // What "peak meas" counts, and the process's own figure beside it (not comparable).
    out +=
        "peak meas: the replay arena's device pages in use at their most (2 MiB pages, placed as the\n"
        "  allocator model placed them), not this process's memory";
    if (r.process_peak_rss >= 0)
        out +=
            " (its peak resident set over the whole\n  validation, trace, host arena and page pool "
            "included, each page once: " +
            format_bytes(r.process_peak_rss) + ")";
    out += "\njudged: the peak (caching: to the byte), swap-in and swap-out (to the byte), the loss (--target)\n";
    if (!r.phases.empty()) {
        out += "time:";
        for (size_t i = 0; i < r.phases.size(); ++i) {
            std::snprintf(buf, sizeof buf, "%s %s %.2f s (CPU %.2f s)", i ? ";" : "", r.phases[i].name.c_str(), r.phases[i].seconds,
                          r.phases[i].cpu_seconds);
            out += buf;
        }
        out += "\n";
    }
    out += "machine: " + r.load.text() + (r.load.loaded() ? " -- LOADED: measured times include other work\n" : "\n");
    for (const Row& x : r.rows) out += "verdict " + x.name + ": " + x.verdict + "\n";
    if (r.time_limit_s > 0) {   // what --time-limit cut
        char limit[64];
        std::snprintf(limit, sizeof limit, "%g s", r.time_limit_s);
        auto cut = [&](const Row& row, const char* what) {
            if (!row.repeats_cut) return;
            const size_t count = row.makespans.size();
            out += "cut short " + row.name + what + ": " + std::to_string(count) +
                   (count == 1 ? " replay" : " replays") + ", the next would have ended past --time-limit " + limit +
                   "\n";
        };
        cut(r.baseline, " (baseline)");
        for (const Row& row : r.rows) cut(row, "");
        for (const std::string& name : r.not_run)
            out += "not run " + name + ": its first replay would have ended past --time-limit " + limit + "\n";
    }
    return out;
}

}  // namespace mhc::replay
