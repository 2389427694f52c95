// The keyboard's Tab ring: every interactive part of the window in one order, Tab (Shift+Tab back)
// moving along it (widgets.hpp). ImGui 1.86 tabs between text fields alone (the step field, then the
// find field, past every button, menu, the details panes and the notes), so the window keeps its own.
// A table's rows are one stop (the arrows move among them), a plot another (the arrows pan and zoom
// it), and an open menu's entries stops after its field (leaving them closes the menu).
#include <GLFW/glfw3.h>
#include <imgui_internal.h>

#include <algorithm>

#include "mhc/viewer/axis.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

void tab_stop(App& app, const std::string& name, unsigned id, bool text) {
    const ImGuiContext& ctx = *ImGui::GetCurrentContext();
    if (id == 0) {
        id = ImGui::GetItemID();
        text = (ctx.LastItemData.InFlags & ImGuiItemFlags_Inputable) != 0;
    }
    if (id == 0) return;
    if ((ctx.NavId == id || ctx.ActiveId == id) && !ctx.NavDisableHighlight) app.layout["keyboard"]["focused"] = name;
    TabStop stop;
    stop.id = id;
    stop.window = ImGui::GetCurrentWindow();
    stop.name = name;
    stop.text = text;
    app.tab_drawn.push_back(std::move(stop));
}

void tab_row(TabRows& rows, int row, bool selected) {
    const ImGuiContext& ctx = *ImGui::GetCurrentContext();
    const ImGuiID id = ImGui::GetItemID();
    if (rows.stop.id == 0 || (selected && !rows.selected)) {
        rows.stop.id = id;
        rows.stop.window = ImGui::GetCurrentWindow();
        rows.selected = selected;
    }
    rows.stop.members.push_back(id);
    if (ctx.NavId == id && !ctx.NavDisableHighlight) rows.focused = row;
}

void tab_rows(App& app, const std::string& name, TabRows& rows) {
    if (rows.stop.id == 0) return;
    rows.stop.name = name;
    if (rows.focused >= 0) {
        app.layout["keyboard"]["focused"] = name;
        app.layout["keyboard"]["row"] = rows.focused;
    }
    app.tab_drawn.push_back(std::move(rows.stop));
    rows = TabRows{};
}

void tab_plot(App& app, ImVec2 p0, ImVec2 p1) {
    const ImGuiID id = ImGui::GetID("##plot");
    const ImRect box(p0, p1);
    ImGui::ItemAdd(box, id, nullptr, ImGuiItemFlags_NoNav);   // Tab reaches it; the arrows do not
    tab_stop(app, "plot", id);
    app.tab_drawn.back().plot = true;
    const ImGuiContext& ctx = *ImGui::GetCurrentContext();
    if (ctx.NavId == id && !ctx.NavDisableHighlight)
        ImGui::GetForegroundDrawList()->AddRect(p0, p1, ImGui::GetColorU32(ImGuiCol_NavHighlight), 0, 0, 2);
}

namespace {
// The stop the keyboard is on: its own item, or one of its rows.
const TabStop* stop_at(const std::vector<TabStop>& ring, ImGuiID id) {
    for (const TabStop& stop : ring)
        if (stop.id == id || std::find(stop.members.begin(), stop.members.end(), id) != stop.members.end())
            return &stop;
    return nullptr;
}

// Enter on a stop that is no text field, or on a table's row: pressed as Space presses it (a button,
// a combo, a view's tab, a row).
void enter_presses(App& app) {
    ImGuiContext& ctx = *ImGui::GetCurrentContext();
    if (ctx.ActiveId != 0 || ctx.NavId == 0 || ctx.NavDisableHighlight || !ImGui::IsKeyPressed(GLFW_KEY_ENTER, false))
        return;
    const TabStop* stop = stop_at(app.tab_ring, ctx.NavId);
    if (stop == nullptr || stop->text || stop->plot) return;
    ctx.NavActivateId = ctx.NavActivateDownId = ctx.NavActivatePressedId = ctx.NavId;
    ctx.NavActivateInputId = 0;
}

// A focused plot takes the arrows: left and right pan by a tenth of the span, up zooms in and down
// out about the middle (as W/S and A/D, a press at a time); ImGui's move away is cancelled.
void plot_keys(App& app) {
    const ImGuiContext& ctx = *ImGui::GetCurrentContext();
    if (ctx.ActiveId != 0 || ctx.NavId == 0 || ctx.NavDisableHighlight) return;
    const TabStop* stop = stop_at(app.tab_ring, ctx.NavId);
    if (stop == nullptr || !stop->plot) return;
    const int64_t step = std::max<int64_t>(app.range.span() / 10, 1);
    const int64_t middle = app.range.t0 + app.range.span() / 2;
    bool moved = true;
    if (ImGui::IsKeyPressed(GLFW_KEY_LEFT)) app.range = pan(app.range, -step, app.limits);
    else if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) app.range = pan(app.range, step, app.limits);
    else if (ImGui::IsKeyPressed(GLFW_KEY_UP)) app.range = zoom(app.range, 0.8, middle, app.limits);
    else if (ImGui::IsKeyPressed(GLFW_KEY_DOWN)) app.range = zoom(app.range, 1.25, middle, app.limits);
    else moved = false;
    if (moved) ImGui::NavMoveRequestCancel();
}
}  // namespace

namespace {
// The keyboard onto stop `stop` of the ring, in its window (which takes the keyboard first).
void focus_stop(const TabStop& stop) {
    ImGuiContext& ctx = *ImGui::GetCurrentContext();
    auto* window = static_cast<ImGuiWindow*>(stop.window);
    if (ctx.NavWindow != window) ImGui::FocusWindow(window);
    ImGui::SetFocusID(stop.id, window);
    ctx.NavDisableHighlight = false;   // the stop focused is outlined, as after ImGui's own Tab
    ctx.NavDisableMouseHover = true;
}

// app.focus_request: the stop named, once a frame has drawn it (the view asked for opens first).
void focus_requested(App& app) {
    if (app.focus_request.empty()) return;
    for (const TabStop& stop : app.tab_ring)
        if (stop.name == app.focus_request) {
            ImGui::NavMoveRequestCancel();
            focus_stop(stop);
            app.focus_request.clear();
            return;
        }
}
}   // namespace

void tab_along(App& app) {
    ImGuiContext& ctx = *ImGui::GetCurrentContext();
    focus_requested(app);
    enter_presses(app);
    plot_keys(app);
    const std::vector<TabStop>& ring = app.tab_ring;
    if (ring.empty() || ctx.IO.KeyCtrl || !ImGui::IsKeyPressed(GLFW_KEY_TAB)) return;
    // No field shown focused (ImGui keeps a hidden one after a click) is none: Tab goes to the
    // first stop, Shift+Tab to the last.
    const bool from_none = ctx.ActiveId == 0 && (ctx.NavId == 0 || ctx.NavDisableHighlight);
    const ImGuiID here_id = ctx.ActiveId != 0 ? ctx.ActiveId : ctx.NavId;
    const TabStop* here_stop = from_none ? nullptr : stop_at(ring, here_id);
    if (here_stop == nullptr && !from_none) return;   // a field of no stop: ImGui's own Tab
    const auto at = here_stop == nullptr ? ring.end() : ring.begin() + (here_stop - ring.data());
    const auto count = static_cast<std::ptrdiff_t>(ring.size());
    const std::ptrdiff_t here = at == ring.end() ? (ctx.IO.KeyShift ? 0 : -1) : at - ring.begin();
    const TabStop& next = ring[static_cast<size_t>(((here + (ctx.IO.KeyShift ? -1 : 1)) % count + count) % count)];
    ImGui::NavMoveRequestCancel();
    if (ctx.ActiveId != 0) ImGui::ClearActiveID();   // leaves a text field as Tab does
    auto* window = static_cast<ImGuiWindow*>(next.window);
    // Out of an open menu (its entries are stops while it is open) into the window under it: the
    // menu closes, as a click outside it closes it.
    if (ctx.NavWindow != nullptr && (ctx.NavWindow->Flags & ImGuiWindowFlags_Popup) != 0 && ctx.NavWindow != window &&
        (window->Flags & ImGuiWindowFlags_Popup) == 0)
        ImGui::ClosePopupsOverWindow(window, false);
    // Into another window (the notes' window, a details pane): it takes the keyboard first.
    focus_stop(next);
}

void end_tab_ring(App& app, size_t first, size_t last) {
    const std::vector<TabStop>& drawn = app.tab_drawn;
    last = std::min(last, drawn.size());
    first = std::min(first, last);
    const auto at = [&](size_t index) { return drawn.begin() + static_cast<std::ptrdiff_t>(index); };
    app.tab_ring.assign(at(first), at(last));
    app.tab_ring.insert(app.tab_ring.end(), drawn.begin(), at(first));
    app.tab_ring.insert(app.tab_ring.end(), at(last), drawn.end());
    nlohmann::json names = nlohmann::json::array();
    for (const TabStop& stop : app.tab_ring) names.push_back(stop.name);
    app.layout["keyboard"]["order"] = names;
    app.tab_drawn.clear();
}

}  // namespace mhc::viewer
