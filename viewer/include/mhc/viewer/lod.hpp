#pragma once
// Level of detail for interval tracks, as Tracy does it: items narrower than `min_px` are
// folded with their neighbours into one drawn run with a count. Only items overlapping the
// visible range are visited, and binary searches skip over folded items, so the work per
// lane is O(drawn items x log n) and the number of drawn items is at most width / min_px + 2.
#include <cstdint>
#include <vector>

#include "mhc/viewer/lane.hpp"

namespace mhc::viewer {

struct TimeRange {
    int64_t t0 = 0, t1 = 1;
    int64_t span() const { return t1 - t0; }
    double x_of(int64_t t, double width) const {
        return (static_cast<double>(t - t0) / static_cast<double>(span())) * width;
    }
    int64_t t_of(double x, double width) const {
        return t0 + static_cast<int64_t>(x / width * static_cast<double>(span()));
    }
};

struct DrawItem {
    float x0 = 0, x1 = 0;   // pixels from the left of the plot, clipped to [0, width]
    uint32_t first = 0;     // index into the lane
    uint32_t count = 1;     // 1: one item; >1: a folded run of `count` items from `first`
    uint8_t cls = 0;        // classified lanes: the item's class, or the run's dominant class by time
    bool mixed = false;     // a folded run of a classified lane with time in more than one class
};

inline constexpr float kFoldPx = 3.0f;   // Tracy's MinVisSize

// Items of `lane` overlapping `range` laid out on `width` pixels, folded below `min_px`.
void prepare_lane(const Lane& lane, TimeRange range, float width, float min_px,
                  std::vector<DrawItem>& out);
inline std::vector<DrawItem> prepare_lane(const Lane& lane, TimeRange range, float width,
                                          float min_px = kFoldPx) {
    std::vector<DrawItem> out;
    prepare_lane(lane, range, width, min_px, out);
    return out;
}

}  // namespace mhc::viewer
