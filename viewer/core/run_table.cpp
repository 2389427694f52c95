#include "mhc/viewer/run_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/metrics.hpp"
#include "mhc/viewer/stats.hpp"

namespace mhc::viewer {

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

std::string config(const trace::RunInfo& r, const char* key) {
    auto it = r.config.find(key);
    return it == r.config.end() ? std::string() : it->second;
}

double metric(const trace::RunInfo& r, const char* key) {
    auto it = r.metrics.find(key);
    return it == r.metrics.end() ? kNone : it->second;
}

// A number to sort by; NaN when the run lacks it.
double number(const RunRow& r, RunColumn c) {
    switch (c) {
        case RunColumn::Id: return static_cast<double>(r.id);
        case RunColumn::Capacity: return r.capacity < 0 ? kNone : static_cast<double>(r.capacity);
        case RunColumn::Peak: return r.peak < 0 ? kNone : r.peak;
        case RunColumn::Reduction: return r.reduction;
        case RunColumn::Loss: return r.loss;
        case RunColumn::Makespan: return r.makespan < 0 ? kNone : r.makespan;
        default: return kNone;
    }
}

const std::string& text(const RunRow& r, RunColumn c) {
    switch (c) {
        case RunColumn::Policy: return r.policy;
        case RunColumn::Prefetch: return r.prefetch;
        case RunColumn::Link: return r.link;
        default: return r.status;
    }
}

bool numeric(RunColumn c) {
    return c != RunColumn::Policy && c != RunColumn::Prefetch && c != RunColumn::Link && c != RunColumn::Status;
}

}  // namespace

const char* run_column_name(RunColumn c) {
    // The figures under the names mhc simulate, sweep and the metrics table below give them.
    static constexpr const char* k[kRunColumnCount] = {"#",        "policy", "prefetch",       "link",
                                                       "capacity", "peak",   "peak reduction", "throughput loss",
                                                       "makespan", "status"};
    auto i = static_cast<int>(c);
    return i >= 0 && i < kRunColumnCount ? k[i] : "?";
}

std::vector<RunRow> run_rows(const std::vector<trace::RunInfo>& runs) {
    std::vector<RunRow> out;
    for (size_t i = 0; i < runs.size(); ++i) {
        const trace::RunInfo& r = runs[i];
        RunRow row;
        row.index = i;
        row.id = r.id;
        row.name = trace::run_name_with_device(r);   // with its device when not GPU 0: "host" finds a host run
        row.kind = to_string(r.kind);
        row.status = to_string(r.status);
        row.policy = config(r, "eviction");
        row.prefetch = config(r, "prefetch");
        row.link = config(r, "link");
        double cap = metric(r, "capacity_bytes");
        if (!std::isnan(cap) && cap > 0) row.capacity = static_cast<int64_t>(cap);
        double peak = metric(r, "simulated_peak_bytes");
        if (!std::isnan(peak)) row.peak = peak;
        row.reduction = metric(r, "peak_reduction");
        row.loss = metric(r, "throughput_loss");
        double ms = metric(r, "simulated_makespan_ns");
        if (!std::isnan(ms)) row.makespan = ms;
        out.push_back(std::move(row));
    }
    return out;
}

std::string run_cell(const RunRow& row, RunColumn column, bool order_only) {
    switch (column) {
        case RunColumn::Id: return std::to_string(row.id);
        case RunColumn::Capacity: return row.capacity < 0 ? "-" : format_bytes(row.capacity);
        // An OOM run did not finish: no peak or makespan to show (its 0 B read as a figure), as mhc info.
        case RunColumn::Peak:
            return row.peak < 0 || row.status == "oom" ? "-" : format_metric("simulated_peak_bytes", row.peak);
        case RunColumn::Reduction:
            return std::isnan(row.reduction) ? "-" : format_metric("peak_reduction", row.reduction);
        case RunColumn::Loss:
            return std::isnan(row.loss) ? "-" : format_metric("throughput_loss", row.loss, order_only);
        case RunColumn::Makespan:
            if (row.makespan < 0 || row.status == "oom") return "-";
            return order_only ? kNotATime : format_metric("simulated_makespan_ns", row.makespan);
        default: {
            const std::string& cell = text(row, column);
            return cell.empty() ? "-" : cell;
        }
    }
}

std::vector<size_t> filter_runs(const std::vector<RunRow>& rows, std::string_view filter, RunColumn by, bool ascending) {
    std::vector<std::string> words;
    std::istringstream in{std::string(filter)};
    for (std::string w; in >> w;) words.push_back(w);
    std::vector<size_t> out;
    for (size_t i = 0; i < rows.size(); ++i) {
        const RunRow& r = rows[i];
        std::string hay = r.name + " " + r.kind + " " + r.policy + " " + r.prefetch + " " + r.link + " " + r.status;
        bool all = true;
        for (const std::string& w : words) all = all && contains_ci(hay, w);
        if (all) out.push_back(i);
    }
    std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
        const RunRow &x = rows[a], &y = rows[b];
        if (numeric(by)) {
            double p = number(x, by), q = number(y, by);
            bool pn = std::isnan(p), qn = std::isnan(q);
            if (pn != qn) return qn;   // absent last
            if (!pn && p != q) return ascending ? p < q : q < p;
        } else {
            const std::string &p = text(x, by), &q = text(y, by);
            if (p.empty() != q.empty()) return q.empty();
            if (p != q) return ascending ? p < q : q < p;
        }
        return x.id < y.id;
    });
    return out;
}

TimeRange follow_limits(TimeRange range, TimeRange old_limits, TimeRange new_limits) {
    if (range.t0 <= old_limits.t0 && range.t1 >= old_limits.t1) return new_limits;
    return clamp(range, new_limits);
}

}  // namespace mhc::viewer
