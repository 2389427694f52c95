#include "mhc/replay/retime.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace mhc::replay {

trace::TraceData retime(const trace::TraceData& t, const Measured& base, RetimeSummary* summary) {
    // (recorded, lag) at every measured kernel start and end, in recorded order.
    std::vector<std::pair<int64_t, int64_t>> points;
    points.reserve(base.kernel_times.size() * 2);
    for (const trace::RunKernelTime& m : base.kernel_times) {
        const int64_t k = t.kernel_at(m.kernel);
        if (k < 0) continue;
        points.emplace_back(t.kernels.t_start[k], m.t_start - t.kernels.t_start[k]);
        points.emplace_back(t.kernels.t_end[k], m.t_end - t.kernels.t_end[k]);
    }
    std::sort(points.begin(), points.end());
    int64_t run = 0;  // running maximum, floored at zero: replay never runs ahead of the trace
    for (auto& p : points) p.second = run = std::max(run, p.second);
    auto f = [&](int64_t x) {
        auto it = std::upper_bound(points.begin(), points.end(), std::make_pair(x, INT64_MAX));
        return it == points.begin() ? x : x + std::prev(it)->second;
    };

    trace::TraceData r = t;
    const int64_t before = t.t_end() - t.t_begin();
    for (auto& v : r.allocations.t_alloc) v = f(v);
    for (auto& v : r.allocations.t_free)
        if (v != trace::kNoTime) v = f(v);
    for (size_t k = 0; k < r.kernels.size(); ++k) {
        r.kernels.t_start[k] = f(t.kernels.t_start[k]);
        r.kernels.t_end[k] = f(t.kernels.t_end[k]);
    }
    for (size_t c = 0; c < r.copies.size(); ++c) {
        r.copies.t_start[c] = f(t.copies.t_start[c]);
        r.copies.t_end[c] = f(t.copies.t_end[c]);
    }
    for (size_t m = 0; m < r.markers.size(); ++m) {
        r.markers.t_start[m] = f(t.markers.t_start[m]);
        r.markers.t_end[m] = f(t.markers.t_end[m]);
    }
    if (summary) {
        summary->span_before_ns = before;
        summary->span_after_ns = r.t_end() - r.t_begin();
        summary->kernels_moved = static_cast<int64_t>(base.kernel_times.size());
    }
    return r;
}

}  // namespace mhc::replay
