// The validation report as text (mhc validate): a table of predicted and measured figures per
// configuration, then the machine's load and the verdicts.
#include <algorithm>
#include <cstdio>

#include "mhc/common/units.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/replay/validate.hpp"

namespace mhc::replay {

namespace {
// The rates the replay's transfers achieved (bytes per second of real time, while busy).
std::string link_seen(const Measured& m) {
    if (m.link_h2d_Bps <= 0 && m.link_d2h_Bps <= 0) return "";
    std::string text = "H2D " + format_rate(m.link_h2d_Bps) + ", D2H " + format_rate(m.link_d2h_Bps) + " (real time)";
    if (m.late_transfers > 0) text += ", " + std::to_string(m.late_transfers) + " late by " + format_ns(m.late_ns);
    return text;
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
    return " (" + std::to_string(x.makespans.size()) + " replays, " + format_ns(*lo) + " .. " + format_ns(*hi) +
           ": the median shown)";
}

// A detail line under a row: its label in a column of 12, the text wrapped within 100 columns.
std::string detail(const char* label, const std::string& text) {
    char head[32];
    std::snprintf(head, sizeof head, "  %-10s ", label);
    return std::string(head) + wrap(text, 100, 13, 13).substr(13);
}

}  // namespace

// The name on a line of its own and the figures under it: a name holds the link's (a calibrated
// profile's can be long), and the row of 11 figures with the name ran to 190 columns.
std::string table_header() {
    char buf[256];
    std::snprintf(buf, sizeof buf, "configuration\n  %10s %10s %7s   %10s %10s %8s   %9s  %s\n", "peak pred", "peak meas",
                  "err", "loss pred", "loss meas", "err pp", "checksums", "status");
    return buf;
}

std::string row_text(const Row& row) {
    std::string out = row.name + "\n";
    char buf[1024];
    const auto& pred = row.predicted;
    const auto& meas = row.measured;
    // A run that ran out of memory has no throughput to lose.
    char lp[16], lm[16], le[16];
    std::snprintf(lp, sizeof lp, pred.oom.happened ? "oom" : "%.2f%%", 100 * row.predicted_loss());
    std::snprintf(lm, sizeof lm, meas.oom ? "oom" : "%.2f%%", 100 * row.measured_loss);
    std::snprintf(le, sizeof le, pred.oom.happened || meas.oom ? "-" : "%+.2f", row.loss_error_pp);
    std::snprintf(buf, sizeof buf, "  %10s %10s %6.2f%%   %10s %10s %8s   %9lld  %s%s\n",
                  format_bytes(predicted_arena_peak(pred)).c_str(), format_bytes(meas.peak).c_str(),
                  100 * row.peak_error, lp, lm, le, static_cast<long long>(meas.checksums),
                  std::string(to_string(meas.status)).c_str(), meas.mismatches ? " CHECKSUM MISMATCH" : "");
    out += buf;
    if (!meas.failure.empty()) out += detail("failure", meas.failure);
    if (pred.oom.happened || meas.oom)
        out += detail("OOM", std::string("predicted: ") + (pred.oom.happened ? pred.oom.where : "none") +
                                 "; measured: " + (meas.oom ? meas.oom_where : "none") +
                                 (meas.oom_fragmentation ? " (fragmentation)" : ""));
    out += detail("swap-in", "pred " + format_bytes(pred.swap_in_bytes) + ", meas " + format_bytes(meas.swap_in_bytes) +
                                 "; swap-out pred " + format_bytes(pred.swap_out_bytes) + ", meas " +
                                 format_bytes(meas.swap_out_bytes));
    out += detail("makespan", "pred " + format_ns(row.predicted_makespan()) + ", meas " + format_ns(meas.makespan_ns) +
                                  spread(row));
    out += detail("stalls", "pred " + std::to_string(pred.stall_count) + " (" + format_ns(pred.stall_time) + "), meas " +
                                std::to_string(meas.stalls) + " (" + format_ns(meas.stall_ns) + "); kernels overran " +
                                std::to_string(meas.overruns) + " times (" + format_ns(meas.overrun_ns) + ")");
    char reduction[16], mapping[32];
    std::snprintf(reduction, sizeof reduction, pred.oom.happened ? "-" : "%.1f%%", 100 * pred.peak_reduction);
    std::snprintf(mapping, sizeof mapping, "%.2f s", meas.map_seconds);
    out += detail("replay", std::string("peak reduction pred ") + reduction + "; arena high water " +
                                format_bytes(meas.high_water) + "; sinkhorn kernels " +
                                std::to_string(meas.sinkhorn_kernels));
    out += detail("mapping", std::string(mapping) + " of page mapping (the clock paused" + copies_meanwhile(meas) + ")");
    if (const std::string seen = link_seen(meas); !seen.empty()) out += detail("transfers", seen);
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
    out += table_header();
    auto line = [&](const Row& row) { out += row_text(row); };
    line(r.baseline);
    if (r.retimed) {
        std::snprintf(buf, sizeof buf,
                      "limited runs predicted on the baseline replay's clock: span %s recorded -> %s measured "
                      "(%lld kernels retimed; --recorded-timing predicts on the recorded one)",
                      format_ns(r.retime.span_before_ns).c_str(), format_ns(r.retime.span_after_ns).c_str(),
                      static_cast<long long>(r.retime.kernels_moved));
        out += wrap(buf, 100, 4, 2);
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
    // Sentences past 100 columns wrapped under their label (the verdict's ran to 400).
    if (!r.phases.empty()) {
        std::string time = "time:";
        for (size_t i = 0; i < r.phases.size(); ++i) {
            std::snprintf(buf, sizeof buf, "%s %s %.2f s (CPU %.2f s)", i ? ";" : "", r.phases[i].name.c_str(), r.phases[i].seconds,
                          r.phases[i].cpu_seconds);
            time += buf;
        }
        out += wrap(time, 100, 6);
    }
    out += wrap("machine: " + r.load.text() + (r.load.loaded() ? " -- LOADED: measured times include other work" : ""),
                100, 9);
    for (const Row& row : r.rows) out += wrap("verdict " + row.name + ": " + row.verdict, 100, 2);
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
