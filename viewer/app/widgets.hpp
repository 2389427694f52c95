#pragma once
// Drawing helpers shared by the views: the time axis, tracks, curves and navigation.
#include <imgui.h>

#include <functional>

#include "app.hpp"
#include "mhc/viewer/axis.hpp"

namespace mhc::viewer {

inline constexpr float kLabelWidth = 170.f;
inline constexpr float kAxisHeight = 22.f;

// Ruler with ticks and labels over [x0, x0 + w), as `times` reads them ("op #N" when order only);
// no label past the right edge. Returns the labels drawn (text, x0, x1) for the layout JSON.
// `run`: an order-only trace's run (its ticks read the op it reached by then, once each).
nlohmann::json draw_time_axis(ImDrawList* dl, ImVec2 p0, float width, float height, TimeRange range,
                              const TimeText& times, const RunTimes* run = nullptr);
// The selected run's times where the view is on its clock and the trace is order only, else nullptr.
const RunTimes* order_only_run(App& app);
// The views' time axis at p0 (the plot's left edge; the label column lies left of it): the ruler of
// app.range and, for an order-only trace, its title in the label column ("op order", hover: why).
// Its labels and title go to `out` (for --layout).
void time_axis(App& app, ImDrawList* dl, ImVec2 p0, float width, nlohmann::json& out);
// Wheel zoom about the mouse, W/S zoom about the mouse or centre, drag (left) pan, A/D pan,
// right-drag selects a range (zoom to it with the toolbar or Z). Returns true if hovered.
bool navigate(App& app, ImVec2 p0, ImVec2 p1);
// The selection as a translucent band.
void draw_selection(App& app, ImDrawList* dl, ImVec2 p0, ImVec2 p1);

// One track row; shows a tooltip for the item under the mouse.
// `labels` (when given) gets the text drawn inside each of f.items' boxes ("" for none): a
// label that does not fit its box is cut with "..." (fit_label), never clipped into the next.
// NOLINTNEXTLINE(readability-identifier-length): f, w, h as the definition names them
void draw_track(App& app, ImDrawList* dl, const TrackFrame& f, ImVec2 p0, float w, float h,
                std::vector<std::string>* labels = nullptr);
// Track title in the label column.
void draw_track_label(ImDrawList* dl, const Lane& lane, ImVec2 p0, float h, bool from_run);

// Memory curve on [p0, p1], whose height spans the bytes `y_range` (byte_range: from 0, or fitted to the
// data): filled from the bottom to the column max when `fill`, else a line; only the first
// `columns` columns (a curve stops where its recording or run ends).
// `first`: columns left undrawn at the left (before a run's first sample: columns_before_first_sample).
void draw_curve(ImDrawList* dl, const CurveColumns& cols, ImVec2 p0, ImVec2 p1, ByteRange y_range, uint32_t color,
                bool fill, size_t columns = SIZE_MAX, size_t first = 0);
// Columns of a `width`-column plot of `r` that start before `t_end`.
size_t columns_before(TimeRange r, int width, int64_t t_end);
// Horizontal grid and byte labels for a memory plot.
// With `label_rects`, each label's rectangle is appended (for the layout JSON).
// A fitted range's labels read "141.402 GiB", "+2 MiB", ... (byte_tick_labels_fitted).
void draw_bytes_axis(ImDrawList* dl, ImVec2 p0, ImVec2 p1, ByteRange y_range, nlohmann::json* label_rects = nullptr);
// A dashed line at `bytes` (nothing when off the plot, as a capacity under a fitted range).
void draw_hline(ImDrawList* dl, ImVec2 p0, ImVec2 p1, double bytes, ByteRange y_range, uint32_t color,
                const char* text);
// The memory plots' y range: from 0 (the default), or fitted to the curves drawn (the toolbar's
// "fit y", --fit-y); `data` holds each curve's columns and how many of them are drawn.
ByteRange plot_range(const App& app, const std::vector<std::pair<const CurveColumns*, size_t>>& data, double capacity,
                     double headroom);

// The toolbar shared by timeline and memory views, on one line: run choice, go to step, zoom, the
// "options" menu (fit y, then what `view_options` draws: the view's own, used now and then), the
// device whose memory is shown, the range. `view_options` writes its items' rectangles into the
// toolbar's layout JSON (for tests).
void toolbar(App& app, const std::function<void(nlohmann::json&)>& view_options = {});

// The keyboard's Tab ring (keyboard.cpp). tab_stop: the last item drawn (or the item `id`) is the
// next stop, `name` in the layout's "keyboard" (and "focused" when the keyboard is on it).
// `text`: the item `id` is a text field (an item of its own is known to be one).
void tab_stop(App& app, const std::string& name, unsigned id = 0, bool text = false);
// Tab (Shift+Tab back) from a stop, or from none, to the next one, in the frame before's order, and
// Enter on a stop that is no text field presses it as Space does (ImGui 1.86's Enter edits text
// alone); called at the frame's start. From a field that is no stop, Tab is ImGui's.
void tab_along(App& app);
// A table's rows as one stop: tab_row after each row's first item (a Selectable spanning the row;
// `selected`: the row chosen, where Tab enters), tab_rows after the last (the stop, named `name`;
// the layout's "keyboard" says {"focused": name, "row": N} when the keyboard is on row N). The
// arrows move row by row, Enter presses the row as a click does, Tab goes on past the table.
struct TabRows {
    TabStop stop;
    bool selected = false;
    int focused = -1;
};
void tab_row(TabRows& rows, int row, bool selected);
void tab_rows(App& app, const std::string& name, TabRows& rows);
// The plot spanning p0..p1 (timeline, memory, compare) as a stop named "plot": focused, it is
// outlined and the arrows pan it (left, right) and zoom it (up: in, down: out) about its middle.
void tab_plot(App& app, ImVec2 p0, ImVec2 p1);
// This frame's stops become the ring: the view's (drawn from `first` to `last`: its toolbar first)
// before the others (the notes, the view tabs), each part in the order drawn.
void end_tab_ring(App& app, size_t first, size_t last);

nlohmann::json rect_json(ImVec2 p0, ImVec2 p1);
// A left click (released without dragging) this frame.
bool clicked();
// The details pane (DetailsPane from the core) in a child of `height` pixels: title, a close
// button (clears the selection: returns true), the fields, then the table. Its contents go to
// `out` (for --layout).
bool draw_details(App& app, const char* id, const DetailsPane& pane, float height, nlohmann::json& out);
// SameLine when `width` more pixels fit after the last item, else start a new line.
void same_line_if_fits(float width, float spacing = 20.f);

}  // namespace mhc::viewer
