// Compare view: two or more runs of one trace, memory curves overlaid, timelines stacked on
// the same time axis, and a metrics table with one column per run.
#include <algorithm>
#include <cstring>
#include <set>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/metrics.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

void draw_compare(App& app) {
    if (app.run_list.empty()) {
        ImGui::TextWrapped("This trace has no runs yet. Simulate it (mhc simulate, or the Run simulator tab) "
                           "and the runs appear here.");
        return;
    }
    // The run checkboxes are the legend: each ticked run's name in its curve's colour.
    std::vector<int> chosen;
    ImGui::TextColored(ImVec4(150 / 255.f, 150 / 255.f, 160 / 255.f, 1), "recorded (no limit)");
    for (size_t i = 0; i < app.run_list.size(); ++i) {
        ImGui::SameLine(0, 18);
        bool on = app.compared[i];
        std::string s = "#" + std::to_string(app.run_list[i].id) + " " + app.run_list[i].name;
        bool coloured = on;
        if (coloured) ImGui::PushStyleColor(ImGuiCol_Text, series_color(chosen.size()));
        if (ImGui::Checkbox(s.c_str(), &on)) app.compared[i] = on;
        if (coloured) ImGui::PopStyleColor();
        if (on) chosen.push_back(static_cast<int>(i));
    }
    std::vector<const ViewRun*> runs;
    for (int i : chosen)
        if (const ViewRun* r = app.run(i)) runs.push_back(r);

    ImVec2 avail = ImGui::GetContentRegionAvail();
    ImVec2 origin = ImGui::GetCursorScreenPos();
    float plot_x = origin.x + kLabelWidth, plot_w = std::max(avail.x - kLabelWidth - 10, 10.f);
    int W = static_cast<int>(plot_w);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    draw_time_axis(dl, {plot_x, origin.y}, plot_w, kAxisHeight, app.range, app.order_only());

    // Overlaid curves: the recorded live bytes, then each run's device bytes.
    float curve_h = std::max(avail.y * 0.36f, 80.f);
    ImVec2 c0{plot_x, origin.y + kAxisHeight + 6}, c1{plot_x + plot_w, origin.y + kAxisHeight + curve_h};
    dl->AddRectFilled(c0, c1, IM_COL32(36, 36, 42, 255));
    static std::vector<CurveColumns> cols;
    cols.resize(runs.size() + 1);
    prepare_curve(app.trace->live, app.range, W, cols[0]);
    double y_max = cols[0].y_max;
    for (size_t k = 0; k < runs.size(); ++k) {
        prepare_curve(runs[k]->memory, app.range, W, cols[k + 1]);
        y_max = std::max(y_max, cols[k + 1].y_max);
        if (runs[k]->capacity > 0) y_max = std::max(y_max, static_cast<double>(runs[k]->capacity));
    }
    y_max = std::max(y_max, 1.0) * 1.08;
    draw_bytes_axis(dl, c0, c1, y_max);
    draw_curve(dl, cols[0], c0, c1, y_max, IM_COL32(150, 150, 160, 255), false,
               columns_before(app.range, W, app.trace->t_end));
    std::set<int64_t> capacities;
    for (size_t k = 0; k < runs.size(); ++k) {
        if (runs[k]->capacity > 0 && capacities.insert(runs[k]->capacity).second) {
            std::string s = "capacity " + format_bytes(runs[k]->capacity);
            draw_hline(dl, c0, c1, static_cast<double>(runs[k]->capacity), y_max, kCapacity, s.c_str());
        }
        draw_curve(dl, cols[k + 1], c0, c1, y_max, series_color(k), false,
                   columns_before(app.range, W, runs[k]->t_end));
    }
    nlohmann::json jruns = nlohmann::json::array();
    for (size_t k = 0; k < runs.size(); ++k) {
        jruns.push_back({{"id", runs[k]->info.id}, {"color", series_color(k)}, {"peak", cols[k + 1].y_max},
                         {"peak_col", cols[k + 1].peak_col}});
    }

    // Stacked timelines: per run, its kernel lanes and event lanes in compact rows.
    float y = c1.y + 8;
    const float row = 13.f;
    float metrics_h = 24.f + 20.f * 8;
    float tl_bottom = origin.y + avail.y - metrics_h;
    static std::vector<std::vector<TrackFrame>> frames;
    frames.resize(runs.size());
    for (size_t k = 0; k < runs.size() && y < tl_bottom; ++k) {
        std::vector<Track> tracks;
        for (const Lane& l : runs[k]->kernel_lanes.empty() ? app.trace->kernel_lanes : runs[k]->kernel_lanes)
            tracks.push_back({&l, true});
        for (const Lane& l : runs[k]->event_lanes) tracks.push_back({&l, true});
        prepare_timeline(tracks, app.range, plot_w, frames[k]);
        dl->AddRectFilled({origin.x, y}, {plot_x + plot_w, y + 16}, IM_COL32(50, 50, 60, 255));
        dl->AddRectFilled({origin.x, y}, {origin.x + 4, y + 16}, series_color(k));
        dl->AddText({origin.x + 8, y + 1}, series_color(k), runs[k]->label().c_str());
        y += 18;
        for (const TrackFrame& f : frames[k]) {
            if (y + row > tl_bottom) break;
            draw_track_label(dl, *f.lane, {origin.x + 10, y}, row, true);
            draw_track(app, dl, f, {plot_x, y}, plot_w, row);
            y += row + 1;
        }
        y += 4;
    }
    navigate(app, {plot_x, c0.y}, {plot_x + plot_w, std::max(y, c1.y)});
    draw_selection(app, dl, {plot_x, c0.y}, {plot_x + plot_w, std::max(y, c1.y)});
    ImGui::Dummy({avail.x, y - origin.y});   // the metrics table takes the rest

    // Metrics table: union of metric keys, one column per run; the headline figures first,
    // readable names, values in the unit the key names (mhc/viewer/metrics.hpp).
    std::vector<std::string> all;
    for (const ViewRun* r : runs)
        for (const auto& [key, v] : r->metrics) all.push_back(key);
    std::vector<std::string> keys = metric_order(all);
    nlohmann::json jrows = nlohmann::json::array();
    int ncols = static_cast<int>(runs.size()) + 1;
    if (!runs.empty() && ImGui::BeginTable("metrics", ncols, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                                               ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchSame)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("metric");
        for (const ViewRun* r : runs) ImGui::TableSetupColumn(r->label().c_str());
        ImGui::TableHeadersRow();
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        ImGui::TextUnformatted("status");
        for (size_t k = 0; k < runs.size(); ++k) {
            ImGui::TableSetColumnIndex(static_cast<int>(k) + 1);
            ImGui::TextUnformatted(runs[k]->info.status.c_str());
        }
        for (const std::string& key : keys) {
            ImGui::TableNextRow();
            ImGui::TableSetColumnIndex(0);
            std::string label = metric_label(key);
            ImGui::TextUnformatted(label.c_str());
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", key.c_str());   // the stored key
            nlohmann::json row = {{"key", key}, {"label", label}, {"values", nlohmann::json::array()}};
            for (size_t k = 0; k < runs.size(); ++k) {
                ImGui::TableSetColumnIndex(static_cast<int>(k) + 1);
                auto it = runs[k]->metrics.find(key);
                std::string v = it != runs[k]->metrics.end() ? format_metric(key, it->second) : "-";
                if (it != runs[k]->metrics.end()) ImGui::TextUnformatted(v.c_str());
                else ImGui::TextDisabled("-");
                row["values"].push_back(v);
            }
            jrows.push_back(row);
        }
        ImGui::EndTable();
    }
    app.layout["compare"] = {{"curve", rect_json(c0, c1)}, {"t0", app.range.t0}, {"t1", app.range.t1},
                             {"y_max", y_max}, {"runs", jruns}, {"metrics", jrows}};
}

}  // namespace mhc::viewer
