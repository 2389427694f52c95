#pragma once
// What the viewer holds of a trace: lanes for the timeline, allocation columns, the live-bytes
// curve, steps and per-name kernel statistics. Leaner than trace::TraceData (no launch
// geometry; accesses only grouped by allocation, and only for files without an index of them).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mhc/trace/model.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/viewer/clock.hpp"
#include "mhc/viewer/curve.hpp"
#include "mhc/viewer/families.hpp"
#include "mhc/viewer/lane.hpp"
#include "mhc/viewer/run_times.hpp"

namespace mhc::trace { class Reader; }

namespace mhc::viewer {

struct TimeText;   // axis.hpp

struct BandKeys;   // band_colors.hpp

struct AllocationTable {
    std::vector<int64_t> id, bytes, t_alloc, t_free, label;
    std::vector<int32_t> device;
    std::vector<trace::Category> category;
    // Allocation indices by bytes, largest first, with their intervals copied alongside so
    // that the band layout scans contiguous memory.
    std::vector<uint32_t> by_size;
    std::vector<int64_t> by_size_alloc, by_size_free;
    // Counting allocations overlapping a range without a scan: those made before its end less
    // those freed by its start.
    std::vector<int64_t> sorted_alloc, sorted_free;
    // Stack group of each allocation (StackGroup, bands.hpp): long-lived state at the bottom.
    std::vector<uint8_t> group;
    size_t overlapping(int64_t t0, int64_t t1) const;
    // Listing the allocations overlapping a range in time proportional to their number (a zoomed-in
    // frame must not scan the whole trace): the allocations in the order of sorted_alloc with
    // their free times alongside, and levels of maxima of those free times over blocks of
    // kFreeMaxFan (level 0 over the free times, each next level over the one below), so that
    // blocks whose allocations are all freed by the range's start are skipped whole.
    static constexpr size_t kFreeMaxFan = 32;
    std::vector<uint32_t> by_alloc;
    std::vector<int64_t> by_alloc_free;
    std::vector<std::vector<int64_t>> free_max;
    std::vector<uint32_t> size_rank;   // position of each allocation in by_size
    // Appends the indices of the allocations overlapping [t0, t1) (t_alloc < t1, t_free > t0),
    // in allocation-time order.
    void list_overlapping(int64_t t0, int64_t t1, std::vector<uint32_t>& out) const;
    // Index of allocation `id` (ids are loaded in order: binary search); -1 when absent.
    int64_t index_of(int64_t id) const;
    size_t size() const { return id.size(); }
    int64_t end_or(size_t i, int64_t t_end) const {
        return t_free[i] == trace::kNoTime ? t_end : t_free[i];
    }
};

// The derived columns of a table whose base columns (id .. category) are filled: size order,
// sorted times, stack groups (the trace spans [t_begin, t_end]). The loader's last step; tests
// that build tables by hand call it too.
void finish_allocations(AllocationTable& a, int64_t t_begin, int64_t t_end);

// The accesses of every allocation, grouped by allocation (CSR) at load, for a file without an
// index of accesses by allocation (docs/viewer.md, "Loading"): allocation index i (AllocationTable
// order) has entries [begin[i], begin[i + 1]), in kernel id order; each names its kernel by its
// place in the kernel lanes. Accesses naming a kernel or allocation the trace lacks are left out.
struct AccessIndex {
    std::vector<uint64_t> begin;                      // allocations + 1
    std::vector<uint32_t> kernel;                     // per entry: dense kernel index (kernel id order)
    std::vector<trace::AccessMode> mode;              // per entry
    std::vector<uint32_t> kernel_lane, kernel_item;   // per dense kernel: ViewTrace::kernel_lanes[lane], item
    bool from_cache = false;                          // read from the file's cache entry, not its rows
    uint64_t count(size_t allocation_index) const { return begin[allocation_index + 1] - begin[allocation_index]; }
    size_t bytes() const;   // memory held, for benchmarks
};

struct StepSpan {
    int32_t step = 0;
    int64_t t0 = 0, t1 = 0;
};

struct KernelNameStat {
    int32_t name = 0;   // string id
    int64_t count = 0, total_ns = 0, max_ns = 0;
};

// One device's allocations in the trace (host pinned memory is device -1).
struct DeviceMemory {
    int32_t device = 0;
    int64_t allocations = 0;
    int64_t peak_bytes = 0;   // live-bytes peak of that device alone
};
// "GPU 0", or "host" for device -1.
std::string device_name(int32_t device);
struct ViewTrace;
// What the memory curves show, for their titles: the device and those left out with their peaks
// ("GPU 0; not shown: host (peak 305.18 MiB)"), or "GPU 2" alone; "" when GPU 0 is the only one
// (nothing to tell: the titles read as before).
std::string memory_device_text(const ViewTrace& view);

// LoadOptions::device: the GPU with the largest live peak, as `mhc simulate --device auto`.
inline constexpr int32_t kAutoMemoryDevice = INT32_MIN;

struct ViewTrace {
    std::string path;
    std::string runs_db;   // where its runs are: empty for the trace itself (LoadOptions::runs_db)
    std::map<std::string, std::string> meta;
    std::vector<std::string> strings;
    std::vector<Lane> kernel_lanes, copy_lanes, marker_lanes;   // markers and copies split into
                                                                // rows where they overlap (split_rows)
    // Per string id, for kernel names: family and colour (classified once at load).
    std::vector<uint8_t> family_of_name;
    std::vector<uint32_t> color_of_name;
    std::vector<int64_t> family_ns;   // kernel time per family (kFamilyCount entries)
    // The memory views show one device's memory (memory_device; adding a host's pinned buffers or
    // another GPU's to it would be nobody's memory): `allocations` and `live` hold that device's
    // only. memory_devices lists every device with allocations, by device number.
    int32_t memory_device = 0;
    std::vector<DeviceMemory> memory_devices;
    AllocationTable allocations;
    Curve live;                       // live bytes of memory_device
    std::vector<StepSpan> steps;      // from step markers, else from kernels' step column
    std::string steps_from;           // meta steps_from when the importer took the steps from the
                                      // optimizer's ranges (no ProfilerStep#N), else ""
    std::vector<KernelNameStat> kernel_stats;   // one per kernel name, unsorted
    int64_t kernel_count = 0, copy_count = 0, marker_count = 0, access_count = 0;
    int64_t t_begin = 0, t_end = 1;
    std::shared_ptr<trace::Reader> reader;   // kept open for on-demand queries
    // Accesses by allocation, built at load when the file has no index of them; null when it has
    // one (files written before 2026-12-02): accesses_of then queries the file.
    std::shared_ptr<const AccessIndex> access_index;
    // The memory view's colour keys for the colouring chosen for the trace (band_colors.hpp),
    // made at load from the same ordering of events as `live`.
    std::shared_ptr<const BandKeys> keys;

    // The trace's timing is order only (meta timing): its times are event numbers.
    bool order_only() const;
    // How its times read (axis.hpp): times, or when order only the numbers of its events, or of its
    // ops for an execution trace (meta source), whose op k lies on [k, k + 1).
    TimeText time_text() const;
    // A kernel name's family and colour (classified at load, the user's rules first).
    KernelFamily family_of(int64_t name_id) const;
    uint32_t color_of(int64_t name_id) const;
    const std::string& str(int64_t id) const {
        static const std::string empty;
        return (id >= 0 && static_cast<size_t>(id) < strings.size()) ? strings[static_cast<size_t>(id)] : empty;
    }
};

// A run of the trace, prepared for display.
struct ViewRun {
    trace::RunInfo info;
    std::map<std::string, std::string> config;
    std::map<std::string, double> metrics;
    std::vector<Lane> kernel_lanes;   // run_kernels times, same order as the trace's lanes;
                                      // empty when the run keeps the recorded times
    std::vector<Lane> event_lanes;    // one per event kind present
    // The trace's markers and copies on the run's clock (RunClock), same order as the trace's
    // lanes; empty when the run keeps the recorded times.
    std::vector<Lane> marker_lanes, copy_lanes;
    RunClock clock;                   // recorded -> run times (empty: the run keeps recorded times)
    std::vector<trace::RunEvent> events;
    Curve memory;                     // run_memory device bytes
    Curve host;                       // run_memory host bytes
    int64_t capacity = -1;            // config "capacity_bytes", -1 if absent
    int64_t t_end = 0;                // last kernel end or event end
    RunTimes times;                   // its times in words (an order-only trace's: ops + link time)
    std::string label() const;   // "#id name", and its device when not GPU 0: "#2 lru+...@70%/pcie4/caching (host)"
};

// Why a run's memory is not drawn against `shown_device`'s (the memory views show one device): "#2
// simulated the host's memory, not GPU 0's: pick host in 'memory of' to see its curve"; empty when
// it simulated that device or does not say. Its device bytes over another device's recording read as
// that device's (compare drew a host run's 2 MiB under GPU 0's 40 MiB as if GPU 0 held them).
std::string run_device_note(const trace::RunInfo& info, int32_t shown_device);
// A run as the toolbar's run list shows it: "#2 lru+none@70%/pcie4/caching (host; oom)", its device
// and status in one pair of brackets as `mhc info` writes them (it read "(host) (oom)").
std::string run_list_entry(const trace::RunInfo& info);

// Why a run stopped, as mhc simulate printed it: "out of memory at 1.2 ms: allocation 508 (...):
// needs 141.39 GiB; ... short by 42.40 GiB" (its config's oom_where, oom_why and its metric
// oom_time_ns); "interrupted: ..." for an incomplete run; "" for a run that completed.
std::string run_outcome(const ViewRun& run, const TimeText& times);

// Progress callback: fraction done in [0, 1]. Called from the loading thread.
using Progress = void (*)(double fraction, void* user);

struct LoadOptions {
    Progress progress = nullptr;
    void* user = nullptr;
    FamilyRules families;   // the user's kernel family rules (mhc-view --families FILE)
    // Whose memory the memory views show (mhc-view --device): kAutoMemoryDevice for the GPU with
    // the largest live peak (the host only when no GPU has allocations), else that device; one
    // without allocations is bad input (mhc::Error naming the file and the devices it has).
    int32_t device = kAutoMemoryDevice;
    // Where the trace's runs are read (mhc-view --runs-db, as `mhc simulate --runs-db` stored
    // them): empty for the trace itself. A runs database of another trace is refused
    // (trace::list_runs), naming both files.
    std::string runs_db;
};

// mhc-view --device `wanted` against the devices the trace's allocations are on (`have`, in order):
// nothing for kAutoMemoryDevice or a device in `have`, else mhc::Error (bad input) naming the file
// and the devices it has. The loader and the window's check before it opens say it alike.
void check_memory_device(const std::string& path, int32_t wanted, const std::vector<int32_t>& have);
// The devices the allocations of the trace `reader` opened are on, in order (a scan of one column).
std::vector<int32_t> allocation_devices(const trace::Reader& reader);
// The step numbers of the trace `reader` opened, in order, as load_view_trace finds its steps (its
// step markers when it has any, else the steps its kernels carry), without loading it: mhc-view's
// --step is checked with it before a window opens.
std::vector<int32_t> step_numbers(const trace::Reader& reader);

// Opens and loads a trace through the trace library. Throws mhc::Error naming the file.
ViewTrace load_view_trace(const std::string& path, const LoadOptions& options = {});
// A refusal to open `path` as a trace (mhc::Error's message), with what to do when the file is a
// profiler's: one that is "not an mhc trace" gets "; a profiler's file (...) is viewed after
// `mhc import PATH -o TRACE.db`" (a Kineto JSON or a snapshot passed to mhc-view read "not an mhc
// trace (not an SQLite database)" and nothing more). Other messages are returned as they are.
std::string with_import_hint(const std::string& message, const std::string& path);
// Loads run `run_id`. Throws mhc::Error naming the file when the id does not exist.
ViewRun load_view_run(const ViewTrace& t, int64_t run_id);
// Where run `run_id` (mhc-view --run) is in `runs`, as trace::list_runs(path, runs_db) read them.
// Throws mhc::Error (bad input) naming the file that holds the runs and how many it has: "T.db:
// run 7 does not exist (2 runs in the file: mhc info T.db lists them)".
size_t run_index(const std::vector<trace::RunInfo>& runs, int64_t run_id, const std::string& path,
                 const std::string& runs_db);

// Accesses of one allocation, by kernel start (ties by kernel id): from access_index, else read
// from the file on demand through its index.
struct AccessHit {
    int64_t kernel = 0, stream = 0, t_start = 0, t_end = 0;
    int32_t device = 0;
    trace::AccessMode mode = trace::AccessMode::Read;
};
std::vector<AccessHit> accesses_of(const ViewTrace& t, int64_t allocation_id);
int64_t access_count_of(const ViewTrace& t, int64_t allocation_id);

// Rows kept when a marker or copy lane is split (split_rows); the last row takes the rest.
inline constexpr size_t kMaxRows = 6;

// Lanes (one per stream) marking the given kernels, with a run's times when `run` has them.
std::vector<Lane> highlight_lanes(const ViewTrace& t, const ViewRun* run, const std::vector<AccessHit>& hits);

}  // namespace mhc::viewer
