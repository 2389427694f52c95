#pragma once
// A run's metrics as the compare table shows them: a readable name instead of the stored key
// ("simulated_makespan_ns" -> "makespan, simulated"), the value in the unit the key names
// (bytes, nanoseconds, ratios as %, counts as integers), and the headline figures first.
#include <string>
#include <vector>

#include "mhc/trace/runs.hpp"

namespace mhc::viewer {

std::string metric_label(const std::string& key);
// A run event's kind in mhc's words (its lanes, bars and details): "swap-out", "swap-in", "clean
// eviction", as mhc simulate says them, not the stored names ("swap_out", "evict_clean").
std::string event_label(trace::EventKind kind);
// `order_only`: the trace's timing is order only (its times are event numbers), so a time or the
// throughput loss is no figure at all and reads "not a time (order only)", as mhc simulate leaves
// them out of its text.
std::string format_metric(const std::string& key, double value, bool order_only = false);
inline constexpr const char* kNotATime = "not a time (order only)";
// A figure of a finished run (simulated peak and makespan, peak reduction, throughput loss): an
// OOM run stores where it stopped, which the compare table showed as "0 B" and "0 ns" beside the
// finished runs' results; it reads "-" there, as mhc info and mhc simulate leave it out.
bool finished_run_figure(const std::string& key);
// The keys in display order: headline figures first (loss, times, peaks, traffic), then the
// rest by name.
std::vector<std::string> metric_order(std::vector<std::string> keys);

}  // namespace mhc::viewer
