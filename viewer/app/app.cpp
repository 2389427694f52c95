#include "app.hpp"

#include <imgui.h>

#include <algorithm>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/viewer/axis.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

TimeRange parse_range(const std::string& text) {
    auto colon = text.find(':');
    if (colon == std::string::npos) throw Error("--range '" + text + "': expected T0:T1, e.g. 100us:2ms");
    auto ns = [&](const std::string& s) -> int64_t {
        bool digits = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (digits) return std::stoll(s);   // plain numbers are nanoseconds
        return static_cast<int64_t>(parse_seconds(s) * 1e9 + 0.5);
    };
    TimeRange r{ns(text.substr(0, colon)), ns(text.substr(colon + 1))};
    if (r.t1 <= r.t0) throw Error("--range '" + text + "': the end must be after the start");
    return r;
}

App::App(Options o) : opt(std::move(o)) {
    if (opt.view == "memory") requested = ViewId::Memory;
    else if (opt.view == "compare") requested = ViewId::Compare;
    else if (opt.view == "statistics") requested = ViewId::Statistics;
    else if (opt.view == "run") requested = ViewId::Launcher;
    view = requested;
}

App::~App() {
    if (loader_.joinable()) loader_.join();
}

void App::finish_load() {
    band_coloring_auto = -1;
    run_list = trace::list_runs(trace->path);
    runs.clear();
    runs.resize(run_list.size());
    compared.assign(run_list.size(), false);
    limits = {trace->t_begin, trace->t_end};
    // --run IDs: the first is the selected run, all of them are compared.
    for (size_t k = 0; k < opt.runs.size(); ++k) {
        auto it = std::find_if(run_list.begin(), run_list.end(),
                               [&](const trace::RunInfo& r) { return r.id == opt.runs[k]; });
        if (it == run_list.end())
            throw Error(trace->path + ": no run with id " + std::to_string(opt.runs[k]) + " (" +
                        std::to_string(run_list.size()) + " runs in the file)");
        int idx = static_cast<int>(it - run_list.begin());
        compared[static_cast<size_t>(idx)] = true;
        if (k == 0) selected = idx;
        if (!run(idx)) throw Error(error);
    }
    // After the runs: a run slower than the recording extends the time axis (run()).
    range = limits;
    if (!opt.range.empty()) range = clamp(parse_range(opt.range), limits);
    // Without --run the compare view shows every run (up to six).
    if (opt.runs.empty())
        for (size_t i = 0; i < run_list.size() && i < 6; ++i) compared[i] = true;
}

void App::load_now() {
    trace = std::make_unique<ViewTrace>(load_view_trace(opt.trace));
    finish_load();
}

void App::load_async() {
    loading = true;
    loader_ = std::thread([this] {
        try {
            auto cb = [](double f, void* u) { static_cast<App*>(u)->progress = f; };
            pending_ = std::make_unique<ViewTrace>(load_view_trace(opt.trace, cb, this));
        } catch (const std::exception& e) {
            pending_error_ = e.what();
        }
        pending_ready_ = true;
    });
}

bool App::order_only() const {
    if (!trace) return false;
    auto it = trace->meta.find("timing");
    return it != trace->meta.end() && trace::order_only_timing(it->second);
}

const ViewRun* App::run(int index) {
    if (index < 0 || static_cast<size_t>(index) >= run_list.size()) return nullptr;
    std::lock_guard<std::mutex> lock(runs_mutex);
    auto& slot = runs[static_cast<size_t>(index)];
    if (!slot) {
        try {
            slot = std::make_unique<ViewRun>(load_view_run(*trace, run_list[static_cast<size_t>(index)].id));
            // Simulated time can run past the recording (stalls): keep all of it reachable.
            limits.t1 = std::max(limits.t1, slot->t_end);
        } catch (const std::exception& e) {
            error = e.what();
            return nullptr;
        }
    }
    return slot.get();
}

void App::refresh_runs() {
    auto fresh = trace::list_runs(trace->path);
    std::lock_guard<std::mutex> lock(runs_mutex);
    runs.resize(fresh.size());
    compared.resize(fresh.size(), true);
    run_list = std::move(fresh);
}

void App::select_allocation(int64_t allocation_id) {
    highlight_alloc = allocation_id;
    try {
        auto hits = accesses_of(*trace, allocation_id);
        highlights = highlight_lanes(*trace, selected_run(), hits);
        for (Lane& l : highlights) l.title = "accesses, stream " + std::to_string(l.stream);
        status = "allocation #" + std::to_string(allocation_id) + ": " + std::to_string(hits.size()) +
                 " kernel accesses highlighted on the timeline";
    } catch (const std::exception& e) {
        error = e.what();
    }
}

void App::go_to_step(int32_t step) {
    for (const StepSpan& s : trace->steps)
        if (s.step == step) {
            // On the selected run's clock when its kernels moved.
            const ViewRun* r = selected_run();
            int64_t t0 = s.t0, t1 = s.t1;
            if (r && !r->clock.empty()) { t0 = r->clock.map(t0); t1 = std::max(t0 + 1, r->clock.map(t1)); }
            int64_t pad = std::max<int64_t>((t1 - t0) / 50, 1);
            range = clamp({t0 - pad, t1 + pad}, limits);
            status = "step " + std::to_string(step) + (r && !r->clock.empty() ? " (on the run's clock)" : "");
            return;
        }
    status = "no step " + std::to_string(step) + " in this trace";
}

void App::frame(float width, float height) {
    layout = nlohmann::json::object();
    if (loading && pending_ready_) {
        loader_.join();
        loading = false;
        if (!pending_error_.empty()) error = pending_error_;
        else {
            trace = std::move(pending_);
            try { finish_load(); } catch (const std::exception& e) { error = e.what(); }
        }
    }
    ImGui::SetNextWindowPos({0, 0});
    ImGui::SetNextWindowSize({width, height});
    ImGui::Begin("mhc-view", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                     ImGuiWindowFlags_NoBringToFrontOnFocus);
    if (!error.empty()) {
        ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
        ImGui::TextWrapped("%s", error.c_str());
        ImGui::PopStyleColor();
        if (trace && ImGui::SmallButton("dismiss")) error.clear();
    }
    if (loading) {
        ImGui::Text("Loading %s", opt.trace.c_str());
        ImGui::ProgressBar(static_cast<float>(progress.load()), {400, 0});
    }
    if (!trace) { ImGui::End(); return; }

    ImGui::Text("%s  |  %lld kernels, %zu allocations, %lld copies, %zu runs  |  %s",
                trace->path.c_str(), static_cast<long long>(trace->kernel_count), trace->allocations.size(),
                static_cast<long long>(trace->copy_count), run_list.size(),
                format_duration(trace->t_end - trace->t_begin).c_str());
    if (ImGui::BeginTabBar("views")) {
        struct Tab { const char* name; ViewId id; void (*draw)(App&); };
        static const Tab tabs[] = {{"Timeline", ViewId::Timeline, draw_timeline},
                                   {"Memory", ViewId::Memory, draw_memory},
                                   {"Compare", ViewId::Compare, draw_compare},
                                   {"Statistics", ViewId::Statistics, draw_statistics},
                                   {"Run simulator", ViewId::Launcher, draw_launcher}};
        for (const Tab& t : tabs) {
            ImGuiTabItemFlags f = (force_frames > 0 && requested == t.id) ? ImGuiTabItemFlags_SetSelected : 0;
            if (ImGui::BeginTabItem(t.name, nullptr, f)) {
                view = t.id;
                t.draw(*this);
                ImGui::EndTabItem();
            }
        }
        if (force_frames > 0) --force_frames;
        ImGui::EndTabBar();
    }
    ImGui::End();
}

}  // namespace mhc::viewer
