#pragma once
// Time axis: tick placement and readable labels, and the navigation arithmetic (zoom about
// a point, pan, clamp) shared by every view.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/viewer/lod.hpp"

namespace mhc::viewer {

struct Tick {
    int64_t t = 0;
    float x = 0;
    bool major = false;
    std::string label;   // only on major ticks
};

// Ticks on a 1-2-5 grid with at least `min_px` between minor ticks; major every 5 or 10.
// `events`: the trace's timing is order only (meta timing), its times are event numbers, and
// labels read "event #N" (`noun` #N: "op #N" for an execution trace's ops) instead of a time.
std::vector<Tick> time_ticks(TimeRange range, float width, float min_px = 12.f, bool events = false,
                             const char* noun = "event");
// The byte values of a plot's grid lines (each labelled "512 MiB"), bottom up: steps of 1-2-5 x
// 1024^k bytes, at most 7 lines below `y_max` (the plot's top), lines at least `min_gap_px`
// apart on a plot `height_px` tall, so that labels `min_gap_px` tall never overlap, and none
// closer than half a label to the top edge, where its label would leave the plot. A plot too
// short for one label gets none.
std::vector<double> byte_ticks(double y_max, float height_px, float min_gap_px);
// The bytes a plot's height spans, bottom to top. Zero-based ([0, top], the default) or fitted to
// the data (`--fit-y`, the toolbar's "fit y"): a curve over a large baseline (SGLang's decode
// capture holds 141.4 GiB from before recording and moves by 10 MB) is a flat line on [0, top].
struct ByteRange {
    double lo = 0, hi = 1;
    double span() const { return hi - lo; }
    // Height fraction of `v` (0 at the bottom, 1 at the top; outside [0, 1] when off the plot).
    double fraction(double bytes) const { return span() > 0 ? (bytes - lo) / span() : 0; }
};
// The range a plot of data in [data_min, data_max] shows: [0, data_max x (1 + headroom)] when not
// `fit`; fitted, [data_min - m, data_max + m] with m = headroom x (data_max - data_min), not
// below 0, and a flat curve (data_min == data_max) in the middle of a range of 1% of its value
// (at least 64 B).
ByteRange byte_range(double data_min, double data_max, bool fit, double headroom = 0.08);
// byte_ticks over a range that need not start at 0: lines at multiples of the step inside it,
// none within half a label of either edge. For lo == 0 the same lines as byte_ticks(hi, ...).
std::vector<double> byte_ticks(ByteRange range, float height_px, float min_gap_px);
// The labels of byte_ticks' lines (the same step apart), all in one unit and with the decimals the
// step needs: "0.5 GiB", "1.0 GiB", "1.5 GiB"; "500 MiB", "1000 MiB", "1500 MiB" (a step of 500 MiB
// is no round part of a GiB). format_bytes wrote "512.00 MiB" beside "1.00 GiB", and a step of
// 500 MiB as "1000.00 MiB", "1.46 GiB".
std::vector<std::string> byte_tick_labels(const std::vector<double>& ticks);
// The labels of a fitted range's lines: byte_tick_labels' when they stay short, else (the lowest
// line a thousand steps and more above 0) the lowest line's value whole, in the largest unit with
// the decimals the step needs, and each other line as its distance above it: "141.402 GiB",
// "+2 MiB", "+4 MiB" (in one unit, "144794 MiB", "144796 MiB" read as noise).
std::vector<std::string> byte_tick_labels_fitted(const std::vector<double>& ticks);
// "1.2345 s" with as many decimals as `resolution_ns` needs, in the unit that suits `t`.
std::string format_time(int64_t t, int64_t resolution_ns);
// A duration as mhc prints one (mhc::format_ns): "850 ns", "12.30 us", "4.56 ms", "1.230 s".
std::string format_duration(int64_t ns);

// Times in words as the trace has them: recorded times, or event numbers when its timing is order
// only (meta timing: a snapshot without time_us, an execution trace alone), where a "time" is an
// event's place and a "duration" a count of events, so no text may read as nanoseconds.
struct TimeText {
    bool events = false;
    // What a number counts when order only: a snapshot's events, or an execution trace's ops (op k
    // from 1 lies on [k, k + 1): "op #k").
    const char* noun = "event";
    std::string at(int64_t time, int64_t resolution_ns = 1) const;   // "1.5000 ms", or "event #1500"
    std::string span(int64_t ns) const;                           // "2.30 ms", or "1500 events"
    // An item or a range [t0, t1): "start 1.5 ms, end 1.6 ms (100 us)"; order only, the numbers it
    // covers: "op #12" (one), "op #12 .. #15 (4 ops)", never an end that is the next one's start.
    std::string interval(int64_t t0, int64_t t1, int64_t resolution_ns = 1) const;
    // The range in view: "1.5 ms .. 2.5 ms (1.00 ms)", or as interval() when order only.
    std::string range(int64_t t0, int64_t t1, int64_t resolution_ns = 1) const;
    // The axis's title when order only ("op order", "event order"), else empty.
    std::string axis_title() const;
};

inline constexpr int64_t kMinSpan = 100;   // ns: the deepest zoom

// Zoom by `factor` (<1 zooms in) keeping `anchor` at the same screen position.
TimeRange zoom(TimeRange r, double factor, int64_t anchor, TimeRange limits);
TimeRange pan(TimeRange r, int64_t dt, TimeRange limits);
TimeRange clamp(TimeRange r, TimeRange limits);
// The range that shows [t0, t1) (a selected kernel, an allocation's lifetime) filling the view, as
// Perfetto's F does: with a tenth of its length either side, at least kMinSpan, within `limits`.
TimeRange focus_range(int64_t t0, int64_t t1, TimeRange limits);

}  // namespace mhc::viewer
