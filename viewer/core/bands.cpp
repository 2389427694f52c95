#include "mhc/viewer/bands.hpp"

#include <algorithm>
#include <climits>

#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

StackGroup stack_group(trace::Category c, int64_t t_alloc, int64_t t_free, int64_t t_begin, int64_t t_end) {
    switch (c) {
        case trace::Category::Param: return StackGroup::Param;
        case trace::Category::Optimizer: return StackGroup::Optimizer;
        case trace::Category::Grad: return StackGroup::Grad;
        default: break;
    }
    const int64_t edge = (t_end - t_begin) / 20;
    return t_alloc <= t_begin + edge && t_free >= t_end - edge ? StackGroup::LongLived : StackGroup::Transient;
}

int64_t BandLayout::hit(int x, double y, int64_t* summary) const {
    if (x < 0 || static_cast<size_t>(x) >= total.size() || y < 0) return -2;
    for (const BandSegment& s : segments)
        if (x >= s.x0 && x < s.x1 && y >= s.y0 && y < s.y1) return bands[s.band];
    for (size_t k = 0; k < summaries.size(); ++k) {
        const SummarySegment& s = summaries[k];
        if (x >= s.x0 && x < s.x1 && y >= s.y0 && y < s.y1) {
            if (summary) *summary = static_cast<int64_t>(k);
            return -1;
        }
    }
    return -2;
}

size_t AllocationTable::overlapping(int64_t t0, int64_t t1) const {
    // Made before t1, less those freed by t0 (each of which was made before t1 too).
    auto made = std::lower_bound(sorted_alloc.begin(), sorted_alloc.end(), t1) - sorted_alloc.begin();
    auto gone = std::upper_bound(sorted_free.begin(), sorted_free.end(), t0) - sorted_free.begin();
    return static_cast<size_t>(std::max<std::ptrdiff_t>(made - gone, 0));
}

void AllocationTable::list_overlapping(int64_t t0, int64_t t1, std::vector<uint32_t>& out) const {
    // Those made before t1 are a prefix of the allocation-time order; of them, descend only into
    // blocks holding one freed after t0.
    const size_t made = static_cast<size_t>(std::lower_bound(sorted_alloc.begin(), sorted_alloc.end(), t1) - sorted_alloc.begin());
    if (made == 0) return;
    auto visit = [&](auto& self, size_t level, size_t node) -> void {
        // level 0: entry `node`; level L > 0: block `node` of free_max[L - 1].
        if (level == 0) {
            if (by_alloc_free[node] > t0) out.push_back(by_alloc[node]);
            return;
        }
        if (free_max[level - 1][node] <= t0) return;
        const size_t below = level == 1 ? by_alloc_free.size() : free_max[level - 2].size();
        size_t span = 1;   // entries under one node of the level below
        for (size_t l = 1; l < level; ++l) span *= kFreeMaxFan;
        for (size_t c = node * kFreeMaxFan; c < std::min(below, node * kFreeMaxFan + kFreeMaxFan); ++c) {
            if (c * span >= made) return;
            self(self, level - 1, c);
        }
    };
    const size_t top = free_max.size();
    const size_t nodes = top == 0 ? by_alloc_free.size() : free_max.back().size();
    for (size_t node = 0; node < nodes; ++node) visit(visit, top, node);
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

// The ranks (positions in by_size) the band selection scans, largest first: every one down to
// the smallest drawable size, or, when far fewer allocations overlap the range, only theirs
// (listed through the allocation-time index into `ranks`): a zoomed-in frame costs what it
// shows, not the trace's length.
struct ScanOrder {
    bool listed = false;   // the ranks are ranks[0, count); else 0 .. count - 1
    size_t count = 0;
};
ScanOrder scan_order(const AllocationTable& a, TimeRange range, double min_bytes, std::vector<uint32_t>& ranks) {
    ScanOrder o;
    o.count = static_cast<size_t>(
        std::partition_point(a.by_size.begin(), a.by_size.end(),
                             [&](uint32_t i) { return static_cast<double>(a.bytes[i]) >= min_bytes; }) -
        a.by_size.begin());
    if (a.overlapping(range.t0, range.t1) * 8 >= o.count) return o;
    o.listed = true;
    ranks.clear();
    a.list_overlapping(range.t0, range.t1, ranks);
    size_t kept = 0;
    for (uint32_t i : ranks)
        if (static_cast<double>(a.bytes[i]) >= min_bytes) ranks[kept++] = a.size_rank[i];
    ranks.resize(kept);
    std::sort(ranks.begin(), ranks.end());
    o.count = kept;
    return o;
}

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


// Stacks one column after another: the drawn bands of the long-lived groups, the long-lived
// summaries per colour key, the other bands, their summaries per key (without keys: one
// summary on top, up to the column's live bytes). Segments grow while their heights repeat.
struct Stacker {
    const AllocationTable& a;
    const BandKeys* keys;
    BandLayout& out;
    std::vector<int64_t> open{}, open_summary{};   // segment being extended, per band / per class
    std::vector<double> drawn{};               // per class: bytes of its bands in this column
    std::vector<int64_t> band_alloc{}, band_free{};   // per band: its allocation's times

    size_t classes() const { return keys ? keys->series.size() : 1; }
    size_t class_of(uint32_t i) const {
        return keys ? 2 * keys->key[i] + (long_lived(static_cast<StackGroup>(a.group[i])) ? 0 : 1) : 0;
    }

    void band(size_t b, size_t x, double& y) {
        uint32_t i = out.bands[b];
        double h = static_cast<double>(a.bytes[i]);
        int64_t s = open[b];
        if (s >= 0 && out.segments[static_cast<size_t>(s)].y0 == y) {
            out.segments[static_cast<size_t>(s)].x1 = static_cast<int16_t>(x + 1);
        } else {
            open[b] = static_cast<int64_t>(out.segments.size());
            out.segments.push_back({static_cast<uint32_t>(b), static_cast<int16_t>(x), static_cast<int16_t>(x + 1), y, y + h});
        }
        drawn[class_of(i)] += h;
        y += h;
    }

    void summary(size_t cls, size_t x, double bytes, double& y) {
        if (bytes <= 0) { open_summary[cls] = -1; return; }
        int64_t s = open_summary[cls];
        if (s >= 0) {
            SummarySegment& g = out.summaries[static_cast<size_t>(s)];
            if (g.y0 == y && g.y1 == y + bytes) { g.x1 = static_cast<int16_t>(x + 1); y += bytes; return; }
        }
        open_summary[cls] = static_cast<int64_t>(out.summaries.size());
        out.summaries.push_back({static_cast<uint8_t>(cls / 2), cls % 2 == 0, static_cast<int16_t>(x),
                                 static_cast<int16_t>(x + 1), y, y + bytes});
        y += bytes;
    }

    // The summaries of one group: per key, its live bytes less its drawn bands, at the column's
    // instant, left to right with a galloping search. The long-lived group's (few samples) are
    // read in every column; the others' at the first column of blocks of kSummaryBlock columns (a
    // summary is an aggregate: its outline need not follow each pixel; read in every column they
    // cost twice the frame on 10 M events), and they never stack above the column's live maximum
    // (read in another column of the block, they stood up to 2.4% above it).
    static constexpr size_t kSummaryBlock = 4;
    std::vector<double> block_bytes{};   // per class, for the current column (long-lived) or block
    std::vector<size_t> hint{};          // per class: last sample found
    void summaries(size_t column, int64_t instant, bool long_group, double& top) {
        if (!keys) return;
        if (long_group)
            for (size_t cls = 0; cls < classes(); cls += (column % kSummaryBlock == 0 ? 1 : 2))
                block_bytes[cls] = keys->series[cls].value_at(instant, hint[cls]);
        for (size_t cls = long_group ? 0 : 1; cls < classes(); cls += 2)
            summary(cls, column,
                    std::min(std::max(0.0, block_bytes[cls] - drawn[cls]), std::max(0.0, out.total[column] - top)), top);
    }

    // `at[x]`: the instant column x shows (its live maximum's); a band is stacked in the column
    // when alive then, not whenever it overlaps the column.
    void run(size_t width, const std::vector<int64_t>& at) {
        const size_t B = out.bands.size();
        open.assign(B, -1);
        open_summary.assign(classes(), -1);
        block_bytes.assign(classes(), 0.0);
        hint.assign(classes(), 0);
        // The bands' times side by side: every column tests every band, and the allocations'
        // own columns are scattered over the whole trace's memory.
        band_alloc.resize(B);
        band_free.resize(B);
        for (size_t b = 0; b < B; ++b) {
            band_alloc[b] = a.t_alloc[out.bands[b]];
            band_free[b] = a.t_free[out.bands[b]];
        }
        size_t split = 0;   // first band of the transient group
        while (split < B && long_lived(static_cast<StackGroup>(a.group[out.bands[split]]))) ++split;
        for (size_t x = 0; x < width; ++x) {
            const int64_t instant = at[x];
            drawn.assign(classes(), 0.0);
            double y = 0;
            auto stack = [&](size_t from, size_t to) {
                for (size_t b = from; b < to; ++b) {
                    if (band_alloc[b] > instant || band_free[b] <= instant) open[b] = -1;
                    else band(b, x, y);
                }
            };
            stack(0, split);
            summaries(x, instant, true, y);
            stack(split, B);
            out.drawn_top[x] = y;
            summaries(x, instant, false, y);
            if (!keys) summary(0, x, out.total[x] - y, y);
            out.stack_top[x] = y;
            // The bands alive at the column's instant add up to its live maximum; summaries read
            // per block of columns may differ a little.
            out.total[x] = std::max(out.total[x], y);
            out.y_max = std::max(out.y_max, y);
        }
    }

    // The legend's figures: the bytes of each key at the range's peak, and how many of them are
    // in allocations not drawn as bands.
    template <class T0, class T1>
    void peak(const Curve& live, T0 col_t0, T1 col_t1) {
        if (out.total.empty() || out.peak_col < 0) return;
        auto px = static_cast<size_t>(out.peak_col);
        out.peak_time = live.empty() ? col_t0(px) : live.argmax(col_t0(px), col_t1(px));
        const int64_t t = out.peak_time;
        const size_t K = keys ? keys->count() : 1;
        out.peak_key_bytes.assign(K, 0.0);
        std::vector<double> drawn_at(K, 0.0);
        for (uint32_t i : out.bands)
            if (a.t_alloc[i] <= t && a.t_free[i] > t) drawn_at[class_of(i) / (keys ? 2 : 1)] += static_cast<double>(a.bytes[i]);
        for (size_t k = 0; k < K; ++k) {
            out.peak_key_bytes[k] = keys ? keys->series[2 * k].value_at(t) + keys->series[2 * k + 1].value_at(t)
                                         : live.value_at(t);
            out.peak_summarised_bytes += std::max(0.0, out.peak_key_bytes[k] - drawn_at[k]);
        }
    }
};

// Every figure of `out` emptied, its per-column arrays `columns` wide and zero.
void clear_layout(BandLayout& out, size_t columns) {
    out.bands.clear();
    out.segments.clear();
    out.summaries.clear();
    out.peak_col = -1;
    out.peak_time = 0;
    out.peak_key_bytes.clear();
    out.peak_summarised_bytes = 0;
    out.summarised = 0;
    out.drawn_top.assign(columns, 0.0);
    out.stack_top.assign(columns, 0.0);
    out.total.assign(columns, 0.0);
    out.y_max = 0;
}

// The bands kept: all of them when they fit in max_bands; else the largest cap of bands per column
// (from per_column, doubling while the bands stay within half the budget) whose selection fits,
// or the first cap's first max_bands when even it overflows. `select(cap, bands)`: false when a
// (max_bands + 1)-th band would have been kept.
template <typename Select>
void choose_bands(const Select& select, size_t per_column, size_t max_bands, BandLayout& out) {
    out.per_column = 0;
    if (select(0, out.bands)) return;
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

}  // namespace

void layout_bands(const AllocationTable& table, const Curve& live, const BandKeys* keys, TimeRange range, int width,
                  int height_px, size_t max_bands, BandLayout& out, size_t per_column, const CurveColumns* columns) {
    const size_t column_count = static_cast<size_t>(std::max(width, 0));
    clear_layout(out, column_count);
    if (column_count == 0 || range.span() <= 0) return;

    CurveColumns own;
    const bool given = columns && columns->max.size() == column_count && columns->at.size() == column_count;
    if (!given) prepare_curve(live, range, width, own, true);
    const CurveColumns& cols = given ? *columns : own;
    for (size_t x = 0; x < column_count; ++x) out.total[x] = cols.max[x];
    out.peak_col = cols.peak_col;   // the live bytes' peak (before bands stack above it)
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
    // Each column shows one instant, that of its live maximum (the first): the allocations alive
    // together then, whose bytes add up to the curve's column maximum. Stacking every allocation
    // that overlaps a column summed ones that never lived at once: at full zoom-out on the H200
    // GPT-2 snapshot (1.4 ms a column, activations freed and made within one) the bands stacked
    // to 15 GiB under a live peak of 12.38 GiB. (prepare_curve's `instants`.)
    const std::vector<int64_t>& at = cols.at;
    // false: a (max_bands + 1)-th band would have been kept (`bands` holds the first max_bands).
    std::vector<uint32_t> ranks;
    const ScanOrder order = scan_order(table, range, min_bytes, ranks);

    auto select = [&](size_t cap, std::vector<uint32_t>& bands) {
        bands.clear();
        ColumnCounts counts(cap ? column_count : 0);
        const int32_t c = static_cast<int32_t>(std::min<size_t>(cap, INT32_MAX));
        for (size_t k = 0; k < order.count; ++k) {
            const size_t r = order.listed ? ranks[k] : k;
            uint32_t allocation = table.by_size[r];
            int64_t ta = table.by_size_alloc[r], tf = table.by_size_free[r];
            if (ta >= range.t1 || tf <= range.t0) continue;
            // Columns [x0, x1) the band is drawn in, by the same test as the stacking below (alive
            // at the column's instant; the instants increase with x). None: it lived between two
            // columns' instants, and is summarised.
            const size_t x0 = first_column(column_count, [&](size_t column) { return at[column] >= ta; });
            const size_t x1 = first_column(column_count, [&](size_t column) { return at[column] >= tf; });
            if (x0 >= x1) continue;
            if (cap) {
                if (counts.min(x0, x1) >= c) {
                    if (counts.min(0, column_count) >= c) break;
                    continue;
                }
            }
            if (bands.size() == max_bands) return false;
            if (cap) counts.add(x0, x1);
            bands.push_back(allocation);
        }
        return true;
    };
    choose_bands(select, per_column, max_bands, out);
    out.summarised = table.overlapping(range.t0, range.t1) - out.bands.size();
    // Stack order: long-lived groups at the bottom, then by allocation time.
    std::sort(out.bands.begin(), out.bands.end(), [&](uint32_t p, uint32_t q) {
        if (table.group[p] != table.group[q]) return table.group[p] < table.group[q];
        return table.t_alloc[p] != table.t_alloc[q] ? table.t_alloc[p] < table.t_alloc[q] : p < q;
    });
    Stacker st{table, keys, out};
    st.run(column_count, at);
    st.peak(live, col_t0, col_t1);
}

void clip_bands(BandLayout& out, size_t columns) {
    if (columns >= out.total.size()) return;
    const auto end = static_cast<int16_t>(columns);
    auto cut = [end](auto& rects) {
        rects.erase(std::remove_if(rects.begin(), rects.end(), [end](const auto& rect) { return rect.x0 >= end; }),
                    rects.end());
        for (auto& rect : rects) rect.x1 = std::min(rect.x1, end);
    };
    cut(out.segments);
    cut(out.summaries);
    out.drawn_top.resize(columns);
    out.stack_top.resize(columns);
    out.total.resize(columns);
}

}  // namespace mhc::viewer
