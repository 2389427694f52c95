#include "mhc/viewer/pacing.hpp"

#include <algorithm>
#include <numeric>

namespace mhc::viewer {

double FramePacer::next_wait(bool had_input, bool animating) {
    if (animating || had_input) {
        settle_ = kSettleFrames;
        return 0;
    }
    if (settle_ > 0) {
        --settle_;
        return 0;
    }
    return kIdleWait;
}

void FrameStats::add(double ms) {
    last_ = ms;
    if (times_.size() < window_) times_.push_back(ms);
    else times_[next_] = ms;
    next_ = (next_ + 1) % window_;
}

double FrameStats::mean() const {
    return times_.empty() ? 0 : std::accumulate(times_.begin(), times_.end(), 0.0) / static_cast<double>(times_.size());
}

double FrameStats::worst() const { return times_.empty() ? 0 : *std::max_element(times_.begin(), times_.end()); }

}  // namespace mhc::viewer
