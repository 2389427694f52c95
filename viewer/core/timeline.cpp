#include "mhc/viewer/timeline.hpp"

#include <algorithm>

namespace mhc::viewer {

std::vector<Track> timeline_tracks(const ViewTrace& t, const ViewRun* run, const std::vector<Lane>* highlights) {
    std::vector<Track> out;
    bool run_times = run && !run->kernel_lanes.empty();
    const ViewRun* on_run = run_times ? run : nullptr;
    for (const Lane& lane : run_times ? run->marker_lanes : t.marker_lanes) out.push_back({&lane, run_times, on_run});
    for (const Lane& lane : run_times ? run->kernel_lanes : t.kernel_lanes) out.push_back({&lane, run_times, on_run});
    for (const Lane& lane : run_times ? run->copy_lanes : t.copy_lanes) out.push_back({&lane, run_times, on_run});
    if (run)
        for (const Lane& lane : run->event_lanes) out.push_back({&lane, true, run});
    if (highlights)
        for (const Lane& lane : *highlights) out.push_back({&lane, run_times, on_run});
    return out;
}

void prepare_timeline(const std::vector<Track>& tracks, TimeRange range, float width,
                      std::vector<TrackFrame>& out, float min_px) {
    out.resize(tracks.size());
    for (size_t i = 0; i < tracks.size(); ++i) {
        out[i].lane = tracks[i].lane;
        out[i].from_run = tracks[i].from_run;
        out[i].run = tracks[i].run;
        out[i].by_op = tracks[i].by_op;
        prepare_lane(*tracks[i].lane, range, width, min_px, out[i].items);
    }
}

std::vector<float> track_heights(const std::vector<Track>& tracks, float avail, float min_row, float max_row,
                                 float compact, float gap) {
    auto fixed = [](const Track& t) { return t.lane->kind == LaneKind::Markers || t.lane->row > 0; };
    size_t flexible = 0;
    float used = 0;
    for (const Track& t : tracks) {
        if (fixed(t)) used += compact; else ++flexible;
        used += gap;
    }
    float h = flexible ? std::clamp((avail - used) / static_cast<float>(flexible), min_row, max_row) : min_row;
    std::vector<float> out;
    out.reserve(tracks.size());
    for (const Track& t : tracks) out.push_back(fixed(t) ? compact : h);
    return out;
}

std::vector<FamilyShare> family_shares(const ViewTrace& t) {
    int64_t total = 0;
    for (int64_t v : t.family_ns) total += v;
    std::vector<FamilyShare> out;
    if (total <= 0) return out;
    for (size_t f = 0; f < t.family_ns.size(); ++f)
        if (t.family_ns[f] > 0)
            out.push_back({static_cast<KernelFamily>(f), static_cast<double>(t.family_ns[f]) / static_cast<double>(total)});
    std::stable_sort(out.begin(), out.end(), [](const FamilyShare& a, const FamilyShare& b) { return a.share > b.share; });
    return out;
}

size_t draw_item_count(const std::vector<TrackFrame>& frame) {
    size_t n = 0;
    for (const TrackFrame& f : frame) n += f.items.size();
    return n;
}

}  // namespace mhc::viewer
