// The keyboard's Tab ring: every interactive part of the window in one order, Tab (Shift+Tab back)
// moving along it (widgets.hpp). ImGui 1.86 tabs between text fields alone (the step field, then the
// find field, past every button, menu, the details panes and the notes), so the window keeps its own.
#include <GLFW/glfw3.h>
#include <imgui_internal.h>

#include <algorithm>

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
    app.tab_drawn.push_back({id, ImGui::GetCurrentWindow(), name, text});
}

namespace {
// Enter on a stop that is no text field: pressed as Space presses it (a button, a combo, a view's tab).
void enter_presses(App& app) {
    ImGuiContext& ctx = *ImGui::GetCurrentContext();
    if (ctx.ActiveId != 0 || ctx.NavId == 0 || ctx.NavDisableHighlight || !ImGui::IsKeyPressed(GLFW_KEY_ENTER, false))
        return;
    for (const TabStop& stop : app.tab_ring)
        if (stop.id == ctx.NavId && !stop.text) {
            ctx.NavActivateId = ctx.NavActivateDownId = ctx.NavActivatePressedId = stop.id;
            ctx.NavActivateInputId = 0;
            return;
        }
}
}  // namespace

void tab_along(App& app) {
    ImGuiContext& ctx = *ImGui::GetCurrentContext();
    enter_presses(app);
    const std::vector<TabStop>& ring = app.tab_ring;
    if (ring.empty() || ctx.IO.KeyCtrl || !ImGui::IsKeyPressed(GLFW_KEY_TAB)) return;
    // No field shown focused (ImGui keeps a hidden one after a click) is none: Tab goes to the
    // first stop, Shift+Tab to the last.
    const bool from_none = ctx.ActiveId == 0 && (ctx.NavId == 0 || ctx.NavDisableHighlight);
    const ImGuiID here_id = ctx.ActiveId != 0 ? ctx.ActiveId : ctx.NavId;
    const auto at = from_none ? ring.end()
                              : std::find_if(ring.begin(), ring.end(), [&](const TabStop& stop) { return stop.id == here_id; });
    if (at == ring.end() && !from_none) return;   // a field of no stop (a table's row): ImGui's own Tab
    const auto count = static_cast<std::ptrdiff_t>(ring.size());
    const std::ptrdiff_t here = at == ring.end() ? (ctx.IO.KeyShift ? 0 : -1) : at - ring.begin();
    const TabStop& next = ring[static_cast<size_t>(((here + (ctx.IO.KeyShift ? -1 : 1)) % count + count) % count)];
    ImGui::NavMoveRequestCancel();
    if (ctx.ActiveId != 0) ImGui::ClearActiveID();   // leaves a text field as Tab does
    auto* window = static_cast<ImGuiWindow*>(next.window);
    // Into another window (the notes' window, a details pane): it takes the keyboard first.
    if (ctx.NavWindow != window) ImGui::FocusWindow(window);
    ImGui::SetFocusID(next.id, window);
    ctx.NavDisableHighlight = false;   // the stop focused is outlined, as after ImGui's own Tab
    ctx.NavDisableMouseHover = true;
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
