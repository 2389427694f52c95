// Compare view: a run picker (a filterable, sortable table of every stored run with its key
// figures; the tick boxes, in each run's colour, choose what is compared), the ticked runs'
// memory curves overlaid on the recorded one, their timelines stacked on the same time axis in a
// scrolling list (the axis reaches the slowest ticked run), and a metrics table with one column
// per run.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "mhc/common/units.hpp"
#include "mhc/viewer/align.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/metrics.hpp"
#include "mhc/viewer/run_table.hpp"
#include "compare_kernel.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

struct CompareUi {
    int64_t generation = -1;             // of the run list the rows were made from
    std::vector<RunRow> rows;
    std::vector<size_t> shown;           // filtered and sorted
    char filter[128] = "";
    std::string last_filter = "\x01";
    RunColumn sort_by = RunColumn::Id;
    bool ascending = true;
    std::vector<CurveColumns> curves;
    std::vector<std::vector<TrackFrame>> frames;
    std::vector<TrackFrame> recorded;   // the recording's kernel lanes, first in the list
    SelectedKernelPlaces selected;      // where the selected kernel lies in each block
    // An order-only trace's runs on its op axis (align.hpp), by run id: made once per run.
    std::map<int64_t, AlignedRun> aligned;
    const AlignedRun* aligned_of(const ViewTrace& view, const ViewRun& run) {
        if (!alignable(view, run)) return nullptr;
        auto it = aligned.find(run.info.id);
        if (it == aligned.end()) it = aligned.emplace(run.info.id, align_by_op(view, run)).first;
        return &it->second;
    }
};

namespace {

constexpr float kRow = 13.f;        // a compact track row
constexpr float kRunHeader = 18.f;  // a run's title bar

// The picker: filter line and the table. Ticks change app.compared; returns the table's layout.
nlohmann::json run_picker(App& app, CompareUi& ui, float height, const std::vector<int>& colour_of) {
    if (ui.generation != app.run_list_generation) {
        ui.rows = run_rows(app.run_list);
        ui.generation = app.run_list_generation;
        ui.last_filter = "\x01";
    }
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("runs");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(300);
    ImGui::InputTextWithHint("##run filter", "filter: words of the name, policy, link, status", ui.filter, sizeof ui.filter);
    tab_stop(app, "run_filter");
    ImGui::SameLine();
    size_t ticked = static_cast<size_t>(std::count(app.compared.begin(), app.compared.end(), true));
    ImGui::TextDisabled("%zu of %zu shown, %zu ticked", ui.shown.size(), ui.rows.size(), ticked);
    ImGui::SameLine();
    if (ImGui::SmallButton("tick the shown")) {
        for (size_t i : ui.shown) app.compared[ui.rows[i].index] = true;
        app.limits_dirty = true;
    }
    tab_stop(app, "tick_shown");
    ImGui::SameLine();
    if (ImGui::SmallButton("untick all")) {
        std::fill(app.compared.begin(), app.compared.end(), false);
        app.limits_dirty = true;
    }
    tab_stop(app, "untick_all");

    nlohmann::json out = {{"total", ui.rows.size()}, {"rows", nlohmann::json::array()}};
    const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_Sortable |
                                  ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
    ImVec2 t0 = ImGui::GetCursorScreenPos();
    if (ImGui::BeginTable("run picker", kRunColumnCount + 1, flags, {0, height})) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("", ImGuiTableColumnFlags_NoSort | ImGuiTableColumnFlags_WidthFixed, 20);
        for (int c = 0; c < kRunColumnCount; ++c) {
            ImGuiTableColumnFlags f = c == 0 ? ImGuiTableColumnFlags_DefaultSort : 0;
            if (static_cast<RunColumn>(c) == RunColumn::Status) f |= ImGuiTableColumnFlags_WidthStretch;
            ImGui::TableSetupColumn(run_column_name(static_cast<RunColumn>(c)), f);
        }
        ImGui::TableHeadersRow();
        bool resort = ui.last_filter != ui.filter;
        if (ImGuiTableSortSpecs* s = ImGui::TableGetSortSpecs(); s && s->SpecsCount > 0 && s->SpecsDirty) {
            ui.sort_by = static_cast<RunColumn>(std::max(s->Specs[0].ColumnIndex - 1, 0));
            ui.ascending = s->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
            s->SpecsDirty = false;
            resort = true;
        }
        if (resort) {
            ui.shown = filter_runs(ui.rows, ui.filter, ui.sort_by, ui.ascending);
            ui.last_filter = ui.filter;
        }
        TabRows stops;
        ImGuiListClipper clip;
        clip.Begin(static_cast<int>(ui.shown.size()));
        while (clip.Step())
            for (int k = clip.DisplayStart; k < clip.DisplayEnd; ++k) {
                const RunRow& r = ui.rows[ui.shown[static_cast<size_t>(k)]];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                bool on = app.compared[r.index];
                int colour = colour_of[r.index];
                if (colour >= 0) ImGui::PushStyleColor(ImGuiCol_CheckMark, series_color(static_cast<size_t>(colour)));
                ImGui::PushID(static_cast<int>(r.id));
                if (ImGui::Checkbox("##tick", &on)) {
                    app.compared[r.index] = on;
                    app.limits_dirty = true;
                }
                // The ticks are the rows' stop: Tab enters at the selected run's, the arrows go row
                // to row, Space or Enter ticks (one stop a run made a long list a Tab a run).
                tab_row(stops, k, static_cast<int>(r.index) == app.selected);
                ImGui::PopID();
                if (colour >= 0) ImGui::PopStyleColor();
                float y0 = ImGui::GetItemRectMin().y, y1 = ImGui::GetItemRectMax().y;
                nlohmann::json cells = nlohmann::json::array();
                for (int c = 0; c < kRunColumnCount; ++c) {
                    ImGui::TableNextColumn();
                    std::string cell = run_cell(r, static_cast<RunColumn>(c), app.order_only());
                    if (colour >= 0 && c == 0)
                        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(series_color(static_cast<size_t>(colour))),
                                           "%s", cell.c_str());
                    else ImGui::TextUnformatted(cell.c_str());
                    if (ImGui::IsItemHovered()) ImGui::SetTooltip("#%lld %s", static_cast<long long>(r.id), r.name.c_str());
                    cells.push_back(cell);
                }
                out["rows"].push_back({{"id", r.id}, {"ticked", on}, {"y0", y0}, {"y1", y1}, {"cells", cells}});
            }
        tab_rows(app, "run_rows", stops);
        ImGui::EndTable();
    }
    ImVec2 t1 = ImGui::GetItemRectMax();
    out["rect"] = rect_json(t0, t1);
    out["shown"] = ui.shown.size();
    return out;
}

// The lanes a run's block shows: its own, or on an order-only trace the same on the op axis.
const std::vector<Lane>& run_kernel_lanes(const App& app, const ViewRun& run, const AlignedRun* aligned) {
    if (aligned) return aligned->kernel_lanes;
    return run.kernel_lanes.empty() ? app.trace->kernel_lanes : run.kernel_lanes;
}

// The height of run_timelines' list drawn whole: the recording's block, then each run's.
float timelines_height(const App& app, const std::vector<const ViewRun*>& runs) {
    float height = 0;
    if (!runs.empty() && !app.trace->kernel_lanes.empty())
        height += kRunHeader + static_cast<float>(app.trace->kernel_lanes.size()) * (kRow + 1) + 6;
    for (const ViewRun* run : runs) {
        const size_t kernels = run->kernel_lanes.empty() ? app.trace->kernel_lanes.size() : run->kernel_lanes.size();
        height += kRunHeader + static_cast<float>(kernels + run->event_lanes.size()) * (kRow + 1) + 6;
    }
    return height;
}

// Where run_timelines draws: the list's left edge and the plot, and the part of it in view.
struct TimelinesPlace {
    float left = 0, plot_x = 0, plot_w = 0;
    float view_top = 0, view_bottom = 0;   // the child's scrolled window
    bool in_view(float top, float block) const { return top + block >= view_top && top <= view_bottom; }
};

// A block's title bar: its colour's mark and its name.
void draw_block_header(ImDrawList* dl, const TimelinesPlace& place, float top, uint32_t colour, const char* name) {
    dl->AddRectFilled({place.left, top}, {place.plot_x + place.plot_w, top + 16}, IM_COL32(50, 50, 60, 255));
    dl->AddRectFilled({place.left, top}, {place.left + 4, top + 16}, colour);
    dl->AddText({place.left + 8, top + 1}, colour, name);
}

// A block's compact rows under its title bar; returns where they end.
float draw_block_rows(App& app, ImDrawList* dl, const TimelinesPlace& place, const std::vector<TrackFrame>& frames,
                     float top) {
    float ty = top + kRunHeader;
    for (const TrackFrame& frame : frames) {
        draw_track_label(dl, *frame.lane, {place.left + 10, ty}, kRow, true);
        draw_track(app, dl, frame, {place.plot_x, ty}, place.plot_w, kRow);
        ty += kRow + 1;
    }
    return ty;
}

// The recording first, in grey as its curve: what each run is compared with, on the same axis
// (before, only the runs' kernels were drawn and a user had to switch to the timeline without
// a run to see where the recorded kernels lay). Returns its layout; `top` moves past it.
nlohmann::json recorded_block(App& app, CompareUi& ui, ImDrawList* dl, const TimelinesPlace& place, float& top) {
    const auto& kernels = app.trace->kernel_lanes;
    const float block = kRunHeader + static_cast<float>(kernels.size()) * (kRow + 1) + 6;
    const bool visible = place.in_view(top, block);
    nlohmann::json recorded = {{"y0", top}, {"y1", top + block}, {"visible", visible}, {"tracks", kernels.size()}};
    if (visible) {
        std::vector<Track> tracks;
        tracks.reserve(kernels.size());
        for (const Lane& lane : kernels) tracks.push_back({&lane, false});
        prepare_timeline(tracks, app.range, place.plot_w, ui.recorded);
        draw_block_header(dl, place, top, IM_COL32(150, 150, 160, 255), "recorded");
        const float rows_end = draw_block_rows(app, dl, place, ui.recorded, top);
        if (ui.selected.kernel)
            draw_kernel_place(app, dl, ui.selected.recorded, nullptr, ui.selected.kernel, ui.selected.name,
                              place.plot_x, place.plot_x + place.plot_w, top, top + kRunHeader, rows_end,
                              recorded["selected"]);
    }
    top += block;
    return recorded;
}

// A run's header note: a run of another device than the memory shown says so (its curve is not
// drawn above), then why it stopped; drawn after its name, clipped before `notes_end`.
void draw_run_note(const App& app, ImDrawList* dl, const TimelinesPlace& place, const ViewRun& run, float top,
                   float notes_end, nlohmann::json& out) {
    const std::string device_note = run_device_note(run.info, app.trace->memory_device);
    const std::string stopped = run_outcome(run, app.times());
    const std::string outcome = device_note.empty() ? stopped
                                : stopped.empty()   ? device_note
                                                    : device_note + "; " + stopped;
    if (outcome.empty()) return;
    const float text_x = place.left + 16 + ImGui::CalcTextSize(run.label().c_str()).x;
    ImVec4 clip{text_x, top, notes_end, top + 16};
    dl->AddText(nullptr, 0, {text_x, top + 1}, stopped.empty() ? IM_COL32(230, 180, 80, 255) : IM_COL32(255, 110, 110, 255),
                outcome.c_str(), nullptr, 0, &clip);
    out["header_note"] = outcome;
}

// Run index's block: its title bar with its note, and its kernel and event rows. Returns its layout;
// `top` moves past it.
nlohmann::json run_block(App& app, CompareUi& ui, ImDrawList* dl, const TimelinesPlace& place, const ViewRun& run,
                         size_t index, const AlignedRun* aligned, float& top) {
    const std::vector<Lane>& kernels = run_kernel_lanes(app, run, aligned);
    const std::vector<Lane>& events = aligned ? aligned->event_lanes : run.event_lanes;
    const float block = kRunHeader + static_cast<float>(kernels.size() + events.size()) * (kRow + 1) + 6;
    const bool visible = place.in_view(top, block);
    nlohmann::json out = {{"id", run.info.id}, {"y0", top}, {"y1", top + block}, {"visible", visible}};
    if (visible) {
        std::vector<Track> tracks;
        tracks.reserve(kernels.size() + events.size());
        for (const Lane& lane : kernels) tracks.push_back({&lane, true, &run, aligned != nullptr});
        for (const Lane& lane : events) tracks.push_back({&lane, true, &run, aligned != nullptr});
        prepare_timeline(tracks, app.range, place.plot_w, ui.frames[index]);
        draw_block_header(dl, place, top, series_color(index), run.label().c_str());
        const float rows_end = top + kRunHeader + static_cast<float>(kernels.size() + events.size()) * (kRow + 1);
        float notes_end = place.plot_x + place.plot_w;   // the run's notes end before the selected kernel's place
        if (ui.selected.kernel)
            notes_end = draw_kernel_place(app, dl, ui.selected.runs[index], &ui.selected.recorded, ui.selected.kernel,
                                          ui.selected.name, place.plot_x, place.plot_x + place.plot_w, top,
                                          top + kRunHeader, rows_end, out["selected"]) -
                        8;
        draw_run_note(app, dl, place, run, top, notes_end, out);
        draw_block_rows(app, dl, place, ui.frames[index], top);
    }
    top += block;
    return out;
}

// The ticked runs' timelines in a scrolling list: only the runs in view are prepared and drawn.
nlohmann::json run_timelines(App& app, CompareUi& ui, const std::vector<const ViewRun*>& runs, float plot_x,
                             float plot_w, float height) {
    ImVec2 origin = ImGui::GetCursorScreenPos();
    std::vector<const AlignedRun*> aligned(runs.size());
    for (size_t k = 0; k < runs.size(); ++k) aligned[k] = ui.aligned_of(*app.trace, *runs[k]);
    ui.selected.update(app, runs, aligned);
    ImGui::BeginChild("compare timelines", {0, height}, false, ImGuiWindowFlags_NoScrollWithMouse);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 top = ImGui::GetCursorScreenPos();
    const float scroll = ImGui::GetScrollY();
    // The wheel over the label column scrolls the list; over the plot it zooms (navigate).
    ImGuiIO& io = ImGui::GetIO();
    if (ImGui::IsWindowHovered() && io.MouseWheel != 0 && io.MousePos.x < plot_x)
        ImGui::SetScrollY(scroll - io.MouseWheel * 3 * (kRunHeader + kRow));
    ui.frames.resize(runs.size());
    const TimelinesPlace place{origin.x, plot_x, plot_w, top.y + scroll, top.y + scroll + height};
    nlohmann::json jr = nlohmann::json::array();
    float y = top.y;
    nlohmann::json recorded;
    if (!runs.empty() && !app.trace->kernel_lanes.empty()) recorded = recorded_block(app, ui, dl, place, y);
    for (size_t k = 0; k < runs.size(); ++k) jr.push_back(run_block(app, ui, dl, place, *runs[k], k, aligned[k], y));
    ImGui::Dummy({1, y - top.y});
    draw_selection(app, dl, {plot_x, top.y + scroll}, {plot_x + plot_w, top.y + scroll + height});
    ImGui::EndChild();
    return {{"rect", rect_json(origin, {plot_x + plot_w, origin.y + height})},
            {"content_height", y - top.y},
            {"scroll", scroll},
            {"runs", jr},
            {"recorded", recorded}};
}

nlohmann::json metrics_table(App& app, const std::vector<const ViewRun*>& runs) {
    // Union of metric keys, one column per run; the headline figures first, readable names,
    // values in the unit the key names (mhc/viewer/metrics.hpp).
    std::vector<std::string> all;
    for (const ViewRun* r : runs)
        for (const auto& [key, v] : r->metrics) all.push_back(key);
    std::vector<std::string> keys = metric_order(all);
    const bool order_only = app.order_only();
    nlohmann::json jrows = nlohmann::json::array();
    int ncols = static_cast<int>(runs.size()) + 1;
    if (runs.empty() || !ImGui::BeginTable("metrics", ncols, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                                              ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                                                              ImGuiTableFlags_SizingFixedFit))
        return jrows;
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("metric");
    for (const ViewRun* r : runs) ImGui::TableSetupColumn(r->label().c_str());
    ImGui::TableHeadersRow();
    // The rows are one stop (after the plot): the arrows go down them, the table scrolling with
    // the keyboard (a long table of many runs took the mouse wheel alone); Enter presses nothing.
    TabRows stops;
    int place = 0;
    const auto row_stop = [&stops, &place] {
        ImGui::Selectable(("##metric" + std::to_string(place)).c_str(), false,
                          ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap);
        tab_row(stops, place++, false);
        ImGui::SameLine(0, 0);
    };
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    row_stop();
    ImGui::TextUnformatted("status");
    for (size_t k = 0; k < runs.size(); ++k) {
        ImGui::TableSetColumnIndex(static_cast<int>(k) + 1);
        ImGui::TextUnformatted(std::string(to_string(runs[k]->info.status)).c_str());
    }
    for (const std::string& key : keys) {
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        std::string label = metric_label(key);
        row_stop();
        ImGui::TextUnformatted(label.c_str());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", key.c_str());   // the stored key
        nlohmann::json row = {{"key", key}, {"label", label}, {"values", nlohmann::json::array()}};
        for (size_t k = 0; k < runs.size(); ++k) {
            ImGui::TableSetColumnIndex(static_cast<int>(k) + 1);
            auto it = runs[k]->metrics.find(key);
            const bool shown = it != runs[k]->metrics.end() &&
                               !(runs[k]->info.status == trace::RunStatus::Oom && finished_run_figure(key));
            std::string value = shown ? format_metric(key, it->second, order_only) : "-";
            if (shown) ImGui::TextUnformatted(value.c_str());
            else ImGui::TextDisabled("-");
            row["values"].push_back(value);
        }
        jrows.push_back(row);
    }
    tab_rows(app, "metric_rows", stops);
    ImGui::EndTable();
    return jrows;
}

// Order only: the op under the mouse, as a line over the plots and a tooltip naming it ("op #808
// aten::mm") and what each run did there: its most device bytes at that op and the link time it
// spent there (the runs are aligned by op). Returns the tooltip's lines (for --layout).
nlohmann::json op_cursor(App& app, const std::vector<const ViewRun*>& runs,
                         const std::vector<const AlignedRun*>& aligned, ImVec2 p0, float plot_w, float curve_bottom,
                         float bottom, int width, CompareUi& ui) {
    const float mouse_x = ImGui::GetIO().MousePos.x;
    const int64_t at = app.range.t_of(std::clamp(mouse_x - p0.x, 0.f, plot_w), plot_w);
    ImDrawList* dl = ImGui::GetForegroundDrawList();
    dl->AddLine({mouse_x, p0.y}, {mouse_x, bottom}, IM_COL32(255, 255, 255, 90));
    // The ops the pixel column spans (zoomed out, many: the curves' columns show their most).
    const auto column = static_cast<size_t>(
        std::clamp<float>(std::floor(mouse_x - p0.x), 0, static_cast<float>(width - 1)));
    const int64_t first_op = app.range.t_of(static_cast<double>(column), plot_w);
    const int64_t end_op = std::max(app.range.t_of(static_cast<double>(column + 1), plot_w), first_op + 1);
    const bool many = end_op - first_op > 1;
    nlohmann::json lines = nlohmann::json::array();
    const TimeText times = app.times();
    lines.push_back(op_at_text(*app.trace, at) +
                    (many ? " (this column: " + times.interval(first_op, end_op) + ")" : std::string()));
    if (!app.trace->live.empty()) {
        const CurveColumns& recorded = ui.curves[0];
        const double bytes = column < recorded.max.size() ? recorded.max[column] : app.trace->live.value_at(at);
        lines.push_back("recorded: " + format_bytes(static_cast<int64_t>(bytes)) + (many ? " live at most" : " live"));
    }
    for (size_t k = 0; k < runs.size(); ++k) {
        std::string line = runs[k]->label() + ": ";
        if (!aligned[k]) {
            line += "not aligned (no op reached)";
        } else if (at >= aligned[k]->t_end) {
            line += "stopped before this op";
        } else {
            // The curve's column under the mouse holds the most the run held at the ops there.
            const CurveColumns& cols = ui.curves[k + 1];
            const double bytes = column < cols.max.size() ? cols.max[column] : aligned[k]->memory.value_at(at);
            line += format_bytes(static_cast<int64_t>(bytes)) + (many ? " on the device at most" : " on the device");
            const int64_t link = many ? aligned[k]->align.link_time_between(first_op, end_op)
                                      : aligned[k]->align.link_time_at(at);
            if (link > 0) line += ", " + runs[k]->times.span(link) + (many ? " in these ops" : " here");
        }
        lines.push_back(line);
    }
    // Over the curves only: over a run's rows the item's own tooltip says what it is and where.
    if (ImGui::GetIO().MousePos.y > curve_bottom) return lines;
    const size_t first_run = lines.size() - runs.size();
    ImGui::BeginTooltip();
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string text = lines[i].get<std::string>();
        if (i == 0) ImGui::TextUnformatted(text.c_str());
        else if (i >= first_run)
            ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(series_color(i - first_run)), "%s", text.c_str());
        else ImGui::TextDisabled("%s", text.c_str());
    }
    ImGui::EndTooltip();
    return lines;
}


// The picker over the view, and the runs ticked in it (loaded), in list order: their colours
// follow that order (the picker's boxes are the curves' legend).
nlohmann::json pick_runs(App& app, CompareUi& ui, std::vector<const ViewRun*>& runs) {
    std::vector<int> colour_of(app.run_list.size(), -1);
    std::vector<int> chosen;
    for (size_t i = 0; i < app.run_list.size(); ++i)
        if (app.compared[i]) {
            colour_of[i] = static_cast<int>(chosen.size());
            chosen.push_back(static_cast<int>(i));
        }
    const float full_h = ImGui::GetContentRegionAvail().y;
    // The picker as tall as its rows (a header and at least three), at most a quarter of the view.
    const float rows_h = (static_cast<float>(std::max<size_t>(app.run_list.size(), 3)) + 1) * ImGui::GetFrameHeight() + 6;
    nlohmann::json picker = run_picker(app, ui, std::min(rows_h, std::max(full_h * 0.26f, 110.f)), colour_of);
    for (int i : chosen)
        if (const ViewRun* r = app.run(i)) runs.push_back(r);
    return picker;
}

// The overlaid curves' plot: where it is, its byte range and what the layout JSON says of it.
struct ComparePlot {
    ImVec2 c0, c1;
    ByteRange y_range;
    nlohmann::json axis_labels = nlohmann::json::array(), runs = nlohmann::json::array(), caption;
};

// What the grey curve is, over the plot's top left as the memory strip's title (in the label
// column it was drawn over the top byte label).
void draw_recorded_caption(const App& app, ImDrawList* dl, ComparePlot& plot) {
    const ImVec2 c0 = plot.c0;
    const std::string caption = "recorded (grey)" + std::string(app.trace->memory_devices.size() > 1 || app.trace->memory_device != 0
                                                                    ? ", " + device_name(app.trace->memory_device)
                                                                    : "");
    const ImVec2 cs = ImGui::CalcTextSize(caption.c_str());
    const ImVec2 ca{c0.x + 2, c0.y + 1}, cb{c0.x + 8 + cs.x, c0.y + 3 + cs.y};
    dl->AddRectFilled(ca, cb, IM_COL32(36, 36, 42, 220));
    dl->AddText({c0.x + 4, c0.y + 2}, IM_COL32(150, 150, 160, 255), caption.c_str());
    plot.caption = rect_json(ca, cb);
}

// Overlaid curves: the recorded live bytes in grey, then each run's device bytes, with each
// capacity's line; `aligned`: each run on an order-only trace's op axis, else null.
ComparePlot draw_compare_curves(App& app, CompareUi& ui, const std::vector<const ViewRun*>& runs,
                                const std::vector<const AlignedRun*>& aligned, ImDrawList* dl, ImVec2 origin,
                                float plot_x, float plot_w, float avail_h) {
    const int columns = static_cast<int>(plot_w);
    ComparePlot plot;
    const float curve_h = std::clamp(avail_h * 0.36f, 80.f, 320.f);
    const ImVec2 c0 = plot.c0 = {plot_x, origin.y + kAxisHeight + 6};
    const ImVec2 c1 = plot.c1 = {plot_x + plot_w, origin.y + kAxisHeight + curve_h};
    dl->AddRectFilled(c0, c1, IM_COL32(36, 36, 42, 255));
    ui.curves.resize(runs.size() + 1);
    prepare_curve(app.trace->live, app.range, columns, ui.curves[0]);
    double y_max = ui.curves[0].y_max;
    // A run of another device than the one shown is not drawn over its recording (run_device_note).
    std::vector<std::string> other_device(runs.size());
    for (size_t k = 0; k < runs.size(); ++k) other_device[k] = run_device_note(runs[k]->info, app.trace->memory_device);
    for (size_t k = 0; k < runs.size(); ++k) {
        if (!other_device[k].empty()) continue;
        prepare_curve(aligned[k] ? aligned[k]->memory : runs[k]->memory, app.range, columns, ui.curves[k + 1]);
        y_max = std::max(y_max, ui.curves[k + 1].y_max);
        if (runs[k]->capacity > 0) y_max = std::max(y_max, static_cast<double>(runs[k]->capacity));
    }
    // Runs of several capacities: always from 0 B (no "fit y" here).
    const ByteRange y_range = plot.y_range = byte_range(0, y_max, false, 0.08);
    draw_bytes_axis(dl, c0, c1, y_range, &plot.axis_labels);
    draw_curve(dl, ui.curves[0], c0, c1, y_range, IM_COL32(150, 150, 160, 255), false,
               columns_before(app.range, columns, app.trace->t_end));
    draw_recorded_caption(app, dl, plot);
    std::set<int64_t> capacities;
    for (size_t k = 0; k < runs.size(); ++k) {
        if (!other_device[k].empty()) {   // said in its timeline's header and under the plot, not drawn
            plot.runs.push_back({{"id", runs[k]->info.id}, {"color", series_color(k)}, {"other_device", other_device[k]}});
            continue;
        }
        if (runs[k]->capacity > 0 && capacities.insert(runs[k]->capacity).second) {
            std::string s = "capacity " + format_bytes(runs[k]->capacity);
            draw_hline(dl, c0, c1, static_cast<double>(runs[k]->capacity), y_range, kCapacity, s.c_str());
        }
        const int64_t t_end = aligned[k] ? aligned[k]->t_end : runs[k]->t_end;
        // From the run's first sample (before it the run stored none; 0 B read as an empty device).
        const Curve& curve = aligned[k] ? aligned[k]->memory : runs[k]->memory;
        const size_t first = columns_before_first_sample(curve, app.range, columns);
        draw_curve(dl, ui.curves[k + 1], c0, c1, y_range, series_color(k), false, columns_before(app.range, columns, t_end),
                   first);
        plot.runs.push_back({{"id", runs[k]->info.id},
                             {"color", series_color(k)},
                             {"peak", ui.curves[k + 1].y_max},
                             {"peak_col", ui.curves[k + 1].peak_col},
                             {"t_end", t_end},
                             {"by_op", aligned[k] != nullptr},
                             {"first_column", first}});
    }
    return plot;
}
}  // namespace

void draw_compare(App& app) {
    if (app.run_list.empty()) {
        ImGui::TextWrapped("This trace has no runs yet. Simulate it (mhc simulate, or the Run simulator tab) "
                           "and the runs appear here.");
        return;
    }
    if (!app.compare_ui) app.compare_ui = std::make_shared<CompareUi>();
    CompareUi& ui = *app.compare_ui;
    std::vector<const ViewRun*> runs;
    const nlohmann::json picker = pick_runs(app, ui, runs);

    ImVec2 avail = ImGui::GetContentRegionAvail();
    ImVec2 origin = ImGui::GetCursorScreenPos();
    float plot_x = origin.x + kLabelWidth, plot_w = std::max(avail.x - kLabelWidth - 10, 10.f);
    int columns = static_cast<int>(plot_w);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    time_axis(app, dl, {plot_x, origin.y + 2}, plot_w, app.layout["axis"]);
    // On an order-only trace, each run on the op axis (its clock's nanoseconds are no op numbers).
    std::vector<const AlignedRun*> aligned(runs.size());
    for (size_t k = 0; k < runs.size(); ++k) aligned[k] = ui.aligned_of(*app.trace, *runs[k]);
    const ComparePlot plot = draw_compare_curves(app, ui, runs, aligned, dl, origin, plot_x, plot_w, avail.y);
    const ImVec2 c0 = plot.c0, c1 = plot.c1;
    ImGui::Dummy({avail.x, c1.y - origin.y + 6});

    // The timelines take what the metrics table leaves (it keeps at least ~7 rows), and no more than
    // they need: a few runs of a few streams left an empty band over the table, which gets the rest.
    const float rest = ImGui::GetContentRegionAvail().y;
    const float metrics_h = std::clamp(rest * 0.42f, 90.f, 260.f);
    const float needed = timelines_height(app, runs);
    nlohmann::json timelines = run_timelines(app, ui, runs, plot_x, plot_w,
                                             std::max(std::min(rest - metrics_h - 6, needed), 40.f));
    float tl_bottom = ImGui::GetItemRectMax().y;
    // One navigation call per frame, over the curves and the timelines.
    const bool hovered = navigate(app, {plot_x, c0.y}, {plot_x + plot_w, tl_bottom});
    draw_selection(app, dl, c0, c1);
    nlohmann::json hover_op;
    if (hovered && app.order_only() && !ImGui::IsMouseDragging(ImGuiMouseButton_Left))
        hover_op = op_cursor(app, runs, aligned, {plot_x, c0.y}, plot_w, c1.y, tl_bottom, columns, ui);
    nlohmann::json jrows = metrics_table(app, runs);
    const nlohmann::json metrics_rect = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    app.layout["compare"] = {{"curve", rect_json(c0, c1)},   {"t0", app.range.t0},   {"t1", app.range.t1},
                             {"y_max", plot.y_range.hi},     {"runs", plot.runs},    {"metrics", jrows},
                             {"metrics_rect", metrics_rect}, {"picker", picker},     {"timelines", timelines},
                             {"axis_labels", plot.axis_labels}, {"hover_op", hover_op}, {"caption", plot.caption}};
}

}  // namespace mhc::viewer
