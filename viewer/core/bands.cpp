#include "mhc/viewer/bands.hpp"

#include <algorithm>
#include <climits>

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

namespace {

// Drawn bands per column: range add and range min over columns (lazy segment tree), so
// deciding whether a candidate band still has room costs O(log width).
class ColumnCounts {
public:
    explicit ColumnCounts(size_t n) : n_(std::max<size_t>(n, 1)), min_(4 * n_, 0), add_(4 * n_, 0) {}
    void add(size_t l, size_t r) { add(1, 0, n_, l, r); }
    int32_t min(size_t l, size_t r) const { return min(1, 0, n_, l, r); }

private:
    void add(size_t node, size_t lo, size_t hi, size_t l, size_t r) {
        if (r <= lo || hi <= l) return;
        if (l <= lo && hi <= r) { ++min_[node]; ++add_[node]; return; }
        size_t mid = (lo + hi) / 2;
        add(2 * node, lo, mid, l, r);
        add(2 * node + 1, mid, hi, l, r);
        min_[node] = add_[node] + std::min(min_[2 * node], min_[2 * node + 1]);
    }
    int32_t min(size_t node, size_t lo, size_t hi, size_t l, size_t r) const {
        if (r <= lo || hi <= l) return INT32_MAX;
        if (l <= lo && hi <= r) return min_[node];
        size_t mid = (lo + hi) / 2;
        return add_[node] + std::min(min(2 * node, lo, mid, l, r), min(2 * node + 1, mid, hi, l, r));
    }
    size_t n_;
    std::vector<int32_t> min_, add_;   // min_ includes this node's own pending add_
};

// First x in [0, n] where the monotone predicate holds (n if none).
template <class Pred>
size_t first_column(size_t n, Pred pred) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pred(mid)) hi = mid; else lo = mid + 1;
    }
    return lo;
}

}  // namespace

void layout_bands(const AllocationTable& a, const Curve& live, TimeRange range, int width,
                  int height_px, size_t max_bands, BandLayout& out, size_t per_column) {
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

    // Largest visible allocations first. When they all fit in max_bands, that is all. If not,
    // a band is kept only while some column it covers has fewer than `cap` drawn bands: a band
    // is drawn iff it is among the cap largest live in at least one of its columns, so
    // equal-sized activations of early steps cannot use up the budget of later ones. The cap
    // starts at per_column and doubles while the bands stay within half the budget. Each scan
    // stops at the first allocation too thin to draw or when every column is full; the rest is
    // summarised (counted without a scan).
    const double ns_per_col = static_cast<double>(range.span()) / width;
    auto col_t0 = [&](size_t x) { return range.t0 + static_cast<int64_t>(static_cast<double>(x) * ns_per_col); };
    auto col_t1 = [&](size_t x) { return std::max(col_t0(x) + 1, col_t0(x + 1)); };
    // false: a (max_bands + 1)-th band would have been kept (`bands` holds the first max_bands).
    auto select = [&](size_t cap, std::vector<uint32_t>& bands) {
        bands.clear();
        ColumnCounts counts(cap ? W : 0);
        const int32_t c = static_cast<int32_t>(std::min<size_t>(cap, INT32_MAX));
        for (size_t r = 0; r < a.by_size.size(); ++r) {
            uint32_t i = a.by_size[r];
            if (static_cast<double>(a.bytes[i]) < min_bytes) break;
            int64_t ta = a.by_size_alloc[r], tf = a.by_size_free[r];
            if (ta >= range.t1 || tf <= range.t0) continue;
            size_t x0 = 0, x1 = W;
            if (cap) {
                // Columns [x0, x1) the band is drawn in, by the same test as the stacking below.
                x0 = first_column(W, [&](size_t x) { return col_t1(x) > ta; });
                x1 = first_column(W, [&](size_t x) { return col_t0(x) >= tf; });
                if (x0 >= x1) continue;
                if (counts.min(x0, x1) >= c) {
                    if (counts.min(0, W) >= c) break;
                    continue;
                }
            }
            if (bands.size() == max_bands) return false;
            if (cap) counts.add(x0, x1);
            bands.push_back(i);
        }
        return true;
    };
    out.per_column = 0;
    if (!select(0, out.bands)) {
        std::vector<uint32_t> trial;
        size_t cap = std::max<size_t>(per_column, 1);
        bool fits = false;
        for (;;) {
            if (!select(cap, trial)) break;
            out.bands.swap(trial);
            out.per_column = cap;
            fits = true;
            if (out.bands.size() > max_bands / 2 || cap >= max_bands) break;
            cap *= 2;
        }
        if (!fits) {   // even the first cap overflows the budget: its first max_bands
            out.bands.swap(trial);
            out.per_column = cap;
        }
    }
    out.summarised = a.overlapping(range.t0, range.t1) - out.bands.size();
    std::sort(out.bands.begin(), out.bands.end(), [&](uint32_t p, uint32_t q) {
        return a.t_alloc[p] != a.t_alloc[q] ? a.t_alloc[p] < a.t_alloc[q] : p < q;
    });

    const size_t B = out.bands.size();
    std::vector<int64_t> open(B, -1);   // segment being extended, per band
    for (size_t x = 0; x < W; ++x) {
        int64_t c0 = col_t0(x), c1 = col_t1(x);
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
