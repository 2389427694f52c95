#include "mhc/viewer/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"

namespace mhc::viewer {

namespace {

enum class Unit { Bytes, Nanoseconds, Seconds, Ratio, Count, Flag, Plain };

struct Known {
    const char* label;
    Unit unit;
};

// The simulator's metrics (sim::metrics); anything else falls back to its key's suffix.
const std::map<std::string, Known>& known() {
    static const std::map<std::string, Known> k = {
        {"throughput_loss", {"throughput loss (slower by)", Unit::Ratio}},
        {"simulated_makespan_ns", {"makespan, simulated", Unit::Nanoseconds}},
        {"baseline_makespan_ns", {"makespan, recorded", Unit::Nanoseconds}},
        {"stall_ns", {"stall time", Unit::Nanoseconds}},
        {"simulated_peak_bytes", {"peak memory, simulated", Unit::Bytes}},
        {"baseline_peak_bytes", {"peak memory, no limit (same allocator model)", Unit::Bytes}},
        {"peak_reduction", {"peak reduction", Unit::Ratio}},
        {"capacity_bytes", {"capacity (memory limit)", Unit::Bytes}},
        {"host_capacity_bytes", {"host capacity", Unit::Bytes}},
        {"host_peak_bytes", {"host peak memory", Unit::Bytes}},
        // Bytes moved as mhc simulate and sweep name them, per direction (the viewer said "swapped in").
        {"swap_in_bytes", {"swap-in (H2D)", Unit::Bytes}},
        {"swap_out_bytes", {"swap-out (D2H)", Unit::Bytes}},
        {"swap_ins", {"swap-ins", Unit::Count}},
        {"swap_outs", {"swap-outs", Unit::Count}},
        {"stalls", {"stalls", Unit::Count}},
        {"recompute_ns", {"recompute time", Unit::Nanoseconds}},
        {"recomputations", {"recomputations", Unit::Count}},
        {"drops", {"drops (freed, recomputed later)", Unit::Count}},
        {"clean_evictions", {"clean evictions", Unit::Count}},
        {"prefetches", {"prefetches", Unit::Count}},
        {"early_evictions", {"early evictions", Unit::Count}},
        {"forecast_evictions", {"forecast evictions", Unit::Count}},
        {"forecast_error", {"forecast error per kernel", Unit::Ratio}},
        {"forecast_peak_error", {"forecast error per step peak", Unit::Ratio}},
        {"oom", {"out of memory", Unit::Flag}},
        {"oom_time_ns", {"OOM at (simulated time)", Unit::Nanoseconds}},
        {"oom_bytes_needed", {"OOM: bytes needed", Unit::Bytes}},
        {"oom_bytes_short", {"OOM: short by", Unit::Bytes}},
        {"oom_bytes_pinned", {"OOM: bytes pinned", Unit::Bytes}},
        {"oom_fragmentation", {"OOM from fragmentation", Unit::Flag}},
        {"assumed_accesses", {"accesses assumed (none in trace)", Unit::Flag}},
        {"sim_seconds", {"simulator wall time", Unit::Seconds}},
    };
    return k;
}

bool ends_with(const std::string& s, const char* suffix) {
    std::string x(suffix);
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

Unit unit_of(const std::string& key) {
    if (auto it = known().find(key); it != known().end()) return it->second.unit;
    if (ends_with(key, "_bytes")) return Unit::Bytes;
    if (ends_with(key, "_ns")) return Unit::Nanoseconds;
    if (ends_with(key, "_seconds")) return Unit::Seconds;
    if (ends_with(key, "_loss") || ends_with(key, "_reduction") || ends_with(key, "_error") || ends_with(key, "_ratio"))
        return Unit::Ratio;
    return Unit::Plain;
}

}  // namespace

bool finished_run_figure(const std::string& key) {
    return key == "simulated_peak_bytes" || key == "simulated_makespan_ns" || key == "peak_reduction" ||
           key == "throughput_loss";
}

std::string event_label(trace::EventKind kind) {
    switch (kind) {
        case trace::EventKind::SwapOut: return "swap-out";
        case trace::EventKind::SwapIn: return "swap-in";
        case trace::EventKind::EvictClean: return "clean eviction";
        default: return std::string(trace::to_string(kind));
    }
}

std::string metric_label(const std::string& key) {
    if (auto it = known().find(key); it != known().end()) return it->second.label;
    std::string s = key;
    for (const char* suffix : {"_bytes", "_ns", "_seconds"})
        if (ends_with(s, suffix) && s.size() > std::string(suffix).size()) { s.resize(s.size() - std::string(suffix).size()); break; }
    std::replace(s.begin(), s.end(), '_', ' ');
    return s;
}

std::string format_metric(const std::string& key, double value, bool order_only) {
    char buf[64];
    if (!std::isfinite(value)) return "-";
    const Unit unit = unit_of(key);
    if (order_only && (unit == Unit::Nanoseconds || unit == Unit::Seconds || key == "throughput_loss"))
        return kNotATime;
    switch (unit) {
        case Unit::Bytes:
            if (value < 0) return "unlimited";
            return format_bytes(static_cast<int64_t>(value));
        // As mhc prints them (docs/cli.md "What the commands print"): a figure read in the viewer
        // and in `mhc simulate` is the same text (it read "295 ms" and "30.06 %" beside 294.61 ms
        // and 30.1%): times by mhc::format_ns, a peak reduction with one decimal, other shares two.
        case Unit::Nanoseconds: return format_ns(static_cast<int64_t>(std::llround(value)));
        case Unit::Seconds: return format_ns(static_cast<int64_t>(std::llround(value * 1e9)));
        case Unit::Ratio:
            std::snprintf(buf, sizeof buf, key == "peak_reduction" ? "%.1f%%" : "%.2f%%", value * 100);
            return buf;
        case Unit::Count:
            std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(std::llround(value)));
            return buf;
        case Unit::Flag: return value != 0 ? "yes" : "no";
        case Unit::Plain: break;
    }
    // A whole number reads whole (13560 kernels reached, not 1.356e+04); others with 4 digits.
    if (value == std::floor(value) && std::fabs(value) < 1e15)
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value));
    else std::snprintf(buf, sizeof buf, "%.4g", value);
    return buf;
}

std::vector<std::string> metric_order(std::vector<std::string> keys) {
    static const char* const kFirst[] = {"throughput_loss", "simulated_makespan_ns", "baseline_makespan_ns",
                                         "stall_ns", "simulated_peak_bytes", "baseline_peak_bytes", "peak_reduction",
                                         "capacity_bytes", "swap_in_bytes", "swap_out_bytes", "recompute_ns"};
    auto rank = [](const std::string& k) {
        for (size_t i = 0; i < std::size(kFirst); ++i)
            if (k == kFirst[i]) return i;
        return std::size(kFirst);
    };
    std::sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
        size_t ra = rank(a), rb = rank(b);
        return ra != rb ? ra < rb : a < b;
    });
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

}  // namespace mhc::viewer
