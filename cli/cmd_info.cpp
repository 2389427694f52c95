// mhc info TRACE: source, device, duration, counts, peak and where time goes.
#include <algorithm>
#include <map>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

#include "command.hpp"
#include "run_store.hpp"
#include "trace_notes.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/text_table.hpp"
#include "mhc/common/units.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/summary.hpp"

namespace {

// True when a line of the summary's text starts with `label` and a space (its own line for it).
bool said_in(const std::string& text, const std::string& label) {
    return ("\n" + text).find("\n" + label + " ") != std::string::npos;
}

// A run's row: its peak, peak reduction and throughput loss in the words and signs `simulate`
// and `sweep` print (a replayed run's measured figures; "-" for what it lacks), then its name,
// and for an OOM what was short: within 100 columns, a long name on a line of its own.
std::string run_row(const mhc::trace::RunInfo& run, bool order_only, int width) {
    auto get = [&](const char* key) {
        auto it = run.metrics.find(key);
        return it == run.metrics.end() ? std::optional<double>{} : std::optional<double>{it->second};
    };
    auto bytes = [](std::optional<double> v) { return v ? mhc::format_bytes(static_cast<int64_t>(*v)) : "-"; };
    auto percent = [](std::optional<double> v, const char* f) {
        char b[32] = "-";
        if (v) std::snprintf(b, sizeof b, f, *v * 100);
        return std::string(b);
    };
    const bool replayed = run.kind == mhc::trace::RunKind::Replayed;
    auto peak = get(replayed ? "measured_peak_bytes" : "simulated_peak_bytes");
    auto red = replayed ? std::nullopt : get("peak_reduction");
    auto loss = get(replayed ? "measured_throughput_loss" : "throughput_loss");
    // Order-only timing: a simulated loss is a share of event numbers, not of time (simulate and
    // sweep print none); a replay's measured loss is timed on the replay machine.
    if (order_only && !replayed) loss = std::nullopt;
    // A stored name is anyone's text (a runs table written by hand, an older mhc): its control
    // bytes shown as '?', as meta values are (a newline split the row, an escape reached the terminal).
    // With its device when not GPU 0 ("... (host)"), as mhc-view lists it: runs of one setting on GPU 0
    // and on the host (simulate --device -1) read the same.
    std::string name = mhc::printable(run.name), loss_text = percent(loss, "%.2f%%"), short_text;
    if (run.status == mhc::trace::RunStatus::Oom) {
        peak = red = std::nullopt;
        loss_text = "OOM";
        if (auto short_by = get("oom_bytes_short")) short_text = "out of memory, short by " + bytes(short_by);
    }
    // The device and what an OOM was short of, in one pair of brackets after the name.
    const std::string what_short = mhc::printable(mhc::trace::run_name_notes(run, short_text));
    const std::string kind(to_string(run.kind)), status(to_string(run.status));
    char b[512];
    std::snprintf(b, sizeof b, "%5lld %-9s %-10s %10s %9s %10s", static_cast<long long>(run.id), kind.c_str(),
                  status.c_str(), bytes(peak).c_str(), percent(red, "%.1f%%").c_str(), loss_text.c_str());
    // A name too long for the line goes under the row.
    const std::string row = b;
    const auto line = static_cast<size_t>(width);
    if (row.size() + 2 + name.size() + what_short.size() <= line) return row + "  " + name + what_short + "\n";
    // Under the row, the name cut to the line as a long kernel name is (--json keeps it whole);
    // what an OOM was short of stays whole (it was cut through its figure: "short by 70...."),
    // wrapped under the name where the line is narrow.
    const auto room = static_cast<size_t>(
        std::max<int>(width - 6 - static_cast<int>(std::min<size_t>(what_short.size(), 60)), 12));
    if (name.size() > room) name = name.substr(0, room - 3) + "...";
    return row + "\n" + mhc::wrap(name + what_short, width, 6, 6);
}

// What the runs table's figures are, as simulate and sweep say it: a simulated run's peak under its
// allocator model (the caching model's is reserved bytes, above the live `peak` line above: a user
// read them as one figure), its loss an estimate; a replay's figures measured.
std::string runs_legend(const std::vector<mhc::trace::RunInfo>& runs, bool order_only) {
    std::vector<std::string> allocators;
    bool simulated = false, replayed = false;
    for (const auto& run : runs) {
        if (run.status == mhc::trace::RunStatus::Oom) continue;   // its row shows no peak or loss
        if (run.kind == mhc::trace::RunKind::Replayed) {
            replayed = true;
            continue;
        }
        simulated = true;
        auto it = run.config.find("allocator");
        if (it != run.config.end() &&
            std::find(allocators.begin(), allocators.end(), it->second) == allocators.end())
            allocators.push_back(it->second);
    }
    std::string out;
    for (const auto& name : allocators) {
        try {
            out += "peaks       of " + name + " runs: " + mhc::sim::peak_meaning(mhc::sim::parse_allocator(name)) + "\n";
        } catch (const mhc::Error&) {   // a name another program stored: nothing known to say of it
        }
    }
    if (simulated && !order_only) out += std::string("loss        ") + mhc::sim::kEstimateNote + "\n";
    if (replayed) out += "replayed    runs' peak and loss are measured on the replay's backend\n";
    return out;
}

// Lines past `width` columns wrapped under the label column (12), as the rest of info is laid out;
// a row of a table under a label (it begins with a blank, and its text before column 12: the
// largest allocations, the kernels)
// keeps its figures and cuts the name it ends with (wrapped, "1.84 ms 8x" stood alone on its line
// and a kernel's name broke at its blanks onto three more).
std::string within(const std::string& text, int width) {
    std::string out;
    std::istringstream lines(text);
    std::string wrapped;
    for (std::string l; std::getline(lines, l);)
        wrapped += static_cast<int>(l.size()) <= width || (l.front() == ' ' && l.find_first_not_of(' ') < 12)
                       ? l + "\n"
                       : l.substr(0, 12) + mhc::wrap(l.substr(12), width, 12, 12).substr(12);
    // A word longer than the room left (a meta value of one piece) is cut, as long names are.
    std::istringstream parts(wrapped);
    for (std::string l; std::getline(parts, l);)
        out += (static_cast<int>(l.size()) <= width ? l : l.substr(0, static_cast<size_t>(width) - 3) + "...") + "\n";
    return out;
}

// What the importer warned of (meta import.warnings, one per line), as it said them: the first
// few, then how many more (--json holds them all).
std::string import_warning_lines(const std::map<std::string, std::string>& meta) {
    auto it = meta.find("import.warnings");
    if (it == meta.end() || it->second.empty()) return {};
    constexpr int kShown = 8;
    std::string out;
    std::istringstream lines(it->second);
    int count = 0;
    for (std::string line; std::getline(lines, line); ++count) {
        if (count >= kShown) continue;
        out += "warning     " + mhc::printable(line) + "\n";
    }
    if (count > kShown)
        out += "warning     ... and " + std::to_string(count - kShown) +
               " more (mhc info --json: meta import.warnings)\n";
    return out;
}

mhc::cli::Registration reg{mhc::cli::Command{
    "info", "Summarise a trace: counts, memory peak, top allocations and kernels, steps, runs",
    [](CLI::App& app) -> std::function<int()> {
        auto path = std::make_shared<std::string>();
        auto json = std::make_shared<bool>(false);
        auto top = std::make_shared<int>(10);
        auto runs_db = std::make_shared<std::string>();
        app.add_option("trace", *path, "Trace file (.db)")->required();
        app.add_flag("--json", *json,
                     "Print the trace's summary as JSON (not its runs: mhc export --format csv has them)");
        app.add_option("--top", *top, "How many allocations and kernels to list")
            ->check(CLI::PositiveNumber)
            ->default_str(std::to_string(*top));
        app.add_option("--runs-db", *runs_db, "List the runs stored in this file (simulate --runs-db) instead of "
                                              "those in the trace")
            ->type_name("FILE");
        return [path, json, top, runs_db] {
            *runs_db = mhc::cli::runs_db_to_read(*runs_db,
                                                 *path);   // the trace itself under another name: its own runs
            // The JSON summary is the trace's alone: the runs a --runs-db holds were read and not printed.
            if (*json && !runs_db->empty())
                throw mhc::Error(
                    "--runs-db and --json: info --json prints the trace's summary, without its runs; "
                    "give one");
            // The full check: info computes peaks and sums, so it refuses what `mhc check` refuses.
            auto data = mhc::trace::load_checked_trace(*path);
            auto summary = mhc::trace::summarize(data, *top);
            auto listed = mhc::trace::list_all_runs(*path, *runs_db);
            const auto& runs = listed.runs;
            // Runs computed from other data than the trace holds now are not its runs.
            if (!listed.note.empty()) mhc::say("mhc: warning: %s\n", mhc::printable(listed.note).c_str());
            if (*json) {
                std::printf("%s\n", mhc::trace::to_json(summary).c_str());
                return mhc::cli::kExitOk;
            }
            std::string text = mhc::trace::to_text(summary);
            // The meta lines shown: what the trace is and lacks, and what an importer changed or
            // could not tell (docs/import.md).
            for (const auto& note : mhc::cli::trace_notes(data.meta)) {
                // A line the summary already gives under that label ("timing  order only: ...",
                // "frees  paired by size ...") is not said again in the importer's words.
                if (said_in(text, note.label)) continue;
                std::string label = note.label;
                label.resize(11, ' ');
                text += label + " " + note.value + "\n";
            }
            text += import_warning_lines(data.meta);
            // Within 100 columns, or the terminal's when narrower (COLUMNS, else its width).
            const int terminal = mhc::table_width();
            const int width = terminal > 0 ? std::clamp(terminal, 60, 100) : 100;
            std::printf("%s", within(text, width).c_str());
            if (!runs.empty()) {
                // Peak, peak reduction and throughput loss (a replay's measured ones), named as sweep
                // and simulate name them.
                // The name's heading where a name can follow the figures on their line (64 columns).
                std::printf(
                    "runs        %zu stored\n"
                    "                                           peak throughput\n"
                    "   id kind      status           peak reduction       loss%s\n",
                    runs.size(), width >= 64 ? "  name" : "");
                for (const auto& run : runs) std::printf("%s", run_row(run, data.order_only(), width).c_str());
                std::printf("%s", within(runs_legend(runs, data.order_only()), width).c_str());
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
