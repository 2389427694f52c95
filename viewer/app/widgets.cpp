#include "widgets.hpp"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/controls.hpp"
#include "mhc/viewer/families.hpp"
#include "mhc/viewer/metrics.hpp"

namespace mhc::viewer {

nlohmann::json rect_json(ImVec2 p0, ImVec2 p1) {
    return {{"x0", p0.x}, {"y0", p0.y}, {"x1", p1.x}, {"y1", p1.y}};
}

void same_line_if_fits(float width, float spacing) {
    float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + spacing + width <= right) ImGui::SameLine(0, spacing);
}

nlohmann::json draw_time_axis(ImDrawList* dl, ImVec2 p0, float width, float height, TimeRange range,
                              const TimeText& times, const RunTimes* run) {
    dl->AddRectFilled(p0, {p0.x + width, p0.y + height}, IM_COL32(42, 42, 48, 255));
    nlohmann::json labels = nlohmann::json::array();
    float last_end = -1e9f;   // the right edge of the last label drawn
    for (const Tick& tick : time_ticks(range, width, times.events ? 16.f : 10.f, times.events, times.noun)) {
        const float tick_x = std::floor(p0.x + tick.x) + 0.5f;
        dl->AddLine({tick_x, p0.y + height - (tick.major ? 8.f : 4.f)}, {tick_x, p0.y + height},
                    IM_COL32(170, 170, 180, 255));
        if (!tick.major) continue;
        // An order-only trace's run: the op it reached by then, once per op (a stall of link time
        // spans many ticks); its clock's numbers are no op numbers.
        std::string label = tick.label;
        if (run && run->order_only) {
            const int64_t op = run->op_before(tick.t);
            label = op < 0 ? std::string("start") : run->recorded.at(op);
            if (!labels.empty() && labels.back()["text"] == label) continue;
        }
        // A label that would run past the plot's right edge ("1.2" for "1.2 s", "57" for "570 ms")
        // ends at the edge instead when it clears the one before, else is left out.
        const float text_w = ImGui::CalcTextSize(label.c_str()).x;
        float tx = tick_x + 3;
        if (tx + text_w > p0.x + width) tx = p0.x + width - text_w - 2;
        if (tx < last_end + 8 || tx < p0.x) continue;
        dl->AddText({tx, p0.y + 2}, IM_COL32(210, 210, 215, 255), label.c_str());
        last_end = tx + text_w;
        labels.push_back({{"text", label}, {"x0", tx}, {"x1", last_end}});
    }
    return labels;
}

const RunTimes* order_only_run(App& app) {
    if (!app.order_only() || app.view == ViewId::Compare) return nullptr;
    const ViewRun* run = app.selected_run();
    return run && !run->kernel_lanes.empty() ? &run->times : nullptr;
}

void time_axis(App& app, ImDrawList* dl, ImVec2 p0, float width, nlohmann::json& out) {
    const TimeText times = app.times();
    const RunTimes* run = order_only_run(app);
    out = {{"labels", draw_time_axis(dl, p0, width, kAxisHeight, app.range, times, run)}};
    // Order only: the axis says what it counts, in the label column beside it, and why (hover).
    // Compare aligns the runs by op (align.hpp): the axis is the trace's, each run drawn at its ops.
    const bool by_op = app.view == ViewId::Compare && times.events;
    const std::string title = run     ? times.noun + std::string("s + link time")
                              : by_op ? times.axis_title() + ", runs by " + times.noun
                                      : times.axis_title();
    if (title.empty()) return;
    const ImVec2 at{p0.x - kLabelWidth + 4, p0.y + (kAxisHeight - ImGui::GetFontSize()) / 2};
    const ImVec2 size = ImGui::CalcTextSize(title.c_str());
    dl->AddText(at, IM_COL32(242, 204, 102, 255), title.c_str());
    out["title"] = title;
    out["title_rect"] = rect_json(at, {at.x + size.x, at.y + size.y});
    if (ImGui::IsMouseHoveringRect(at, {at.x + size.x, at.y + size.y}) &&
        ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows)) {
        const std::string noun = times.noun;
        const std::string why =
            by_op ? "order only: the trace has no timestamps, only the order of its " + noun +
                        "s;\nthe axis counts them (" + noun + " #1 is the first). Each run is drawn at the " + noun +
                        "s it reached:\nits transfers and stalls (its link time) lie inside the " + noun +
                        " they delayed,\nits curve shows at each " + noun +
                        " the most device bytes it held there.\nHover the curves: the " + noun +
                        " there, its name, and each run's bytes and link time at it"
            : run ? "order only: the trace has no timestamps, only the order of its " + noun +
                        "s;\nthe run's clock gives each " + noun +
                        " 1 ns and its transfers and stalls the link's time:\n"
                        "a label names the " +
                        noun + " the run reached by then, a time reads \"" + noun + " #N + the link time since\""
                  : "order only: the trace has no timestamps, only the order of its " + noun +
                        "s;\nthe axis counts them (" + noun + " #1 is the first)" +
                        (app.selected >= 0 ? ";\na run adds the simulated ns of its transfers and stalls" : "");
        ImGui::SetTooltip("%s", why.c_str());
        out["tooltip"] = why;
    }
}

bool navigate(App& app, ImVec2 p0, ImVec2 p1) {
    tab_plot(app, p0, p1);
    ImGuiIO& io = ImGui::GetIO();
    float w = p1.x - p0.x;
    bool hovered = ImGui::IsMouseHoveringRect(p0, p1) && ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows);
    int64_t at_mouse = app.range.t_of(std::clamp(io.MousePos.x - p0.x, 0.f, w), w);
    int64_t anchor = hovered ? at_mouse : app.range.t0 + app.range.span() / 2;
    if (hovered && io.MouseWheel != 0)
        app.range = zoom(app.range, std::pow(0.8, io.MouseWheel), anchor, app.limits);
    if (!io.WantTextInput) {
        float dt = io.DeltaTime > 0 ? io.DeltaTime : 1.f / 60;
        if (ImGui::IsKeyDown(GLFW_KEY_W)) app.range = zoom(app.range, std::pow(0.1, dt), anchor, app.limits);
        if (ImGui::IsKeyDown(GLFW_KEY_S)) app.range = zoom(app.range, std::pow(10.0, dt), anchor, app.limits);
        auto step = static_cast<int64_t>(static_cast<double>(app.range.span()) * dt);
        if (ImGui::IsKeyDown(GLFW_KEY_A)) app.range = pan(app.range, -step, app.limits);
        if (ImGui::IsKeyDown(GLFW_KEY_D)) app.range = pan(app.range, step, app.limits);
        // Z or F (Perfetto's key): the range selected, else the selected kernel or allocation.
        if (!io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_Z, false) || ImGui::IsKeyPressed(GLFW_KEY_F, false)))
            app.zoom_to_selection(app.view == ViewId::Memory);
        // 0 (a browser's Ctrl+0): the whole trace, as "Reset zoom" (no other key of the views uses it).
        if (!io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_0, false)) app.reset_zoom();
    }
    if (hovered && ImGui::IsMouseDragging(ImGuiMouseButton_Left) && io.MouseDelta.x != 0) {
        auto dt = static_cast<int64_t>(-io.MouseDelta.x / w * static_cast<double>(app.range.span()));
        app.range = pan(app.range, dt, app.limits);
    }
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
        app.sel = {true, true, at_mouse, at_mouse};
    }
    if (app.sel.dragging) {
        app.sel.t1 = at_mouse;
        if (!ImGui::IsMouseDown(ImGuiMouseButton_Right)) {
            app.sel.dragging = false;
            if (app.sel.t1 < app.sel.t0) std::swap(app.sel.t0, app.sel.t1);
            app.sel.active = app.sel.t1 > app.sel.t0;
        }
    }
    return hovered;
}

void draw_selection(App& app, ImDrawList* dl, ImVec2 p0, ImVec2 p1) {
    if (!app.sel.active && !app.sel.dragging) return;
    float w = p1.x - p0.x;
    float a = p0.x + static_cast<float>(app.range.x_of(std::min(app.sel.t0, app.sel.t1), w));
    float b = p0.x + static_cast<float>(app.range.x_of(std::max(app.sel.t0, app.sel.t1), w));
    a = std::clamp(a, p0.x, p1.x);
    b = std::clamp(b, p0.x, p1.x);
    dl->AddRectFilled({a, p0.y}, {b, p1.y}, IM_COL32(120, 160, 255, 40));
    dl->AddRect({a, p0.y}, {b, p1.y}, IM_COL32(120, 160, 255, 160));
    if (!app.sel.dragging) {
        std::string text = app.times().span(std::abs(app.sel.t1 - app.sel.t0)) + "  (Z: zoom)";
        dl->AddText({a + 4, p0.y + 2}, IM_COL32(200, 215, 255, 255), text.c_str());
    }
}

namespace {

uint32_t item_color(const App& app, const Lane& l, const DrawItem& d) {
    // Kernels keep their family's colour when folded (the run's dominant family by time).
    if (l.kind == LaneKind::Kernels) {
        if (d.count > 1) return family_color(static_cast<KernelFamily>(d.cls));
        return app.trace->color_of(l.key[d.first]);
    }
    // Other lanes hold one kind each (a copy direction, a marker kind, an event kind): a folded
    // run keeps that kind's colour (its hatched edge says "many").
    int32_t k = d.count > 1 ? static_cast<int32_t>(l.stream) : l.key[d.first];
    switch (l.kind) {
        case LaneKind::Kernels: break;
        case LaneKind::Copies: return copy_color(static_cast<trace::CopyKind>(k));
        case LaneKind::Markers: return marker_color(static_cast<trace::MarkerKind>(l.stream));
        case LaneKind::Events: return event_color(static_cast<trace::EventKind>(k));
        case LaneKind::Highlight: return kHighlight;
    }
    return kFolded;
}

std::string item_name(App& app, const Lane& l, size_t i) {
    switch (l.kind) {
        case LaneKind::Kernels: return app.trace->str(l.key[i]);
        case LaneKind::Copies: return std::string(trace::to_string(static_cast<trace::CopyKind>(l.key[i])));
        case LaneKind::Markers: return app.trace->str(l.key[i]);
        case LaneKind::Events: return event_label(static_cast<trace::EventKind>(l.key[i]));
        case LaneKind::Highlight:
            return std::string(trace::to_string(static_cast<trace::AccessMode>(l.key[i]))) + " by kernel #" +
                   std::to_string(l.ref[i]);
    }
    return {};
}

// `run`: the run whose clock the lane is on (nullptr: the recording's); an order-only trace's run
// reads its times as ops and link time (run_times.hpp). `by_op`: the lane is that run's on the trace's
// op axis (compare on an order-only trace): its places are op numbers, and an event's length is the
// run's link time.
// NOLINTNEXTLINE(readability-identifier-length): l, d as the body has always named them
void tooltip(App& app, const Lane& l, const DrawItem& d, const ViewRun* run, bool by_op) {
    ImGui::BeginTooltip();
    if (d.count > 1) {
        int64_t a = l.t_start[d.first], b = l.end_max(d.first + d.count - 1);
        ImGui::Text("%u items folded (%s)", d.count, l.title.c_str());
        if (l.kind == LaneKind::Kernels)
            ImGui::Text(app.ops() ? "mostly %s ops" : "mostly %s kernels (by time)",
                        family_name(static_cast<KernelFamily>(d.cls)));
        const std::string when = run && run->times.order_only && !by_op ? run->times.interval(a, b)
                                                                        : app.times().range(a, b, 1000);
        ImGui::TextUnformatted(when.c_str());
        app.layout["hover"] = {{"folded", d.count}, {"when", when}};
        ImGui::TextDisabled("zoom in to see them");
    } else {
        size_t i = d.first;
        ImGui::Text("%s", item_name(app, l, i).c_str());
        // The events of the run the lane is of (in compare, the hovered run's: they were the
        // selected run's, whose event of the same index named another allocation).
        const ViewRun* of_run = run ? run : app.selected_run();
        const trace::RunEvent* event = l.kind == LaneKind::Events && of_run &&
                                               static_cast<size_t>(l.ref[i]) < of_run->events.size()
                                           ? &of_run->events[static_cast<size_t>(l.ref[i])]
                                           : nullptr;
        // Order only: "op #12", no start and end one apart nor a duration the trace does not have.
        std::string when = run && !by_op ? run->times.interval(l.t_start[i], l.t_end[i])
                                         : app.times().interval(l.t_start[i], l.t_end[i]);
        // On the op axis: at which op, and the link time it took on the run's clock.
        if (by_op && event) when += ", " + run->times.span(event->t_end - event->t_start);
        ImGui::TextUnformatted(when.c_str());
        app.layout["hover"] = {{"name", item_name(app, l, i)}, {"when", when}};
        if (l.kind == LaneKind::Kernels)
            ImGui::TextDisabled("kernel #%lld, %s", static_cast<long long>(l.ref[i]),
                                family_name(app.trace->family_of(l.key[i])));
        if (event) {
            if (event->allocation) {
                int64_t ai = app.trace->allocations.index_of(event->allocation);
                ImGui::Text(
                    "allocation #%lld %s", static_cast<long long>(event->allocation),
                    ai >= 0 ? app.trace->str(app.trace->allocations.label[static_cast<size_t>(ai)]).c_str() : "");
                app.layout["hover"]["allocation"] = event->allocation;
            }
            if (event->kernel) ImGui::Text("kernel #%lld", static_cast<long long>(event->kernel));
            if (event->bytes) ImGui::Text("%s", format_bytes(event->bytes).c_str());
        }
    }
    ImGui::EndTooltip();
}

}  // namespace

bool clicked() {
    return ImGui::IsMouseReleased(ImGuiMouseButton_Left) && ImGui::GetIO().MouseDragMaxDistanceSqr[0] < 9;
}

namespace {

// A kernel (or a highlighted access, which names its kernel) selects it; a folded box zooms to
// its span, as Tracy does.
void click_item(App& app, const Lane& l, const DrawItem& d) {
    if (d.count > 1) {
        int64_t a = l.t_start[d.first], b = l.end_max(d.first + d.count - 1);
        int64_t pad = std::max<int64_t>((b - a) / 20, 1);
        app.range = clamp({a - pad, b + pad}, app.limits);
        return;
    }
    if (l.kind == LaneKind::Kernels || l.kind == LaneKind::Highlight) app.select_kernel(l.ref[d.first]);
    // The run's out-of-memory mark: what was alive then (the statistics' "At the OOM").
    if (l.kind == LaneKind::Events && l.stream == static_cast<int>(trace::EventKind::Oom)) app.show_oom();
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-length): f, w, h as the body has always named them
void draw_track(App& app, ImDrawList* dl, const TrackFrame& f, ImVec2 p0, float w, float h,
                std::vector<std::string>* labels) {
    const float char_width = ImGui::CalcTextSize("M").x;
    if (labels) labels->clear();
    const Lane& l = *f.lane;
    ImVec2 mouse = ImGui::GetIO().MousePos;
    bool row_hovered = mouse.y >= p0.y && mouse.y < p0.y + h && mouse.x >= p0.x && mouse.x < p0.x + w &&
                       ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows);
    const DrawItem* hovered = nullptr;
    for (size_t k = 0; k < f.items.size(); ++k) {
        const DrawItem& item = f.items[k];
        ImVec2 a{p0.x + item.x0, p0.y + 1}, b{p0.x + std::max(item.x1, item.x0 + 1.f), p0.y + h - 1};
        uint32_t c = item_color(app, l, item);
        dl->AddRectFilled(a, b, c);
        std::string label;
        // The label has the part of the box that stays in view: the next box covers the rest when
        // they overlap (ranges nested deeper than the rows, all in the last one: MTIA's "36 | 1 16 35").
        const float right = k + 1 < f.items.size() ? std::min(b.x, p0.x + f.items[k + 1].x0) : b.x;
        const ImVec4 clip{a.x + 2, a.y, right - 2, b.y};   // the label fits; a wider glyph stays inside
        if (item.count > 1) {
            // Folded runs: hatched edge so they read as "many", as Tracy's zig-zag does.
            dl->AddRect(a, b, IM_COL32(70, 70, 80, 255));
            if (right - a.x > 12) {
                const char* family = l.kind == LaneKind::Kernels ? family_name(static_cast<KernelFamily>(item.cls))
                                                                 : nullptr;
                label = folded_label(item.count, folded_noun(l, family, item.mixed, app.ops()), right - a.x - 6,
                                     char_width);
                dl->AddText(nullptr, 0, {a.x + 3, a.y + (b.y - a.y - ImGui::GetFontSize()) / 2},
                            IM_COL32(20, 20, 20, 255), label.c_str(), nullptr, 0, &clip);
            }
        } else if (right - a.x > 24) {
            // Inside the box with 3 pixels either side, cut with "..." when longer.
            label = fit_label(item_name(app, l, item.first), right - a.x - 6, char_width);
            dl->AddText(nullptr, 0, {a.x + 3, a.y + (b.y - a.y - ImGui::GetFontSize()) / 2}, IM_COL32(15, 15, 20, 255),
                        label.c_str(), nullptr, 0, &clip);
        }
        if (labels) labels->push_back(label);
        if (item.count == 1 && app.selected_kernel && (l.kind == LaneKind::Kernels || l.kind == LaneKind::Highlight) &&
            l.ref[item.first] == app.selected_kernel)
            dl->AddRect({a.x - 1, a.y - 1}, {b.x + 1, b.y + 1}, kSelected, 0, 0, 2.f);
        if (row_hovered && mouse.x >= a.x && mouse.x < b.x) hovered = &item;
    }
    if (hovered) {
        dl->AddRect({p0.x + hovered->x0, p0.y}, {p0.x + std::max(hovered->x1, hovered->x0 + 1.f), p0.y + h},
                    IM_COL32(255, 255, 255, 255));
        tooltip(app, l, *hovered, f.run, f.by_op);
        if (clicked()) click_item(app, l, *hovered);
    }
}

void draw_track_label(ImDrawList* dl, const Lane& lane, ImVec2 p0, float h, bool from_run) {
    uint32_t c = lane.kind == LaneKind::Events ? event_color(static_cast<trace::EventKind>(lane.stream))
                 : lane.kind == LaneKind::Highlight ? kHighlight
                 : from_run ? IM_COL32(150, 200, 255, 255) : IM_COL32(200, 200, 205, 255);
    ImVec4 clip{p0.x, p0.y, p0.x + kLabelWidth - 6, p0.y + h};
    dl->AddText(nullptr, 0, {p0.x + 4, p0.y + (h - ImGui::GetFontSize()) / 2}, c, lane.title.c_str(), nullptr, 0, &clip);
}

size_t columns_before(TimeRange r, int width, int64_t t_end) {
    if (width <= 0 || r.span() <= 0 || t_end <= r.t0) return 0;
    double x = std::ceil(static_cast<double>(t_end - r.t0) / static_cast<double>(r.span()) * width);
    return static_cast<size_t>(std::min(x, static_cast<double>(width)));
}

void draw_curve(ImDrawList* dl, const CurveColumns& cols, ImVec2 p0, ImVec2 p1, ByteRange y_range, uint32_t color,
                bool fill, size_t columns, size_t first) {
    float h = p1.y - p0.y;
    auto y_of = [&](double bytes) {
        return std::clamp(p1.y - static_cast<float>(y_range.fraction(bytes)) * h, p0.y, p1.y);
    };
    uint32_t soft = (color & 0x00ffffff) | (110u << 24);
    float prev = -1;
    for (size_t x = first; x < std::min(cols.max.size(), columns); ++x) {
        float px = p0.x + static_cast<float>(x);
        float top = y_of(cols.max[x]), low = y_of(cols.min[x]);
        if (fill) {
            dl->AddRectFilled({px, top}, {px + 1, p1.y}, soft);
            dl->AddRectFilled({px, top}, {px + 1, std::max(top + 1.5f, low)}, color);
        } else {
            // Line: join to the previous column, then span this column's min..max.
            if (prev >= 0) dl->AddLine({px, prev}, {px + 0.5f, top}, color, 1.5f);
            dl->AddRectFilled({px, top}, {px + 1.5f, std::max(top + 1.5f, low)}, color);
        }
        prev = low;
    }
}

void draw_bytes_axis(ImDrawList* dl, ImVec2 p0, ImVec2 p1, ByteRange y_range, nlohmann::json* label_rects) {
    // "512 MiB", "1 GiB": lines a label's height apart and more, so that a short plot (the
    // timeline's memory strip in a small window) has fewer labels, never overlapping ones.
    const float label_h = ImGui::GetTextLineHeight();
    const std::vector<double> ticks = byte_ticks(y_range, p1.y - p0.y, label_h + 3);
    const std::vector<std::string> texts = byte_tick_labels_fitted(ticks);
    for (size_t i = 0; i < ticks.size(); ++i) {
        const double value = ticks[i];
        const float line_y = p1.y - static_cast<float>(y_range.fraction(value)) * (p1.y - p0.y);
        dl->AddLine({p0.x, line_y}, {p1.x, line_y}, IM_COL32(70, 70, 80, 255));
        const std::string& text = texts[i];
        ImVec2 sz = ImGui::CalcTextSize(text.c_str());
        ImVec2 at{p0.x - sz.x - 6, line_y - sz.y / 2};
        dl->AddText(at, IM_COL32(180, 180, 190, 255), text.c_str());
        if (label_rects) {
            nlohmann::json rect = rect_json(at, {at.x + sz.x, at.y + sz.y});
            rect["text"] = text;
            label_rects->push_back(rect);
        }
    }
}

void draw_hline(ImDrawList* dl, ImVec2 p0, ImVec2 p1, double bytes, ByteRange y_range, uint32_t color,
                const char* text) {
    float py = p1.y - static_cast<float>(y_range.fraction(bytes)) * (p1.y - p0.y);
    if (py < p0.y || py > p1.y) return;
    for (float x = p0.x; x < p1.x; x += 10) dl->AddLine({x, py}, {std::min(x + 6, p1.x), py}, color, 2.f);
    if (text) dl->AddText({p1.x - ImGui::CalcTextSize(text).x - 4, py - 16}, color, text);
}

ByteRange plot_range(const App& app, const std::vector<std::pair<const CurveColumns*, size_t>>& data, double capacity,
                     double headroom) {
    double lo = 0, hi = 0;
    bool any = false;
    for (const auto& [cols, columns] : data) {
        const Curve::MinMax span = columns_min_max(*cols, columns);
        if (std::min(columns, cols->max.size()) == 0) continue;
        lo = any ? std::min(lo, span.min) : span.min;
        hi = any ? std::max(hi, span.max) : span.max;
        any = true;
    }
    // From 0 the capacity line is always in view; a fitted range is the data's alone.
    if (!app.fit_y && capacity > 0) hi = std::max(hi, capacity);
    return byte_range(lo, hi, app.fit_y && any, headroom);
}

bool draw_details(App& app, const char* id, const DetailsPane& pane, float height, nlohmann::json& out) {
    bool close = false;
    ImGui::BeginChild(id, {0, height}, true, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    ImVec2 p0 = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    // The title (a kernel's name may be hundreds of characters: wrapped, never cut) and "close".
    // "copy" (or Ctrl+C) puts the pane as text on the clipboard, as Perfetto's details copy a row.
    const float pad = ImGui::GetStyle().FramePadding.x * 2;
    const float close_w = ImGui::CalcTextSize("close").x + pad, copy_w = ImGui::CalcTextSize("copy").x + pad;
    const float right = ImGui::GetWindowContentRegionMax().x;
    ImGui::PushTextWrapPos(right - close_w - copy_w - 18);
    ImGui::TextUnformatted(pane.title.c_str());
    ImGui::PopTextWrapPos();
    float title_bottom = ImGui::GetItemRectMax().y;
    ImGui::SameLine(right - close_w - copy_w - 6);
    const ImGuiIO& io = ImGui::GetIO();
    bool copy = ImGui::SmallButton("copy");
    tab_stop(app, "details_copy");
    const nlohmann::json copy_rect = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("copy these details as text (Ctrl+C)");
    copy = copy || (!io.WantTextInput && io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_C, false));
    std::string copied;
    if (copy) {
        copied = details_text(pane);
        ImGui::SetClipboardText(copied.c_str());
    }
    ImGui::SameLine(right - close_w);
    if (ImGui::SmallButton("close")) close = true;
    tab_stop(app, "details_close");
    ImGui::SetCursorScreenPos({ImGui::GetCursorScreenPos().x, std::max(ImGui::GetCursorScreenPos().y, title_bottom + 4)});
    // Fields on the left, the table on the right, as Perfetto's details pane.
    const float avail_h = ImGui::GetContentRegionAvail().y, avail_w = ImGui::GetContentRegionAvail().x;
    const float fields_w = std::max(300.f, avail_w * 0.38f);
    ImGui::BeginChild("fields", {fields_w, avail_h}, false);
    if (ImGui::BeginTable("fields", 2, ImGuiTableFlags_SizingStretchProp)) {
        ImGui::TableSetupColumn("field", ImGuiTableColumnFlags_WidthFixed);
        ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
        for (const auto& [k, v] : pane.fields) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", k.c_str());
            ImGui::TableNextColumn();
            ImGui::PushTextWrapPos(0);
            ImGui::TextUnformatted(v.c_str());
            ImGui::PopTextWrapPos();
        }
        ImGui::EndTable();
    }
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("table", {0, avail_h}, false);
    if (pane.rows.empty() && !pane.empty_table.empty()) {
        ImGui::TextDisabled("%s", pane.empty_table.c_str());
    } else if (!pane.columns.empty() &&
               ImGui::BeginTable("rows", static_cast<int>(pane.columns.size()),
                                 ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollX |
                                     ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        for (const std::string& c : pane.columns) ImGui::TableSetupColumn(c.c_str());
        ImGui::TableHeadersRow();
        ImGuiListClipper clip;
        clip.Begin(static_cast<int>(pane.rows.size()));
        TabRows stops;
        while (clip.Step())
            for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
                ImGui::TableNextRow();
                bool first = true;
                for (const std::string& cell : pane.rows[static_cast<size_t>(r)]) {
                    ImGui::TableNextColumn();
                    if (first) {
                        // A row the arrows reach (the table scrolls with them); it does nothing pressed.
                        ImGui::Selectable(("##row" + std::to_string(r)).c_str(), false,
                                          ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap);
                        tab_row(stops, r, false);
                        ImGui::SameLine(0, 0);
                        first = false;
                    }
                    ImGui::TextUnformatted(cell.c_str());
                }
            }
        tab_rows(app, "details_rows", stops);
        ImGui::EndTable();
    }
    ImGui::EndChild();
    ImGui::EndChild();
    nlohmann::json rows = nlohmann::json::array();
    for (size_t r = 0; r < pane.rows.size() && r < 50; ++r) rows.push_back(pane.rows[r]);
    nlohmann::json fields = nlohmann::json::array();
    for (const auto& [k, v] : pane.fields) fields.push_back({k, v});
    out = {{"rect", rect_json(p0, {p0.x + size.x, p0.y + size.y})},
           {"title", pane.title},
           {"fields", fields},
           {"columns", pane.columns},
           {"rows", rows},
           {"row_count", pane.rows.size()},
           {"copy", copy_rect}};
    if (copy) out["copied"] = copied;
    return close;
}

}  // namespace mhc::viewer
