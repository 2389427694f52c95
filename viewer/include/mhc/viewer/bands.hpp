#pragma once
// The active-memory view in the manner of PyTorch's memory_viz: every live allocation is a
// band stacked on the ones allocated before it, so a band drops when one below it is freed.
// Only the largest allocations visible in the range are drawn as bands: none under half a
// pixel tall, at most `max_bands`. When more would qualify, a band is drawn only if it is
// among the `cap` largest of one of its columns (cap starts at `per_column`, doubled while
// the bands stay within half the budget), so every part of the range gets its largest bands,
// not only the earliest steps of a trace of equal-sized activations. The rest are summarised
// in one band on top, whose top is the live-bytes curve. Work per frame: a few scans of a
// size-sorted copy (x log width when capped) + bands x width.
#include <cstdint>
#include <vector>

#include "mhc/viewer/curve.hpp"
#include "mhc/viewer/lod.hpp"

namespace mhc::viewer {

struct AllocationTable;   // data.hpp

struct BandSegment {
    uint32_t band = 0;      // index into BandLayout::bands
    int16_t x0 = 0, x1 = 0; // columns [x0, x1)
    double y0 = 0, y1 = 0;  // bytes from the bottom
};

struct BandLayout {
    std::vector<uint32_t> bands;       // allocation indices, in stack order (allocation order)
    std::vector<BandSegment> segments; // drawn rectangles
    std::vector<double> drawn_top;     // per column: top of the drawn bands (bytes)
    std::vector<double> total;         // per column: live bytes (max over the column)
    double y_max = 0;                  // vertical scale (bytes)
    size_t summarised = 0;             // allocations visible in range but not drawn as bands
    size_t per_column = 0;             // cap on bands per column used (0: none needed)

    // Band (allocation index) under column x at height y bytes; -1 summary/none, -2 nothing.
    int64_t hit(int x, double y) const;
};

inline constexpr size_t kBandsPerColumn = 64;

// `height_px` sets the half-pixel threshold below which allocations are summarised.
void layout_bands(const AllocationTable& allocs, const Curve& live, TimeRange range, int width,
                  int height_px, size_t max_bands, BandLayout& out, size_t per_column = kBandsPerColumn);

}  // namespace mhc::viewer
