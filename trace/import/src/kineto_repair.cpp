// Members Kineto wrote with no value (kineto_repair.hpp): counted while the streamed parse reads
// them as null, then said in meta and a warning.
#include "kineto_repair.hpp"

#include "kineto_write.hpp"

namespace mhc::trace::import {

void EmptyValues::add(const std::string& key, uint64_t at) {
    if (count == 0) first_at = at;
    ++count;
    if (by_key.count(key) > 0 || by_key.size() < kMaxKeys) ++by_key[key];
    else ++by_key[kOtherKeys];
}

void say_empty_values(const EmptyValues& found, const std::string& trace, Result& result) {
    if (found.count == 0) return;
    std::string keys;
    for (const auto& [key, n] : found.by_key) keys += (keys.empty() ? "" : ", ") + std::to_string(n) + " '" + key + "'";
    said_and_warned(result, "kineto.empty_values",
                    std::to_string(found.count) + (found.count == 1 ? " member" : " members") + " of " + trace +
                        " written with no value (" + keys + "; the first at byte " + std::to_string(found.first_at) +
                        ") read as absent: invalid JSON that PyTorch's profiler wrote for an empty process group "
                        "description (Kineto from April 2024 to August 2025)");
}

}   // namespace mhc::trace::import
