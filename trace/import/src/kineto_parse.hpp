#pragma once
// Streaming parse of a Kineto (PyTorch profiler) Chrome-trace JSON into compact arrays.
// Shared by the Kineto importer and the execution-trace importer (which takes its timing
// from Kineto). Only what the trace model uses is kept; the JSON is never held whole.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kineto_repair.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/model.hpp"

namespace mhc::trace::import {

struct KStrings {
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::vector<std::string> list;
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> index;
    uint32_t intern(std::string_view s);
};

struct KKernel {
    int64_t ts = 0, dur = 0, stream = 0, correlation = 0, external = 0, tid = 0;
    int64_t pid = 0;   // the event's pid: Kineto writes the device number; a tool merging ranks may write others
    int32_t device = 0, registers = 0, shared_mem = 0;
    int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    uint32_t name = 0;
    bool is_copy = false, is_memset = false;
    int64_t bytes = 0;   // copies
    CopyKind copy_kind = CopyKind::D2D;   // copies and memsets (Memset)
    // The process group its args name (kineto_groups.cpp): interned args.Process Group Name and
    // args.Process Group Ranks, kNoGroup where absent; group_unreadable where one was no string.
    static constexpr uint32_t kNoGroup = UINT32_MAX;
    uint32_t group_name = kNoGroup, group_ranks = kNoGroup;
    bool group_unreadable = false;
};

struct KMemory {
    int64_t ts = 0, addr = 0, bytes = 0;
    int64_t total = -1, reserved = -1;   // args.Total Allocated / Total Reserved; -1: absent
    int64_t index = 0;                   // position in traceEvents (for messages)
    int32_t device = 0;                  // -1: host (Device Type 0)
    bool has_addr = false;
    int64_t pid = 0;   // the process whose allocator it is (several in a file of merged ranks)
};

struct KOp {   // cpu_op / user_annotation on a CPU thread
    int64_t ts = 0, dur = 0, tid = 0, external = -1, rf_id = -1, ev_idx = -1;
    int64_t pid = 0, seq = -1;   // seq: args.Sequence number (autograd), -1 when absent
    uint32_t name = 0;
    int32_t parent = -1;   // enclosing op (same process and thread), filled by link_ops
};

struct KLaunch {   // cuda_runtime / cuda_driver call by correlation id, or an ac2g flow's start by flow id
    int64_t ts = 0, tid = 0, pid = 0;
    int64_t dur = 0;   // runtime_calls only
};

// How a kernel's launch was found (KinetoData::launch_of).
enum class LaunchPick : uint8_t {
    None,        // no launch of its id
    Only,        // one process launched the id
    ByProcess,   // several did: the one that launched the other kernels of the kernel's GPU
    ByTime,      // several did and the GPU's process is not known: the latest launch before the kernel
};

// A runtime or driver call that launches kernels (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel,
// cudaGraphLaunch, ...) or begins or ends a stream capture (cudaStreamBeginCapture, ...), in file
// order: whether each launch's kernels are in the trace (kineto.cpp, say_launches_without_kernels).
enum class KCallKind : uint8_t { Launch, CaptureBegin, CaptureEnd };
struct KCall {
    int64_t ts = 0, pid = 0, correlation = -1;
    int64_t index = 0;   // position in traceEvents (for messages)
    uint32_t name = 0;
    KCallKind kind = KCallKind::Launch;
};

struct KRange {
    int64_t ts = 0, dur = 0, pid = 0;
    int64_t tid = 0;   // the CPU thread (an optimizer range's work is counted on it: steps.hpp)
    uint32_t name = 0;
    int32_t step = -1;
    bool gpu = false;
};

struct KinetoData {
    // A CPU thread: (pid, tid). Merged ranks' files may repeat thread ids across processes.
    using ThreadKey = std::pair<int64_t, int64_t>;
    KStrings strings;
    std::vector<KKernel> kernels;   // kernels, memcpy and memset
    std::vector<KMemory> memory;
    std::vector<KOp> ops;
    std::unordered_map<int64_t, KLaunch> launches;      // correlation -> runtime call (the last one read)
    std::unordered_map<int64_t, KLaunch> flow_starts;   // ac2g flow id -> start (the last one read)
    // Ids that calls of more than one process used (ranks merged into one file: ids are per
    // process): each process's last call of the id. A kernel of such an id takes the call of the
    // process that drove its GPU (lane_process), else the latest call before it (launch_of).
    std::unordered_map<int64_t, std::vector<KLaunch>> shared_launches, shared_flows;
    // A GPU lane (a kernel event's pid, its device) -> the process whose calls launched at least
    // 99% of its kernels whose id one process used; -1 where none did (two processes' kernels
    // under one pid and device). Filled by learn_lanes where some id is shared, empty otherwise.
    std::map<std::pair<int64_t, int32_t>, int64_t> lane_process;
    // Each process's lowest correlation id among its runtime and driver calls. CUPTI and roctracer
    // number a process's calls in the order they are made, so a GPU event of a lower id whose call
    // is not in the file was launched before recording began (kineto_steps.hpp, KernelSteps).
    std::map<int64_t, int64_t> first_call_id;
    // How many processes' calls of the kernel's id (one the calls of several used) began by its start.
    size_t calls_begun(const KKernel& kernel) const;
    std::vector<KRange> ranges;   // ProfilerStep#N and annotations
    // A loop's zero_grad and DataLoader ranges of category cpu_op or Operator (user_annotation ones
    // are in `ranges`): where step 0 begins when the steps are the optimizer's; no markers.
    std::vector<KRange> loop_ranges;
    std::vector<KCall> launch_calls;   // kernel launches and stream captures' begins and ends
    // Every runtime and driver call (ts, tid, pid, dur), with or without a correlation id: counted with
    // the ops in an optimizer range's work (steps.hpp), and where an open one ends (add_optimizer_steps).
    std::vector<KLaunch> runtime_calls;
    int64_t events = 0, flows = 0, host_memory_events = 0;
    // The processes (pids) whose runtime calls launched GPU work, at most kMaxLaunchPids of them:
    // one in a trace the profiler wrote; several in a file of several processes' traces (ranks
    // merged into one file). Correlation ids are per process: launches of one id by two of them.
    static constexpr size_t kMaxLaunchPids = 1024;
    std::set<int64_t> launch_pids;
    int64_t sycl_queue_lanes = 0;   // kernels and copies placed by args.sycl queue (Intel XPU)
    int64_t begin_end_events = 0;   // ph B or E halves: not read (only complete events are)
    EmptyValues empty_values;       // members written with no value, read as absent (kineto_repair.hpp)
    RawStrings raw_strings;         // characters of strings written unescaped, read as their string's
    StrayMember members_after_name;   // after an event's name, members of no trace event (kineto_repair.hpp)
    // Memcpy events whose name gives no direction (copy_direction), read as device to device, and
    // the first one's name: said in meta and a warning.
    int64_t copies_without_direction = 0;
    std::string first_copy_without_direction;
    // The profiler's [OutOfMemory] instants (PyTorch writes one where its allocator failed to
    // allocate: args Device Type, Device Id, Bytes asked for, Total Allocated, Total Reserved; no
    // allocation), how many and the first: said in meta and a warning, never left out in silence.
    int64_t out_of_memory = 0;
    KMemory first_out_of_memory;
    // Memcpys without args.device placed on their args.inDevice (peer copies: Kineto writes a
    // CUPTI peer-to-peer memcpy with fromDevice, inDevice, toDevice instead), said in meta; and
    // kernels, memcpys and memsets with neither, placed on device 0 (the first one's name kept):
    // said in meta and a warning.
    int64_t copies_on_in_device = 0, activities_without_device = 0;
    // Kernels, memcpys and memsets without args.stream placed on the stream their numeric 'tid'
    // names, and those with neither, on stream 0: said in meta and a warning.
    int64_t streams_from_tid = 0, activities_without_stream = 0;
    std::string first_without_device;
    // Counter events (ph C: hardware_counters, mtia_counters, xpu_scope_profiler, ...) by category:
    // the trace has no counters; said in meta and a warning, never left out in silence.
    std::map<std::string, int64_t, std::less<>> counter_categories;
    // [memory] events read as host memory whose Device Type is not the CPU's (0), or whose Device Id
    // is negative on an accelerator, by "Device Type T Id I": said in meta and a warning.
    std::map<std::string, int64_t, std::less<>> odd_memory_devices;
    // 'X' events of categories the mapping does not read (kineto_map.hpp), by category: device
    // work of other back-ends (MTIA's mtia_ccp_events, CUPTI's cuda_profiler_range) among them.
    // Said in meta and a warning, never left out in silence.
    std::map<std::string, int64_t, std::less<>> unread_categories;
    // Whether the file is PyTorch's profiler's at all: events the mapping reads or knows (a
    // category it reads or knows holds no work, [memory], [OutOfMemory], ac2g flows), and the
    // other events that are not metadata (ph M), by category ("(no category)" where 'cat' is
    // absent). A file with events and none of the profiler's is another tool's Chrome trace
    // (refuse_foreign_trace).
    int64_t profiler_events = 0, foreign_events = 0;
    std::map<std::string, int64_t, std::less<>> foreign_categories;
    // The first process named as TensorFlow's and JAX's profiler (XProf) names them in the trace
    // viewer's JSON ("/device:GPU:0", "/host:CPU"; ph M process_name), empty where none is.
    std::string xprof_process;
    // A process named "Ascend Hardware": the NPU's tasks in the timeline of Huawei's msprof, which
    // torch_npu's and MindSpore's profilers write as trace_view.json (with cpu_op events in
    // Kineto's shape, the tasks without 'cat'), refused by name by refuse_foreign_trace.
    bool ascend_npu = false;
    // A pid written as "CPU functions" or "CUDA functions": the autograd profiler's export before
    // Kineto (its events have no 'cat'), said by name by refuse_foreign_trace.
    bool autograd_legacy = false;
    // Events whose 'dur' is negative (read as 0 ns), and the first of them (its index in
    // traceEvents and name): said in meta, never silently.
    int64_t negative_durations = 0, first_negative = -1, first_negative_dur = 0;
    std::string first_negative_name;
    int64_t t_min = INT64_MAX;
    std::string device_name;
    int64_t device_memory = 0;
    int device_count = 0;
    int64_t device_id = -1;   // the id of the last deviceProperties entry (-1: none, or no id)
    int64_t rank = -1, world_size = -1;   // distributedInfo, -1 when the trace does not say
    // distributedInfo.pg_config: each process group's pg_name -> its ranks (global), as listed; a
    // group whose ranks are not all integers in [0, 2^24] is listed with none. Where a kernel's
    // args.Process Group Ranks is cut short (PyTorch writes 30 ranks, then "..."), its members.
    std::map<std::string, std::vector<int64_t>, std::less<>> pg_config;
    // The top-level profile_memory flag PyTorch writes when memory profiling was on (1; 0 when a
    // writer says off); -1 when the trace does not say (older PyTorch, or profiling off).
    int profile_memory = -1;
    // The top-level baseTimeNanoseconds (PyTorch 2.4 on): the Unix-epoch ns that every ts (us) is
    // written from; -1 when absent or not an integer in [0, 2^62].
    int64_t base_time_ns = -1;
    // The trace is ROCm's: a top-level roctracer_version, rocprofiler_version or hip_*_version key,
    // a runtime call named hip* (ROCm 6.2's traces write no version key), or a [memory] event of
    // Device Type 6 (HIP).
    // Its kernels carry the runtime's agent number as args.device (kineto.cpp, unify_kernel_device).
    bool rocm = false;
    bool has_rf_id = false;
    bool streamed = false;   // parsed by the reference (streamed) parse, not the windowed one
    int64_t second_part_from = -1;   // the event a second thread parsed from (-1: one thread did all)

    // Records a runtime call by its correlation id (a later call of the same process and id
    // replaces it; calls of other processes are kept beside it in shared_launches), counting its
    // process.
    void add_launch(int64_t correlation, const KLaunch& call);
    // Records an ac2g flow's start by its id, as add_launch does.
    void add_flow(int64_t id, const KLaunch& start);
    // Fills lane_process (called once the whole file is read).
    void learn_lanes();
    // The runtime call (else the ac2g flow start) that launched `kernel`, nullptr if none; `how`
    // says how it was chosen.
    const KLaunch* launch_of(const KKernel& kernel, LaunchPick* how = nullptr) const;
    // Sorts ops per thread and sets each op's enclosing op.
    void link_ops();
    // Innermost op on process `pid`'s thread `tid` containing time `at`, -1 if none.
    int32_t op_at(int64_t pid, int64_t tid, int64_t at) const;
    // The CPU op that launched kernel k (runtime call by correlation, else ac2g flow), -1.
    int32_t launcher(const KKernel& k) const;

private:
    std::map<ThreadKey, std::pair<size_t, size_t>> thread_ops_;   // -> [begin,end) in ops
};

// Throws mhc::Error naming the file on invalid JSON, truncated gzip, or a JSON that is not
// a Kineto trace.
// Gzip input: one event (or top-level member) may not expand past `max_input_size` bytes.
// A plain file may be parsed by two threads, each from one half of traceEvents; the result is
// the same as one thread's. Auto: where the file has at least kSplitFrom bytes and a core is
// idle now (on busy cores a second thread only adds its merge). Two: whatever its size.
constexpr uint64_t kSplitFrom = uint64_t{16} << 20;
KinetoData parse_kineto(const std::string& path, uint64_t max_input_size = UINT64_MAX,
                        ParseThreads threads = ParseThreads::Auto);

// Throws mhc::Error naming the file where the trace holds events and none that PyTorch's profiler
// writes: the Chrome trace JSON of another tool (TensorFlow's and JAX's profiler, a browser,
// ...), which would import as nothing.
void refuse_foreign_trace(const std::string& path, const KinetoData& data);
// What refuse_foreign_trace and detection say of an Ascend NPU profiler's trace_view.json.
std::string ascend_trace_message();

// The ProfilerStep#N ranges (CPU side) of a trace: the step a time falls in (-1 outside every
// step). Kernels take the step of their launch; execution-trace ops joined to Kineto ops, the
// step of their Kineto op when the execution trace names none.
class StepRanges {
public:
    explicit StepRanges(const std::vector<KRange>& ranges);
    int32_t at(int64_t time) const;
    size_t size() const { return steps_.size(); }

private:
    std::vector<const KRange*> steps_;   // by start
};

// Each process's own step ranges, kept before merge_process_steps joins those of one N across the
// processes of a file of merged ranks: a kernel is in the step its launch fell in among its own
// process's ranges. Looked up in the joined ones, a rank running behind another had the launches
// at the end of its step N (its optimizer's update) counted in step N+1, which the other rank had
// begun (param's ResNet trace as two ranks, the second 2 ms behind: its steps held 317, 317, 316,
// 321, 304, ... kernels where its own ranges hold 318, then 321 each).
class ProcessSteps {
public:
    explicit ProcessSteps(const std::vector<KRange>& ranges);   // ProfilerStep#N and step#k ranges
    // The step of `pid`'s own ranges that holds `time`; `joined`'s where `pid` has none.
    int32_t at(int64_t pid, int64_t time, const StepRanges& joined) const;
    // The most by which ranges of one N begin apart across processes (0 for one process).
    int64_t skew() const { return skew_; }

private:
    struct Span {
        int64_t start = 0, end = 0;
        int32_t step = -1;
    };
    std::map<int64_t, std::vector<Span>> own_;   // pid -> its step ranges, by start
    int64_t skew_ = 0;
};

}  // namespace mhc::trace::import
