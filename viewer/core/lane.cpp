#include "mhc/viewer/lane.hpp"

#include <algorithm>
#include <numeric>

namespace mhc::viewer {

namespace {
template <class T>
void permute(std::vector<T>& v, const std::vector<uint32_t>& order) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < order.size(); ++i) out[i] = v[order[i]];
    v.swap(out);
}
}  // namespace

void Lane::finish() {
    // Recorded streams come sorted; sort only when they do not (imports, nested ranges).
    if (!std::is_sorted(t_start.begin(), t_start.end())) {
        std::vector<uint32_t> order(t_start.size());
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(),
                         [&](uint32_t a, uint32_t b) { return t_start[a] < t_start[b]; });
        permute(t_start, order);
        permute(t_end, order);
        permute(key, order);
        permute(ref, order);
    }
    end_sorted_ = std::is_sorted(t_end.begin(), t_end.end());
    end_max_.clear();
    if (!end_sorted_) {
        end_max_.resize(t_end.size());
        int64_t m = INT64_MIN;
        for (size_t i = 0; i < t_end.size(); ++i) end_max_[i] = m = std::max(m, t_end[i]);
    }
}

size_t Lane::first_ending_at_or_after(int64_t t) const {
    // end_max is non-decreasing, so the first index with end_max >= t is a partition point.
    size_t lo = 0, hi = size();
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (end_max(mid) < t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

}  // namespace mhc::viewer
