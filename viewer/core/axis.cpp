#include "mhc/viewer/axis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mhc::viewer {

std::vector<Tick> time_ticks(TimeRange r, float width, float min_px, bool events) {
    std::vector<Tick> out;
    if (r.span() <= 0 || width <= 0) return out;
    double ns_per_px = static_cast<double>(r.span()) / width;
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
    int64_t first = (r.t0 >= 0 ? (r.t0 + step - 1) / step : r.t0 / step) * step;
    for (int64_t t = first; t <= r.t1; t += step) {
        Tick k;
        k.t = t;
        k.x = static_cast<float>(r.x_of(t, width));
        k.major = t % major == 0;
        if (k.major) k.label = events ? "event #" + std::to_string(t) : format_time(t, major);
        out.push_back(std::move(k));
        if (out.size() > 10000) break;
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

std::string format_duration(int64_t ns) {
    const Unit* u = &kUnits[3];
    for (const Unit& c : kUnits)
        if (std::llabs(ns) >= c.ns) { u = &c; break; }
    char buf[64];
    double v = static_cast<double>(ns) / static_cast<double>(u->ns);
    if (u->ns == 1) std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(ns));
    else std::snprintf(buf, sizeof buf, "%.*f %s", std::fabs(v) < 10 ? 2 : (std::fabs(v) < 100 ? 1 : 0), v, u->name);
    return buf;
}

std::string TimeText::at(int64_t time, int64_t resolution_ns) const {
    return events ? "event #" + std::to_string(time) : format_time(time, resolution_ns);
}

std::string TimeText::span(int64_t ns) const {
    if (!events) return format_duration(ns);
    return std::to_string(ns) + (ns == 1 ? " event" : " events");
}

TimeRange clamp(TimeRange r, TimeRange limits) {
    int64_t span = std::clamp<int64_t>(r.span(), std::min(kMinSpan, limits.span()), limits.span());
    int64_t t0 = std::clamp<int64_t>(r.t0, limits.t0, limits.t1 - span);
    return {t0, t0 + span};
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
