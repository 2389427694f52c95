#pragma once
// A run's metrics as the compare table shows them: a readable name instead of the stored key
// ("simulated_makespan_ns" -> "makespan, simulated"), the value in the unit the key names
// (bytes, nanoseconds, ratios as %, counts as integers), and the headline figures first.
#include <string>
#include <vector>

namespace mhc::viewer {

std::string metric_label(const std::string& key);
std::string format_metric(const std::string& key, double value);
// The keys in display order: headline figures first (loss, times, peaks, traffic), then the
// rest by name.
std::vector<std::string> metric_order(std::vector<std::string> keys);

}  // namespace mhc::viewer
