#include "mhc/viewer/bands.hpp"

#include <algorithm>

#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

int64_t BandLayout::hit(int x, double y) const {
    if (x < 0 || static_cast<size_t>(x) >= total.size() || y < 0) return -2;
    for (const BandSegment& s : segments)
        if (x >= s.x0 && x < s.x1 && y >= s.y0 && y < s.y1) return bands[s.band];
    if (y >= drawn_top[static_cast<size_t>(x)] && y < total[static_cast<size_t>(x)]) return -1;
    return -2;
}

size_t AllocationTable::overlapping(int64_t t0, int64_t t1) const {
    // Live at t0 (allocated at or before t0, freed after it) plus allocated in (t0, t1).
    auto live = static_cast<size_t>(live_count.value_at(t0));
    auto a = std::upper_bound(sorted_alloc.begin(), sorted_alloc.end(), t0);
    auto b = std::lower_bound(sorted_alloc.begin(), sorted_alloc.end(), t1);
    return live + static_cast<size_t>(std::max<std::ptrdiff_t>(b - a, 0));
}

void layout_bands(const AllocationTable& a, const Curve& live, TimeRange range, int width,
                  int height_px, size_t max_bands, BandLayout& out) {
    out.bands.clear();
    out.segments.clear();
    out.summarised = 0;
    const size_t W = static_cast<size_t>(std::max(width, 0));
    out.drawn_top.assign(W, 0.0);
    out.total.assign(W, 0.0);
    out.y_max = 0;
    if (W == 0 || range.span() <= 0) return;

    CurveColumns cols;
    prepare_curve(live, range, width, cols);
    for (size_t x = 0; x < W; ++x) out.total[x] = cols.max[x];
    out.y_max = std::max(cols.y_max, 1.0);
    const double min_bytes = 0.5 * out.y_max / std::max(height_px, 1);

    // Largest visible allocations first; the scan stops at the first one too thin to draw,
    // and everything not drawn is summarised (counted without a scan).
    for (size_t r = 0; r < a.by_size.size() && out.bands.size() < max_bands; ++r) {
        uint32_t i = a.by_size[r];
        if (static_cast<double>(a.bytes[i]) < min_bytes) break;
        if (a.by_size_alloc[r] >= range.t1 || a.by_size_free[r] <= range.t0) continue;
        out.bands.push_back(i);
    }
    out.summarised = a.overlapping(range.t0, range.t1) - out.bands.size();
    std::sort(out.bands.begin(), out.bands.end(), [&](uint32_t p, uint32_t q) {
        return a.t_alloc[p] != a.t_alloc[q] ? a.t_alloc[p] < a.t_alloc[q] : p < q;
    });

    const size_t B = out.bands.size();
    std::vector<int64_t> open(B, -1);   // segment being extended, per band
    const double ns_per_col = static_cast<double>(range.span()) / width;
    for (size_t x = 0; x < W; ++x) {
        int64_t c0 = range.t0 + static_cast<int64_t>(static_cast<double>(x) * ns_per_col);
        int64_t c1 = std::max(c0 + 1, range.t0 + static_cast<int64_t>(static_cast<double>(x + 1) * ns_per_col));
        double y = 0;
        for (size_t b = 0; b < B; ++b) {
            uint32_t i = out.bands[b];
            if (a.t_alloc[i] >= c1 || a.t_free[i] <= c0) { open[b] = -1; continue; }
            double h = static_cast<double>(a.bytes[i]);
            int64_t s = open[b];
            if (s >= 0 && out.segments[static_cast<size_t>(s)].y0 == y) {
                out.segments[static_cast<size_t>(s)].x1 = static_cast<int16_t>(x + 1);
            } else {
                open[b] = static_cast<int64_t>(out.segments.size());
                out.segments.push_back({static_cast<uint32_t>(b), static_cast<int16_t>(x),
                                        static_cast<int16_t>(x + 1), y, y + h});
            }
            y += h;
        }
        out.drawn_top[x] = y;
        // Bands live for part of a column can stack above the column's true maximum.
        out.total[x] = std::max(out.total[x], y);
        out.y_max = std::max(out.y_max, y);
    }
}

}  // namespace mhc::viewer
