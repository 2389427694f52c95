// The validation report as text (mhc validate): a table of predicted and measured figures per
// configuration, then the machine's load and the verdicts.
#include <algorithm>
#include <cstdio>

#include "mhc/common/text_table.hpp"
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

// The figures' table (mhc::TextTable, as mhc's other tables): each figure headed over two lines,
// right-aligned, the columns as wide as their widest usual figure so that a row told alone as it is
// measured (validate_configuration.cpp) lines up with the header told before it and reads the same
// in the report. The first column, empty, indents the figures under each configuration's name.
TextTable figures_table() {
    return TextTable({{{}, true, true, 1},
                      {{"peak", "pred"}, false, false, 11},
                      {{"peak", "meas"}, false, false, 11},
                      {{"peak", "err"}, false, false, 7},
                      {{"loss", "pred"}, false, false, 8},
                      {{"loss", "meas"}, false, false, 8},
                      {{"loss", "err pp"}, false, false, 8},
                      {{"checksums"}, false, false, 9},
                      {{"status"}, true}});
}

std::string percent(const char* format, double value) {
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

}  // namespace

// The name on a line of its own and the figures under it: a name holds the link's (a calibrated
// profile's can be long), and the row of 11 figures with the name ran to 190 columns.
std::string table_header() { return "configuration\n" + figures_table().render(0); }

std::string row_text(const Row& row) {
    std::string out = row.name + "\n";
    const auto& pred = row.predicted;
    const auto& meas = row.measured;
    // A run that ran out of memory has no throughput to lose.
    const bool oom = pred.oom.happened || meas.oom;
    TextTable table = figures_table();
    table.add_row({"", format_bytes(predicted_arena_peak(pred)), format_bytes(meas.peak),
                   percent("%.2f%%", 100 * row.peak_error),
                   pred.oom.happened ? "OOM" : percent("%.2f%%", 100 * row.predicted_loss()),
                   meas.oom ? "OOM" : percent("%.2f%%", 100 * row.measured_loss),
                   oom ? "-" : percent("%+.2f", row.loss_error_pp), std::to_string(meas.checksums),
                   std::string(to_string(meas.status)) + (meas.mismatches ? " CHECKSUM MISMATCH" : "")});
    const std::string rendered = table.render(0);
    // The heading's two lines are table_header's; the row alone here.
    out += rendered.substr(rendered.find('\n', rendered.find('\n') + 1) + 1);
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
                                std::to_string(meas.stalls) + " (" + format_ns(meas.stall_ns) + "); kernel overruns " +
                                std::to_string(meas.overruns) + " (" + format_ns(meas.overrun_ns) + ")");
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
