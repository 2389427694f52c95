// Statistics view: kernels by total time, allocations by size and category, per-step time
// and peak; sortable tables and one search box for kernel and allocation names.
#include <algorithm>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/stats.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

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

}  // namespace

void draw_statistics(App& app) {
    static char search[128] = "";
    static std::string last_search = "\x01";
    ImGui::SetNextItemWidth(320);
    ImGui::InputTextWithHint("##search", "search kernel and allocation names", search, sizeof search);
    bool changed = last_search != search;
    last_search = search;
    const ViewTrace& t = *app.trace;

    if (!ImGui::BeginTabBar("stats")) return;
    if (ImGui::BeginTabItem("Kernels")) {
        static std::vector<uint32_t> rows;
        static int col = 2;
        static bool asc = false;
        if (ImGui::BeginTable("kernels", 5, kTable)) {
            ImGui::TableSetupScrollFreeze(0, 1);
            ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
            ImGui::TableSetupColumn("count");
            ImGui::TableSetupColumn("total", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending);
            ImGui::TableSetupColumn("mean");
            ImGui::TableSetupColumn("max");
            ImGui::TableHeadersRow();
            if (sort_spec(col, asc) || changed || rows.empty())
                rows = kernel_table(t, search, static_cast<KernelSort>(col), asc);
            int64_t all = 0;
            for (const auto& k : t.kernel_stats) all += k.total_ns;
            ImGuiListClipper clip;
            clip.Begin(static_cast<int>(rows.size()));
            while (clip.Step())
                for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
                    const KernelNameStat& k = t.kernel_stats[rows[static_cast<size_t>(r)]];
                    ImGui::TableNextRow();
                    ImGui::TableNextColumn();
                    ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(t.color_of(k.name)),
                                       ImGuiColorEditFlags_NoTooltip, {10, 10});
                    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s kernel", family_name(t.family_of(k.name)));
                    ImGui::SameLine();
                    ImGui::TextUnformatted(t.str(k.name).c_str());
                    ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(k.count));
                    ImGui::TableNextColumn();
                    ImGui::Text("%s (%.1f%%)", format_duration(k.total_ns).c_str(),
                                all ? 100.0 * static_cast<double>(k.total_ns) / static_cast<double>(all) : 0.0);
                    ImGui::TableNextColumn(); ImGui::TextUnformatted(format_duration(k.total_ns / std::max<int64_t>(k.count, 1)).c_str());
                    ImGui::TableNextColumn(); ImGui::TextUnformatted(format_duration(k.max_ns).c_str());
                }
            ImGui::EndTable();
        }
        ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Allocations")) {
        static std::vector<uint32_t> rows;
        static int col = 1;
        static bool asc = false;
        const AllocationTable& a = t.allocations;
        ImGui::TextDisabled("largest 5000 matching; click a row to highlight its kernels on the timeline");
        if (ImGui::BeginTable("allocs", 5, kTable)) {
            ImGui::TableSetupScrollFreeze(0, 1);
            ImGui::TableSetupColumn("label", ImGuiTableColumnFlags_WidthStretch);
            ImGui::TableSetupColumn("bytes", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending);
            ImGui::TableSetupColumn("category");
            ImGui::TableSetupColumn("lifetime");
            ImGui::TableSetupColumn("allocated at");
            ImGui::TableHeadersRow();
            if (sort_spec(col, asc) || changed || rows.empty())
                rows = allocation_table(t, search, static_cast<AllocSort>(col), asc, 5000);
            ImGuiListClipper clip;
            clip.Begin(static_cast<int>(rows.size()));
            while (clip.Step())
                for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
                    size_t i = rows[static_cast<size_t>(r)];
                    ImGui::TableNextRow();
                    ImGui::TableNextColumn();
                    std::string label = (t.str(a.label[i]).empty() ? "#" + std::to_string(a.id[i]) : t.str(a.label[i])) +
                                        "##" + std::to_string(a.id[i]);
                    if (ImGui::Selectable(label.c_str(), app.highlight_alloc == a.id[i], ImGuiSelectableFlags_SpanAllColumns))
                        app.select_allocation(a.id[i]);
                    ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(a.bytes[i]).c_str());
                    ImGui::TableNextColumn(); ImGui::TextUnformatted(std::string(trace::to_string(a.category[i])).c_str());
                    ImGui::TableNextColumn(); ImGui::TextUnformatted(format_duration(a.end_or(i, t.t_end) - a.t_alloc[i]).c_str());
                    ImGui::TableNextColumn(); ImGui::TextUnformatted(format_time(a.t_alloc[i], 1000).c_str());
                }
            ImGui::EndTable();
        }
        ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Categories")) {
        static std::vector<CategoryStat> cats = category_stats(t);
        if (ImGui::BeginTable("cats", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg)) {
            for (const char* h : {"category", "count", "bytes allocated", "largest", "peak live"}) ImGui::TableSetupColumn(h);
            ImGui::TableHeadersRow();
            for (const CategoryStat& c : cats) {
                if (c.count == 0) continue;
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(category_color(c.category)), ImGuiColorEditFlags_NoTooltip, {10, 10});
                ImGui::SameLine();
                ImGui::TextUnformatted(std::string(trace::to_string(c.category)).c_str());
                ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(c.count));
                ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(c.bytes).c_str());
                ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(c.largest).c_str());
                ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(static_cast<int64_t>(c.peak_live)).c_str());
            }
            ImGui::EndTable();
        }
        ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Steps")) {
        static std::vector<StepStat> steps = step_stats(t);
        static int col = 0;
        static bool asc = true;
        if (ImGui::BeginTable("steps", 4, kTable)) {
            ImGui::TableSetupScrollFreeze(0, 1);
            for (const char* h : {"step", "start", "time", "peak live"}) ImGui::TableSetupColumn(h);
            ImGui::TableHeadersRow();
            if (sort_spec(col, asc))
                std::stable_sort(steps.begin(), steps.end(), [&](const StepStat& x, const StepStat& y) {
                    auto key = [&](const StepStat& s) -> double {
                        return col == 0 ? s.step : col == 1 ? static_cast<double>(s.t0)
                             : col == 2 ? static_cast<double>(s.t1 - s.t0) : s.peak;
                    };
                    return asc ? key(x) < key(y) : key(y) < key(x);
                });
            for (const StepStat& s : steps) {
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                std::string n = std::to_string(s.step);
                if (ImGui::Selectable(n.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) app.go_to_step(s.step);
                ImGui::TableNextColumn(); ImGui::TextUnformatted(format_time(s.t0, 1000).c_str());
                ImGui::TableNextColumn(); ImGui::TextUnformatted(format_duration(s.t1 - s.t0).c_str());
                ImGui::TableNextColumn(); ImGui::TextUnformatted(format_bytes(static_cast<int64_t>(s.peak)).c_str());
            }
            ImGui::EndTable();
        }
        ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
}

}  // namespace mhc::viewer
