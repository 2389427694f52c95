#include "mhc/common/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "mhc/common/bandwidth.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"

namespace mhc {
namespace {

std::string lower(std::string_view s) {
    std::string out;
    for (char c : s)
        if (!std::isspace(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(c));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// The grammar's number and what follows it: "1.5 GiB" -> {"1.5", 1.5, "GiB"}.
struct Quantity {
    std::string number;   // as typed
    double value = 0;
    std::string unit;     // as typed, whitespace around it removed
};

// Throws "'TEXT': a <what> cannot be negative" or "'TEXT': not a <what> (<example>)".
Quantity split_quantity(std::string_view text, const std::string& quoted, const char* what, const char* example) {
    std::string_view t = trim(text);
    if (!t.empty() && t.front() == '-')
        throw Error(quoted + ": a " + std::string(what) + " cannot be negative");
    size_t i = 0, digits = 0;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++digits;
    if (i < t.size() && t[i] == '.') {
        ++i;
        while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++digits;
    }
    if (digits == 0) throw Error(quoted + ": not a " + what + " (" + example + ")");
    Quantity q;
    q.number = std::string(t.substr(0, i));
    q.value = std::strtod(q.number.c_str(), nullptr);
    // Digits past a double (400 nines) read as inf: a duration or a bandwidth of inf was taken
    // (advise --host-bandwidth), a size said "too large" only by its own bound.
    if (!std::isfinite(q.value)) throw Error(quoted + ": too large");
    q.unit = std::string(trim(t.substr(i)));
    return q;
}

constexpr const char* kUnits = "B, KiB, MiB, GiB, TiB, kB, MB, GB, TB";

// bytes per unit, 0 for a unit the grammar does not have.
double unit_bytes(const std::string& unit) {
    static const std::pair<const char*, double> units[] = {
        {"b", 1},           {"k", 0x1p10},  {"kib", 0x1p10}, {"m", 0x1p20},  {"mib", 0x1p20}, {"g", 0x1p30},
        {"gib", 0x1p30},    {"t", 0x1p40},  {"tib", 0x1p40}, {"kb", 1e3},    {"mb", 1e6},     {"gb", 1e9},
        {"tb", 1e12},
    };
    std::string u;
    for (char c : unit) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& [name, bytes] : units)
        if (u == name) return bytes;
    return 0;
}

// "500GiB or 500GB": at most two of the number with a unit that fall within [min, max].
std::string size_suggestions(const Quantity& q, int64_t min, int64_t max) {
    std::string out;
    int n = 0;
    for (const char* unit : {"GiB", "GB", "MiB", "MB", "KiB", "kB", "B"}) {
        double bytes = std::floor(q.value * unit_bytes(unit) + 0.5);
        if (n == 2 || bytes < static_cast<double>(min) || bytes > static_cast<double>(max)) continue;
        out += (n++ ? " or " : "") + q.number + unit;
    }
    return out;
}

// number (digits with at most one '.') x per, rounded to the nearest whole, halves up, in 128-bit
// integers: digits / 10^k x per = floor((2 x digits x per + 10^k) / (2 x 10^k)). Empty when the
// number has more than 19 digits or per is not whole (the caller reads it through a double).
std::optional<unsigned __int128> exact_bytes(const std::string& number, double per) {
    if (per != std::floor(per) || per > 0x1p50) return std::nullopt;
    unsigned __int128 digits = 0, scale = 1;
    int count = 0;
    bool fraction = false;
    for (char c : number) {
        if (c == '.') {
            fraction = true;
            continue;
        }
        if (++count > 19) return std::nullopt;
        digits = digits * 10 + static_cast<unsigned>(c - '0');
        if (fraction) scale *= 10;
    }
    const auto whole = static_cast<unsigned __int128>(per);
    return (2 * digits * whole + scale) / (2 * scale);
}

// A bound of a bandwidth as a user writes one: 1000 -> "1kB/s", 1e15 -> "1000TB/s".
std::string bandwidth_text(double bytes_per_s) {
    static const std::pair<const char*, double> units[] = {{"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"kB/s", 1e3}};
    for (const auto& [unit, per] : units)
        if (bytes_per_s >= per) {
            char text[48];
            std::snprintf(text, sizeof text, "%.15g%s", bytes_per_s / per, unit);
            return text;
        }
    char text[48];
    std::snprintf(text, sizeof text, "%.15gB/s", bytes_per_s);
    return text;
}

}  // namespace

int64_t parse_size(std::string_view text, int64_t min, int64_t max) {
    const std::string quoted = quoted_value(text);
    Quantity q = split_quantity(text, quoted, "size", "a number and a unit: 40GiB, 512 MB");
    if (q.unit.empty()) {
        std::string hint = size_suggestions(q, min, max);
        throw Error(quoted + ": a size needs a unit" + (hint.empty() ? "" : ": " + hint) + " (mhc help sizes)");
    }
    const double per = unit_bytes(q.unit);
    if (per == 0)
        throw Error(quoted + ": unknown unit '" + q.unit + "' (" + kUnits + "; mhc help sizes)");
    // To the nearest byte, halves up: exactly where the number has at most 19 digits (a double
    // holds whole bytes only up to 2^53: `72057594037927935B` read as 2^56 before 2026-12-05,
    // found by tests/sim/reference_allocator_outside_compare.py), else through a double.
    const std::optional<unsigned __int128> exact = exact_bytes(q.number, per);
    const double bytes = exact ? static_cast<double>(*exact) : std::floor(q.value * per + 0.5);
    if (exact ? *exact >= (static_cast<unsigned __int128>(1) << 63) : bytes >= 0x1p63)
        throw Error(quoted + ": too large");
    const auto b = exact ? static_cast<int64_t>(*exact) : static_cast<int64_t>(bytes);
    if (b < min) throw Error(quoted + ": at least " + format_bytes(min));
    if (b > max) throw Error(quoted + ": at most " + format_bytes(max));
    return b;
}

double parse_share(std::string_view text, double max_percent) {
    const std::string quoted = quoted_value(text);
    Quantity q = split_quantity(text, quoted, "share", "a percentage: 70%");
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g%%", max_percent);
    if (q.unit.empty()) {
        if (q.value <= max_percent) throw Error(quoted + ": a share needs a '%': " + q.number + "%");
        throw Error(quoted + ": a share needs a '%' and is at most " + limit);
    }
    if (q.unit != "%") throw Error(quoted + ": not a percentage (a number and '%': 70%)");
    if (q.value > max_percent) throw Error(quoted + ": at most " + limit);
    return q.value / 100.0;
}

int64_t parse_bytes(std::string_view text) {
    std::string_view t = trim(text);
    if (t.find_first_not_of("0123456789") == std::string_view::npos)
        if (auto bytes = parse_integer<int64_t>(t)) return *bytes;
    return parse_size(text);
}

// Durations follow the sizes' grammar: digits with an optional fraction, then a unit (ns, us,
// ms, s, min, h; spaces may stand around it); no sign, exponent or other base (0x10 was read as
// 16 s), and no bare number (7 could mean 7 s or 7 us) unless the option names its unit.
double parse_seconds(std::string_view text, std::string_view bare_unit) {
    static const std::pair<const char*, double> units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3},
                                                           {"s", 1},     {"min", 60},  {"h", 3600}};
    const std::string quoted = quoted_value(text);
    // A bare number where the option names its unit, as the option read it before (any decimal,
    // an exponent included: --max-replay-minutes 1e-9).
    if (!bare_unit.empty() && decimal_refusal(std::string(text)).empty()) {
        const double value = std::strtod(std::string(text).c_str(), nullptr);
        if (value < 0) throw Error(quoted + ": a duration cannot be negative");
        if (!std::isfinite(value)) throw Error(quoted + ": too large");
        return parse_seconds("1" + std::string(bare_unit)) * (value + 0.0);
    }
    const Quantity quantity = split_quantity(text, quoted, "duration", "a number and a unit: 6us, 2.5 ms, 90min");
    const std::string unit = lower(quantity.unit);
    const std::string& number = quantity.number;
    if (unit.empty()) {
        if (!bare_unit.empty())
            throw Error(quoted + ": a bare number is written without spaces: " + number + " or " + number +
                        std::string(bare_unit));
        throw Error(quoted + ": a duration needs a unit: " + number + "us, " + number + "ms or " + number + "s");
    }
    for (const auto& [name, seconds] : units)
        if (unit == name) return quantity.value * seconds;
    if (unit == "m")
        throw Error(quoted + ": 'm' could be minutes or milliseconds: write " + number + "min or " + number + "ms");
    throw Error(quoted + ": unknown unit '" + quantity.unit + "' (ns, us, ms, s, min, h)");
}

double parse_bandwidth(std::string_view text) {
    const std::string quoted = quoted_value(text);
    std::string_view t = trim(text);
    // "/s", with any spaces and case, is the same size per second.
    if (size_t slash = t.rfind('/'); slash != std::string_view::npos) {
        std::string per = lower(t.substr(slash + 1));
        if (per != "s") throw Error(quoted + ": a bandwidth is a size per second (25GB/s; mhc help sizes)");
        t = trim(t.substr(0, slash));
    }
    Quantity q = split_quantity(t, quoted, "bandwidth", "a size per second: 25GB/s");
    if (q.unit.empty())
        throw Error(quoted + ": a bandwidth needs a unit: " + q.number + "GB/s or " + q.number + "GiB/s (mhc help sizes)");
    const double per = unit_bytes(q.unit);
    if (per == 0) throw Error(quoted + ": unknown unit '" + q.unit + "' (" + kUnits + ", per second; mhc help sizes)");
    if (q.value <= 0) throw Error(quoted + ": must be positive");
    return q.value * per;
}

double parse_bandwidth_in(std::string_view text, double min, double max) {
    const double rate = parse_bandwidth(text);
    if (rate < min || rate > max)
        throw Error(quoted_value(text) + ": not in [" + bandwidth_text(min) + ", " + bandwidth_text(max) + "]");
    return rate;
}

std::string format_bytes(int64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (std::fabs(v) >= 1024 && u < 6) {
        v /= 1024;
        ++u;
    }
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
