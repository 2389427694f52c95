// Timeline view: one time axis; markers, kernels per stream, copies per direction and, for a
// selected run, its events per kind. Items come folded from the core (prepare_timeline).
#include <algorithm>

#include "mhc/viewer/colors.hpp"
#include "widgets.hpp"

namespace mhc::view {

void draw_timeline(App& app) {
    toolbar(app);
    const ViewRun* run = app.selected_run();
    std::vector<Track> tracks = timeline_tracks(*app.trace, run, app.highlights.empty() ? nullptr : &app.highlights);
    static std::vector<TrackFrame> frame;   // buffers reused across frames

    ImVec2 avail = ImGui::GetContentRegionAvail();
    ImVec2 origin = ImGui::GetCursorScreenPos();
    float plot_x = origin.x + kLabelWidth, plot_w = std::max(avail.x - kLabelWidth, 10.f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    draw_time_axis(dl, {plot_x, origin.y}, plot_w, kAxisHeight, app.range);
    ImGui::Dummy({avail.x, kAxisHeight});

    prepare_timeline(tracks, app.range, plot_w, frame);
    ImGui::BeginChild("tracks", {0, 0}, false);
    dl = ImGui::GetWindowDrawList();
    ImVec2 p = ImGui::GetCursorScreenPos();
    const float row = 20.f;
    float y = p.y;
    nlohmann::json jt = nlohmann::json::array();
    for (size_t i = 0; i < frame.size(); ++i) {
        const Lane& l = *frame[i].lane;
        float h = l.kind == LaneKind::Markers ? 16.f : row;
        // Separators between the trace's tracks and the run's, so that a run reads as a block.
        if (i > 0 && frame[i].from_run != frame[i - 1].from_run) y += 4;
        if (i % 2 == 0) dl->AddRectFilled({origin.x, y}, {plot_x + plot_w, y + h}, IM_COL32(38, 38, 44, 255));
        draw_track_label(dl, l, {origin.x, y}, h, frame[i].from_run);
        draw_track(app, dl, frame[i], {plot_x, y}, plot_w, h);
        jt.push_back({{"title", l.title}, {"y0", y}, {"y1", y + h}, {"items", frame[i].items.size()}});
        y += h + 2;
    }
    float bottom = std::max(y, p.y + ImGui::GetContentRegionAvail().y);
    ImGui::Dummy({avail.x, y - p.y});
    navigate(app, {plot_x, p.y}, {plot_x + plot_w, bottom});
    draw_selection(app, dl, {plot_x, p.y}, {plot_x + plot_w, bottom});
    ImGui::EndChild();

    app.layout["timeline"] = {{"plot", rect_json({plot_x, p.y}, {plot_x + plot_w, bottom})},
                              {"t0", app.range.t0}, {"t1", app.range.t1}, {"tracks", jt},
                              {"draw_items", draw_item_count(frame)}};
}

}  // namespace mhc::view
