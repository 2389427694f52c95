#include "mhc/viewer/clock.hpp"

#include <algorithm>

namespace mhc::viewer {

void RunClock::add(int64_t recorded_start, int64_t run_start) {
    pending_.emplace_back(recorded_start, run_start - recorded_start);
}

void RunClock::finish() {
    // (start, shift) ascending: among kernels starting together the last, largest shift wins.
    std::sort(pending_.begin(), pending_.end());
    start_.clear(); shift_.clear();
    // Keep only the kernels where the shift changes: map() takes the last entry at or before t,
    // and a run's shifts stay constant between stalls, so this is usually far fewer entries.
    for (const auto& [s, d] : pending_) {
        if (!shift_.empty() && shift_.back() == d) continue;
        start_.push_back(s);
        shift_.push_back(d);
    }
    pending_.clear();
    pending_.shrink_to_fit();
}

int64_t RunClock::map(int64_t recorded) const {
    auto it = std::upper_bound(start_.begin(), start_.end(), recorded);
    if (it == start_.begin()) return recorded;
    return recorded + shift_[static_cast<size_t>(it - start_.begin()) - 1];
}

Lane RunClock::map_lane(const Lane& src) const {
    Lane l;
    l.kind = src.kind; l.title = src.title; l.device = src.device; l.stream = src.stream; l.row = src.row;
    for (size_t i = 0; i < src.size(); ++i) {
        int64_t a = map(src.t_start[i]);
        l.push(a, std::max(a, map(src.t_end[i])), src.key[i], src.ref[i]);
    }
    l.finish();
    return l;
}

}  // namespace mhc::viewer
