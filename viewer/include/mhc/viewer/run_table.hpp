#pragma once
// The compare view's run picker: one row per stored run with the figures users pick by (policy,
// prefetcher, link, capacity, peak, reduction, loss, status), filtered by words and sorted by any
// column, so that 70 runs of a sweep are a table, not a line of checkboxes. And the time axis
// that follows the slowest run ticked.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/trace/runs.hpp"
#include "mhc/viewer/lod.hpp"

namespace mhc::viewer {

enum class RunColumn { Id, Policy, Prefetch, Link, Capacity, Peak, Reduction, Loss, Makespan, Status };
inline constexpr int kRunColumnCount = 10;
const char* run_column_name(RunColumn c);   // "policy", "throughput loss", and so on

struct RunRow {
    size_t index = 0;   // into the run list
    int64_t id = 0;
    std::string name, kind, policy, prefetch, link, status;
    // NaN / -1 when the run does not have it (a replayed run has no capacity, say).
    int64_t capacity = -1;
    double peak = -1, makespan = -1;
    double reduction = std::numeric_limits<double>::quiet_NaN(), loss = std::numeric_limits<double>::quiet_NaN();
};

std::vector<RunRow> run_rows(const std::vector<trace::RunInfo>& runs);
// The cell as the table shows it, in mhc's formats: "cost_aware", "70.00 GiB", "21.9%", "5.660 s",
// "-" when absent (an OOM run's peak and makespan too).
// `order_only`: the trace's times are event numbers: loss and makespan read "not a time (order only)".
std::string run_cell(const RunRow& row, RunColumn column, bool order_only = false);
// Rows whose text holds every word of `filter` (case-insensitive, in any of the name, kind,
// policy, prefetch, link and status), sorted by `by` (absent values last either way; ties by id).
std::vector<size_t> filter_runs(const std::vector<RunRow>& rows, std::string_view filter, RunColumn by, bool ascending);

// The time axis follows what is shown: when the view showed all of the old limits (the user had
// not zoomed in), it shows all of the new ones; otherwise it keeps its range, clamped to them.
TimeRange follow_limits(TimeRange range, TimeRange old_limits, TimeRange new_limits);

}  // namespace mhc::viewer
