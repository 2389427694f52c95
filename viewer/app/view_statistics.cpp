// Statistics view: kernels by total time, allocations by size and category, per-step time
// and peak; sortable tables and one search box for kernel and allocation names. Number columns
// are as wide as their figures; the name column takes the rest (full names in a tooltip).
#include <imgui_internal.h>

#include <algorithm>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/controls.hpp"
#include "mhc/viewer/details.hpp"
#include "mhc/viewer/stats.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

struct StatisticsUi {
    char search[128] = "";
    std::string last_search = "\x01";
    std::vector<uint32_t> kernel_rows, alloc_rows;
    int kernel_col = 2, alloc_col = 1, step_col = 0;
    bool kernel_asc = false, alloc_asc = false, step_asc = true;
    bool stats_ready = false;
    std::vector<CategoryStat> categories;
    std::vector<StepStat> steps;
    PeakLive at_peak;   // what is live at the recorded peak
    RunPeakLive at_run_peak;    // what is live at the selected run's peak
    int64_t run_peak_of = -1;   // the run it was computed for (its id; -1: none yet)
    RunOom at_oom;              // what was alive when the selected run ran out of memory
    int64_t oom_of = -1;        // the run it was computed for
    std::vector<LiveGroup> oom_groups;   // at_oom's rows by where each was allocated
    bool oom_each = false;               // "At the OOM": one row per allocation instead of per label
};

namespace {

// Returns (column, ascending) of the table's sort spec, and whether it changed.
bool sort_spec(int& column, bool& ascending) {
    ImGuiTableSortSpecs* s = ImGui::TableGetSortSpecs();
    if (!s || s->SpecsCount == 0) return false;
    column = s->Specs[0].ColumnIndex;
    ascending = s->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
    bool dirty = s->SpecsDirty;
    s->SpecsDirty = false;
    return dirty;
}

constexpr ImGuiTableFlags kTable = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_Sortable |
                                   ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable;

// A number column as wide as `sample` (its widest figure) plus padding.
void number_column(const char* name, const char* sample, ImGuiTableColumnFlags extra = 0) {
    float w = std::max(ImGui::CalcTextSize(sample).x, ImGui::CalcTextSize(name).x + 14) + 8;
    ImGui::TableSetupColumn(name, ImGuiTableColumnFlags_WidthFixed | extra, w);
}

// A name cell: the text clipped by its column; the whole name in a tooltip when it does not fit.
void name_cell(const std::string& name) {
    ImGui::TextUnformatted(name.c_str());
    if (ImGui::IsItemHovered() && ImGui::CalcTextSize(name.c_str()).x > ImGui::GetContentRegionAvail().x + 1) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 60);
        ImGui::TextUnformatted(name.c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
}

void kernels_tab(App& app, StatisticsUi& ui, bool changed, nlohmann::json& out) {
    const ViewTrace& t = *app.trace;
    if (t.kernel_count == 0) {
        const std::string why = empty_table_text(t, StatsTable::Kernels, 0);
        ImGui::TextDisabled("%s", why.c_str());
        out = {{"empty", why}, {"rows", 0}};
        return;
    }
    if (!ImGui::BeginTable("kernels", 5, kTable)) return;
    // An execution trace's ops each take one place in its order: a total is their count, a mean or
    // a max "1 op". Its table has the count and the share of ops (mean and max columns hidden).
    const bool ops = app.ops();
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
    number_column("count", "88888888");
    number_column(ops ? "share" : "total", ops ? "88.8%" : "888.88 ms (88.8%)",
                  ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending);
    number_column("mean", "888.88 ms", ops ? ImGuiTableColumnFlags_Disabled : 0);
    number_column("max", "888.88 ms", ops ? ImGuiTableColumnFlags_Disabled : 0);
    ImGui::TableHeadersRow();
    nlohmann::json headers = nlohmann::json::array();
    for (int c = 0; c < 5; ++c)
        if (ImGui::TableGetColumnFlags(c) & ImGuiTableColumnFlags_IsEnabled)
            headers.push_back(ImGui::TableGetColumnName(c));
    if (sort_spec(ui.kernel_col, ui.kernel_asc) || changed || ui.kernel_rows.empty())
        ui.kernel_rows = kernel_table(t, ui.search, static_cast<KernelSort>(ui.kernel_col), ui.kernel_asc);
    int64_t all = 0;
    for (const auto& k : t.kernel_stats) all += k.total_ns;
    nlohmann::json cols = nlohmann::json::array(), names = nlohmann::json::array();
    TabRows stops;
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(ui.kernel_rows.size()));
    while (clip.Step())
        for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
            const KernelNameStat& k = t.kernel_stats[ui.kernel_rows[static_cast<size_t>(r)]];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (cols.empty()) cols.push_back(ImGui::GetContentRegionAvail().x);
            // The row: a click or Enter finds the kernel on the timeline (its matches marked and counted).
            if (ImGui::Selectable(("##kernel" + std::to_string(r)).c_str(), false,
                                  ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap)) {
                app.find_on_timeline(t.str(k.name));
                // From the keyboard (the row outlined): it goes on to the plot, where the kernel lies;
                // it was left on an item gone with the view, and Tab started again from the toolbar.
                if (!ImGui::GetCurrentContext()->NavDisableHighlight) app.focus_request = "plot";
            }
            tab_row(stops, r, false);
            ImGui::SameLine(0, 0);
            ImGui::PushItemFlag(ImGuiItemFlags_NoNav, true);
            ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(t.color_of(k.name)), ImGuiColorEditFlags_NoTooltip,
                               {10, 10});
            ImGui::PopItemFlag();
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s kernel", family_name(t.family_of(k.name)));
            ImGui::SameLine();
            name_cell(t.str(k.name));
            if (names.size() < 40) names.push_back({{"name", t.str(k.name)}, {"x1", ImGui::GetItemRectMax().x}});
            ImGui::TableNextColumn();
            if (cols.size() == 1) cols.push_back(ImGui::GetContentRegionAvail().x);
            ImGui::Text("%lld", static_cast<long long>(k.count));
            ImGui::TableNextColumn();
            if (cols.size() == 2) cols.push_back(ImGui::GetContentRegionAvail().x);
            const double share = all ? 100.0 * static_cast<double>(k.total_ns) / static_cast<double>(all) : 0.0;
            if (ops) ImGui::Text("%.1f%%", share);
            else ImGui::Text("%s (%.1f%%)", app.times().span(k.total_ns).c_str(), share);
            ImGui::TableNextColumn();
            if (cols.size() == 3) cols.push_back(ImGui::GetContentRegionAvail().x);
            ImGui::TextUnformatted(app.times().span(k.total_ns / std::max<int64_t>(k.count, 1)).c_str());
            ImGui::TableNextColumn();
            if (cols.size() == 4) cols.push_back(ImGui::GetContentRegionAvail().x);
            ImGui::TextUnformatted(app.times().span(k.max_ns).c_str());
        }
    tab_rows(app, "kernel_rows", stops);
    ImVec2 p0 = ImGui::GetWindowPos();
    ImGui::EndTable();
    out = {{"column_widths", cols}, {"names", names},   {"rows", ui.kernel_rows.size()},
           {"headers", headers},    {"table_x0", p0.x}, {"table_x1", ImGui::GetItemRectMax().x}};
}

void allocations_tab(App& app, StatisticsUi& ui, bool changed) {
    const ViewTrace& t = *app.trace;
    const AllocationTable& a = t.allocations;
    if (a.size() == 0) {
        ImGui::TextDisabled("%s", empty_table_text(t, StatsTable::Allocations, 0).c_str());
        return;
    }
    ImGui::TextDisabled("largest 5000 matching; click a row: its details in the memory view, its kernels on the timeline");
    if (!ImGui::BeginTable("allocs", 5, kTable)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("label", ImGuiTableColumnFlags_WidthStretch);
    number_column("bytes", "888.88 MiB", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending);
    number_column("category", "activation");
    number_column("lifetime", "888.88 ms");
    number_column("allocated at", "88.888 s");
    ImGui::TableHeadersRow();
    if (sort_spec(ui.alloc_col, ui.alloc_asc) || changed || ui.alloc_rows.empty())
        ui.alloc_rows = allocation_table(t, ui.search, static_cast<AllocSort>(ui.alloc_col), ui.alloc_asc, 5000);
    TabRows stops;
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(ui.alloc_rows.size()));
    while (clip.Step())
        for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
            size_t i = ui.alloc_rows[static_cast<size_t>(r)];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            std::string label = (t.str(a.label[i]).empty() ? "#" + std::to_string(a.id[i]) : t.str(a.label[i])) + "##" +
                                std::to_string(a.id[i]);
            if (ImGui::Selectable(label.c_str(), app.highlight_alloc == a.id[i], ImGuiSelectableFlags_SpanAllColumns))
                app.select_allocation(a.id[i]);
            tab_row(stops, r, app.highlight_alloc == a.id[i]);
            ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(a.bytes[i]).c_str());
            ImGui::TableNextColumn(); ImGui::TextUnformatted(std::string(trace::to_string(a.category[i])).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(app.times().span(a.end_or(i, t.t_end) - a.t_alloc[i]).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(app.times().at(a.t_alloc[i], 1000).c_str());
        }
    tab_rows(app, "allocation_rows", stops);
    ImGui::EndTable();
}

// A peak table row's first two cells: the allocation's label (selects it; the first row's place
// goes to the screenshot JSON) and its size. `tag` keeps the widget ids of two tables apart; the
// row (number `place` in its table) joins the table's stop.
void allocation_cells(App& app, size_t row, const char* tag, int place, TabRows& stops, nlohmann::json& out) {
    const ViewTrace& view = *app.trace;
    const AllocationTable& allocs = view.allocations;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const std::string& name = view.str(allocs.label[row]);
    const std::string label =
        (name.empty() ? "#" + std::to_string(allocs.id[row]) : name) + tag + std::to_string(allocs.id[row]);
    if (ImGui::Selectable(label.c_str(), app.highlight_alloc == allocs.id[row], ImGuiSelectableFlags_SpanAllColumns))
        app.select_allocation(allocs.id[row]);
    tab_row(stops, place, app.highlight_alloc == allocs.id[row]);
    if (place == 0) out["first_row"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(allocs.bytes[row]).c_str());
}

// What is live at the recorded peak of the memory views' device, largest first: the question a
// peak raises. A click selects the allocation as in the Allocations tab.
void peak_tab(App& app, const StatisticsUi& ui, nlohmann::json& out) {
    const ViewTrace& view = *app.trace;
    const AllocationTable& allocs = view.allocations;
    if (allocs.size() == 0) {
        ImGui::TextDisabled("%s", empty_table_text(view, StatsTable::Allocations, 0).c_str());
        return;
    }
    const PeakLive& peak = ui.at_peak;
    const std::string device = memory_device_text(view);
    const std::string head = std::to_string(peak.rows.size()) + (peak.rows.size() == 1 ? " allocation" : " allocations") +
                             " live at the recorded peak" +
                             (device.empty() ? "" : " of " + device_name(view.memory_device)) + ": " +
                             format_bytes(static_cast<int64_t>(peak.bytes)) + " at " + app.times().at(peak.time, 1000) +
                             "; click a row: its details in the memory view, its kernels on the timeline";
    ImGui::TextDisabled("%s", head.c_str());
    nlohmann::json first = nlohmann::json::array();
    for (size_t r = 0; r < std::min<size_t>(peak.rows.size(), 8); ++r)
        first.push_back({{"id", allocs.id[peak.rows[r]]}, {"bytes", allocs.bytes[peak.rows[r]]}});
    out = {{"head", head}, {"rows", peak.rows.size()}, {"bytes", peak.bytes}, {"time", peak.time}, {"first", first}};
    if (!ImGui::BeginTable("at_peak", 6, kTable & ~ImGuiTableFlags_Sortable)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("label", ImGuiTableColumnFlags_WidthStretch);
    number_column("bytes", "888.88 MiB");
    number_column("of the peak", "88.8%");
    number_column("category", "activation");
    number_column("allocated at", "88.888 s");
    number_column("freed at", "88.888 s");
    ImGui::TableHeadersRow();
    TabRows stops;
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(peak.rows.size()));
    while (clip.Step())
        for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
            const size_t row = peak.rows[static_cast<size_t>(r)];
            allocation_cells(app, row, "##peak", r, stops, out);
            ImGui::TableNextColumn();
            ImGui::Text("%.1f%%", peak.bytes > 0 ? 100.0 * static_cast<double>(allocs.bytes[row]) / peak.bytes : 0.0);
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(std::string(trace::to_string(allocs.category[row])).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(app.times().at(allocs.t_alloc[row], 1000).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(
                allocs.t_free[row] == trace::kNoTime ? "never" : app.times().at(allocs.t_free[row], 1000).c_str());
        }
    tab_rows(app, "peak_rows", stops);
    ImGui::EndTable();
}

// The rows of a run's live allocations (at its peak, or at its out-of-memory instant): label,
// bytes, where the policy had put each, its share of the device bytes, its lifetime, the policy's
// last decision on it before `peak.time` and its next after. `oom`: the run's out-of-memory instant,
// whose kernel's operands read "device, operand" and whose needed allocation "needed: not placed" or
// "needed: on the host".
void live_rows_table(App& app, const ViewRun& run, const RunPeakLive& peak, const RunOom* oom, const char* before_title,
                     nlohmann::json& out) {
    const std::vector<bool>* operand = oom ? &oom->operand : nullptr;
    const AllocationTable& allocs = app.trace->allocations;
    const bool order_only = app.order_only();
    if (!ImGui::BeginTable("at_run_peak", 8, kTable & ~ImGuiTableFlags_Sortable)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("label", ImGuiTableColumnFlags_WidthStretch);
    number_column("bytes", "888.88 MiB");
    number_column("where", oom ? "needed: not placed" : "dropped");
    number_column(operand ? "of the device" : "of the peak", "88.8%");
    number_column("allocated at", "88.888 s");
    number_column("freed at", oom ? "after the OOM" : "88.888 s");
    ImGui::TableSetupColumn(before_title, ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("after it", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    auto event_text = [&](int64_t index, bool before) {
        if (index < 0) return std::string("-");
        return describe_events({run.events[static_cast<size_t>(index)]}, peak.time, before, &run.times);
    };
    TabRows stops;
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(peak.rows.size()));
    while (clip.Step())
        for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
            const RunPeakRow& each = peak.rows[static_cast<size_t>(r)];
            const size_t row = each.row;
            allocation_cells(app, row, "##runpeak", r, stops, out);
            ImGui::TableNextColumn();
            const bool pinned = operand && (*operand)[static_cast<size_t>(r)] && each.where == Residence::Device;
            const bool needed = oom && oom->needed == r;
            const std::string where = !peak.placement_known ? "?"
                                      : needed              ? std::string("needed: ") +
                                                     (oom->needed_placed ? to_string(each.where) : "not placed")
                                      : pinned ? "device, operand"
                                               : to_string(each.where);
            ImGui::TextUnformatted(where.c_str());
            ImGui::TableNextColumn();
            if (each.where == Residence::Device && !needed)
                ImGui::Text("%.1f%%",
                            peak.bytes > 0 ? 100.0 * static_cast<double>(allocs.bytes[row]) / peak.bytes : 0.0);
            else ImGui::TextUnformatted("-");
            ImGui::TableNextColumn();
            const int64_t t_alloc = order_only ? allocs.t_alloc[row] : each.t_alloc;
            const int64_t t_free = order_only ? allocs.t_free[row] : each.t_free;
            ImGui::TextUnformatted(app.times().at(t_alloc, 1000).c_str());
            ImGui::TableNextColumn();
            // Past the out-of-memory point the run's clock has no time: the run never got there.
            const bool after_oom = oom && oom->recorded_at >= 0 && allocs.t_free[row] > oom->recorded_at;
            ImGui::TextUnformatted(t_free == trace::kNoTime ? "never"
                                   : after_oom              ? "after the OOM"
                                                            : app.times().at(t_free, 1000).c_str());
            ImGui::TableNextColumn();
            name_cell(event_text(each.before, true));
            ImGui::TableNextColumn();
            name_cell(event_text(each.after, false));
        }
    tab_rows(app, "live_rows", stops);
    ImGui::EndTable();
}

// A run's live allocations by where each was allocated (group_live_by_label): one row per label with
// its count and bytes summed, the most on the device first. A click selects the group's largest.
void live_groups_table(App& app, const RunPeakLive& live, const std::vector<LiveGroup>& groups, bool needed_placed,
                       nlohmann::json& out) {
    const ViewTrace& view = *app.trace;
    const AllocationTable& allocs = view.allocations;
    nlohmann::json jg = nlohmann::json::array();
    for (size_t g = 0; g < std::min<size_t>(groups.size(), 16); ++g)
        jg.push_back({{"label", groups[g].name},
                      {"count", groups[g].count},
                      {"bytes", groups[g].bytes},
                      {"on_device", groups[g].on_device},
                      {"on_host", groups[g].on_host},
                      {"needed", groups[g].needed}});
    out["groups"] = jg;
    out["group_count"] = groups.size();
    if (!ImGui::BeginTable("at_run_groups", 7, kTable & ~ImGuiTableFlags_Sortable)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("allocated at", ImGuiTableColumnFlags_WidthStretch);
    number_column("count", "888888");
    number_column("on the device", "888.88 MiB");
    number_column("of the device", "88.8%");
    number_column("on the host", "888.88 MiB");
    number_column("largest", "888.88 MiB");
    ImGui::TableSetupColumn("note", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    TabRows stops;
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(groups.size()));
    while (clip.Step())
        for (int g = clip.DisplayStart; g < clip.DisplayEnd; ++g) {
            const LiveGroup& group = groups[static_cast<size_t>(g)];
            const size_t largest = live.rows[group.rows.front()].row;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            const std::string name = group.name.empty() ? "(no label)" : group.name;
            const std::string id = name + "##group" + std::to_string(g);
            if (ImGui::Selectable(id.c_str(), app.highlight_alloc == allocs.id[largest],
                                  ImGuiSelectableFlags_SpanAllColumns))
                app.select_allocation(allocs.id[largest]);
            tab_row(stops, g, app.highlight_alloc == allocs.id[largest]);
            if (g == 0) out["first_row"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("%s\n%zu allocations, %s in all; click: the largest (#%lld) in the memory view",
                                  name.c_str(), group.count, format_bytes(group.bytes).c_str(),
                                  static_cast<long long>(allocs.id[largest]));
            ImGui::TableNextColumn();
            ImGui::Text("%zu", group.count);
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(group.on_device > 0 ? format_bytes(group.on_device).c_str() : "-");
            ImGui::TableNextColumn();
            const double share = live.on_device > 0 ? 100.0 * static_cast<double>(group.on_device) /
                                                          static_cast<double>(live.on_device)
                                                    : 0;
            if (group.on_device <= 0) ImGui::TextUnformatted("-");
            else if (share < 0.05) ImGui::TextUnformatted("<0.1%");   // 64 KiB of 785 MiB read "0.0%"
            else ImGui::Text("%.1f%%", share);
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(group.on_host > 0 ? format_bytes(group.on_host).c_str() : "-");
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(format_bytes(group.largest).c_str());
            ImGui::TableNextColumn();
            std::string note;
            if (group.needed)
                note = "needed " + format_bytes(group.needed_bytes) +
                       (needed_placed ? ", back from the host" : ", not placed");
            if (group.operands > 0)
                note += (note.empty() ? "" : "; ") + std::to_string(group.operands) +
                        (group.operands == 1 ? " operand, " : " operands, ") + format_bytes(group.operand_bytes) +
                        " (pinned)";
            if (group.dropped > 0) note += (note.empty() ? "" : "; ") + format_bytes(group.dropped) + " dropped";
            name_cell(note);
        }
    tab_rows(app, "group_rows", stops);
    ImGui::EndTable();
}

// With a simulated run selected: what is live at the run's peak of device bytes, on its clock, and
// where the run's policy had put each allocation then (on the device, on the host, dropped), with
// its last decision before the peak and its next after it. A click selects the allocation.
void run_peak_tab(App& app, StatisticsUi& ui, const ViewRun& run, nlohmann::json& out) {
    const ViewTrace& view = *app.trace;
    const AllocationTable& allocs = view.allocations;
    if (ui.run_peak_of != run.info.id) {
        ui.at_run_peak = live_at_run_peak(view, run);
        ui.run_peak_of = run.info.id;
    }
    const RunPeakLive& peak = ui.at_run_peak;
    auto count = [](size_t rows, const char* what) {
        return std::to_string(rows) + (rows == 1 ? " allocation " : " allocations ") + what;
    };
    // An order-only trace's run has no times to show: its peak is placed by the op (or event) it ran
    // then, and the rows' lifetimes are the recorded ones (they read "op #49494549" on param's ResNet ET).
    const bool order_only = app.order_only();
    const std::string when = !order_only               ? app.times().at(peak.time, 1000)
                             : peak.recorded_time >= 0 ? app.times().at(peak.recorded_time, 1000)
                                                       : std::string("its start");
    const std::string at = run.label() + " at its peak: " + format_bytes(static_cast<int64_t>(peak.bytes)) + " on " +
                           device_name(view.memory_device) + " at " + when + " (host " +
                           format_bytes(static_cast<int64_t>(peak.host_bytes)) + "); ";
    // A run stored without its events that moved allocations: where each was is not known, said.
    const std::string head =
        !peak.placement_known
            ? at + count(peak.rows.size(), "alive then") + "; where each was is not known: the run moved allocations " +
                  std::to_string(peak.moves) + " times but was stored without its events (mhc simulate --no-events)"
            : at + count(peak.device_rows, "on the device") + " (" + format_bytes(peak.on_device) + "), " +
                  count(peak.host_rows, "on the host") + " (" + format_bytes(peak.on_host) + "), " +
                  count(peak.dropped_rows, "dropped") + " (" + format_bytes(peak.dropped) + ")" +
                  // The caching model's device bytes are its segments: the rest is its free cache.
                  (peak.bytes > static_cast<double>(peak.on_device)
                       ? "; the allocator model holds " +
                             format_bytes(static_cast<int64_t>(peak.bytes) - peak.on_device) + " more (its cache)"
                       : "");
    // Wrapped: with the host and the allocator's cache it is longer than a 1400 px window.
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", head.c_str());
    ImGui::PopStyleColor();
    ImGui::TextDisabled(
        order_only
            ? "op and event numbers as recorded (the run's times are not); the recording's peak: pick \"recorded\" in "
              "the run field; click a row: its details in the memory view"
            : "times on the run's clock; the recording's peak: pick \"recorded\" in the run field; click a "
              "row: its details in the memory view");
    nlohmann::json first = nlohmann::json::array();
    for (size_t r = 0; r < std::min<size_t>(peak.rows.size(), 8); ++r)
        first.push_back({{"id", allocs.id[peak.rows[r].row]},
                         {"bytes", allocs.bytes[peak.rows[r].row]},
                         {"where", peak.placement_known ? to_string(peak.rows[r].where) : "?"}});
    out = {{"head", head},
           {"run", run.info.id},
           {"rows", peak.rows.size()},
           {"bytes", peak.bytes},
           {"time", peak.time},
           {"on_device", peak.on_device},
           {"on_host", peak.on_host},
           {"dropped", peak.dropped},
           {"first", first},
           {"placement_known", peak.placement_known}};
    live_rows_table(app, run, peak, nullptr, "the policy before the peak", out);
}

// A run that stopped out of memory: what was alive at that instant and where the policy had put
// each (the allocation it could not place named in the head, the kernel's operands flagged), with
// each allocation's label: where it was allocated (a snapshot's source frame). A user went from the
// OOM line to hovering bands one at a time, on the recording's clock.
void oom_tab(App& app, StatisticsUi& ui, const ViewRun& run, nlohmann::json& out) {
    const ViewTrace& view = *app.trace;
    const AllocationTable& allocs = view.allocations;
    if (ui.oom_of != run.info.id) {
        ui.at_oom = live_at_run_oom(view, run);
        ui.oom_groups = group_live_by_label(view, ui.at_oom.live, &ui.at_oom);
        ui.oom_of = run.info.id;
    }
    const RunOom& oom = ui.at_oom;
    const RunPeakLive& live = oom.live;
    auto count = [](size_t rows) { return std::to_string(rows) + (rows == 1 ? " allocation" : " allocations"); };
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
    const std::string outcome = run.label() + ": " + run_outcome(run, app.times());
    ImGui::TextWrapped("%s", outcome.c_str());
    ImGui::PopStyleColor();
    std::string needed;
    if (const int64_t index = allocs.index_of(oom.allocation); index >= 0) {
        const auto row = static_cast<size_t>(index);
        needed = std::string(oom.needed_placed ? "it could not bring back allocation #"
                                               : "it could not place allocation #") +
                 std::to_string(oom.allocation) + " (" +
                 (view.str(allocs.label[row]).empty() ? "no label" : view.str(allocs.label[row])) + ", " +
                 format_bytes(allocs.bytes[row]) + ")";
        if (oom.kernel != 0) needed += " for kernel #" + std::to_string(oom.kernel);
        needed += "; ";
    }
    std::string head = needed + "on " + device_name(view.memory_device) + " then: " + count(live.device_rows) + " (" +
                       format_bytes(live.on_device) + ")";
    if (oom.kernel != 0)
        head += ", of which the kernel's operands " + format_bytes(oom.operand_bytes) + " (pinned while it runs)";
    head += "; on the host " + count(live.host_rows) + " (" + format_bytes(live.on_host) + "), dropped " +
            count(live.dropped_rows) + " (" + format_bytes(live.dropped) + ")";
    if (!live.placement_known) head += "; where each was is not known (the run was stored without its events)";
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", head.c_str());
    ImGui::PopStyleColor();
    ImGui::Checkbox("one row per allocation", &ui.oom_each);
    tab_stop(app, "oom_each");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("off: the allocations grouped by where each was allocated, their bytes summed");
    out["each_rect"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::TextDisabled(ui.oom_each
                            ? "label: where each was allocated (a snapshot's source frame); click a row: its "
                              "details in the memory view"
                            : "by where they were allocated (a snapshot's source frame), the most on the device "
                              "first; click a row: its largest in the memory view");
    nlohmann::json first = nlohmann::json::array();
    for (size_t r = 0; r < std::min<size_t>(live.rows.size(), 8); ++r)
        first.push_back({{"id", allocs.id[live.rows[r].row]},
                         {"label", view.str(allocs.label[live.rows[r].row])},
                         {"where", live.placement_known ? to_string(live.rows[r].where) : "?"},
                         {"operand", static_cast<bool>(oom.operand[r])},
                         {"needed", oom.needed == static_cast<int64_t>(r)}});
    out = {{"oom", true},
           {"outcome", outcome},
           {"head", head},
           {"run", run.info.id},
           {"time", oom.time},
           {"allocation", oom.allocation},
           {"kernel", oom.kernel},
           {"rows", live.rows.size()},
           {"on_device", live.on_device},
           {"operand_bytes", oom.operand_bytes},
           {"first", first},
           {"each", ui.oom_each}};
    if (ui.oom_each) live_rows_table(app, run, live, &oom, "the policy before it", out);
    else live_groups_table(app, live, ui.oom_groups, oom.needed_placed, out);
}

void categories_tab(App& app, StatisticsUi& ui) {
    if (app.trace->allocations.size() == 0) {
        ImGui::TextDisabled("%s", empty_table_text(*app.trace, StatsTable::Allocations, 0).c_str());
        return;
    }
    if (!ImGui::BeginTable("cats", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg)) return;
    ImGui::TableSetupColumn("category", ImGuiTableColumnFlags_WidthStretch);
    number_column("count", "88888888");
    number_column("bytes allocated", "888.88 GiB");
    number_column("largest", "888.88 GiB");
    number_column("peak live", "888.88 GiB");
    ImGui::TableHeadersRow();
    TabRows stops;
    int place = 0;
    for (const CategoryStat& c : ui.categories) {
        if (c.count == 0) continue;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        // A row the arrows reach, as in the other tables; it does nothing pressed.
        ImGui::Selectable(("##category" + std::to_string(place)).c_str(), false,
                          ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap);
        tab_row(stops, place++, false);
        ImGui::SameLine(0, 0);
        ImGui::PushItemFlag(ImGuiItemFlags_NoNav, true);
        ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(category_color(c.category)), ImGuiColorEditFlags_NoTooltip, {10, 10});
        ImGui::PopItemFlag();
        ImGui::SameLine();
        ImGui::TextUnformatted(std::string(trace::to_string(c.category)).c_str());
        ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(c.count));
        ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(c.bytes).c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(c.largest).c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(static_cast<int64_t>(c.peak_live)).c_str());
    }
    tab_rows(app, "category_rows", stops);
    ImGui::EndTable();
}

void steps_tab(App& app, StatisticsUi& ui) {
    if (ui.steps.empty()) {
        ImGui::TextDisabled("%s", empty_table_text(*app.trace, StatsTable::Steps, 0).c_str());
        return;
    }
    const std::string origin = steps_origin(*app.trace);
    if (!origin.empty()) ImGui::TextDisabled("%s", origin.c_str());
    if (!ImGui::BeginTable("steps", 4, kTable)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* h : {"step", "start", "time", "peak live"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    if (sort_spec(ui.step_col, ui.step_asc)) sort_steps(ui.steps, static_cast<StepSort>(ui.step_col), ui.step_asc);
    TabRows stops;
    int place = 0;
    for (const StepStat& s : ui.steps) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        std::string n = std::to_string(s.step);
        if (ImGui::Selectable(n.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) app.go_to_step(s.step);
        tab_row(stops, place++, false);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(app.times().at(s.t0, 1000).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(app.times().span(s.t1 - s.t0).c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(static_cast<int64_t>(s.peak)).c_str());
    }
    tab_rows(app, "step_rows", stops);
    ImGui::EndTable();
}

}  // namespace

void draw_statistics(App& app) {
    if (!app.statistics_ui) app.statistics_ui = std::make_shared<StatisticsUi>();
    StatisticsUi& ui = *app.statistics_ui;
    if (!ui.stats_ready) {
        ui.categories = category_stats(*app.trace);
        ui.steps = step_stats(*app.trace);
        ui.at_peak = live_at_peak(*app.trace);
        ui.stats_ready = true;
    }
    ImGui::SetNextItemWidth(320);
    ImGui::InputTextWithHint("##search",
                             app.ops() ? "search op and allocation names" : "search kernel and allocation names",
                             ui.search, sizeof ui.search);
    tab_stop(app, "stats_search");
    bool changed = ui.last_search != ui.search;
    ui.last_search = ui.search;

    if (!ImGui::BeginTabBar("stats")) return;
    nlohmann::json kernels;
    const bool kernels_open = ImGui::BeginTabItem(app.ops() ? "Ops###kernels" : "Kernels###kernels");
    tab_stop(app, "stats_kernels");
    if (kernels_open) {
        kernels_tab(app, ui, changed, kernels);
        ImGui::EndTabItem();
    }
    const bool allocations_open = ImGui::BeginTabItem("Allocations");
    tab_stop(app, "stats_allocations");
    if (allocations_open) {
        allocations_tab(app, ui, changed);
        ImGui::EndTabItem();
    }
    nlohmann::json at_peak, tabs;
    // A run that stopped out of memory: what was alive then ("At the OOM"), as the timeline's OOM
    // line and its oom mark open it (App::open_oom).
    const ViewRun* run = app.selected_run();
    const bool oom = run && run->info.status == trace::RunStatus::Oom && app.trace->allocations.size() > 0;
    const bool peak_open = ImGui::BeginTabItem(oom ? "At the OOM###at_peak" : "At the peak###at_peak", nullptr,
                                               app.open_oom ? ImGuiTabItemFlags_SetSelected : 0);
    app.open_oom = false;
    tabs["at_peak"] = rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    tab_stop(app, "stats_at_peak");
    if (peak_open) {
        // With a run selected, the run's peak (the curve the memory views show is the run's).
        if (oom) oom_tab(app, ui, *run, at_peak);
        else if (run && !run->memory.empty() && app.trace->allocations.size() > 0) run_peak_tab(app, ui, *run, at_peak);
        else peak_tab(app, ui, at_peak);
        ImGui::EndTabItem();
    }
    const bool categories_open = ImGui::BeginTabItem("Categories");
    tab_stop(app, "stats_categories");
    if (categories_open) {
        categories_tab(app, ui);
        ImGui::EndTabItem();
    }
    const bool steps_open = ImGui::BeginTabItem("Steps");
    tab_stop(app, "stats_steps");
    if (steps_open) {
        steps_tab(app, ui);
        ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
    app.layout["statistics"] = {{"kernels", kernels}, {"at_peak", at_peak}, {"tabs", tabs}};
}

}  // namespace mhc::viewer
