#pragma once
// A run's metrics as the compare table shows them: a readable name instead of the stored key
// ("simulated_makespan_ns" -> "makespan, simulated"), the value in the unit the key names
// (bytes, nanoseconds, ratios as %, counts as integers), and the headline figures first.
#include <string>
#include <vector>

namespace mhc::viewer {

std::string metric_label(const std::string& key);
// `order_only`: the trace's timing is order only (its times are event numbers), so a time or the
// throughput loss is no figure at all and reads "not a time (order only)", as mhc simulate leaves
// them out of its text.
std::string format_metric(const std::string& key, double value, bool order_only = false);
inline constexpr const char* kNotATime = "not a time (order only)";
// The keys in display order: headline figures first (loss, times, peaks, traffic), then the
// rest by name.
std::vector<std::string> metric_order(std::vector<std::string> keys);

}  // namespace mhc::viewer
