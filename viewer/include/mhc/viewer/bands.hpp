#pragma once
// The active-memory view in the manner of PyTorch's memory_viz: every live allocation is a
// band stacked on the ones below it, so a band drops when one below it is freed. Long-lived
// state lies at the bottom (parameters, optimizer state, gradients, then allocations alive from
// the trace's start to its end), the rest above it in allocation order.
//
// Only the largest allocations visible in the range are drawn as bands: none under half a
// pixel tall, at most `max_bands`. When more would qualify, a band is drawn only if it is
// among the `cap` largest of one of its columns (cap starts at `per_column`, doubled while the
// bands stay within half the budget), so every part of the range gets its largest bands, not
// only the earliest steps of a trace of equal-sized activations. The rest are summarised by
// bytes: per colour key (BandKeys), the bytes of its smaller allocations in a muted band of its
// colour, right above the drawn bands of their group (long-lived or not). Work per frame: a few
// scans of a size-sorted copy (x log width when capped) + (bands + keys) x width.
#include <cstdint>
#include <vector>

#include "mhc/trace/model.hpp"
#include "mhc/viewer/curve.hpp"
#include "mhc/viewer/lod.hpp"

namespace mhc::viewer {

struct AllocationTable;   // data.hpp
struct BandKeys;          // band_colors.hpp

// Stack groups, bottom first.
enum class StackGroup : uint8_t { Param, Optimizer, Grad, LongLived, Transient };
// Parameters, optimizer state and gradients by category; any other allocation made in the first
// twentieth of the trace [t_begin, t_end] and alive in its last twentieth is long-lived too (an
// imported trace's weights, which carry no category).
StackGroup stack_group(trace::Category c, int64_t t_alloc, int64_t t_free, int64_t t_begin, int64_t t_end);
inline bool long_lived(StackGroup g) { return g != StackGroup::Transient; }

struct BandSegment {
    uint32_t band = 0;      // index into BandLayout::bands
    int16_t x0 = 0, x1 = 0; // columns [x0, x1)
    double y0 = 0, y1 = 0;  // bytes from the bottom
};

// The smaller allocations of one colour key in one group, drawn together.
struct SummarySegment {
    uint8_t key = 0;
    bool long_lived = false;
    int16_t x0 = 0, x1 = 0;
    double y0 = 0, y1 = 0;
};

struct BandLayout {
    std::vector<uint32_t> bands;       // allocation indices, in stack order
    std::vector<BandSegment> segments; // drawn rectangles
    std::vector<SummarySegment> summaries;
    std::vector<double> drawn_top;     // per column: top of the drawn bands (below the top summaries), bytes
    std::vector<double> stack_top;     // per column: top of everything stacked, bytes
    std::vector<double> total;         // per column: live bytes (max over the column)
    double y_max = 0;                  // vertical scale (bytes)
    size_t summarised = 0;             // allocations visible in range but not drawn as bands
    size_t per_column = 0;             // cap on bands per column used (0: none needed)
    // At the range's peak (the column with the most live bytes, at the time of its maximum):
    int peak_col = -1;
    int64_t peak_time = 0;
    std::vector<double> peak_key_bytes;   // live bytes per colour key (they add up to the peak)
    double peak_summarised_bytes = 0;     // of them, in allocations not drawn as bands

    // Band (allocation index) under column x at height y bytes; -1 a summary (`summary` set
    // to its index when given), -2 nothing.
    int64_t hit(int x, double y, int64_t* summary = nullptr) const;
};

inline constexpr size_t kBandsPerColumn = 64;

// `height_px` sets the half-pixel threshold below which allocations are summarised. Without
// `keys`, the summary is one area on top of each column, up to its live bytes. `columns`: the
// live curve's columns over the same range and width when the caller has them already.
void layout_bands(const AllocationTable& allocs, const Curve& live, const BandKeys* keys, TimeRange range, int width,
                  int height_px, size_t max_bands, BandLayout& out, size_t per_column = kBandsPerColumn,
                  const CurveColumns* columns = nullptr);

// Keeps the first `columns` columns of a layout: the memory view's range reaches past the
// recording's end when a selected run ends later, and allocations alive at the end (t_free
// kNoTime) would be drawn on to the run's end, where nothing was recorded. Segments and summaries
// are cut at the column, the per-column figures shortened (hit() then finds nothing past it).
void clip_bands(BandLayout& out, size_t columns);

}  // namespace mhc::viewer
