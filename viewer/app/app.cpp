#include "app.hpp"

#include <imgui.h>
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/viewer/align.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/controls.hpp"
#include "mhc/viewer/run_table.hpp"
#include "mhc/viewer/stats.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

TimeRange parse_range(const std::string& text) {
    auto colon = text.find(':');
    if (colon == std::string::npos) throw Error(refused_value("--range", text, "expected T0:T1, e.g. 100us:2ms"));
    auto ns = [&](const std::string& s) -> int64_t {
        bool digits = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (digits) {   // plain numbers are nanoseconds, decimal (docs/cli.md, "Numbers")
            if (std::string why = whole_number_refusal(s, false); !why.empty()) throw Error(of_option("--range", why));
            return *parse_integer<int64_t>(s);
        }
        double seconds = 0;
        try {
            seconds = parse_seconds(s);
        } catch (const Error& e) {
            throw Error(of_option("--range", e.what()));   // the option named, as for numbers
        }
        // Past int64 nanoseconds (292 years) the cast wrapped: '0:99999999999s' read as an end
        // before its start.
        if (!(seconds * 1e9 < 9.2e18))
            throw Error(refused_value("--range", text, "'" + s + "' is too large (at most 292 years)"));
        return static_cast<int64_t>(std::llround(seconds * 1e9));
    };
    TimeRange r{ns(text.substr(0, colon)), ns(text.substr(colon + 1))};
    if (r.t1 <= r.t0) throw Error(refused_value("--range", text, "the end must be after the start"));
    return r;
}

App::App(Options o) : opt(std::move(o)) {
    fit_y = opt.fit_y;
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
    auto listed = trace::list_all_runs(trace->path, trace->runs_db);
    run_list = std::move(listed.runs);
    ++run_list_generation;
    runs.clear();
    runs.resize(run_list.size());
    compared.assign(run_list.size(), false);
    limits = {trace->t_begin, trace->t_end};
    notes = trace_notes(trace->meta, static_cast<int64_t>(trace->allocations.size()));
    if (!listed.note.empty()) notes.push_back({"stale runs", listed.note});   // computed from other data
    step_input = step_control(trace->steps).first;   // the first step there is (not always 0)
    // --run IDs: the first is the selected run, all of them are compared.
    for (size_t k = 0; k < opt.runs.size(); ++k) {
        const int idx = static_cast<int>(run_index(run_list, opt.runs[k], trace->path, trace->runs_db));
        compared[static_cast<size_t>(idx)] = true;
        if (k == 0) selected = idx;
        if (!run(idx)) throw Error(error);
    }
    // Without --run the compare view shows every run (up to six).
    if (opt.runs.empty())
        for (size_t i = 0; i < run_list.size() && i < 6; ++i) compared[i] = true;
    // After the runs: a run slower than the recording extends the time axis.
    limits = range = whole();
    limits_dirty = false;
    if (!opt.range.empty()) range = clamp(parse_range(opt.range), limits);
    if (kept_) {   // read again for another memory device: the same runs and range
        const Kept kept = *kept_;
        kept_.reset();
        selected = -1;
        compared.assign(run_list.size(), false);
        for (size_t i = 0; i < run_list.size(); ++i) {
            if (run_list[i].id == kept.selected_run) select_run(static_cast<int>(i));
            if (std::find(kept.compared.begin(), kept.compared.end(), run_list[i].id) != kept.compared.end())
                compared[i] = true;
        }
        limits = whole();
        range = clamp(kept.range, limits);
    }
}

void App::drop_trace_state() {
    reserved_.reset();   // their workers read the trace: done before it goes
    picked_keys_.reset();
    // The views' caches index its tables (the statistics' rows are allocation indexes); called
    // between frames only, when no view holds them.
    timeline_ui.reset();
    memory_ui.reset();
    compare_ui.reset();
    statistics_ui.reset();
}

void App::switch_memory_device(int32_t device) {
    if (!trace || loading || device == trace->memory_device) return;
    Kept kept{range, selected >= 0 ? run_list[static_cast<size_t>(selected)].id : 0, {}};
    for (size_t i = 0; i < compared.size() && i < run_list.size(); ++i)
        if (compared[i]) kept.compared.push_back(run_list[i].id);
    kept_ = kept;
    opt.device = device;
    select_allocation(0);
    status = "memory of " + device_name(device);
    load_async();
    // Screenshot mode shows the finished view: the same worker, waited for.
    if (!opt.screenshot.empty()) take_pending();
}

void App::take_pending() {
    loader_.join();
    loading = false;
    loaded_this_frame = true;
    if (!pending_error_.empty()) {
        error = pending_error_;
        kept_.reset();
        return;
    }
    drop_trace_state();
    trace = std::move(pending_);
    try {
        finish_load();
    } catch (const std::exception& e) {
        error = e.what();
    }
}

TimeRange App::whole() {
    TimeRange w{trace->t_begin, trace->t_end};
    // Compare on an order-only trace draws its runs on the trace's op axis (align.hpp): a run's
    // clock (ops + link time) reaches far past its last op and does not extend it.
    const bool by_op = view == ViewId::Compare && order_only();
    auto extend = [&](size_t i) {
        if (i < runs.size() && runs[i] && !(by_op && alignable(*trace, *runs[i])))
            w.t1 = std::max(w.t1, runs[i]->t_end);
    };
    if (selected >= 0) extend(static_cast<size_t>(selected));
    for (size_t i = 0; i < compared.size(); ++i)
        if (compared[i]) extend(i);
    return w;
}

void App::update_limits() {
    TimeRange n = whole();
    range = follow_limits(range, limits, n);
    limits = n;
    limits_dirty = false;
}

LoadOptions App::load_options() const {
    LoadOptions o;
    if (!opt.families.empty()) o.families.load_file(opt.families);
    o.device = opt.device;
    o.runs_db = opt.runs_db;
    return o;
}

void App::load_now() {
    trace = std::make_unique<ViewTrace>(load_view_trace(opt.trace, load_options()));
    finish_load();
}

void App::load_async() {
    if (loader_.joinable()) loader_.join();
    pending_ready_ = false;
    pending_error_.clear();
    loading = true;
    loader_ = std::thread([this] {
        try {
            LoadOptions o = load_options();
            o.progress = [](double f, void* u) { static_cast<App*>(u)->progress = f; };
            o.user = this;
            pending_ = std::make_unique<ViewTrace>(load_view_trace(opt.trace, o));
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
            // Simulated time can run past the recording (stalls): the axis follows (update_limits).
            limits_dirty = true;
            loaded_this_frame = true;
        } catch (const std::exception& e) {
            error = e.what();
            return nullptr;
        }
    }
    return slot.get();
}

void App::refresh_runs() {
    auto fresh = trace::list_runs(trace->path, trace->runs_db);
    std::lock_guard<std::mutex> lock(runs_mutex);
    runs.resize(fresh.size());
    compared.resize(fresh.size(), true);
    run_list = std::move(fresh);
    ++run_list_generation;
}

void App::select_run(int index) {
    selected = index;
    if (index >= 0) run(index);
    limits_dirty = true;
    if (highlight_alloc) select_allocation(highlight_alloc);
    if (selected_kernel) select_kernel(selected_kernel);
}

void App::select_allocation(int64_t allocation_id) {
    highlight_alloc = allocation_id;
    highlights.clear();
    allocation_info = {};
    allocation_span.reset();
    if (!allocation_id) return;
    try {
        auto hits = accesses_of(*trace, allocation_id);
        highlights = highlight_lanes(*trace, selected_run(), hits);
        for (Lane& l : highlights) l.title = "accesses, stream " + std::to_string(l.stream);
        const ViewRun* r = selected_run();
        const AllocationDetails details = allocation_details(*trace, r, allocation_id);
        allocation_info = allocation_pane(details, r);
        if (details.found) allocation_span = Span{details.allocation.t_alloc, details.t_end};
        status = "allocation #" + std::to_string(allocation_id) + ": " + std::to_string(hits.size()) +
                 " kernel accesses highlighted on the timeline";
    } catch (const std::exception& e) {
        error = e.what();
    }
}

void App::reset_zoom() {
    range = limits;
    status = "zoom reset: the whole trace (0)";
}

bool App::zoom_to_selection(bool memory_view) {
    if (sel.active) {
        range = clamp({sel.t0, sel.t1}, limits);
        sel.active = false;
        return true;
    }
    const bool allocation = highlight_alloc && allocation_span;
    const std::optional<Span>& to = memory_view && allocation          ? allocation_span
                                    : selected_kernel && selected_span ? selected_span
                                                                       : allocation_span;
    if (!to || (!selected_kernel && !allocation)) return false;
    range = focus_range(to->first, to->second, limits);
    return true;
}

bool App::find_update() {
    // A slice of the search a frame (typing stays within the frame on millions of kernels); screenshot
    // mode shows the finished view, as it waits for the workers.
    if (!opt.screenshot.empty()) return find.finish(*trace, selected_run(), find_text, selected_kernel);
    return find.update(*trace, selected_run(), find_text, selected_kernel);
}

void App::find_on_timeline(const std::string& name) {
    std::snprintf(find_text, sizeof find_text, "%s", name.c_str());   // a longer name's start still finds it
    selected_kernel = 0;
    find_next();
    requested = ViewId::Timeline;
    force_frames = std::max(force_frames, 2);
}

void App::find_next(bool backward) {
    find.finish(*trace, selected_run(), find_text, selected_kernel);   // Enter asks for a match: all of them
    KernelMatch match;
    find.index = find.next(selected_kernel, range.t0, backward, &match);
    if (find.index < 0) {
        status = find.of.empty() ? "" : "no kernel name contains '" + find.of + "'";
        return;
    }
    range = range_for_match(match, range, limits);
    select_kernel(match.kernel);   // find.next made find.index that kernel's
    status = "match " + match_count_text(find.index, find.count()) + ": " + kernel_info.title;
}

void App::select_kernel(int64_t kernel_id) {
    selected_kernel = kernel_id;
    kernel_info = {};
    selected_span.reset();
    if (!kernel_id) return;
    try {
        const ViewRun* r = selected_run();
        const KernelDetails details = kernel_details(*trace, r, kernel_id);
        kernel_info = kernel_pane(details, r);
        // Where it lies on the clock shown (the run's when it reached it), for F / "Zoom to selection".
        if (details.found)
            selected_span = details.has_run && details.reached ? Span{details.run_start, details.run_end}
                                                               : Span{details.kernel.t_start, details.kernel.t_end};
        status = "kernel #" + std::to_string(kernel_id) + " selected";
    } catch (const std::exception& e) {
        error = e.what();
    }
}

Job<ReservedCurves>* App::reserved_curves() {
    if (!reserved_) {
        reserved_ = std::make_unique<Job<ReservedCurves>>(
            [path = trace->path, device = trace->memory_device] { return viewer::reserved_curves(path, device); });
        if (!opt.screenshot.empty()) {
            reserved_->wait();
            loaded_this_frame = true;
        }
    }
    reserved_->done();
    return reserved_.get();
}

const BandKeys* App::band_keys_for(BandColoring coloring, std::string& error) {
    error.clear();
    if (trace->keys && trace->keys->coloring == coloring) return trace->keys.get();
    if (!picked_keys_ || picked_coloring_ != coloring) {
        picked_keys_ = std::make_unique<Job<BandKeys>>([view = trace.get(), coloring] { return band_keys(*view, coloring); });
        picked_coloring_ = coloring;
        if (!opt.screenshot.empty()) {
            picked_keys_->wait();
            loaded_this_frame = true;
        }
    }
    picked_keys_->done();
    error = picked_keys_->error();
    return picked_keys_->value();
}

bool App::animating() const {
    if (loading || launcher_busy(*this) || sel.dragging) return true;
    if (find_text[0] != 0 && !find.current(find_text)) return true;   // a search under way, a slice a frame
    // A worker's result is drawn when it arrives.
    if ((reserved_ && !reserved_->value() && reserved_->error().empty()) ||
        (picked_keys_ && !picked_keys_->value() && picked_keys_->error().empty()))
        return true;
    if (ImGui::GetCurrentContext() == nullptr) return false;
    if (ImGui::IsAnyMouseDown()) return true;
    const ImGuiIO& io = ImGui::GetIO();
    if (io.WantTextInput) return false;
    for (int k : {GLFW_KEY_W, GLFW_KEY_A, GLFW_KEY_S, GLFW_KEY_D})
        if (ImGui::IsKeyDown(k)) return true;
    return false;
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
    status = trace->steps.empty() ? step_control(trace->steps).why
                                  : "no step " + std::to_string(step) + " in this trace";
}

void App::status_bar() {
    ImGui::Separator();
    ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::TextDisabled("%s", status.empty() ? "ready" : status.c_str());
    // Frame time as Tracy shows its own: the last frame, and the mean and worst of the last ones.
    char buf[128];
    std::snprintf(buf, sizeof buf, "frame %.1f ms (mean %.1f, worst %.1f)", frame_stats.last(), frame_stats.mean(),
                  frame_stats.worst());
    float w = ImGui::CalcTextSize(buf).x;
    ImGui::SameLine(std::max(ImGui::GetWindowContentRegionMax().x - w, ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x + 20));
    ImGui::TextDisabled("%s", buf);
    layout["status"] = {{"text", status},
                        {"frame", buf},
                        {"y0", p0.y},
                        {"y1", ImGui::GetItemRectMax().y},
                        {"frame_ms", frame_stats.last()},
                        {"copied", copied}};
}

void App::notes_line() {
    if (notes.empty()) return;
    // Beside the header when a useful part of it fits there, else on a line of its own; cut with
    // "..." to the window, every note whole in the tooltip and in the notes' window (a click on
    // the line, or N), where each can be read and selected.
    const std::string full = "notes: " + notes_summary(notes);
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    const float beside = right - ImGui::GetItemRectMax().x - 24;
    if (beside >= 320) ImGui::SameLine(0, 24);
    const float room = beside >= 320 ? beside : ImGui::GetContentRegionAvail().x;
    const std::string shown = fit_label(full, room, ImGui::CalcTextSize("M").x);
    ImGui::TextColored(ImVec4(0.95f, 0.8f, 0.4f, 1.f), "%s", shown.c_str());
    const ImVec2 line_min = ImGui::GetItemRectMin(), line_max = ImGui::GetItemRectMax();
    // The line is a button of the Tab ring too: Space or Enter there opens the window, as a click.
    ImGui::SetCursorScreenPos(line_min);
    const bool pressed = ImGui::InvisibleButton("##notes", {line_max.x - line_min.x, line_max.y - line_min.y});
    tab_stop(*this, "notes");
    nlohmann::json lines = nlohmann::json::array();
    for (const TraceNote& note : notes) lines.push_back(note.text);
    layout["notes"] = {{"text", shown}, {"lines", lines}, {"rect", rect_json(line_min, line_max)}};
    const bool hovered = ImGui::IsItemHovered();
    if (hovered) ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
    if (pressed) notes_open = !notes_open;
    if (!ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(GLFW_KEY_N, false)) notes_open = !notes_open;
    if (hovered && !notes_open) {
        layout["notes"]["tooltip"] = lines;
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 70);
        for (const TraceNote& note : notes) ImGui::TextUnformatted(note.text.c_str());
        ImGui::TextDisabled("click or N: list them in a window");
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
    if (!notes_open) return;
    // Under the line, as wide as the window allows; Esc, N, "close" or a click on the line close it.
    const float width = std::min(ImGui::GetFontSize() * 60, right - ImGui::GetWindowPos().x - 16);
    ImGui::SetNextWindowPos(
        {std::max(ImGui::GetWindowPos().x + 8, std::min(line_min.x, right - width)), line_max.y + 4}, ImGuiCond_Always);
    ImGui::SetNextWindowSizeConstraints({width, 0}, {width, ImGui::GetIO().DisplaySize.y * 0.6f});
    ImGui::Begin("notes on this trace", &notes_open,
                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_AlwaysAutoResize |
                     ImGuiWindowFlags_NoMove);
    ImGui::PushTextWrapPos(0);
    for (size_t k = 0; k < notes.size(); ++k) {
        ImGui::Bullet();
        ImGui::TextColored(ImVec4(0.95f, 0.8f, 0.4f, 1.f), "%s", notes[k].text.c_str());
    }
    ImGui::PopTextWrapPos();
    escape_taken_ = ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false);   // this press closes the notes only
    const bool close = ImGui::SmallButton("close");
    tab_stop(*this, "notes_close");
    if (close || escape_taken_) notes_open = false;
    const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    layout["notes"]["window"] = {{"lines", lines}, {"rect", rect_json(pos, {pos.x + size.x, pos.y + size.y})}};
    ImGui::End();
}

void App::escape_key() {
    if (escape_taken_ || ImGui::GetIO().WantTextInput || !ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false)) return;
    if (sel.active || sel.dragging) {
        sel = {};
        status = "range selection cleared (Esc)";
    } else if (view == ViewId::Timeline && selected_kernel) {
        select_kernel(0);
        status = "kernel details closed (Esc)";
    } else if (view == ViewId::Memory && highlight_alloc) {
        select_allocation(0);
        status = "allocation details closed (Esc)";
    }
}

void App::frame(float width, float height) {
    layout = nlohmann::json::object();
    tab_drawn.clear();
    loaded_this_frame = false;
    if (loading && pending_ready_) take_pending();
    if (device_request) {   // picked in the last frame's toolbar
        const int32_t device = *device_request;
        device_request.reset();
        try {
            switch_memory_device(device);
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    if (limits_dirty) update_limits();
    if (step_on_load && trace && !loading) {
        step_on_load = false;
        step_input = opt.step;
        go_to_step(opt.step);
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
        if (trace) tab_stop(*this, "dismiss");
    }
    if (loading && trace) {
        ImGui::Text("Reading %s for %s...", opt.trace.c_str(), device_name(opt.device).c_str());
    } else if (loading) {
        ImGui::Text("Loading %s", opt.trace.c_str());
        ImGui::ProgressBar(static_cast<float>(progress.load()), {400, 0});
    }
    if (!trace) { ImGui::End(); return; }
    tab_along(*this);

    // With several devices the allocations counted are those of the device the memory views show.
    const std::string on = trace->memory_devices.size() > 1 ? " on " + device_name(trace->memory_device) : "";
    const std::string header_text = trace->path + "  |  " + header_counts(*trace, run_list.size(), ops(), on) +
                                    "  |  " + times().span(trace->t_end - trace->t_begin);
    ImGui::TextUnformatted(header_text.c_str());
    layout["header"] = header_text;
    escape_taken_ = false;
    notes_line();
    escape_key();
    // The status bar keeps its line at the bottom whatever the view does above it.
    const float status_h = ImGui::GetFrameHeightWithSpacing();
    std::pair<size_t, size_t> view_stops{0, 0};   // the view's own stops among this frame's
    if (ImGui::BeginTabBar("views")) {
        struct Tab { const char* name; const char* stop; ViewId id; void (*draw)(App&); };
        static constexpr Tab kTabs[] = {{"Timeline", "view_timeline", ViewId::Timeline, draw_timeline},
                                        {"Memory", "view_memory", ViewId::Memory, draw_memory},
                                        {"Compare", "view_compare", ViewId::Compare, draw_compare},
                                        {"Statistics", "view_statistics", ViewId::Statistics, draw_statistics},
                                        {"Run simulator", "view_run", ViewId::Launcher, draw_launcher}};
        for (const Tab& t : kTabs) {
            ImGuiTabItemFlags f = (force_frames > 0 && requested == t.id) ? ImGuiTabItemFlags_SetSelected : 0;
            const bool open = ImGui::BeginTabItem(t.name, nullptr, f);
            tab_stop(*this, t.stop);   // Space or Enter on it opens the view
            if (open) {
                // Compare's axis differs from the others' on an order-only trace (runs by op): the
                // limits follow the view at once, before it draws.
                if (view != t.id) {
                    view = t.id;
                    if (order_only()) update_limits();
                }
                // NavFlattened: Tab goes on from the view tabs into the view's toolbar (it stopped at the tabs).
                ImGui::BeginChild("view", {0, -status_h}, false,
                                  ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse |
                                      ImGuiWindowFlags_NavFlattened);
                const ImVec2 view_pos = ImGui::GetWindowPos(), view_size = ImGui::GetWindowSize();
                layout["view"] = rect_json(view_pos, {view_pos.x + view_size.x, view_pos.y + view_size.y});
                view_stops.first = tab_drawn.size();
                t.draw(*this);
                view_stops.second = tab_drawn.size();
                ImGui::EndChild();
                ImGui::EndTabItem();
            }
        }
        if (force_frames > 0) --force_frames;
        ImGui::EndTabBar();
    }
    status_bar();
    end_tab_ring(*this, view_stops.first, view_stops.second);
    ImGui::End();
}

}  // namespace mhc::viewer
