#pragma once
// When to draw: an idle viewer waits for input instead of drawing frames in a loop (a polling
// loop costs a core), and the frame time the status bar shows, as Tracy shows its own.
#include <cstddef>
#include <vector>

namespace mhc::viewer {

// After input, a few more frames are drawn at once so that what the input changed settles
// (hover states, a tooltip, a tab switch take a frame or two); then the loop waits.
class FramePacer {
public:
    static constexpr int kSettleFrames = 3;
    // How long the next wait for events may block, in seconds: 0 draws the next frame at once.
    // `had_input`: events arrived since the last frame; `animating`: something moves on its own
    // (loading, a run in flight, a key or a mouse button held).
    double next_wait(bool had_input, bool animating);

    static constexpr double kIdleWait = 2.0;   // a safety wake-up; workers also post an empty event
private:
    int settle_ = kSettleFrames;
};

// The last frames' CPU times (building the UI and its draw lists): last, mean and worst of the
// last `window` frames.
class FrameStats {
public:
    explicit FrameStats(size_t window = 120) : window_(window) {}
    void add(double ms);
    double last() const { return last_; }
    double mean() const;
    double worst() const;
    size_t count() const { return times_.size(); }

private:
    size_t window_, next_ = 0;
    double last_ = 0;
    std::vector<double> times_;
};

}  // namespace mhc::viewer
