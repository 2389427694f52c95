#pragma once
// What the timeline draws: the list of tracks for a trace (and optionally a run), and for a
// range and width the folded draw items of each track. The front-end only paints them.
#include <vector>

#include "mhc/viewer/data.hpp"
#include "mhc/viewer/lod.hpp"

namespace mhc::viewer {

struct Track {
    const Lane* lane = nullptr;
    bool from_run = false;   // kernel times or events of the selected run
};

struct TrackFrame {
    const Lane* lane = nullptr;
    bool from_run = false;
    std::vector<DrawItem> items;
};

// Markers, kernels per stream (the run's times when it has them), copies per direction, then
// the run's events per kind. `highlights` (kernels touching a clicked allocation) come last.
std::vector<Track> timeline_tracks(const ViewTrace& t, const ViewRun* run,
                                   const std::vector<Lane>* highlights = nullptr);

// Reuses `out`'s buffers across frames.
void prepare_timeline(const std::vector<Track>& tracks, TimeRange range, float width,
                      std::vector<TrackFrame>& out, float min_px = kFoldPx);
size_t draw_item_count(const std::vector<TrackFrame>& frame);

}  // namespace mhc::viewer
