#pragma once
// The viewer's state, shared by the views (one file each, as Tracy does).
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/details.hpp"
#include "mhc/viewer/find.hpp"
#include "mhc/viewer/job.hpp"
#include "mhc/viewer/notes.hpp"
#include "mhc/viewer/pacing.hpp"
#include "mhc/viewer/reserved.hpp"
#include "mhc/viewer/timeline.hpp"

namespace mhc::viewer {

enum class ViewId { Timeline = 0, Memory, Compare, Statistics, Launcher };

struct Options {
    std::string trace;
    std::vector<int64_t> runs;      // --run: selected run (first) and compare set
    std::string screenshot, layout, view = "timeline", range;
    std::string families;           // --families FILE: the user's kernel family rules
    std::string runs_db;            // --runs-db FILE: the runs stored there (mhc simulate --runs-db)
    int32_t device = kAutoMemoryDevice;   // --device: whose memory the memory views show
    int width = 1600, height = 900;
    // Screenshot mode: left clicks at window pixels (x, y), one after the other, as a user's
    // clicks (press and release on separate frames), and the toolbar's step + Go.
    std::vector<std::pair<float, float>> clicks;
    std::optional<std::pair<float, float>> hover;   // --hover: the mouse there in the saved frame
    bool go_step = false;
    int step = 0;
    bool fit_y = false;   // --fit-y: memory curves' y axis fitted to the data, not from 0 B
    // --find TEXT (each one more press of Enter in the timeline's find field, after the clicks).
    std::vector<std::string> finds;
    int find_back = 0;   // --find-back N: Shift+Enter N times after them
    // --type TEXT: after them, the find field is focused and TEXT typed into it, a letter a frame,
    // without Enter (as a user types: its matches are marked as they are).
    std::string typed;
    // --keys KEYS: after them, each key pressed and released in turn with no field focused, as a
    // keyboard sends it (a key, and its character where it has one): Tab, Esc, Enter, a letter, a digit.
    std::string keys;
};

// Each view's own state (buffers reused across frames, sort orders, search text), complete only
// in the view's file; the views keep nothing static.
struct LauncherUi;     // view_launcher.cpp
struct TimelineUi;     // view_timeline.cpp
struct MemoryUi;       // view_memory.cpp
struct CompareUi;      // view_compare.cpp
struct StatisticsUi;   // view_statistics.cpp

// One stop of the keyboard's Tab ring (keyboard.cpp): an item's ImGui id, the ImGui window it is in,
// and its name in the layout ("keyboard": {"focused": NAME, "order": [...]}).
struct TabStop {
    unsigned id = 0;
    void* window = nullptr;
    std::string name;
    bool text = false;   // a text field: Enter edits it (ImGui's), where it presses any other stop
    // A table's rows as one stop (tab_row): the keyboard on any of them is at this stop, which it
    // enters at `id` (the selected row, else the first drawn).
    std::vector<unsigned> members;
    bool plot = false;   // a plot: the arrows pan and zoom it (keyboard.cpp), not move away
};

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
    // Where the selected kernel lies on the clock shown and the selected allocation's lifetime
    // (recorded): what F, Z and "Zoom to selection" zoom to when no range is selected.
    using Span = std::pair<int64_t, int64_t>;
    std::optional<Span> selected_span, allocation_span;
    // Zooms to the range selected (right-drag), else in the memory view to the selected allocation's
    // lifetime, else to the selected kernel, else the allocation; false when nothing is selected.
    bool zoom_to_selection(bool memory_view = false);
    // The whole trace in view ("Reset zoom", the 0 key); said in the status line.
    void reset_zoom();
    ViewId view = ViewId::Timeline;
    ViewId requested = ViewId::Timeline;   // tab to select in the first frames
    int force_frames = 3;

    // Allocation clicked in the memory view: its kernels are highlighted on the timeline, its
    // details fill the memory view's details pane.
    int64_t highlight_alloc = 0;
    std::vector<Lane> highlights;
    DetailsPane allocation_info;
    // Kernel clicked on a timeline: outlined, its details in the timeline's details pane.
    int64_t selected_kernel = 0;
    DetailsPane kernel_info;
    std::vector<TraceNote> notes;            // what the trace lacks or its import warned of (notes.hpp)
    std::string status;                      // the status bar's message (left of the frame time)
    std::string copied;                      // what "copy" (Ctrl+C) last put on the clipboard
    FrameStats frame_stats;                  // CPU time of the last frames (status bar)
    bool loaded_this_frame = false;          // a run was read from the file, or screenshot mode
                                             // waited for a worker: not a drawing frame
    int step_input = 0;                      // the toolbar's "step" field
    // Window mode, --step: gone to on the first frame the trace is there (screenshot mode presses
    // Go among its scripted input instead).
    bool step_on_load = false;
    bool memory_strip = true;                // timeline: the memory curve under the tracks
    bool fit_y = false;                      // memory curves: y axis fitted to the data in view (toolbar)
    bool notes_open = false;                 // the notes' window (a click on the notes line, or N)
    bool open_oom = false;                   // the statistics' "At the OOM" tab is to be selected
    bool focus_find = false;                 // the find field takes the keyboard on the next frame
    // The timeline's find field: kernels whose name contains the text (find.hpp), on the clock
    // shown, marked as it is typed (find_update, every frame); Enter goes to the next (Shift+Enter
    // the one before), zooms to it and selects it.
    char find_text[128] = "";
    FindState find;
    bool find_update();   // true when the matches changed
    void find_next(bool backward = false);
    // A kernel row of the statistics (a click or Enter on it): its name in the find field, the
    // timeline shown at its first match (selected), as Enter in the field goes to it.
    void find_on_timeline(const std::string& name);
    // Shows what was alive when the selected run ran out of memory: the statistics view at its
    // "At the OOM" tab (the timeline's OOM line and oom mark call it).
    void show_oom() {
        requested = ViewId::Statistics;
        force_frames = std::max(force_frames, 2);
        open_oom = true;
    }
    int band_coloring = -1;                  // memory view: BandColoring, -1 = chosen for the trace

    nlohmann::json layout;                   // plot rectangles of this frame (for --layout)
    std::mutex runs_mutex;                   // the launcher's worker adds runs
    // The run launcher's widgets and worker (view_launcher.cpp; created on first use). A
    // shared_ptr because its type is complete only there.
    std::shared_ptr<LauncherUi> launcher;
    std::shared_ptr<TimelineUi> timeline_ui;
    std::shared_ptr<MemoryUi> memory_ui;
    std::shared_ptr<CompareUi> compare_ui;
    std::shared_ptr<StatisticsUi> statistics_ui;

    // Work done on worker threads for the memory view (the view draws what is ready; an
    // interactive window keeps drawing meanwhile, screenshot mode waits for it):
    // the reserved curves, started when the view first opens; null before.
    Job<ReservedCurves>* reserved_curves();
    // The colour keys of `coloring`: the trace's own (made at load) or those of another
    // colouring the user picked, computed on a worker; nullptr while they are computed, and
    // `error` says why when they could not be.
    const BandKeys* band_keys_for(BandColoring coloring, std::string& error);

    // The trace's timing is order only (meta timing): its times are event numbers.
    bool order_only() const;
    // Times in words: as recorded, or the numbers of its ops or events when order only.
    TimeText times() const { return trace ? trace->time_text() : TimeText{}; }
    // The trace's "kernels" are an execution trace's ops (CPU and GPU operators in their order):
    // the header, the family legend and the statistics say ops.
    bool ops() const { return trace && times().events && std::string(times().noun) == "op"; }
    const ViewRun* run(int index);           // loads on first use; nullptr and sets error if it fails
    const ViewRun* selected_run() { return selected >= 0 ? run(selected) : nullptr; }
    void refresh_runs();                     // re-reads the run list (after a launch)
    void select_run(int index);              // -1: recorded; refreshes highlights and details
    // The time axis's limits: the recording and the selected and ticked runs (a run slower than
    // the recording extends it); the range follows when it showed everything (follow_limits).
    TimeRange whole();
    void update_limits();
    bool limits_dirty = false;               // a run loaded or the selection changed
    int64_t run_list_generation = 0;         // increments when the run list is (re)read
    void select_allocation(int64_t allocation_id);   // 0 clears
    void select_kernel(int64_t kernel_id);            // 0 clears
    // Something moves without input (loading, a run in flight, a button or key held): the
    // window keeps drawing; otherwise it waits for events (FramePacer).
    bool animating() const;
    void go_to_step(int32_t step);
    // The memory views show `device` (the toolbar's picker, as --device): the trace is read again
    // for it (on a worker, the window drawing the one before meanwhile; at once in screenshot
    // mode), keeping the range, the selected and compared runs.
    void switch_memory_device(int32_t device);
    std::optional<int32_t> device_request;   // picked in the toolbar: switched at the next frame's start
    // Every interactive part in Tab order as the frame before drew them, and this frame's so far:
    // ImGui 1.86 tabs between text fields only, so the window moves the keyboard along its own
    // (keyboard.cpp): the view's toolbar and fields, its details pane, then the notes and the view tabs.
    std::vector<TabStop> tab_ring, tab_drawn;
    // The stop the keyboard goes to once a frame has drawn it (a view just opened), "" for none:
    // Enter on a kernel's row puts it on the timeline's plot, where the kernel found lies.
    std::string focus_request;

    // Loader progress for the async path.
    std::atomic<double> progress{0};
    std::atomic<bool> loading{false};

private:
    LoadOptions load_options() const;   // throws mhc::Error for a bad --families file
    void status_bar();
    void notes_line();   // the trace's notes, one line by the header (hover: all)
    // Esc, outside a text field, closes the innermost thing open, one a press: the notes' window
    // (notes_line, which says so in escape_taken_), else the range selected (right-drag), else the
    // view's details pane (its "close" alone closed it; a browser's Esc closes a find bar or panel).
    void escape_key();
    bool escape_taken_ = false;
    void finish_load();
    struct Kept {   // what a reload for another memory device keeps
        TimeRange range;
        int64_t selected_run = 0;   // run id, 0 for the recording
        std::vector<int64_t> compared;
    };
    std::optional<Kept> kept_;
    void take_pending();       // the loader's trace (or its error) replaces the one shown
    void drop_trace_state();   // before `trace` is replaced: workers done, views' caches dropped
    std::thread loader_;
    std::unique_ptr<ViewTrace> pending_;
    std::string pending_error_;
    std::atomic<bool> pending_ready_{false};
    // After `trace`: their workers read it, and finish before it goes.
    std::unique_ptr<Job<ReservedCurves>> reserved_;
    std::unique_ptr<Job<BandKeys>> picked_keys_;
    BandColoring picked_coloring_ = BandColoring::Category;
};

// The views; each in its own file.
void draw_timeline(App& app);
void draw_memory(App& app);
void draw_compare(App& app);
void draw_statistics(App& app);
void draw_launcher(App& app);
bool launcher_busy(const App& app);   // view_launcher.cpp

// Parses "T0:T1" (each "123", "1.5ms", "200us", ...) into ns; throws mhc::Error.
TimeRange parse_range(const std::string& text);

}  // namespace mhc::viewer
