#include "compare_kernel.hpp"

#include <cstdlib>
#include <string>

#include "mhc/common/units.hpp"
#include "mhc/viewer/align.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/viewer/details.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

void SelectedKernelPlaces::update(App& app, const std::vector<const ViewRun*>& ticked,
                                  const std::vector<const AlignedRun*>& aligned) {
    std::vector<int64_t> ids;
    ids.reserve(ticked.size());
    for (const ViewRun* run : ticked) ids.push_back(run->info.id);
    if (kernel == app.selected_kernel && run_ids == ids) return;
    kernel = app.selected_kernel;
    run_ids = std::move(ids);
    recorded = {};
    runs.assign(ticked.size(), {});
    name.clear();
    trace::Kernel found;
    if (!kernel || !app.trace->reader || !app.trace->reader->kernel(kernel, found)) return;
    name = app.trace->str(found.name);
    recorded = {true, found.t_start, found.t_end};
    for (size_t i = 0; i < ticked.size(); ++i) {
        if (aligned[i]) runs[i] = recorded;
        else runs[i].reached = kernel_in_run(*ticked[i], found, runs[i].t0, runs[i].t1);
    }
}

float draw_kernel_place(App& app, ImDrawList* dl, const SelectedKernelPlaces::Place& place,
                        const SelectedKernelPlaces::Place* recorded, int64_t kernel, const std::string& name, float x0,
                        float x1, float title_y, float rows_y0, float rows_y1, nlohmann::json& out) {
    const bool order_only = app.order_only();
    const auto when = [&](int64_t time) { return order_only ? app.times().at(time) : format_ns(time); };
    std::string text = "kernel #" + std::to_string(kernel);
    std::string where = "not reached";
    if (!place.reached) {
        text += " not reached (the run stopped before it)";
    } else {
        text += " at " + when(place.t0);
        if (recorded && recorded->reached && !order_only) {
            const int64_t shift = place.t0 - recorded->t0;
            text += shift == 0 ? std::string(" (as recorded)")
                               : std::string(" (") + (shift > 0 ? "+" : "-") + format_ns(std::llabs(shift)) + ")";
        }
        const float width = x1 - x0;
        if (place.t1 <= app.range.t0) {
            text = "< " + text;
            where = "left";
        } else if (place.t0 >= app.range.t1) {
            text += " >";
            where = "right";
        } else {
            where = "in view";
            const float line_x = x0 + static_cast<float>(app.range.x_of(place.t0, width));
            dl->AddLine({line_x, rows_y0}, {line_x, rows_y1}, kSelected, 1.f);
            out["x"] = line_x;
        }
    }
    const ImVec2 size = ImGui::CalcTextSize(text.c_str());
    const ImVec2 tag0{x1 - size.x - 6, title_y}, tag1{x1, title_y + 16};
    const bool outside = where == "left" || where == "right";
    const bool hovered = ImGui::IsMouseHoveringRect(tag0, tag1) &&
                         ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows);
    if (outside) dl->AddRectFilled(tag0, tag1, hovered ? IM_COL32(90, 90, 110, 255) : IM_COL32(70, 70, 85, 255));
    dl->AddText({tag0.x + 3, title_y + 1}, kSelected, text.c_str());
    if (hovered)
        ImGui::SetTooltip("kernel #%lld %s%s", static_cast<long long>(kernel), name.c_str(),
                          outside ? "\nclick: bring it into view (the zoom kept)" : "");
    if (hovered && outside) {
        // Panned so that it starts a third into the view: what led to it stays in sight.
        if (clicked()) {
            const int64_t span = app.range.span();
            const int64_t t0 = place.t0 - span / 3;
            app.range = clamp({t0, t0 + span}, app.limits);
        }
    }
    out["text"] = text;
    out["where"] = where;
    out["rect"] = rect_json(tag0, tag1);
    if (place.reached) out["t0"] = place.t0;
    return tag0.x;
}

}   // namespace mhc::viewer
