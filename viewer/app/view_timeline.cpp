// Timeline view: one time axis; markers, kernels per stream, copies per direction and, for a
// selected run, its events per kind; under them an optional memory strip on the same axis.
// Items come folded from the core (prepare_timeline); row heights fill the window
// (track_heights); kernels are coloured by family (legend under the axis).
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdio>

#include "mhc/common/units.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/stats.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

struct TimelineUi {
    std::vector<TrackFrame> frame;   // folded items per track, reused across frames
    CurveColumns strip, strip_recorded;   // the strip's curve; the recorded one beside a run's
};

namespace {

// The family legend's row under the time axis.
constexpr float kTimelineLegendHeight = 18.f;

// The families present and their share of kernel time, in their colours, on one line.
void family_legend(App& app, ImDrawList* dl, ImVec2 p, float x_max, nlohmann::json& out) {
    float x = p.x;
    if (app.trace->kernel_count == 0) {
        const std::string why = empty_table_text(*app.trace, StatsTable::Kernels, 0);
        // Cut with "..." to the plot (at 1024 px a snapshot's sentence ran off the window).
        const std::string shown = fit_label(why, x_max - x - 4, ImGui::CalcTextSize("M").x);
        dl->AddText({x, p.y}, IM_COL32(150, 150, 160, 255), shown.c_str());
        out.push_back({{"family", ""},
                       {"text", why},
                       {"shown", shown},
                       {"x0", x},
                       {"x1", x + ImGui::CalcTextSize(shown.c_str()).x}});
        return;
    }
    for (const FamilyShare& f : family_shares(*app.trace)) {
        char buf[64];
        if (f.share < 0.005) std::snprintf(buf, sizeof buf, "%s <1%%", family_name(f.family));
        else std::snprintf(buf, sizeof buf, "%s %.0f%%", family_name(f.family), f.share * 100);
        float w = ImGui::CalcTextSize(buf).x + 22;
        if (x + w > x_max) break;
        dl->AddRectFilled({x, p.y + 3}, {x + 12, p.y + 13}, family_color(f.family));
        dl->AddText({x + 16, p.y}, IM_COL32(200, 200, 205, 255), buf);
        out.push_back({{"family", family_name(f.family)},
                       {"text", buf},
                       {"color", family_color(f.family)},
                       {"x0", x},
                       {"y0", p.y + 3},
                       {"x1", x + 12},
                       {"y1", p.y + 13},
                       {"end", x + 16 + ImGui::CalcTextSize(buf).x}});
        x += w;
    }
}

// The selected run's device bytes with the recorded live bytes as a grey line over them (so that
// what the run changed shows), or the recorded live bytes alone, under the tracks.
void memory_strip(App& app, const ViewRun* run, ImDrawList* dl, ImVec2 p0, ImVec2 p1, TimelineUi& ui,
                  nlohmann::json& out) {
    CurveColumns& cols = ui.strip;
    // A run of another device than the one shown: the recording's memory, its title saying why.
    const std::string device_note = run ? run_device_note(run->info, app.trace->memory_device) : std::string();
    if (!device_note.empty()) run = nullptr;
    const bool run_curve = run && !run->memory.empty();
    const Curve& curve = run_curve ? run->memory : app.trace->live;
    if (curve.empty() || curve.peak() <= 0) {
        dl->AddRectFilled(p0, p1, IM_COL32(36, 36, 42, 255));
        std::string text = "no memory in use: the curve stays at 0 B";
        if (app.trace->allocations.size() == 0) {
            const std::string why = no_allocations_reason(*app.trace);
            text = "no allocations in this trace: no memory curve" + (why.empty() ? "" : " (" + why + ")");
        }
        // Cut with "..." to the strip (it ran off the window's edge mid-word: "--cuda-memory-u"),
        // whole in the tooltip.
        const std::string shown = fit_label(text, p1.x - p0.x - 8, ImGui::CalcTextSize("M").x);
        dl->AddText({p0.x + 4, p0.y + 2}, IM_COL32(150, 150, 160, 255), shown.c_str());
        out = {{"rect", rect_json(p0, p1)}, {"empty", true}, {"text", text}, {"shown", shown}};
        out["device_note"] = device_note;
        if (shown != text && ImGui::IsMouseHoveringRect(p0, p1) &&
            ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows)) {
            ImGui::BeginTooltip();
            ImGui::PushTextWrapPos(ImGui::GetFontSize() * 60);
            ImGui::TextUnformatted(text.c_str());
            ImGui::PopTextWrapPos();
            ImGui::EndTooltip();
            out["tooltip"] = text;
        }
        return;
    }
    int W = static_cast<int>(p1.x - p0.x);
    prepare_curve(curve, app.range, W, cols);
    const size_t drawn = columns_before(app.range, W, run_curve ? run->t_end : app.trace->t_end);
    std::vector<std::pair<const CurveColumns*, size_t>> curves{{&cols, drawn}};
    // Beside a run's curve, the recorded one (it stops where the recording ends); before, the strip
    // showed the run's alone and a user switched the run field back and forth to compare.
    const bool recorded_too = run_curve && !app.trace->live.empty() && app.trace->live.peak() > 0;
    const size_t recorded_drawn = columns_before(app.range, W, app.trace->t_end);
    if (recorded_too) {
        prepare_curve(app.trace->live, app.range, W, ui.strip_recorded);
        curves.emplace_back(&ui.strip_recorded, recorded_drawn);
    }
    const ByteRange y_range = plot_range(app, curves, run && run->capacity > 0 ? static_cast<double>(run->capacity) : 0,
                                         0.1);
    dl->AddRectFilled(p0, p1, IM_COL32(36, 36, 42, 255));
    nlohmann::json labels = nlohmann::json::array();
    draw_bytes_axis(dl, p0, p1, y_range, &labels);
    // A run's curve from its first sample (before it the run stored none; 0 B read as an empty device).
    const size_t first = run_curve ? columns_before_first_sample(curve, app.range, W) : 0;
    draw_curve(dl, cols, p0, p1, y_range, kCurve, true, drawn, first);
    // Over the run's fill, so that it shows where the run holds more as where it holds less.
    if (recorded_too) draw_curve(dl, ui.strip_recorded, p0, p1, y_range, kRecorded, false, recorded_drawn);
    if (run && run->capacity > 0) {
        std::string s = "capacity " + format_bytes(run->capacity);
        draw_hline(dl, p0, p1, static_cast<double>(run->capacity), y_range, kCapacity, s.c_str());
    }
    const std::string device = memory_device_text(*app.trace);
    std::string title = run_curve ? "device bytes, " + run->label()
                                  : "live bytes (recorded)" + (device.empty() ? "" : ", " + device) +
                                        (device_note.empty() ? "" : "; " + device_note);
    // With a run: its title in its colour, then the recorded curve's in grey.
    const std::string recorded_title = recorded_too ? "  recorded live bytes" + (device.empty() ? "" : ", " + device)
                                                    : std::string();
    ImVec2 ts = ImGui::CalcTextSize(title.c_str());
    const float rw = ImGui::CalcTextSize(recorded_title.c_str()).x;
    dl->AddRectFilled({p0.x + 2, p0.y + 1}, {p0.x + 8 + ts.x + rw, p0.y + 3 + ts.y}, IM_COL32(36, 36, 42, 220));
    dl->AddText({p0.x + 4, p0.y + 2}, kCurve, title.c_str());
    if (recorded_too) dl->AddText({p0.x + 4 + ts.x, p0.y + 2}, kRecorded, recorded_title.c_str());
    out = {{"rect", rect_json(p0, p1)},
           {"title", title},
           {"y_max", y_range.hi},
           {"y_min", y_range.lo},
           {"peak_bytes", cols.y_max},
           {"peak_col", cols.peak_col},
           {"axis_labels", labels},
           {"recorded", recorded_too},
           {"recorded_title", recorded_title},
           {"recorded_peak_bytes", recorded_too ? ui.strip_recorded.y_max : 0.0},
           {"device_note", device_note}};
}

}  // namespace

namespace {

// The find field at `at` (the label column of the family legend's row): every kernel whose name
// contains the text is marked as it is typed (the matches follow each letter, FindState); Enter goes
// to the next (Shift+Enter the one before), zooms to it and selects it; its tooltip says which match
// of how many. Returns its rectangle and state (for --layout).
nlohmann::json find_field(App& app, ImVec2 at) {
    ImGui::SetCursorScreenPos(at);
    ImGui::PushStyleVar(ImGuiStyleVar_FramePadding, {4, 1});
    ImGui::SetNextItemWidth(kLabelWidth - 10);
    // Ctrl+F (or /) puts the cursor in it, as in a browser or Perfetto.
    const ImGuiIO& io = ImGui::GetIO();
    if (!io.WantTextInput &&
        ((io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_F, false)) || ImGui::IsKeyPressed(GLFW_KEY_SLASH, false)))
        app.focus_find = true;
    if (app.focus_find) {   // its text selected, as a browser's find field: typing replaces it
        ImGui::SetKeyboardFocusHere();
        app.focus_find = false;
    }
    // The text is the field's as typed (ImGui writes each edit back at once); Enter is said apart.
    const bool enter = ImGui::InputTextWithHint("##find", app.ops() ? "find op" : "find kernel", app.find_text,
                                                sizeof app.find_text, ImGuiInputTextFlags_EnterReturnsTrue);
    tab_stop(app, "find");
    ImGui::PopStyleVar();
    nlohmann::json out = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (enter) {
        app.find_next(ImGui::GetIO().KeyShift);
        ImGui::SetKeyboardFocusHere(-1);   // stay in the field for the next Enter (its text not selected)
    }
    // F3 / Shift+F3 go on from anywhere, as in a browser.
    if (!io.WantTextInput && app.find_text[0] != 0 && ImGui::IsKeyPressed(GLFW_KEY_F3, false))
        app.find_next(io.KeyShift);
    // The matches of the text as it stands, and which of them is selected (a click on a kernel too).
    const bool searched = app.find_update();
    const bool current = app.find.current(app.find_text);
    const bool searching = app.find_text[0] != 0 && !current;
    const size_t count = app.find.count();
    const std::string said =
        searching ? "searching the kernels for '" + app.find.of +
                        "': " + std::to_string(static_cast<int>(app.find.progress() * 100)) + "% looked at"
        : !current ? std::string(
                         "a kernel name or part of it: its matches are marked as you type; "
                         "Enter: the next, Shift+Enter: the one before")
        : count == 0         ? "no kernel name contains '" + app.find.of + "'"
        : app.find.index < 0 ? match_count_text(-1, count) +
                                   " (Enter or F3: the first from the view's start, Shift+Enter or Shift+F3: the one "
                                   "before it)"
                             : "match " + match_count_text(app.find.index, count) +
                                   " (Enter or F3: the next, Shift+Enter or Shift+F3: the one before)";
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", said.c_str());
    out["text"] = app.find_text;
    out["said"] = said;
    out["matches"] = current ? count : 0;
    out["index"] = current ? app.find.index : -1;
    out["searched"] = searched;
    out["searching"] = searching;
    out["searches"] = app.find.searches;
    out["refinements"] = app.find.refinements;
    out["slices"] = app.find.slices;
    if (current && app.find.index >= 0) out["t_start"] = app.find.selected_match().t_start;
    return out;
}

// The matches' count and the buttons to the one before and the next, at the right end of the
// family legend's row (the label column holds only the field): "3 of 17", "no match". Nothing
// before a search. Returns the width taken (the legend ends before it).
float find_count(App& app, ImVec2 right_top, nlohmann::json& out) {
    const bool searching = app.find_text[0] != 0 && !app.find.current(app.find_text);
    if (!app.find.current(app.find_text) && !searching) return 0;
    // While the search goes on (a slice a frame), how far it is instead of a count.
    const std::string text = searching
                                 ? "searching " + std::to_string(static_cast<int>(app.find.progress() * 100)) + "%"
                                 : match_count_text(app.find.index, app.find.count());
    const float button = ImGui::GetFrameHeight() - 2;
    const float text_w = ImGui::CalcTextSize(text.c_str()).x;
    const float width = 2 * button + text_w + 16;
    ImVec2 at{right_top.x - width, right_top.y};
    ImGui::SetCursorScreenPos(at);
    ImGui::PushStyleVar(ImGuiStyleVar_FramePadding, {2, 0});
    const bool any = !searching && app.find.count() > 0;
    if (!any) ImGui::BeginDisabled();
    if (ImGui::ArrowButton("##find previous", ImGuiDir_Left)) app.find_next(true);
    if (any) tab_stop(app, "find_previous");
    out["previous"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("the match before (Shift+Enter, Shift+F3)");
    ImGui::SameLine(0, 2);
    if (ImGui::ArrowButton("##find next", ImGuiDir_Right)) app.find_next(false);
    if (any) tab_stop(app, "find_next");
    out["next"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("the next match (Enter, F3)");
    if (!any) ImGui::EndDisabled();
    ImGui::PopStyleVar();
    const ImVec2 text_at{at.x + 2 * button + 10, right_top.y};
    ImGui::GetWindowDrawList()->AddText(text_at,
                                        searching ? IM_COL32(190, 190, 200, 255)
                                        : any     ? kFindMark
                                                  : IM_COL32(255, 140, 110, 255),
                                        text.c_str());
    out["count"] = text;
    out["count_rect"] = rect_json(text_at, {text_at.x + text_w, text_at.y + ImGui::GetFontSize()});
    return width + 8;
}

// A run that stopped says why (mhc simulate's line), before anything is drawn of it; out of
// memory, a click shows what was alive then (statistics). Returns the line's rectangle when it
// can be clicked.
nlohmann::json run_outcome_line(App& app, const ViewRun& run, const std::string& outcome) {
    nlohmann::json outcome_rect;
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
    ImGui::TextWrapped("%s: %s", run.label().c_str(), outcome.c_str());
    ImGui::PopStyleColor();
    // Out of memory: a click shows what was alive then, where each was allocated (statistics).
    if (run.info.status == trace::RunStatus::Oom) {
        outcome_rect = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "click: what was alive when it ran out of memory, where the policy had put each "
                "and where it was allocated");
        if (ImGui::IsItemClicked()) app.show_oom();
    }
    return outcome_rect;
}

// The tracks' rows and the memory strip under them, in `body_h` px.
struct TimelineHeights {
    float strip_h = 0, tracks_h = 0;
    std::vector<float> rows;
};

TimelineHeights timeline_heights(const App& app, const ViewRun* run, const std::vector<Track>& tracks, float body_h) {
    // The tracks fill what the memory strip leaves; they scroll when they do not fit.
    // When the rows reach their largest height with room to spare, the strip takes the rest.
    // Without a curve to draw (no allocations, or an OOM run that stored none and a trace without
    // any) the strip is the one line saying so, and the tracks keep the window.
    const bool curve_empty = (run && !run->memory.empty() ? run->memory : app.trace->live).peak() <= 0;
    const float empty_strip_h = ImGui::GetTextLineHeight() + 6.f;
    TimelineHeights out;
    out.strip_h = app.memory_strip ? (curve_empty ? empty_strip_h : std::max(70.f, body_h * 0.24f)) : 0.f;
    out.tracks_h = std::max(body_h - out.strip_h - (app.memory_strip ? 6.f : 0.f), 40.f);
    // Without a curve under them the rows share the window up to four times their usual height: two
    // streams of a trace without allocations (vLLM's decode graph) left 60% of it empty.
    const bool no_curve = !app.memory_strip || curve_empty;
    out.rows = track_heights(tracks, out.tracks_h - 8.f, 20.f, no_curve ? 256.f : 64.f);
    if (app.memory_strip) {
        float rows = 8.f;
        for (size_t i = 0; i < out.rows.size(); ++i)
            rows += out.rows[i] + 2.f + (i > 0 && tracks[i].from_run != tracks[i - 1].from_run ? 4.f : 0.f);
        if (rows < out.tracks_h && !curve_empty) {
            out.strip_h += out.tracks_h - rows;
            out.tracks_h = rows;
        }
    }
    return out;
}

// One row's entry in the layout: its lane, where it is, and the first boxes of the row on screen
// (x from the window's left) with what each is (an id, or the folded count) and the label drawn
// in it, for tests that click on them.
nlohmann::json row_layout(const TrackFrame& row, float plot_x, float row_y, float row_h,
                          const std::vector<std::string>& labels) {
    const Lane& lane = *row.lane;
    nlohmann::json boxes = nlohmann::json::array();
    for (size_t k = 0; k < row.items.size() && boxes.size() < 64; ++k) {
        const DrawItem& box = row.items[k];
        boxes.push_back({plot_x + box.x0, plot_x + box.x1,
                         box.count == 1 ? lane.ref[box.first] : -static_cast<int64_t>(box.count), labels[k]});
    }
    return {{"title", lane.title},
            {"kind", static_cast<int>(lane.kind)},
            {"stream", lane.stream},
            {"row", lane.row},
            {"y0", row_y},
            {"y1", row_y + row_h},
            {"items", row.items.size()},
            {"boxes", boxes}};
}

// The find field's matches on one kernel row (`index` among the lanes searched), the one selected
// outlined as well; their x ranges go to `row["marks"]`, their counts to the totals.
void mark_find_matches(const App& app, ImDrawList* dl, const std::vector<MatchMark>& row_marks, size_t index,
                       float plot_x, float plot_w, float row_y, float row_h, nlohmann::json& row, size_t& marks_drawn,
                       size_t& matches_marked) {
    nlohmann::json jm = nlohmann::json::array();
    for (const MatchMark& mark : row_marks) {
        const ImVec2 top_left{plot_x + mark.x0, row_y}, bottom_right{plot_x + mark.x1, row_y + row_h};
        dl->AddRect(top_left, bottom_right, kFindMark, 0, 0, 1.5f);
        dl->AddRectFilled(top_left, {bottom_right.x, row_y + 4}, kFindMark);
        dl->AddLine({top_left.x, row_y + 4.5f}, {bottom_right.x, row_y + 4.5f}, IM_COL32(20, 20, 20, 255));
        if (jm.size() < 256) jm.push_back({top_left.x, bottom_right.x, mark.count});
        ++marks_drawn;
        matches_marked += mark.count;
    }
    // The match selected: its bar in white, at least 7 px wide, so that "2 of 50" is one of
    // the marks to the eye (at 20 ms a view, all were the same lime line).
    const auto current = static_cast<size_t>(app.find.index);
    if (app.find.index >= 0 && current < app.find.count() && app.find.selected_match().lane == index) {
        const KernelMatch match = app.find.selected_match();
        float x0 = plot_x + static_cast<float>(app.range.x_of(match.t_start, plot_w));
        float x1 = plot_x + static_cast<float>(app.range.x_of(match.t_end, plot_w));
        if (x1 - x0 < 7) {
            const float middle = (x0 + x1) / 2;
            x0 = middle - 3.5f;
            x1 = middle + 3.5f;
        }
        x0 = std::max(x0, plot_x);
        x1 = std::min(x1, plot_x + plot_w);
        if (x1 > x0) {
            dl->AddRectFilled({x0, row_y}, {x1, row_y + 4}, kSelected);
            row["current_mark"] = {x0, x1};
        }
    }
    row["marks"] = jm;
}

// What the stages of one timeline frame share: the run shown and the plot's place, and what each
// stage leaves for the layout JSON.
struct TimelineFrame {
    const ViewRun* run = nullptr;
    std::string outcome;   // a run that stopped: why (mhc simulate's line)
    nlohmann::json outcome_rect, legend = nlohmann::json::array(), find, tracks = nlohmann::json::array(), strip,
                                 details;
    ImVec2 avail, origin;
    float details_h = 0, plot_x = 0, plot_w = 0;
    float tracks_top = 0, bottom = 0;   // the tracks' child: its top, and the plot's bottom
    size_t marks_drawn = 0, matches_marked = 0;
};

// The time axis, and under it the find field, its count and the family legend on one line.
void draw_timeline_header(App& app, TimelineFrame& frame) {
    frame.avail = ImGui::GetContentRegionAvail();
    // The selected kernel's details take the bottom of the view.
    frame.details_h = app.selected_kernel ? std::clamp(frame.avail.y * 0.34f, 150.f, 320.f) : 0.f;
    frame.avail.y -= frame.details_h;
    const ImVec2 origin = frame.origin = ImGui::GetCursorScreenPos();
    const float plot_x = frame.plot_x = origin.x + kLabelWidth;
    const float plot_w = frame.plot_w = std::max(frame.avail.x - kLabelWidth, 10.f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    time_axis(app, dl, {plot_x, origin.y}, plot_w, app.layout["axis"]);
    // The label column of the family legend's row holds the find field (the legend's colours say
    // what it is; an execution trace's families are its ops', by count).
    frame.find = find_field(app, {origin.x + 2, origin.y + kAxisHeight + 1});
    const float count_w = find_count(app, {plot_x + plot_w, origin.y + kAxisHeight + 1}, frame.find);
    family_legend(app, dl, {plot_x, origin.y + kAxisHeight + 2}, plot_x + plot_w - count_w, frame.legend);
    ImGui::SetCursorScreenPos(origin);
    ImGui::Dummy({frame.avail.x, kAxisHeight + kTimelineLegendHeight});
}

// The tracks' rows in a child that scrolls, each with its label, boxes and find marks.
void draw_tracks(App& app, TimelineUi& ui, const std::vector<float>& heights, float tracks_h, TimelineFrame& frame) {
    const ViewRun* run = frame.run;
    const float plot_x = frame.plot_x, plot_w = frame.plot_w;
    ImGui::BeginChild("tracks", {0, tracks_h}, false);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 top_left = ImGui::GetCursorScreenPos();
    frame.tracks_top = top_left.y;
    float row_y = top_left.y;
    std::vector<std::string> labels;
    // Every match of the find field, marked on its row (the one selected is outlined as well).
    const std::vector<Lane>& searched = run && !run->kernel_lanes.empty() ? run->kernel_lanes : app.trace->kernel_lanes;
    const bool marking = app.find.current(app.find_text) && app.find.run == (run ? run->info.id : 0) &&
                         app.find.count() > 0;
    std::vector<std::vector<MatchMark>> marks = marking ? app.find.marks(app.range, plot_w)
                                                        : std::vector<std::vector<MatchMark>>{};
    marks.resize(searched.size());
    for (size_t i = 0; i < ui.frame.size(); ++i) {
        const Lane& l = *ui.frame[i].lane;
        float h = heights[i];
        // Separators between the trace's tracks and the run's, so that a run reads as a block.
        if (i > 0 && ui.frame[i].from_run != ui.frame[i - 1].from_run) row_y += 4;
        if (l.row == 0 && i % 2 == 0)
            dl->AddRectFilled({frame.origin.x, row_y}, {plot_x + plot_w, row_y + h}, IM_COL32(38, 38, 44, 255));
        draw_track_label(dl, l, {frame.origin.x, row_y}, h, ui.frame[i].from_run);
        draw_track(app, dl, ui.frame[i], {plot_x, row_y}, plot_w, h, &labels);
        // A stream of the run without a kernel: it stopped before reaching any (the row was blank).
        std::string note;
        if (ui.frame[i].from_run && l.kind == LaneKind::Kernels && l.t_start.empty() && !frame.outcome.empty()) {
            note = "no kernel reached: the run stopped before this stream's first";
            dl->AddText({plot_x + 6, row_y + (h - ImGui::GetFontSize()) / 2}, IM_COL32(140, 140, 150, 255), note.c_str());
        }
        frame.tracks.push_back(row_layout(ui.frame[i], plot_x, row_y, h, labels));
        if (!note.empty()) frame.tracks.back()["note"] = note;
        if (marking && l.kind == LaneKind::Kernels && !searched.empty() && &l >= searched.data() &&
            &l < searched.data() + searched.size()) {
            const auto index = static_cast<size_t>(&l - searched.data());
            mark_find_matches(app, dl, marks[index], index, plot_x, plot_w, row_y, h, frame.tracks.back(),
                              frame.marks_drawn, frame.matches_marked);
        }
        row_y += h + 2;
    }
    frame.bottom = std::max(row_y, top_left.y + ImGui::GetContentRegionAvail().y);
    ImGui::Dummy({frame.avail.x, row_y - top_left.y});
    draw_selection(app, dl, {plot_x, top_left.y}, {plot_x + plot_w, frame.bottom});
    ImGui::EndChild();
}

// The selected kernel's details pane; its "copy" said on the status bar.
void draw_kernel_details(App& app, TimelineFrame& frame) {
    if (app.selected_kernel && draw_details(app, "kernel details", app.kernel_info, frame.details_h - 4, frame.details))
        app.select_kernel(0);
    if (frame.details.contains("copied")) {
        app.status = "copied kernel #" + std::to_string(app.selected_kernel) + "'s details to the clipboard";
        app.copied = frame.details["copied"];
    }
}

}   // namespace

void draw_timeline(App& app) {
    if (!app.timeline_ui) app.timeline_ui = std::make_shared<TimelineUi>();
    TimelineUi& ui = *app.timeline_ui;
    toolbar(app, [&app](nlohmann::json& jt) {
        ImGui::Checkbox("memory strip", &app.memory_strip);
        tab_stop(app, "memory_strip");
        jt["memory_strip"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    });
    TimelineFrame frame;
    const ViewRun* run = frame.run = app.selected_run();
    // A run that stopped says why (mhc simulate's line), before anything is drawn of it.
    frame.outcome = run ? run_outcome(*run, app.times()) : std::string();
    if (!frame.outcome.empty()) frame.outcome_rect = run_outcome_line(app, *run, frame.outcome);
    std::vector<Track> tracks = timeline_tracks(*app.trace, run, app.highlights.empty() ? nullptr : &app.highlights);
    draw_timeline_header(app, frame);

    // Below the axis come the tracks' child and the strip's dummy, each followed by the item
    // spacing: counted here, so that the strip ends inside the view (it ran 6 px past it, under
    // the status bar: the bottom of its curve, and of its one line "no memory curve", was cut).
    const float body_h =
        frame.avail.y - kAxisHeight - kTimelineLegendHeight - 2 * ImGui::GetStyle().ItemSpacing.y;
    const TimelineHeights sizes = timeline_heights(app, run, tracks, body_h);
    const float plot_x = frame.plot_x, plot_w = frame.plot_w;
    prepare_timeline(tracks, app.range, plot_w, ui.frame);
    draw_tracks(app, ui, sizes.rows, sizes.tracks_h, frame);
    float nav_bottom = frame.tracks_top + sizes.tracks_h;
    if (app.memory_strip) {
        ImDrawList* dl = ImGui::GetWindowDrawList();
        ImVec2 s0{plot_x, ImGui::GetCursorScreenPos().y + 4}, s1{plot_x + plot_w - 2, s0.y + sizes.strip_h};
        memory_strip(app, run, dl, s0, s1, ui, frame.strip);
        ImGui::Dummy({frame.avail.x, sizes.strip_h + 4});
        draw_selection(app, dl, s0, s1);
        nav_bottom = s1.y;
    }
    // One navigation call per frame (keys would act twice otherwise), over tracks and strip.
    navigate(app, {plot_x, frame.tracks_top}, {plot_x + plot_w, nav_bottom});
    draw_kernel_details(app, frame);
    app.layout["timeline"] = {{"plot", rect_json({plot_x, frame.tracks_top}, {plot_x + plot_w, frame.bottom})},
                              {"t0", app.range.t0},
                              {"t1", app.range.t1},
                              {"tracks", frame.tracks},
                              {"legend", frame.legend},
                              {"memory_strip", frame.strip},
                              {"draw_items", draw_item_count(ui.frame)},
                              {"details", frame.details},
                              {"selected_kernel", app.selected_kernel},
                              {"run_outcome", frame.outcome},
                              {"run_outcome_rect", frame.outcome_rect},
                              {"find", frame.find},
                              {"find_marks", frame.marks_drawn},
                              {"find_marked", frame.matches_marked}};
}

}  // namespace mhc::viewer
