// Run launcher: choose policy, prefetch, capacity and link, simulate on a worker thread, and
// the new run appears in the run list.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "mhc/common/error.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/viewer/stats.hpp"
#include "mhc/viewer/launch.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

struct LauncherUi {
    explicit LauncherUi(const std::string& path) : worker(path) {}
    LaunchFields fields;
    char capacity_text[64] = "40GiB";
    char prefetch_arg[16] = "";
    char link_file[512] = "";
    bool use_link_file = false;
    float percent = 70.f;
    std::string error;          // the fields did not make a valid configuration
    int64_t seen_generation = 0;
    Launcher worker;
};

namespace {

// A field's name in the Tab ring, as the other views name theirs: its label in snake case
// ("eviction_policy").
std::string stop_name(const char* label) {
    std::string name = label;
    std::replace(name.begin(), name.end(), ' ', '_');
    return name;
}

// A combo over a simulator registry; shows each entry's help as a tooltip.
void registry_combo(App& app, const char* label, const std::vector<sim::PolicyInfo>& list, std::string& value, bool base) {
    ImGui::SetNextItemWidth(220);
    tab_stop(app, stop_name(label), ImGui::GetID(label));   // before its entries: stops while it is open
    if (ImGui::BeginCombo(label, value.c_str())) {
        for (const sim::PolicyInfo& p : list) {
            std::string name = base ? policy_base_name(p.name) : p.name;
            if (ImGui::Selectable(p.name.c_str(), name == value)) value = name;
            tab_stop(app, stop_name(label) + "_" + p.name);
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("%s%s%s", p.help.c_str(), p.source.empty() ? "" : "\n", p.source.c_str());
        }
        ImGui::EndCombo();
    }
}

void spinner(float radius, uint32_t color) {
    ImVec2 p = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 c{p.x + radius, p.y + radius};
    float a0 = static_cast<float>(ImGui::GetTime()) * 6.f;
    dl->PathArcTo(c, radius - 2, a0, a0 + 4.2f, 24);
    dl->PathStroke(color, 0, 3.f);
    ImGui::Dummy({radius * 2, radius * 2});
}

// A finished launch: re-read the run list, select and compare the new run.
void adopt_run(App& app, int64_t run_id) {
    app.refresh_runs();
    for (size_t i = 0; i < app.run_list.size(); ++i)
        if (app.run_list[i].id == run_id) {
            app.compared[i] = true;
            app.select_run(static_cast<int>(i));
            app.status = "run #" + std::to_string(run_id) + " " + app.run_list[i].name +
                         " added (selected; see Timeline, Memory, Compare)";
        }
}

// Each field a stop of the Tab ring (none while a run is in flight: they are off then).
void draw_fields(App& app, LauncherUi& ui, bool busy) {
    LaunchFields& f = ui.fields;
    const auto stop = [&](const char* name) {
        if (!busy) tab_stop(app, stop_name(name));
    };
    ImGui::BeginDisabled(busy);
    registry_combo(app, "eviction policy", sim::eviction_policies(), f.eviction, false);
    registry_combo(app, "prefetch policy", sim::prefetch_policies(), f.prefetch, true);
    const sim::PolicyInfo* pre = nullptr;
    for (const sim::PolicyInfo& p : sim::prefetch_policies())
        if (policy_base_name(p.name) == f.prefetch) pre = &p;
    if (pre && policy_takes_argument(pre->name)) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(70);
        ImGui::InputTextWithHint("##prefetch_arg", pre->name.substr(pre->name.find(':') + 1).c_str(),
                                 ui.prefetch_arg, sizeof ui.prefetch_arg, ImGuiInputTextFlags_CharsDecimal);
        stop("prefetch argument");
        ImGui::SameLine();
        ImGui::TextDisabled("(empty: the policy's default)");
    } else {
        ui.prefetch_arg[0] = 0;
    }

    ImGui::Spacing();
    ImGui::TextUnformatted("GPU capacity");
    ImGui::SameLine();
    // mhc simulate's words ("70% of the baseline peak") and range: above 100% limits nothing and
    // was refused after the click (the slider went to 150%).
    if (ImGui::RadioButton("% of the baseline peak", f.capacity_is_percent)) f.capacity_is_percent = true;
    stop("capacity share");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the peak of the run without a limit, under the allocator model chosen below");
    ImGui::SameLine();
    if (ImGui::RadioButton("bytes", !f.capacity_is_percent)) f.capacity_is_percent = false;
    stop("capacity bytes");
    ImGui::SetNextItemWidth(220);
    if (f.capacity_is_percent)
        ImGui::SliderFloat("capacity##pct", &ui.percent, 5.f, 100.f, "%.0f %%");
    else
        ImGui::InputTextWithHint("capacity##bytes", "40GiB, 1500MB, unlimited", ui.capacity_text,
                                 sizeof ui.capacity_text);
    stop("capacity");

    ImGui::Spacing();
    ImGui::Checkbox("link profile file", &ui.use_link_file);
    stop("link profile file");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ui.use_link_file ? 420.f : 220.f);
    if (ui.use_link_file) {
        ImGui::InputTextWithHint("##linkfile", "path of a JSON profile (mhc calibrate)", ui.link_file,
                                 sizeof ui.link_file);
        stop("link file");
    } else {
        if (!busy) tab_stop(app, "link_preset", ImGui::GetID("link preset"));   // before its entries
    }
    if (!ui.use_link_file && ImGui::BeginCombo("link preset", f.link.c_str())) {
        for (const sim::LinkModel& l : sim::link_presets()) {
            if (ImGui::Selectable(l.name.c_str(), l.name == f.link)) f.link = l.name;
            stop(("link_preset_" + l.name).c_str());
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("H2D %.1f GB/s, D2H %.1f GB/s, %d copy engines\n%s", l.h2d.bandwidth_Bps / 1e9,
                                  l.d2h.bandwidth_Bps / 1e9, l.copy_engines, l.source.c_str());
        }
        ImGui::EndCombo();
    }
    registry_combo(app, "allocator model", sim::allocator_models(), f.allocator, false);
    ImGui::Checkbox("record events (timeline tracks)", &f.record_events);
    stop("record events");
    ImGui::EndDisabled();
}

}  // namespace

void draw_launcher(App& app) {
    if (!app.launcher) app.launcher = std::make_shared<LauncherUi>(app.trace->path);
    LauncherUi& ui = *app.launcher;
    bool busy = ui.worker.busy();
    if (app.trace->memory_devices.empty())   // mhc simulate refuses such a trace: say so before the button
        ImGui::TextDisabled("%s: a run has nothing to keep under a memory limit",
                            empty_table_text(*app.trace, StatsTable::Allocations, 0).c_str());
    draw_fields(app, ui, busy);
    // Whose memory the run keeps under the capacity: the device the memory views show. It simulated
    // the GPU with the largest peak whatever they showed (a user on "memory of: host" got a GPU 0 run).
    const int32_t shown = app.trace->memory_device;
    const std::string device_line = std::string("simulates ") + (shown < 0 ? "the " : "") + device_name(shown) +
                                    "'s memory, the one the memory views show" +
                                    (app.trace->memory_devices.size() > 1 ? " (the toolbar's 'memory of' picks another)"
                                                                          : "");
    ImGui::TextDisabled("%s", device_line.c_str());
    app.layout["run"]["device"] = app.trace->memory_device;
    app.layout["run"]["device_line"] = device_line;
    const LaunchFields& fields = ui.fields;   // as the fields read now (tests of the keyboard)
    app.layout["run"]["fields"] = {{"eviction", fields.eviction},   {"prefetch", fields.prefetch},
                                   {"link", fields.link},           {"allocator", fields.allocator},
                                   {"capacity_is_percent", fields.capacity_is_percent},
                                   {"record_events", fields.record_events}};

    ImGui::Spacing();
    ImGui::BeginDisabled(busy);
    if (ImGui::Button("Run simulation", {180, 0})) {
        LaunchFields f = ui.fields;
        f.capacity_percent = std::round(static_cast<double>(ui.percent));
        f.capacity_text = ui.capacity_text;
        f.prefetch_arg = ui.prefetch_arg;
        f.link_file = ui.use_link_file ? std::string(ui.link_file) : std::string();
        f.device = app.trace->memory_device;   // the memory shown (auto: the GPU with the largest peak)
        try {
            ui.error.clear();
            if (ui.use_link_file && f.link_file.empty()) throw Error("link profile file: no path given");
            ui.worker.start(make_config(f));
        } catch (const std::exception& e) {
            ui.error = e.what();
        }
    }
    if (!busy) tab_stop(app, "run_simulation");
    ImGui::EndDisabled();
    if (!ui.error.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
        ImGui::TextWrapped("%s", ui.error.c_str());
        ImGui::PopStyleColor();
    }

    // The simulator reports no progress while it runs: a spinner, the phase and the time.
    LaunchStatus s = ui.worker.status();
    if (busy) {
        spinner(9, IM_COL32(120, 180, 255, 255));
        ImGui::SameLine();
        ImGui::Text("%s: %s ... %.1f s", s.name.c_str(), phase_name(s.phase), s.elapsed_s);
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) ui.worker.cancel();
        tab_stop(app, "cancel");
    }
    if (s.generation != ui.seen_generation && !busy) {
        ui.seen_generation = s.generation;
        if (s.phase == LaunchPhase::Done) {
            try { adopt_run(app, s.run_id); } catch (const std::exception& e) { ui.error = e.what(); }
        }
    }
    if (s.phase == LaunchPhase::Cancelled) {
        ImGui::Separator();
        ImGui::Text("%s cancelled after %.1f s; nothing stored", s.name.c_str(), s.elapsed_s);
    }
    if (s.phase == LaunchPhase::Done || s.phase == LaunchPhase::Failed) {
        ImGui::Separator();
        if (s.phase == LaunchPhase::Done)
            ImGui::Text("run #%lld %s stored in %.1f s", static_cast<long long>(s.run_id), s.name.c_str(), s.elapsed_s);
        if (!s.message.empty()) {
            ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
            ImGui::TextWrapped("%s%s", s.phase == LaunchPhase::Failed ? "simulation failed: " : "", s.message.c_str());
            ImGui::PopStyleColor();
        }
        if (!s.summary.empty()) {
            ImGui::BeginChild("summary", {0, 0}, true);
            ImGui::TextUnformatted(s.summary.c_str());
            ImGui::EndChild();
        }
    }
}

bool launcher_busy(const App& app) { return app.launcher && app.launcher->worker.busy(); }

}  // namespace mhc::viewer
