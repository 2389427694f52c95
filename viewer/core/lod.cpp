#include "mhc/viewer/lod.hpp"

#include <algorithm>
#include <cmath>

namespace mhc::viewer {

void prepare_lane(const Lane& lane, TimeRange range, float width, float min_px,
                  std::vector<DrawItem>& out) {
    out.clear();
    if (lane.size() == 0 || range.span() <= 0 || width <= 0) return;
    const double px_per_ns = width / static_cast<double>(range.span());
    // Time that min_px pixels cover, at least 1 ns so that the search always advances.
    const int64_t min_ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(min_px / px_per_ns)));
    auto x_of = [&](int64_t t) {
        double x = static_cast<double>(t - range.t0) * px_per_ns;
        return static_cast<float>(std::clamp(x, 0.0, static_cast<double>(width)));
    };
    const auto& st = lane.t_start;
    size_t i = lane.first_ending_at_or_after(range.t0);
    // Items from `last` on start at or after the right edge: never drawn, never folded in.
    const size_t last = static_cast<size_t>(std::lower_bound(st.begin(), st.end(), range.t1) - st.begin());
    while (i < last) {
        int64_t end = lane.end_max(i);
        if (static_cast<double>(lane.t_end[i] - st[i]) * px_per_ns >= min_px) {
            out.push_back({x_of(st[i]), x_of(lane.t_end[i]), static_cast<uint32_t>(i), 1, lane.item_class(i)});
            ++i;
            continue;
        }
        // A narrow item: swallow every following item that starts less than min_px after the
        // run's end, jumping with binary search, and stop before an item wide enough to draw.
        size_t j = i + 1;
        while (j < last) {
            auto k = static_cast<size_t>(
                std::lower_bound(st.begin() + static_cast<std::ptrdiff_t>(j),
                                 st.begin() + static_cast<std::ptrdiff_t>(last), end + min_ns) -
                st.begin());
            if (k == j) break;
            // [j, k) start within the gap; a wide one among them ends the run where it starts.
            size_t stop = k;
            for (size_t q = j; q < k && q < j + 64; ++q)
                if (static_cast<double>(lane.t_end[q] - st[q]) * px_per_ns >= min_px) { stop = q; break; }
            if (stop != k) { j = stop; break; }
            end = std::max(end, lane.end_max(k - 1));
            j = k;
        }
        DrawItem d{x_of(st[i]), x_of(std::max(end, st[i])), static_cast<uint32_t>(i),
                   static_cast<uint32_t>(j - i), 0};
        if (lane.classified()) d.cls = j - i == 1 ? lane.item_class(i) : lane.dominant_class(i, j - i, &d.mixed);
        // A run is drawn at least min_px wide so that it stays visible.
        if (d.x1 - d.x0 < min_px) d.x1 = std::min(width, d.x0 + min_px);
        out.push_back(d);
        i = j;
    }
}

}  // namespace mhc::viewer
