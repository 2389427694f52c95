#include "mhc/viewer/axis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mhc/common/units.hpp"

namespace mhc::viewer {

std::vector<double> byte_ticks(double y_max, float height_px, float min_gap_px) {
    std::vector<double> out;
    if (!(y_max > 0) || !(height_px > 0) || !(min_gap_px > 0) || height_px < min_gap_px) return out;
    double unit = 1;
    while (unit * 1024 <= y_max / 2) unit *= 1024;
    double step = unit * std::pow(10.0, std::floor(std::log10(y_max / 4 / unit)));
    // The first of 1, 2, 5, 10, 20, ... x step with at most 7 lines and min_gap_px between them.
    const double px_per_byte = static_cast<double>(height_px) / y_max;
    for (double m = 1;; m *= 10) {
        double found = 0;
        for (double factor : {1.0, 2.0, 5.0})
            if (y_max / (step * m * factor) <= 7 && step * m * factor * px_per_byte >= min_gap_px) {
                found = step * m * factor;
                break;
            }
        if (found > 0) {
            step = found;
            break;
        }
        if (step * m > y_max) return out;   // not one line fits
    }
    step = std::max(step, 1.0);   // whole bytes: a curve of a few bytes has no "0 B" lines
    const double top = y_max - min_gap_px / 2 / px_per_byte;
    for (double v = step; v <= top; v += step) out.push_back(v);
    return out;
}

ByteRange byte_range(double data_min, double data_max, bool fit, double headroom) {
    data_max = std::max(data_max, 0.0);
    if (!fit) return {0, std::max(data_max, 1.0) * (1 + headroom)};
    data_min = std::clamp(data_min, 0.0, data_max);
    const double spread = data_max - data_min;
    const double margin = spread > 0 ? spread * headroom : std::max(data_max * 0.005, 32.0);
    return {std::max(data_min - margin, 0.0), data_max + margin};
}

std::vector<double> byte_ticks(ByteRange range, float height_px, float min_gap_px) {
    const double span = range.span();
    std::vector<double> out;
    if (!(range.lo > 0)) {   // zero-based: as it always was
        return byte_ticks(range.hi, height_px, min_gap_px);
    }
    // The step of a zero-based plot of the span, then its lines moved up to the range.
    const std::vector<double> zero = byte_ticks(span, height_px, min_gap_px);
    if (zero.empty()) return out;
    const double step = zero.size() > 1 ? zero[1] - zero[0] : zero[0];
    const double half_label = min_gap_px / 2 / (static_cast<double>(height_px) / span);
    for (double v = std::ceil((range.lo + half_label) / step) * step; v <= range.hi - half_label; v += step)
        out.push_back(v);
    return out;
}

std::vector<std::string> byte_tick_labels_fitted(const std::vector<double>& ticks) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (ticks.size() < 2) return byte_tick_labels(ticks);
    const double step = ticks[1] - ticks[0];
    if (ticks[0] < 1000 * step) return byte_tick_labels(ticks);
    // The base in the largest unit it holds one of, with the decimals that resolve a step.
    int unit = 0;
    while (unit < 6 && ticks[0] >= std::pow(1024.0, unit + 1)) ++unit;
    const double scale = std::pow(1024.0, unit);
    const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step / scale) - 1e-9)), 0, 6);
    std::vector<std::string> out;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f %s", decimals, ticks[0] / scale, units[unit]);
    out.emplace_back(buf);
    std::vector<double> above;
    for (size_t i = 1; i < ticks.size(); ++i) above.push_back(ticks[i] - ticks[0]);
    for (std::string& text : byte_tick_labels(above)) out.push_back("+" + text);
    return out;
}

std::vector<std::string> byte_tick_labels(const std::vector<double>& ticks) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    std::vector<std::string> out;
    if (ticks.empty()) return out;
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : ticks[0];
    // The largest unit in which the step is a whole number of tenths (0.5 GiB, 0.1 GiB, 500 MiB).
    int unit = 0;
    for (int k = 6; k > 0; --k) {
        const double tenths = step / std::pow(1024.0, k) * 10;
        if (tenths >= 1 - 1e-9 && std::fabs(tenths - std::round(tenths)) < 1e-6 * tenths) {
            unit = k;
            break;
        }
    }
    const double scale = std::pow(1024.0, unit);
    const double in_unit = step / scale;
    const int decimals = std::fabs(in_unit - std::round(in_unit)) < 1e-6 * in_unit ? 0 : 1;
    for (double value : ticks) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.*f %s", decimals, value / scale, units[unit]);
        out.emplace_back(buf);
    }
    return out;
}

std::vector<Tick> time_ticks(TimeRange range, float width, float min_px, bool events, const char* noun) {
    std::vector<Tick> out;
    if (range.span() <= 0 || width <= 0) return out;
    double ns_per_px = static_cast<double>(range.span()) / width;
    double want = ns_per_px * min_px;
    // Smallest step on the 1-2-5 grid that leaves min_px between ticks.
    int64_t step = 1;
    for (int64_t p = 1;; p *= 10) {
        if (p >= want) { step = p; break; }
        if (2 * p >= want) { step = 2 * p; break; }
        if (5 * p >= want) { step = 5 * p; break; }
        if (p > INT64_MAX / 100) { step = p; break; }
    }
    int64_t major = (std::to_string(step)[0] == '2') ? step * 5 : step * 10;
    int64_t first = (range.t0 >= 0 ? (range.t0 + step - 1) / step : range.t0 / step) * step;
    for (int64_t t = first; t <= range.t1; t += step) {
        Tick k;
        k.t = t;
        k.x = static_cast<float>(range.x_of(t, width));
        k.major = t % major == 0;
        if (k.major) k.label = events ? std::string(noun) + " #" + std::to_string(t) : format_time(t, major);
        out.push_back(std::move(k));
        if (out.size() > 10000) break;
    }
    // A range shorter than one major step (a few events, or nanoseconds, on a wide plot: the step
    // stops at 1) had ticks and no label at all: label every m-th step instead, the fewest that
    // leave 2.5 x min_px between labels, and at least one.
    if (!out.empty() && std::none_of(out.begin(), out.end(), [](const Tick& tick) { return tick.major; })) {
        const double px_per_step = static_cast<double>(step) / ns_per_px;
        int64_t every = step;
        for (int64_t times : {1, 2, 5, 10})
            if (px_per_step * static_cast<double>(times) >= 2.5 * min_px) { every = step * times; break; }
        bool any = false;
        for (Tick& tick : out)
            if (tick.t % every == 0 || (!any && &tick == &out.back())) {   // at least one: the last tick
                tick.major = any = true;
                tick.label = events ? std::string(noun) + " #" + std::to_string(tick.t) : format_time(tick.t, every);
            }
    }
    return out;
}

namespace {
struct Unit { int64_t ns; const char* name; };
constexpr Unit kUnits[] = {{1'000'000'000, "s"}, {1'000'000, "ms"}, {1'000, "us"}, {1, "ns"}};
}  // namespace

std::string format_time(int64_t t, int64_t resolution_ns) {
    int64_t mag = std::max<int64_t>(std::llabs(t), resolution_ns);
    const Unit* u = &kUnits[3];
    for (const Unit& c : kUnits)
        if (mag >= c.ns) { u = &c; break; }
    int decimals = 0;
    for (int64_t q = u->ns; q > std::max<int64_t>(resolution_ns, 1) && decimals < 9; q /= 10) ++decimals;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f %s", decimals, static_cast<double>(t) / static_cast<double>(u->ns), u->name);
    return buf;
}

// mhc's one duration format (common/src/units.cpp): the header's "40.1 ms" read beside mhc info's
// "duration 40.11 ms" as another figure.
std::string format_duration(int64_t ns) { return format_ns(ns); }

std::string TimeText::at(int64_t time, int64_t resolution_ns) const {
    return events ? std::string(noun) + " #" + std::to_string(time) : format_time(time, resolution_ns);
}

std::string TimeText::span(int64_t ns) const {
    if (!events) return format_duration(ns);
    return std::to_string(ns) + " " + noun + (ns == 1 ? "" : "s");
}

std::string TimeText::interval(int64_t t0, int64_t t1, int64_t resolution_ns) const {
    if (!events)
        return "start " + at(t0, resolution_ns) + ", end " + at(t1, resolution_ns) + " (" + span(t1 - t0) + ")";
    if (t1 - t0 <= 1) return at(t0);
    return at(t0) + " .. #" + std::to_string(t1 - 1) + " (" + span(t1 - t0) + ")";
}

std::string TimeText::range(int64_t t0, int64_t t1, int64_t resolution_ns) const {
    if (events) return interval(t0, t1);
    return at(t0, resolution_ns) + " .. " + at(t1, resolution_ns) + " (" + span(t1 - t0) + ")";
}

std::string TimeText::axis_title() const { return events ? std::string(noun) + " order" : std::string(); }

TimeRange clamp(TimeRange r, TimeRange limits) {
    int64_t span = std::clamp<int64_t>(r.span(), std::min(kMinSpan, limits.span()), limits.span());
    int64_t t0 = std::clamp<int64_t>(r.t0, limits.t0, limits.t1 - span);
    return {t0, t0 + span};
}

TimeRange focus_range(int64_t t0, int64_t t1, TimeRange limits) {
    const int64_t length = std::max<int64_t>(t1 - t0, 0);
    const int64_t span = std::max(length + 2 * (length / 10), kMinSpan);
    const int64_t start = t0 + length / 2 - span / 2;
    return clamp({start, start + span}, limits);
}

TimeRange zoom(TimeRange r, double factor, int64_t anchor, TimeRange limits) {
    double a = static_cast<double>(anchor - r.t0) / static_cast<double>(r.span());
    double span = std::max(static_cast<double>(r.span()) * factor, static_cast<double>(kMinSpan));
    span = std::min(span, static_cast<double>(limits.span()));
    int64_t t0 = anchor - static_cast<int64_t>(a * span);
    return clamp({t0, t0 + static_cast<int64_t>(span)}, limits);
}

TimeRange pan(TimeRange r, int64_t dt, TimeRange limits) {
    return clamp({r.t0 + dt, r.t1 + dt}, limits);
}

}  // namespace mhc::viewer
