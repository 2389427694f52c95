// The toolbar shared by the timeline and the memory view (widgets.hpp): run, step, zoom, the
// options menu, the device whose memory is shown, the range in view; its compact and narrow forms.
#include "widgets.hpp"

#include <GLFW/glfw3.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cmath>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/controls.hpp"
#include "mhc/viewer/families.hpp"

namespace mhc::viewer {

namespace {
// The field the keyboard is on (Tab, the arrows), named in the layout: "toolbar": {"focused": "run"};
// `id`, the field's own (the last item's by default), joins the Tab ring (keyboard.cpp).
void note_focus(App& app, nlohmann::json& jt, const char* name, ImGuiID id = 0) {
    if (id == 0) id = ImGui::GetItemID();
    const ImGuiContext& ctx = *ImGui::GetCurrentContext();
    if (id != 0 && (ctx.NavId == id || ctx.ActiveId == id) && !ctx.NavDisableHighlight) jt["focused"] = name;
    tab_stop(app, name, id, name == std::string("step"));
}

// The width of a combo whose widest value is `text_width` px: that, the frame's padding and the arrow.
float combo_width(float text_width) {
    return text_width + ImGui::GetStyle().FramePadding.x * 2 + ImGui::GetFrameHeight() + 4;
}

// The "memory of" choices: each device with its peak (as --device); picking one reads the trace
// again for it, at the next frame's start. Their rectangles go to `entries`.
void device_entries(App& app, const std::vector<DeviceChoice>& devices, nlohmann::json& entries) {
    for (const DeviceChoice& choice : devices) {
        if (ImGui::Selectable(choice.label.c_str(), choice.device == app.trace->memory_device))
            app.device_request = choice.device;
        tab_stop(app, "device_" + std::to_string(choice.device));
        entries.push_back(rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax()));
        entries.back()["device"] = choice.device;
    }
}

// The options used now and then, in one menu so that the toolbar keeps to one line (at 1400 px
// with every field; the "memory of" field pushed "memory strip" and "band colour" to a second
// one): "fit y" for both views, then the view's own, and in a narrow window (`devices` not empty)
// the "memory of" choices that left the line.
void options_menu(App& app, const std::function<void(nlohmann::json&)>& view_options, nlohmann::json& jt,
                  const std::vector<DeviceChoice>& devices) {
    const char* title = "options";
    ImGui::SetNextItemWidth(combo_width(ImGui::CalcTextSize(title).x));
    // The field's stop before its entries' (stops while the menu is open): Tab goes down the menu.
    note_focus(app, jt, "options", ImGui::GetID("##options"));
    if (ImGui::BeginCombo("##options", title, ImGuiComboFlags_HeightLargest)) {
        ImGui::Checkbox("fit y", &app.fit_y);
        tab_stop(app, "fit_y");
        jt["fit_y"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "memory curves: the y axis fitted to the bytes in view (on) or from 0 B (off);\n"
                "a curve over a large baseline (141 GiB moving by 10 MB) is flat from 0 B");
        if (view_options) view_options(jt);
        if (!devices.empty()) {
            ImGui::Separator();
            ImGui::TextDisabled("memory of");
            const bool busy = app.loading || launcher_busy(app);
            ImGui::BeginDisabled(busy);
            nlohmann::json entries = nlohmann::json::array();
            device_entries(app, devices, entries);
            ImGui::EndDisabled();
            jt["device_entries"] = entries;
        }
        ImGui::EndCombo();
    }
    jt["options"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    jt["options"]["fit_y"] = app.fit_y;
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("fit y (%s), and this view's own options%s", app.fit_y ? "on" : "off",
                          devices.empty() ? "" : ", and whose memory is shown");
}

// Widths of the toolbar's parts, to choose its form before drawing it.
struct ToolbarWidths {
    float full = 0;      // every field with its whole label, the device field included
    float compact = 0;   // short labels, the device in the options menu
};

float text_w(const char* text) { return ImGui::CalcTextSize(text).x; }
nlohmann::json last_rect() { return rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax()); }

// What the toolbar shows and the form it takes, worked out before anything is drawn.
struct ToolbarForm {
    std::string label;                   // the run field's value
    std::vector<std::string> items;      // the run field's entries
    float widest = 0;                    // the widest of them, "recorded" included
    std::vector<DeviceChoice> devices;   // the "memory of" choices
    float device_w = 0, help_w = 0, gap = 0, right = 0, avail = 0, step_w = 0;
    ToolbarWidths widths;
    bool compact = false, device_on_line = false;
};

ToolbarForm toolbar_form(const App& app, nlohmann::json& jt) {
    ToolbarForm form;
    const ImGuiStyle& style = ImGui::GetStyle();
    auto button_w = [&](const char* text) { return text_w(text) + style.FramePadding.x * 2; };
    form.gap = style.ItemSpacing.x;
    form.right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    form.avail = form.right - ImGui::GetCursorScreenPos().x;
    const float gap = form.gap;

    const char* current = app.selected < 0 ? "recorded" : nullptr;
    form.label = current ? current : trace::run_name_with_device(app.run_list[static_cast<size_t>(app.selected)]);
    form.items.reserve(app.run_list.size());
    form.widest = text_w("recorded");
    for (const auto& run : app.run_list) {
        form.items.push_back(run_list_entry(run));
        form.widest = std::max(form.widest, text_w(form.items.back().c_str()));
    }
    form.devices = device_choices(app.trace->memory_devices);
    float device_w = 0;   // the "memory of" combo: as wide as its longest entry
    for (const DeviceChoice& choice : form.devices) device_w = std::max(device_w, text_w(choice.label.c_str()));
    form.device_w = device_w = std::clamp(combo_width(device_w), 120.f, 260.f);
    const float options_w = combo_width(text_w("options"));
    form.help_w = text_w("(?)");
    // Everything but the run field and the zoom buttons, in either form.
    const float common = text_w("run") + gap + 24 + text_w("step") + gap + 100 + gap + button_w("Go") + gap +
                         options_w + gap + form.help_w;
    form.widths.full = common + std::clamp(combo_width(form.widest), 120.f, 260.f) + button_w("Zoom to selection") +
                       gap + button_w("Reset zoom") + gap +
                       (form.devices.empty() ? 0.f : 16 + text_w("memory of") + gap + device_w);
    form.compact = form.widths.full > form.avail;
    form.step_w = form.compact ? 80.f : 100.f;
    form.widths.compact = common - (100 - form.step_w) + std::clamp(combo_width(form.widest), 120.f, 180.f) +
                          button_w("Zoom sel") + gap + button_w("Reset") + gap;
    // The "memory of" field stays on the line while it fits there (1024 px with a run and two
    // devices), else it is in the options menu.
    const float device_part = 16 + text_w("memory of") + gap + device_w;
    form.device_on_line = !form.devices.empty() && (!form.compact || form.widths.compact + device_part <= form.avail);
    jt["form"] = !form.compact ? "full" : form.device_on_line || form.devices.empty() ? "compact" : "narrow";
    return form;
}

void run_field(App& app, const ToolbarForm& form, nlohmann::json& jt) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("run");
    jt["run_label"] = last_rect();
    ImGui::SameLine();
    // As wide as its longest entry, up to 260 px ("recorded" alone took 260 px of the line); 180 in
    // a narrow window (a longer name is cut in the field, whole in its list and its tooltip).
    ImGui::SetNextItemWidth(std::clamp(combo_width(form.widest), 120.f, form.compact ? 180.f : 260.f));
    note_focus(app, jt, "run", ImGui::GetID("##run"));
    if (ImGui::BeginCombo("##run", form.label.c_str())) {
        if (ImGui::Selectable("recorded", app.selected < 0)) app.select_run(-1);
        tab_stop(app, "run_recorded");
        for (size_t i = 0; i < form.items.size(); ++i) {
            if (ImGui::Selectable(form.items[i].c_str(), app.selected == static_cast<int>(i)))
                app.select_run(static_cast<int>(i));
            tab_stop(app, "run_" + std::to_string(i));
        }
        ImGui::EndCombo();
    }
    jt["run_combo"] = last_rect();
    jt["run_combo"]["text"] = form.label;
    if (ImGui::IsItemHovered() && app.selected >= 0)
        ImGui::SetTooltip("%s", form.items[static_cast<size_t>(app.selected)].c_str());
}

// The step field: off, reading "none", for a trace without steps (its tooltip says why);
// else on a step the trace has (+/- move to the next one there is).
void step_field(App& app, const ToolbarForm& form, nlohmann::json& jt) {
    const StepControl steps = step_control(app.trace->steps);
    ImGui::BeginGroup();
    ImGui::BeginDisabled(!steps.enabled);
    ImGui::TextUnformatted("step");
    jt["step_label"] = last_rect();
    ImGui::SameLine();
    ImGui::SetNextItemWidth(form.step_w);
    ImGuiID step_text = 0;   // InputInt's own text field (ImGui::InputScalar: "" under the label's id)
    if (steps.enabled) {
        ImGui::PushID("##step");
        step_text = ImGui::GetID("");
        ImGui::PopID();
        const int previous = app.step_input;
        if (ImGui::InputInt("##step", &app.step_input))
            app.step_input = snap_step(app.trace->steps, app.step_input, previous);
    } else {
        char none[] = "none";
        ImGui::InputText("##step", none, sizeof none, ImGuiInputTextFlags_ReadOnly);
    }
    jt["step_input"] = last_rect();
    if (steps.enabled) note_focus(app, jt, "step", step_text);
    if (steps.enabled) app.step_input = std::clamp(app.step_input, steps.first, steps.last);
    ImGui::SameLine();
    if (ImGui::Button("Go") && steps.enabled) app.go_to_step(app.step_input);
    if (steps.enabled) note_focus(app, jt, "go");
    ImGui::EndDisabled();
    ImGui::EndGroup();
    jt["step"] = {{"enabled", steps.enabled}, {"value", app.step_input}, {"first", steps.first}, {"last", steps.last}};
    if (!steps.enabled && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
        ImGui::SetTooltip("%s", steps.why.c_str());
        jt["step"]["tooltip"] = steps.why;
    }
    // Steps the trace does not mark but its optimizer's ranges give: said where the field is.
    const std::string origin = steps_origin(*app.trace);
    if (!origin.empty()) {
        jt["step"]["origin"] = origin;
        if (steps.enabled && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", origin.c_str());
    }
}

void zoom_buttons(App& app, bool compact, nlohmann::json& jt) {
    if (ImGui::Button(compact ? "Zoom sel" : "Zoom to selection")) app.zoom_to_selection(app.view == ViewId::Memory);
    jt["zoom_selection"] = last_rect();
    note_focus(app, jt, "zoom_selection");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "zoom to the range selected (right-drag), else to the kernel or allocation selected (a "
            "click); Z or F does the same");
    ImGui::SameLine();
    if (ImGui::Button(compact ? "Reset" : "Reset zoom")) app.reset_zoom();
    jt["reset_zoom"] = last_rect();
    note_focus(app, jt, "reset_zoom");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("reset zoom: the whole trace; 0 does the same");
}

// Whose memory the curves show, when the trace has several devices (as --device).
void device_field(App& app, const ToolbarForm& form, nlohmann::json& jt) {
    std::string shown = device_name(app.trace->memory_device);
    for (const DeviceChoice& choice : form.devices)
        if (choice.device == app.trace->memory_device) shown = choice.label;
    ImGui::SameLine(0, 16);
    ImGui::TextUnformatted("memory of");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(form.device_w);
    const bool busy = app.loading || launcher_busy(app);
    ImGui::BeginDisabled(busy);
    nlohmann::json entries = nlohmann::json::array();
    note_focus(app, jt, "device", ImGui::GetID("##memory device"));
    if (ImGui::BeginCombo("##memory device", shown.c_str())) {
        device_entries(app, form.devices, entries);
        ImGui::EndCombo();
    }
    ImGui::EndDisabled();
    jt["device"] = last_rect();
    jt["device"]["current"] = app.trace->memory_device;
    jt["device"]["text"] = shown;
    if (!entries.empty()) jt["device"]["entries"] = entries;
}

// The range in view: whole when it fits, else its span alone, else nothing (it is in (?)'s
// tooltip and on the axis); then (?) and its help.
void range_and_help(App& app, const ToolbarForm& form, nlohmann::json& jt) {
    const int64_t resolution = std::max<int64_t>(app.range.span() / 1000, 1);
    const RunTimes* run_clock = order_only_run(app);   // an order-only trace's run: ops + link time
    const std::string range_text = run_clock ? run_clock->interval(app.range.t0, app.range.t1)
                                             : app.times().range(app.range.t0, app.range.t1, resolution);
    const std::string span_text = "(" +
                                  (run_clock ? run_clock->span(app.range.span()) : app.times().span(app.range.span())) +
                                  ")";
    const float room = form.right - ImGui::GetItemRectMax().x - 2 * form.gap - form.help_w;
    const std::string& shown_range = text_w(range_text.c_str()) <= room ? range_text : span_text;
    if (text_w(shown_range.c_str()) <= room) {
        ImGui::SameLine();
        ImGui::TextDisabled("%s", shown_range.c_str());
        jt["range"] = last_rect();
        jt["range"]["text"] = shown_range;
    }
    ImGui::SameLine();
    ImGui::TextDisabled("(?)");
    const bool help = ImGui::IsItemHovered();
    jt["help"] = last_rect();
    jt["range_text"] = range_text;
    if (help) {
        const std::string text =
            "wheel or W/S: zoom; drag or A/D: pan; right-drag: select a range, Z: zoom to it; 0: the whole trace\n"
            "click a kernel or an allocation: its details, F (or Z): zoom to it; click a folded box: zoom to it\n"
            "Ctrl+F or /: find a kernel by name; Enter or F3: the next match, Shift: the one before; N: the notes\n"
            "Ctrl+C: copy the details; Esc: close the notes, else clear the range selected, else close the details\n"
            "Tab (Shift+Tab): the toolbar's fields in turn (an open menu's entries too), then the view's, its plot,\n"
            "the details and their rows, the notes and the view tabs; arrows between them (in a table row to row;\n"
            "on the plot left/right pan, up/down zoom), Space or Enter: use the one focused\n"
            "in view: " +
            range_text;
        ImGui::SetTooltip("%s", text.c_str());
        jt["tooltip"] = text;
    }
}
}   // namespace

void toolbar(App& app, const std::function<void(nlohmann::json&)>& view_options) {
    // Each field's label on its left ("run [combo]   step [-][+] Go"), so that no value reads
    // as belonging to the widget before it. One line always: where the whole toolbar does not
    // fit (under about 1300 px with a run and several devices), the zoom buttons read "Zoom sel"
    // and "Reset", the run field narrows, the "memory of" field moves into the options menu, and
    // the range in view is said as far as room is left (whole in (?)'s tooltip); it wrapped to a
    // second line, pushing every plot down, and ran off the window at 1024 px.
    nlohmann::json& jt = app.layout["toolbar"];
    const ToolbarForm form = toolbar_form(app, jt);
    run_field(app, form, jt);
    ImGui::SameLine(0, 24);
    step_field(app, form, jt);
    ImGui::SameLine();
    zoom_buttons(app, form.compact, jt);
    ImGui::SameLine();
    options_menu(app, view_options, jt, form.device_on_line ? std::vector<DeviceChoice>{} : form.devices);
    if (form.device_on_line) device_field(app, form, jt);
    else if (!form.devices.empty()) jt["device_in_options"] = {{"current", app.trace->memory_device}};
    range_and_help(app, form, jt);
    jt["widths"] = {{"full", form.widths.full}, {"compact", form.widths.compact}, {"available", form.avail}};
}

}   // namespace mhc::viewer
