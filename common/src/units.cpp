#include "mhc/common/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mhc/common/error.hpp"

namespace mhc {
namespace {

std::string lower(std::string_view s) {
    std::string out;
    for (char c : s)
        if (!std::isspace(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(c));
    return out;
}

// Splits "1.5GiB" into 1.5 and "gib". Throws when no number leads.
std::pair<double, std::string> split_number(std::string_view text, const char* what) {
    std::string s = lower(text);
    const char* begin = s.c_str();
    char* end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v))
        throw Error("invalid " + std::string(what) + " '" + std::string(text) + "'");
    return {v, std::string(end)};
}

}  // namespace

int64_t parse_bytes(std::string_view text) {
    auto [v, unit] = split_number(text, "size");
    double mul = 1;
    if (unit.empty() || unit == "b") mul = 1;
    else if (unit == "k" || unit == "kib") mul = 1024.0;
    else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
    else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tib") mul = 1024.0 * 1024 * 1024 * 1024;
    else if (unit == "kb") mul = 1e3;
    else if (unit == "mb") mul = 1e6;
    else if (unit == "gb") mul = 1e9;
    else if (unit == "tb") mul = 1e12;
    else throw Error("invalid size '" + std::string(text) + "': unknown unit '" + unit + "'");
    double bytes = v * mul;
    if (bytes < 0) throw Error("invalid size '" + std::string(text) + "': negative");
    if (bytes > 9.2e18) throw Error("invalid size '" + std::string(text) + "': too large");
    return static_cast<int64_t>(std::llround(bytes));
}

double parse_seconds(std::string_view text) {
    auto [v, unit] = split_number(text, "duration");
    double mul;
    if (unit == "ns") mul = 1e-9;
    else if (unit == "us") mul = 1e-6;
    else if (unit == "ms") mul = 1e-3;
    else if (unit == "s" || unit.empty()) mul = 1;
    else throw Error("invalid duration '" + std::string(text) + "': unknown unit '" + unit + "'");
    if (v < 0) throw Error("invalid duration '" + std::string(text) + "': negative");
    return v * mul;
}

double parse_bandwidth(std::string_view text) {
    auto [v, unit] = split_number(text, "bandwidth");
    if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "/s") unit.resize(unit.size() - 2);
    double mul;
    if (unit.empty() || unit == "b") mul = 1;
    else if (unit == "kb") mul = 1e3;
    else if (unit == "mb") mul = 1e6;
    else if (unit == "gb") mul = 1e9;
    else if (unit == "tb") mul = 1e12;
    else if (unit == "gib") mul = 1024.0 * 1024 * 1024;
    else if (unit == "mib") mul = 1024.0 * 1024;
    else throw Error("invalid bandwidth '" + std::string(text) + "': unknown unit '" + unit + "'");
    if (v <= 0) throw Error("invalid bandwidth '" + std::string(text) + "': must be positive");
    return v * mul;
}

std::string format_bytes(int64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (std::fabs(v) >= 1024 && u < 4) { v /= 1024; ++u; }
    char buf[64];
    if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

std::string format_ns(int64_t ns) {
    char buf[64];
    double a = std::fabs(static_cast<double>(ns));
    if (a < 1e3) std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(ns));
    else if (a < 1e6) std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
    else if (a < 1e9) std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
    else std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
    return buf;
}

std::string format_rate(double bps) {
    char buf[64];
    if (bps >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GB/s", bps / 1e9);
    else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB/s", bps / 1e6);
    else std::snprintf(buf, sizeof buf, "%.0f B/s", bps);
    return buf;
}

}  // namespace mhc
