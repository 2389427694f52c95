#pragma once
// The viewer's state, shared by the views (one file each, as Tracy does).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/timeline.hpp"

namespace mhc::viewer {

enum class ViewId { Timeline = 0, Memory, Compare, Statistics, Launcher };

struct Options {
    std::string trace;
    std::vector<int64_t> runs;      // --run: selected run (first) and compare set
    std::string screenshot, layout, view = "timeline", range;
    int width = 1600, height = 900;
};

struct LauncherUi;   // view_launcher.cpp

struct Selection {
    bool active = false, dragging = false;
    int64_t t0 = 0, t1 = 0;
};

class App {
public:
    explicit App(Options o);
    ~App();

    // Loads the trace and the runs named on the command line; throws mhc::Error.
    void load_now();
    // Interactive mode: loads on a worker thread, the window shows progress.
    void load_async();
    // Draws one frame of the whole UI into a full-window ImGui window.
    void frame(float width, float height);

    Options opt;
    std::string error;                       // shown in the window (and on stderr in screenshot mode)
    std::unique_ptr<ViewTrace> trace;
    std::vector<trace::RunInfo> run_list;
    std::vector<std::unique_ptr<ViewRun>> runs;   // loaded runs, by position in run_list
    int selected = -1;                       // index into run_list; -1 = recorded
    std::vector<bool> compared;              // per run_list entry
    TimeRange range, limits;
    Selection sel;
    ViewId view = ViewId::Timeline;
    ViewId requested = ViewId::Timeline;   // tab to select in the first frames
    int force_frames = 3;

    // Allocation clicked in the memory view: its kernels are highlighted on the timeline.
    int64_t highlight_alloc = 0;
    std::vector<Lane> highlights;
    std::string status;                      // one line under the toolbar
    int step_input = 0;                      // the toolbar's "step" field
    bool memory_strip = true;                // timeline: the memory curve under the tracks
    int band_coloring = -1;                  // memory view: BandColoring, -1 = chosen for the trace
    int band_coloring_auto = -1;             // the trace's choice, computed once (scans allocations)

    nlohmann::json layout;                   // plot rectangles of this frame (for --layout)
    std::mutex runs_mutex;                   // the launcher's worker adds runs
    // The run launcher's widgets and worker (view_launcher.cpp; created on first use). A
    // shared_ptr because its type is complete only there.
    std::shared_ptr<LauncherUi> launcher;

    // The trace's timing is order only (meta timing): its times are event numbers.
    bool order_only() const;
    const ViewRun* run(int index);           // loads on first use; nullptr and sets error if it fails
    const ViewRun* selected_run() { return selected >= 0 ? run(selected) : nullptr; }
    void refresh_runs();                     // re-reads the run list (after a launch)
    void select_allocation(int64_t allocation_id);
    void go_to_step(int32_t step);

    // Loader progress for the async path.
    std::atomic<double> progress{0};
    std::atomic<bool> loading{false};

private:
    void finish_load();
    std::thread loader_;
    std::unique_ptr<ViewTrace> pending_;
    std::string pending_error_;
    std::atomic<bool> pending_ready_{false};
};

// The views; each in its own file.
void draw_timeline(App& app);
void draw_memory(App& app);
void draw_compare(App& app);
void draw_statistics(App& app);
void draw_launcher(App& app);

// Parses "T0:T1" (each "123", "1.5ms", "200us", ...) into ns; throws mhc::Error.
TimeRange parse_range(const std::string& text);

}  // namespace mhc::viewer
