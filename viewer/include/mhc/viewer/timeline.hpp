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
    const ViewRun* run = nullptr;   // that run (its clock reads its times: ViewRun::times)
    bool by_op = false;             // the run's items on the trace's op axis (align.hpp), not its clock
};

struct TrackFrame {
    const Lane* lane = nullptr;
    bool from_run = false;
    const ViewRun* run = nullptr;
    bool by_op = false;
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

// Row heights that use the height available: marker rows and the extra rows of a split lane
// (Lane::row > 0) get `compact`; the other tracks share the rest equally, between `min_row`
// and `max_row`. Rows are `gap` apart.
std::vector<float> track_heights(const std::vector<Track>& tracks, float avail, float min_row = 20.f,
                                 float max_row = 64.f, float compact = 16.f, float gap = 2.f);

// Kernel families present in the trace with their share of kernel time, largest first.
struct FamilyShare {
    KernelFamily family = KernelFamily::Other;
    double share = 0;
};
std::vector<FamilyShare> family_shares(const ViewTrace& t);

}  // namespace mhc::viewer
