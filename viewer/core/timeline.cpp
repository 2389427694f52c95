#include "mhc/viewer/timeline.hpp"

namespace mhc::viewer {

std::vector<Track> timeline_tracks(const ViewTrace& t, const ViewRun* run, const std::vector<Lane>* highlights) {
    std::vector<Track> out;
    for (const Lane& l : t.marker_lanes) out.push_back({&l, false});
    bool run_times = run && !run->kernel_lanes.empty();
    for (const Lane& l : run_times ? run->kernel_lanes : t.kernel_lanes) out.push_back({&l, run_times});
    for (const Lane& l : t.copy_lanes) out.push_back({&l, false});
    if (run)
        for (const Lane& l : run->event_lanes) out.push_back({&l, true});
    if (highlights)
        for (const Lane& l : *highlights) out.push_back({&l, run_times});
    return out;
}

void prepare_timeline(const std::vector<Track>& tracks, TimeRange range, float width,
                      std::vector<TrackFrame>& out, float min_px) {
    out.resize(tracks.size());
    for (size_t i = 0; i < tracks.size(); ++i) {
        out[i].lane = tracks[i].lane;
        out[i].from_run = tracks[i].from_run;
        prepare_lane(*tracks[i].lane, range, width, min_px, out[i].items);
    }
}

size_t draw_item_count(const std::vector<TrackFrame>& frame) {
    size_t n = 0;
    for (const TrackFrame& f : frame) n += f.items.size();
    return n;
}

}  // namespace mhc::viewer
