// Kineto event -> KinetoData rows (kineto_map.hpp states the rules). The tokenizer
// (kineto_parse.cpp) calls map_event once per traceEvents entry.
#include "kineto_map.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quoted_name.hpp"
#include "steps.hpp"

namespace mhc::trace::import {

std::optional<CopyKind> copy_direction(std::string_view name) {
    // The word after "Memcpy ": CUPTI's (libkineto memcpyKindString; ROCm's rocprofiler names
    // HtoD, DtoH, DtoD, HtoH the same way) or Intel PTI's (Kineto's XPU plugin:
    // ptiViewMemcpyTypeToString, X2Y of M system memory, H USM host, D USM device, S USM shared).
    constexpr std::string_view prefix = "Memcpy ";
    if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
    std::string_view word = name.substr(prefix.size());
    word = word.substr(0, word.find(' '));
    static constexpr std::pair<std::string_view, CopyKind> cupti[] = {
        {"HtoD", CopyKind::H2D}, {"HtoA", CopyKind::H2D}, {"DtoH", CopyKind::D2H}, {"AtoH", CopyKind::D2H},
        {"DtoD", CopyKind::D2D}, {"AtoA", CopyKind::D2D}, {"AtoD", CopyKind::D2D}, {"DtoA", CopyKind::D2D},
        {"PtoP", CopyKind::P2P}, {"HtoH", CopyKind::H2H}};
    for (const auto& [kind_word, kind] : cupti)
        if (word == kind_word) return kind;
    // PTI: M and H are host memory, D and S the device's (USM shared memory counted as the
    // device's, as nsys counts unified-memory migrations by their direction).
    auto side = [](char letter) {
        return letter == 'M' || letter == 'H' ? 0 : letter == 'D' || letter == 'S' ? 1 : -1;
    };
    if (word.size() == 3 && word[1] == '2' && side(word[0]) >= 0 && side(word[2]) >= 0) {
        static constexpr CopyKind kinds[2][2] = {{CopyKind::H2H, CopyKind::H2D}, {CopyKind::D2H, CopyKind::D2D}};
        return kinds[side(word[0])][side(word[2])];
    }
    return std::nullopt;
}

CopyKind copy_kind_of(std::string_view name) { return copy_direction(name).value_or(CopyKind::D2D); }

namespace {
// Counts one more under `key` in a map a file fills: at most 32 keys by name (a file cannot grow
// it without bound), the rest under one.
void count_by_name(std::map<std::string, int64_t, std::less<>>& counts, std::string_view key, const char* rest) {
    auto it = counts.find(key);
    if (it == counts.end())
        it = counts.emplace(counts.size() < 32 ? std::string(key.substr(0, 80)) : std::string(rest), 0).first;
    ++it->second;
}

bool is_copy_category(std::string_view c) { return c == "gpu_memcpy" || c == "Memcpy"; }
bool is_memset_category(std::string_view c) { return c == "gpu_memset" || c == "Memset"; }
bool is_gpu_activity_category(std::string_view cat) {
    return cat == "kernel" || cat == "Kernel" || is_copy_category(cat) || is_memset_category(cat);
}
// Categories the mapping has no use for and that hold no device work: the profiler's own span
// (Trace), CUPTI overhead, host instants, and cuda_sync (waits on the GPU's lanes: a stream or
// event synchronization, not work). Other unread categories are counted and said.
bool is_known_unread_category(std::string_view cat) {
    return cat == "Trace" || cat == "overhead" || cat == "Overhead" || cat == "cpu_instant_event" ||
           cat == "cuda_sync" || cat == "xpu_sync" || cat == "cuda_event";
}

// Host-side runtime and driver calls that launch device work, with the correlation id their
// kernels carry: CUDA's (and PyTorch 1.8's names), ROCm's (written as cuda_runtime), Intel XPU's
// and PrivateUse1 back-ends' (libkineto's ActivityType names).
bool is_launch_category(std::string_view cat) {
    return cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime" || cat == "Driver" ||
           cat == "xpu_runtime" || cat == "xpu_driver" || cat == "privateuse1_runtime" || cat == "privateuse1_driver";
}

}   // namespace

// Calls that launch kernels, by the names of CUDA's runtime and driver APIs and of HIP's (with
// their suffixes: cudaLaunchKernelExC, cuLaunchKernelEx, cudaLaunchKernel_ptsz, ...), a CUDA
// graph's launch among them, and the calls that begin and end a stream capture (between them a
// launch is captured into a graph, not run).
std::optional<KCallKind> launch_call_kind(std::string_view name) {
    auto starts = [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
    for (std::string_view prefix : {"cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture"})
        if (starts(prefix)) return KCallKind::CaptureBegin;
    for (std::string_view prefix : {"cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture"})
        if (starts(prefix)) return KCallKind::CaptureEnd;
    for (std::string_view prefix :
         {"cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchCooperativeKernel",
          "cudaGraphLaunch", "cuGraphLaunch", "hipLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel",
          "hipExtLaunchKernel", "hipLaunchCooperativeKernel", "hipModuleLaunchCooperativeKernel", "hipGraphLaunch"})
        if (starts(prefix)) return KCallKind::Launch;
    return std::nullopt;
}

bool uses_copy_bytes(const KEvent& e) {
    return e.has_ts && e.ph == 'X' && (is_copy_category(e.cat) || is_memset_category(e.cat));
}

bool uses_gpu_placement(const KEvent& event) {
    return event.has_ts && event.ph == 'X' && is_gpu_activity_category(event.cat);
}

bool is_accelerator(int64_t device_type) {
    // c10::DeviceType (c10/core/DeviceType.h): CUDA 1, OPENGL 3, OPENCL 4, HIP 6 (ROCm builds),
    // FPGA 7, MAIA 8, XLA 9, Vulkan 10, Metal 11, XPU 12, MPS 13, HPU 15, VE 16, IPU 18, MTIA 19,
    // PrivateUse1 20 (out-of-tree back-ends: Ascend NPU, ...): a device's own memory. CPU (0) and
    // the CPU-side types (MKLDNN 2, IDEEP 5, Meta 14, Lazy 17) are host memory.
    constexpr std::array<int, 16> kDevices = {1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 18, 19, 20};
    return std::find(kDevices.begin(), kDevices.end(), device_type) != kDevices.end();
}

namespace {
// A kernel, memcpy or memset event: a KKernel (map_event's rules).
void map_gpu_activity(const KEvent& event, std::string_view category, KinetoData& data) {
    KKernel kernel;
    kernel.ts = event.ts;
    kernel.dur = std::max<int64_t>(0, event.dur);
    kernel.device = static_cast<int32_t>(event.device);
    if (!event.has_device && event.in_device >= 0) {   // a peer copy: on the device that ran it
        kernel.device = static_cast<int32_t>(event.in_device);
        ++data.copies_on_in_device;
    } else if (!event.has_device && data.activities_without_device++ == 0) {
        data.first_without_device = quoted_name(event.name);
    }
    kernel.stream = event.stream;
    if (!event.has_stream && event.sycl_queue >= 0) {   // an Intel XPU trace: the SYCL queue is the lane
        kernel.stream = event.sycl_queue;
        ++data.sycl_queue_lanes;
    } else if (!event.has_stream && event.tid_stream >= 0) {   // the lane's tid: where Kineto writes the stream too
        kernel.stream = event.tid_stream;
        ++data.streams_from_tid;
    } else if (!event.has_stream) {
        ++data.activities_without_stream;
    }
    kernel.correlation = event.corr;
    kernel.external = event.ext;
    kernel.tid = event.tid;
    kernel.pid = event.pid;
    kernel.name = data.strings.intern(event.name);
    kernel.registers = static_cast<int32_t>(event.regs);
    kernel.shared_mem = static_cast<int32_t>(event.smem);
    std::copy(event.grid, event.grid + 3, kernel.grid);
    std::copy(event.block, event.block + 3, kernel.block);
    kernel.is_copy = is_copy_category(category);
    kernel.is_memset = is_memset_category(category);
    kernel.bytes = event.bytes;
    if (kernel.is_copy) {
        const std::optional<CopyKind> kind = copy_direction(event.name);
        kernel.copy_kind = kind.value_or(CopyKind::D2D);
        if (!kind && data.copies_without_direction++ == 0) data.first_copy_without_direction = quoted_name(event.name);
    }
    if (kernel.is_memset) kernel.copy_kind = CopyKind::Memset;
    if (!event.group_name.empty()) kernel.group_name = data.strings.intern(event.group_name);
    if (!event.group_ranks.empty()) kernel.group_ranks = data.strings.intern(event.group_ranks);
    kernel.group_unreadable = event.group_unreadable;
    data.kernels.push_back(kernel);
    data.t_min = std::min(data.t_min, kernel.ts);
}
}   // namespace

namespace {
// The rest of map_event's rules; false where none reads the event (nor knows it holds no work).
bool map_timed_event(const KEvent& e, KinetoData& d);
}   // namespace

void map_event(const KEvent& e, KinetoData& d) {
    if (e.ph == 'M') {   // metadata: names of processes and threads (TensorFlow's and JAX's writer omits 'ts')
        if (d.xprof_process.empty() && e.name == "process_name" &&
            (e.arg_name.substr(0, 8) == "/device:" || e.arg_name.substr(0, 6) == "/host:"))
            d.xprof_process = quoted_name(e.arg_name);
        if (e.name == "process_name" && e.arg_name == "Ascend Hardware") d.ascend_npu = true;
        return;
    }
    if (!e.has_ts) return;
    if (map_timed_event(e, d)) {
        ++d.profiler_events;
    } else {
        ++d.foreign_events;
        count_by_name(d.foreign_categories, e.cat.empty() ? std::string_view("(no category)") : e.cat,
                      "(other categories)");
    }
}

namespace {
// A host op or a range (cpu_op, user_annotation, Operator, python_function,
// gpu_user_annotation): a step or annotation range, a loop range, and an op row.
void map_host_op(const KEvent& event, std::string_view category, KinetoData& data) {
    constexpr std::string_view kStepPrefix = "ProfilerStep#";   // then the step's number
    const bool step = std::string_view(event.name).starts_with(kStepPrefix);
    // An optimizer's step range is kept whatever its category (cpu_op and Operator before
    // about PyTorch 1.10): steps come from it where the trace has no ProfilerStep#N.
    if (category == "gpu_user_annotation" || category == "user_annotation" || step || is_optimizer_step(event.name)) {
        KRange range;
        range.ts = event.ts;
        range.dur = std::max<int64_t>(0, event.dur);
        range.name = data.strings.intern(event.name);
        range.gpu = category == "gpu_user_annotation";
        range.pid = event.pid;
        range.tid = event.tid;
        int64_t step_number = -1;
        if (step && !range.gpu &&
            parse_int(event.name.data() + kStepPrefix.size(), event.name.size() - kStepPrefix.size(), step_number) &&
            step_number >= 0 && step_number <= INT32_MAX)
            range.step = static_cast<int32_t>(step_number);
        data.ranges.push_back(range);
        data.t_min = std::min(data.t_min, range.ts);
    } else if (is_loop_range(event.name)) {   // PyTorch 1.8's Operator, cpu_op: not a marker
        KRange loop;
        loop.ts = event.ts;
        loop.dur = std::max<int64_t>(0, event.dur);
        loop.name = data.strings.intern(event.name);
        loop.pid = event.pid;
        loop.tid = event.tid;   // its thread's ops place step 0 (steps.hpp)
        data.loop_ranges.push_back(loop);
    }
    if (category != "gpu_user_annotation" && category != "python_function") {
        KOp op;
        op.ts = event.ts;
        op.dur = std::max<int64_t>(0, event.dur);
        op.tid = event.tid;
        op.external = event.ext;
        op.rf_id = event.rf_id;
        op.ev_idx = event.ev_idx;
        op.pid = event.pid;
        op.seq = event.seq;
        if (event.rf_id >= 0) data.has_rf_id = true;
        op.name = data.strings.intern(event.name);
        data.ops.push_back(op);
    }
}

// A [memory] instant: one allocation or free on a device (or the host), in the profiler's order.
void map_memory_event(const KEvent& event, KinetoData& data) {
    KMemory memory;
    memory.ts = event.ts;
    memory.addr = event.addr;
    memory.bytes = event.mem_bytes;
    memory.total = event.total;
    memory.reserved = event.reserved;
    memory.has_addr = event.has_addr;
    memory.index = data.events - 1;   // the tokenizer counted this event already
    memory.pid = event.pid;
    memory.device = is_accelerator(event.dev_type) && event.dev_id >= 0 ? static_cast<int32_t>(event.dev_id) : -1;
    if (memory.device < 0) ++data.host_memory_events;
    if (memory.device < 0 && event.dev_type != 0)   // host memory by another rule than Device Type 0 (-1: none written)
        count_by_name(data.odd_memory_devices,
                      "Device Type " + std::to_string(event.dev_type) + " Id " + std::to_string(event.dev_id),
                      "(other Device Types and Ids)");
    if (event.dev_type == 6) data.rocm = true;   // c10::DeviceType HIP: memory of a ROCm build's GPU
    data.memory.push_back(memory);
    data.t_min = std::min(data.t_min, memory.ts);
}

bool map_timed_event(const KEvent& e, KinetoData& d) {
    std::string_view c = e.cat;
    if (e.ph == 'X' && e.dur < 0 && d.negative_durations++ == 0) {
        d.first_negative = d.events - 1;   // the tokenizer counted this event already
        d.first_negative_dur = e.dur;
        d.first_negative_name = quoted_name(e.name);
    }
    if (e.ph == 'X') {
        if (is_gpu_activity_category(c)) {
            map_gpu_activity(e, c, d);
        } else if (is_launch_category(c)) {
            if (e.corr >= 0) d.add_launch(e.corr, KLaunch{e.ts, e.tid, e.pid});
            d.runtime_calls.push_back(KLaunch{e.ts, e.tid, e.pid, std::max<int64_t>(0, e.dur)});
            if (e.name.substr(0, 3) == "hip") d.rocm = true;   // hipLaunchKernel, ...: a ROCm trace
            if (auto kind = launch_call_kind(e.name))
                d.launch_calls.push_back(KCall{e.ts, e.pid, e.corr, d.events - 1, d.strings.intern(e.name), *kind});
        } else if (c == "cpu_op" || c == "user_annotation" || c == "Operator" || c == "python_function" ||
                   c == "gpu_user_annotation") {
            map_host_op(e, c, d);
        } else if (!is_known_unread_category(c)) {
            count_by_name(d.unread_categories, c.empty() ? std::string_view("(no category)") : c,
                          "(other categories)");
            return false;
        }
    } else if ((e.ph == 'i' || e.ph == 'I') && e.name == "[memory]" && e.has_mem) {
        map_memory_event(e, d);
    } else if ((e.ph == 'i' || e.ph == 'I') && e.name == "[OutOfMemory]") {
        if (d.out_of_memory++ == 0) {   // the first one's device, request and totals, for the message
            KMemory& oom = d.first_out_of_memory;
            oom.ts = e.ts;
            oom.bytes = e.mem_bytes;
            oom.total = e.total;
            oom.reserved = e.reserved;
            oom.index = d.events - 1;
            oom.pid = e.pid;
            oom.device = is_accelerator(e.dev_type) && e.dev_id >= 0 ? static_cast<int32_t>(e.dev_id) : -1;
        }
    } else if (e.ph == 'C') {   // counters: hardware_counters, mtia_counters, xpu_scope_profiler, ...
        count_by_name(d.counter_categories, c.empty() ? std::string_view("(no category)") : c, "(other categories)");
        return false;
    } else if (e.ph == 'B' || e.ph == 'E') {
        ++d.begin_end_events;
        return false;
    } else if (e.ph == 's' && (c == "ac2g" || c == "async_cpu_to_gpu")) {
        ++d.flows;
        d.add_flow(e.id, KLaunch{e.ts, e.tid, e.pid});
    } else if (e.ph == 'f' && (c == "ac2g" || c == "async_cpu_to_gpu")) {
        ++d.flows;
    } else if ((e.ph == 'i' || e.ph == 'I') &&
               (e.name == "Iteration Start: PyTorch Profiler" || e.name == "Record Window End")) {
        // the profiler's own marks of its window (no category): no row
    } else if (is_known_unread_category(c) || c == "fwdbwd" || c == "async" || c == "async_gpu") {
        // Kineto's instants (cpu_instant_event) and flows of its own (forward-backward links,
        // PyTorch 1.9's async flows): no row, but the profiler's
    } else {
        return false;
    }
    return true;
}
}   // namespace

void KinetoData::link_ops() {
    // Ops that start in one microsecond (PyTorch up to 1.13 writes whole microseconds) are put in
    // the profiler's own start order where every op of the thread has its index (Ev Idx; 1.13's
    // Profiler Event Index), which it gives in order of the start's nanosecond: by duration alone,
    // an op of 0 us and a longer one begun after it in that microsecond were swapped, the longer
    // taken as the other's parent. Elsewhere the longer (the enclosing op) comes first, and ops
    // alike in both keep the file's order: std::sort's order of them was arbitrary (a 1.13 thread
    // whose parent and child start and end in one microsecond came out child first).
    std::map<ThreadKey, bool> thread_indexed;
    auto thread_of = [&, last = thread_indexed.end()](const KOp& op) mutable {   // runs of one thread: one lookup
        if (last == thread_indexed.end() || last->first != ThreadKey{op.pid, op.tid})
            last = thread_indexed.emplace(ThreadKey{op.pid, op.tid}, true).first;
        return last;
    };
    for (const KOp& op : ops) {
        auto it = thread_of(op);
        it->second = it->second && op.ev_idx >= 0;
    }
    std::vector<uint8_t> indexed(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) indexed[i] = thread_of(ops[i])->second ? 1 : 0;
    // A thread is a process's: merged ranks' files may repeat thread ids across processes.
    auto before = [&](size_t lhs, size_t rhs) {
        const KOp &one = ops[lhs], &other = ops[rhs];
        if (one.pid != other.pid) return one.pid < other.pid;
        if (one.tid != other.tid) return one.tid < other.tid;
        if (one.ts != other.ts) return one.ts < other.ts;
        return indexed[lhs] ? one.ev_idx < other.ev_idx : one.dur > other.dur;
    };
    bool sorted = true;
    for (size_t i = 1; i < ops.size() && sorted; ++i) sorted = !before(i, i - 1);
    if (!sorted) {
        std::vector<size_t> order(ops.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), before);
        std::vector<KOp> moved;
        moved.reserve(ops.size());
        for (size_t from : order) moved.push_back(ops[from]);
        ops = std::move(moved);
    }
    thread_ops_.clear();
    std::vector<int32_t> stack;
    for (size_t i = 0; i < ops.size(); ++i) {
        const ThreadKey thread{ops[i].pid, ops[i].tid};
        if (i == 0 || thread != ThreadKey{ops[i - 1].pid, ops[i - 1].tid}) {
            stack.clear();
            thread_ops_[thread] = {i, i};
        }
        thread_ops_[thread].second = i + 1;
        while (!stack.empty() && ops[stack.back()].ts + ops[stack.back()].dur <= ops[i].ts) stack.pop_back();
        ops[i].parent = stack.empty() ? -1 : stack.back();
        stack.push_back(static_cast<int32_t>(i));
    }
}

int32_t KinetoData::op_at(int64_t pid, int64_t tid, int64_t at) const {
    auto thread = thread_ops_.find(ThreadKey{pid, tid});
    if (thread == thread_ops_.end()) return -1;
    auto first = ops.begin() + static_cast<long>(thread->second.first);
    auto last = ops.begin() + static_cast<long>(thread->second.second);
    auto after = std::upper_bound(first, last, at, [](int64_t time, const KOp& op) { return time < op.ts; });
    if (after == first) return -1;
    auto inner = static_cast<int32_t>(after - ops.begin() - 1);
    while (inner >= 0 && !(ops[inner].ts <= at && at <= ops[inner].ts + ops[inner].dur)) inner = ops[inner].parent;
    return inner;
}

int32_t KinetoData::launcher(const KKernel& k) const {
    const KLaunch* call = launch_of(k);
    return call == nullptr ? -1 : op_at(call->pid, call->tid, call->ts);
}

}  // namespace mhc::trace::import
