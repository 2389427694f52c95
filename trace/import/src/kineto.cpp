// Kineto Chrome-trace JSON -> trace: kernels, memcpy/memset, [memory] events as allocations,
// ProfilerStep#N as step markers, annotations as range markers.
#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "kineto_groups.hpp"
#include "kineto_memory.hpp"
#include "kineto_write.hpp"
#include "kineto_steps.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/comm_kernels.hpp"

namespace mhc::trace::import {

namespace {

// The trace keeps one kernel at a time per stream (mhc check, rule stream-overlap), but Kineto
// puts kernels on one stream that overlap: by a few ns of clock jitter, and by microseconds where
// they really ran at once, the parallel branches of a CUDA graph (all its kernels carry the
// correlation id of the one cudaGraphLaunch, and the stream it was launched on) or a kernel
// started early by programmatic dependent launch. Such a start moves to the previous kernel's end
// (its end stays); how many, by how much, and how many of them came from one graph launch is said
// in meta and, since the kernel time is no longer the file's, in a warning.
void clamp_stream_overlaps(KinetoData& data, Result& result) {
    std::vector<size_t> order;
    for (size_t index = 0; index < data.kernels.size(); ++index)
        if (!data.kernels[index].is_copy && !data.kernels[index].is_memset) order.push_back(index);
    auto by_stream = [&](size_t lhs, size_t rhs) {
        const auto &first = data.kernels[lhs], &second = data.kernels[rhs];
        if (first.device != second.device) return first.device < second.device;
        if (first.stream != second.stream) return first.stream < second.stream;
        return first.ts < second.ts;
    };
    if (!std::is_sorted(order.begin(), order.end(), by_stream)) std::stable_sort(order.begin(), order.end(), by_stream);
    int64_t clamped = 0, moved_ns = 0, largest_ns = 0;
    std::vector<int64_t> clamped_correlations;
    for (size_t j = 1; j < order.size(); ++j) {
        auto &prev = data.kernels[order[j - 1]], &kernel = data.kernels[order[j]];
        if (prev.device != kernel.device || prev.stream != kernel.stream || kernel.ts >= prev.ts + prev.dur) continue;
        int64_t end = kernel.ts + kernel.dur, by = prev.ts + prev.dur - kernel.ts;
        kernel.ts = prev.ts + prev.dur;
        kernel.dur = std::max<int64_t>(0, end - kernel.ts);
        ++clamped;
        moved_ns += std::min(by, end - kernel.ts + by);   // the kernel time lost: the overlap, at most the kernel
        largest_ns = std::max(largest_ns, by);
        clamped_correlations.push_back(kernel.correlation);
    }
    result.meta["kineto.kernel_starts_clamped"] = std::to_string(clamped);
    if (clamped == 0) return;
    // Kernels of one CUDA graph launch share its correlation id (a plain launch has one kernel).
    std::unordered_map<int64_t, int32_t> per_correlation;
    for (size_t index : order) ++per_correlation[data.kernels[index].correlation];
    int64_t in_graphs = 0;
    for (int64_t correlation : clamped_correlations) in_graphs += correlation >= 0 && per_correlation[correlation] > 1;
    std::string said = std::to_string(clamped) +
                       " kernels started before the previous kernel on their stream ended (by up to " +
                       std::to_string(largest_ns) + " ns; " + std::to_string(moved_ns) + " ns of kernel time in all; " +
                       std::to_string(in_graphs) +
                       " of them launched with other kernels under one correlation id, a CUDA graph's)";
    result.meta["kineto.kernel_clamp"] = said;
    result.warnings.push_back(
        said + ": their starts were moved to that end, since a trace keeps one kernel at a time per stream");
}

// A file of several processes' traces can hold kernels of two processes on one device number
// (ranks of two nodes merged, each on its GPU 0, their pids made distinct by the merging tool, as
// "[TP08] 0"; or processes sharing a GPU). Kineto writes a GPU's kernels under one pid, so a
// device whose kernels, copies and memsets carry several pids holds several processes' work: the
// k-th pid's (k = 0, 1, ... by pid) streams become k * 2^40 + stream, so that each keeps its own
// lanes instead of being cut short behind the other's (as nsys exports of several processes are
// read). Said in meta and a warning.
void separate_process_streams(KinetoData& data, Result& result) {
    std::map<int32_t, std::set<int64_t>> pids;   // device -> the pids of its kernels
    for (const KKernel& kernel : data.kernels) pids[kernel.device].insert(kernel.pid);
    int64_t moved = 0;
    std::string devices;
    for (KKernel& kernel : data.kernels) {
        const std::set<int64_t>& of_device = pids[kernel.device];
        if (of_device.size() < 2) continue;
        const auto rank = static_cast<int64_t>(std::distance(of_device.begin(), of_device.find(kernel.pid)));
        if (rank == 0) continue;
        kernel.stream = (rank << 40) + (kernel.stream & ((int64_t{1} << 40) - 1));
        ++moved;
    }
    for (const auto& [device, of_device] : pids)
        if (of_device.size() > 1)
            devices += (devices.empty() ? "" : ", ") + std::to_string(device) + " (" +
                       std::to_string(of_device.size()) + " pids)";
    if (moved == 0) return;
    std::string said = "kernels, copies and memsets of several pids on device " + devices +
                       ": processes' traces merged into one file; " + std::to_string(moved) +
                       " of them were given streams k * 2^40 + stream (k: the pid's rank on its device), so each "
                       "process keeps its own lanes";
    said_and_warned(result, "kineto.device_processes", said);
}

// Correlation (or flow) ids that calls of several processes used: how many, and how their
// kernels found their launch (by the process that drove the kernel's GPU, or, where that is not
// known, by time), in meta; a warning only where some kernel had to be placed by time.
void say_shared_ids(const KinetoData& data, const std::array<int64_t, 4>& picked, Result& result) {
    const size_t shared = data.shared_launches.size() + data.shared_flows.size();
    if (shared == 0) return;
    const int64_t by_process = picked[static_cast<size_t>(LaunchPick::ByProcess)];
    const int64_t by_time = picked[static_cast<size_t>(LaunchPick::ByTime)];
    std::string said = std::to_string(shared) +
                       " correlation ids were used by calls of more than one process (ids are per process): " +
                       std::to_string(by_process) +
                       " kernels of such ids joined to the launch of the process that launched the other kernels of "
                       "their GPU, " +
                       std::to_string(by_time) + " to the latest launch before them (their GPU's process not known)";
    result.meta["kineto.shared_correlations"] = said;
    if (by_time > 0) result.warnings.push_back(said + ": those kernels' steps may be another process's");
}

void say_launches_without_kernels(const KinetoData& data, Result& result);   // below

}   // namespace

int64_t kineto_base(const KinetoData& d) {
    int64_t b = d.t_min;
    for (const auto& o : d.ops) b = std::min(b, o.ts);
    return b == INT64_MAX ? 0 : b;
}

namespace {

// "3 a, 1 b" of counts by name.
std::string counts_text(const std::map<std::string, int64_t, std::less<>>& counts, int64_t* total = nullptr) {
    std::string text;
    for (const auto& [name, count] : counts) {
        text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + name;
        if (total != nullptr) *total += count;
    }
    return text;
}

// Where device work without args.device was placed, [memory] events read as host memory by
// another rule than Device Type 0, and the counter events, which become no row: meta, and a
// warning for all but the peer copies (read as the file says).
void say_placement_and_counters(const KinetoData& data, Result& result) {
    if (data.copies_on_in_device > 0)
        result.meta["kineto.copies_on_in_device"] =
            std::to_string(data.copies_on_in_device) +
            " memcpys without args.device (peer copies: args.fromDevice, inDevice, toDevice) on their args.inDevice";
    if (data.streams_from_tid > 0)
        said_and_warned(result, "kineto.streams_from_tid",
                        std::to_string(data.streams_from_tid) +
                            " kernels, memcpys or memsets without args.stream were placed on the stream their 'tid' "
                            "names (Kineto writes both; a converter from another tool may write the tid only)");
    if (data.activities_without_stream > 0)
        said_and_warned(result, "kineto.without_stream",
                        std::to_string(data.activities_without_stream) +
                            " kernels, memcpys or memsets without args.stream or a 'tid' naming a stream were placed on "
                            "stream 0: work of several streams is made serial there (kineto.kernel_clamp says how "
                            "much was moved)");
    if (data.activities_without_device > 0) {
        const std::string said = std::to_string(data.activities_without_device) +
                                 " kernels, memcpys or memsets without args.device (the first: '" +
                                 data.first_without_device + "') were placed on device 0";
        said_and_warned(result, "kineto.without_device", said);
    }
    if (!data.odd_memory_devices.empty()) {
        int64_t total = 0;
        const std::string text = counts_text(data.odd_memory_devices, &total);
        result.meta["kineto.memory_read_as_host"] = text;
        result.warnings.push_back(std::to_string(total) + " [memory] events were read as host memory (device -1) " +
                                  "though not of Device Type 0, the CPU's (" + text +
                                  "): mhc knows no accelerator by that type, or its Device Id is negative");
    }
    if (!data.counter_categories.empty()) {
        int64_t total = 0;
        const std::string text = counts_text(data.counter_categories, &total);
        result.meta["kineto.counter_events"] = text;
        result.warnings.push_back(std::to_string(total) + " counter events (ph C: " + text +
                                  ") were left out: a trace holds no counters");
    }
}

// What the file holds that became no row, or not the row it names, said in meta and warnings:
// negative durations, begin/end halves, memcpys without a direction, out-of-memory events and
// the categories mhc does not read.
void say_what_was_not_read(const KinetoData& data, Result& result) {
    if (data.negative_durations > 0)
        result.meta["kineto.negative_durations"] =
            std::to_string(data.negative_durations) +
            " events with a negative 'dur', read as 0 ns (the first: traceEvents[" +
            std::to_string(data.first_negative) + "] '" + data.first_negative_name + "', dur " +
            std::to_string(data.first_negative_dur / 1000) + " us)";
    if (data.begin_end_events > 0) {
        // Chrome's trace format allows a duration as a B and an E event; Kineto writes complete
        // (X) events only, so a file of halves comes from another writer: say what was not read.
        result.meta["kineto.begin_end_events"] = std::to_string(data.begin_end_events);
        result.warnings.push_back(std::to_string(data.begin_end_events) +
                                  " events written as begin/end halves (ph B, E) were left out: only complete events "
                                  "(ph X, as PyTorch's profiler writes them) become kernels, copies and ranges");
    }
    if (data.copies_without_direction > 0) {
        const std::string said = std::to_string(data.copies_without_direction) +
                                 " memcpy events whose name gives no direction (the first: '" +
                                 data.first_copy_without_direction + "') were read as device to device";
        said_and_warned(result, "kineto.copies_without_direction", said);
    }
    if (data.out_of_memory > 0) {
        const KMemory& oom = data.first_out_of_memory;
        std::string said = std::to_string(data.out_of_memory) +
                           (data.out_of_memory == 1 ? " allocation" : " allocations") +
                           " failed while the profiler recorded ([OutOfMemory] events; the first: traceEvents[" +
                           std::to_string(oom.index) + "], " +
                           (oom.device >= 0 ? "device " + std::to_string(oom.device) : std::string("host memory")) +
                           ", " + std::to_string(oom.bytes) + " bytes asked for";
        if (oom.total >= 0) said += ", Total Allocated " + std::to_string(oom.total);
        if (oom.reserved >= 0) said += ", Total Reserved " + std::to_string(oom.reserved);
        said += ")";
        result.meta["kineto.out_of_memory"] = said;
        result.warnings.push_back(said +
                                  ": the run did not fit; the trace holds what was allocated, not what was asked for");
    }
    say_placement_and_counters(data, result);
    if (!data.unread_categories.empty()) {
        int64_t total = 0;
        const std::string unread = counts_text(data.unread_categories, &total);
        result.meta["kineto.unread_events"] = unread;
        result.warnings.push_back(std::to_string(total) + " events of categories mhc does not read were left out (" +
                                  unread + "): only kernel, gpu_memcpy and gpu_memset events become device rows");
    }
}

// torch.distributed's collectives (CPU ops named c10d::..., one per call) in a trace without one
// NCCL kernel (comm_kernel_op): a gloo job, or any backend whose collectives run on the host.
// `simulate --ranks` couples ranks at NCCL kernels only, so such ranks run uncoupled: said in
// meta and a warning, never left to the count of cross-rank kernels alone.
void say_host_collectives(const KinetoData& data, Result& result) {
    std::map<std::string, int64_t, std::less<>> ops;
    for (const auto& op : data.ops) {
        const std::string& name = data.strings.list[op.name];
        if (name.rfind("c10d::", 0) == 0) ++ops[name];
    }
    if (ops.empty()) return;
    for (const auto& kernel : data.kernels)
        if (!kernel.is_copy && !kernel.is_memset && !comm_kernel_op(data.strings.list[kernel.name]).empty()) return;
    int64_t total = 0;
    const std::string text = counts_text(ops, &total);
    said_and_warned(result, "kineto.host_collectives",
                    std::to_string(total) + " collective ops of torch.distributed (" + text +
                        ") and no NCCL kernel: the collectives ran on the host (gloo, or another backend without "
                        "NCCL kernels); simulate --ranks couples ranks at NCCL kernels only, so this rank runs "
                        "uncoupled from the others");
}

}   // namespace

void write_kineto_timeline(KinetoData& d, int64_t base, Rows& w, Result& r,
                           const std::function<void(size_t, int64_t)>& on_kernel) {
    // Kineto writes most events in time order: checking first saves sorting 100-byte structs.
    auto by_ts = [](const auto& a, const auto& b) { return a.ts < b.ts; };
    if (!std::is_sorted(d.kernels.begin(), d.kernels.end(), by_ts))
        std::stable_sort(d.kernels.begin(), d.kernels.end(), by_ts);
    // Steps from ProfilerStep#N (CPU side): a kernel belongs to the step its launch fell in.
    add_optimizer_steps(d, base, r);
    const ProcessSteps own_steps(d.ranges);   // before the join: each process's own ranges
    merge_process_steps(d, own_steps.skew(), r);
    const StepRanges steps(d.ranges);
    KernelSteps kernel_steps(d, own_steps, steps);
    separate_process_streams(d, r);
    clamp_stream_overlaps(d, r);
    write_process_groups(d, r);   // the streams are final
    std::vector<int64_t> name_ids(d.strings.list.size(), -1);
    auto name = [&](uint32_t s) {
        if (name_ids[s] < 0) name_ids[s] = w.intern(d.strings.list[s]);
        return name_ids[s];
    };
    int64_t kid = 0, cid = 0, linked = 0, nkern = 0;
    std::array<int64_t, 4> picked{};   // kernels by LaunchPick
    for (size_t i = 0; i < d.kernels.size(); ++i) {
        const KKernel& k = d.kernels[i];
        if (k.is_copy || k.is_memset) {
            Copy c;
            c.id = ++cid;
            c.device = k.device;
            c.stream = k.stream;
            c.kind = k.copy_kind;
            c.bytes = std::max<int64_t>(0, k.bytes);
            c.t_start = k.ts - base;
            c.t_end = k.ts + k.dur - base;
            w.add(c);
            continue;
        }
        ++nkern;
        Kernel row;
        row.id = ++kid;
        row.device = k.device;
        row.stream = k.stream;
        row.name = name(k.name);
        row.t_start = k.ts - base;
        row.t_end = k.ts + k.dur - base;
        std::copy(k.grid, k.grid + 3, row.grid);
        std::copy(k.block, k.block + 3, row.block);
        row.shared_mem = k.shared_mem;
        row.registers = k.registers;
        row.correlation = k.correlation;
        LaunchPick how = LaunchPick::None;
        const KLaunch* call = d.launch_of(k, &how);
        linked += call != nullptr;
        picked[static_cast<size_t>(how)] += 1;
        row.step = kernel_steps.of(k, call);
        w.add(row);
        if (on_kernel) on_kernel(i, row.id);
    }
    int64_t mid = 0;
    for (const auto& g : d.ranges) {
        Marker m;
        m.id = ++mid;
        m.name = name(g.name);
        m.t_start = g.ts - base;
        m.t_end = g.ts + g.dur - base;
        m.kind = g.step >= 0 ? MarkerKind::Step : MarkerKind::Range;
        m.index = g.step;
        w.add(m);
    }
    r.meta["timing"] = "exact";
    r.meta["kineto.kernels"] = std::to_string(nkern);
    r.meta["kineto.copies"] = std::to_string(cid);
    r.meta["kineto.kernels_linked_to_launch"] = std::to_string(linked);
    r.meta["kineto.flow_events"] = std::to_string(d.flows);
    r.meta["kineto.step_markers"] = std::to_string(steps.size());
    say_shared_ids(d, picked, r);
    kernel_steps.say(r);
    if (d.sycl_queue_lanes > 0)
        r.meta["kineto.sycl_queues"] = std::to_string(d.sycl_queue_lanes) +
                                       " kernels and copies on the stream of their args.sycl queue (an Intel XPU "
                                       "trace: no args.stream)";
    // The job identity the profiler recorded (docs/trace-format.md, "Multi-rank traces"): no job
    // id; its clock is the Unix epoch's (the wall clock every rank of a job reads, NTP-synchronised
    // across hosts): time 0 (base) lies at baseTimeNanoseconds + base on it, written where that is
    // a time of the years 2000 to 2100 (a trace whose ts start near 0 was rewritten by some tool).
    if (d.rank >= 0) r.meta["rank"] = std::to_string(d.rank);
    if (d.world_size >= 1) r.meta["world_size"] = std::to_string(d.world_size);
    say_host_collectives(d, r);
    int64_t origin = 0;
    constexpr int64_t kYear2000 = INT64_C(946684800) * 1000000000, kYear2100 = INT64_C(4102444800) * 1000000000;
    if (!__builtin_add_overflow(d.base_time_ns >= 0 ? d.base_time_ns : 0, base, &origin) && origin >= kYear2000 &&
        origin < kYear2100)
        r.meta["time_origin_ns"] = std::to_string(origin);
    say_what_was_not_read(d, r);
    say_launches_without_kernels(d, r);
    if (!d.device_name.empty()) r.meta["device_name"] = d.device_name;
    if (d.device_memory > 0) r.meta["device_memory"] = std::to_string(d.device_memory);
}

namespace {

void write_memory_meta(const KMemoryResult& mem, Result& r) {
    auto n = [](int64_t v) { return std::to_string(v); };
    r.meta["reconstructed_blocks"] = n(mem.reconstructed);
    r.meta["reconstructed_bytes.unattributed"] = n(mem.unattributed);
    bool by_size = std::any_of(mem.devices.begin(), mem.devices.end(), [](const KMemoryDevice& v) { return v.by_size; });
    if (!mem.devices.empty()) {
        r.meta["pairing"] = by_size ? "size" : "address";
        r.meta["pairing.frees_by_address"] = n(mem.by_address);
        r.meta["pairing.frees_by_size"] = n(mem.by_size);
        r.meta["kineto.frees_split"] = n(mem.split);
        r.meta["kineto.memory_events_moved"] = n(mem.moved);
        r.meta["kineto.memory_events_max_move_ns"] = n(mem.max_move);
    }
    if (mem.zero_bytes) r.meta["kineto.memory_events_zero_bytes"] = n(mem.zero_bytes);
    std::string later;   // later processes of a device: their allocators' own address spaces
    for (const auto& space : mem.devices)
        if (space.process > 0 && !space.mapped)
            later += (later.empty() ? "" : ", ") + std::string("pid ") + n(space.pid) + " on device " + n(space.device);
    if (!later.empty())
        r.meta["kineto.memory_processes"] =
            "[memory] events of several processes on one device (" + later +
            "): each process's paired, its baseline and Total Allocated its own (meta keys .deviceN.pidP); their " +
            n(mem.unaddressed) + " allocations have address 0, as the trace holds one address space per device";
    if (mem.mapping_events > 0)
        r.meta["kineto.mapped_memory"] =
            n(mem.mapping_events) +
            " host [memory] events are PyTorch's file and shared-memory mappings (MapAllocator: Total Allocated 0, "
            "Total Reserved the mapping's size; a DataLoader worker's batches, share_memory_(), from_file, "
            "load(mmap=True)): host memory, paired apart from the CPU allocator's (meta keys .device-1.mapped), "
            "their Total Allocated not the CPU allocator's running total";
    for (const auto& v : mem.devices) {
        std::string dev = memory_space_key(v);
        r.meta["kineto.baseline" + dev] =
            n(v.baseline) + (v.baseline_recorded ? " (Total Allocated before the first event)"
                                                 : " (the least the signed sum of Bytes requires)");
        if (v.reserved_peak >= 0) r.meta["kineto.reserved_peak" + dev] = n(v.reserved_peak);
        // What the allocator held when the profiler's first event came: the caching model starts there.
        if (v.reserved_first >= 0) r.meta["kineto.reserved_first" + dev] = n(v.reserved_first);
        if (v.checked == 0) continue;
        std::string off = total_allocated_disagreement(v);
        r.meta["kineto.total_allocated" + dev] = off.empty() ? "agrees at all " + n(v.checked) + " events" : off;
    }
}

// ROCm traces number a kernel's device by the runtime's agent (2, 9, ...: the CPU agents come
// first) and a [memory] event's, like deviceProperties, by the process's device index (0): with
// one GPU on each side and no kernel on the memory's device, they are the same GPU, and the
// kernels (and copies) take the memory's number. Without GPU [memory] events, a deviceProperties
// list of one GPU gives that number the same way. Where neither tells, a ROCm trace's kernels
// keep the agent number, and meta and a warning say so (rank 0 of an 8-GPU job on agent 2).
// Other traces (CUDA, XPU, ...) number kernels and [memory] events by the same device index, so a
// kernel on another device than every [memory] event really ran there: nothing is renumbered.
void unify_kernel_device(KinetoData& d, Result& r) {
    if (!d.rocm) return;
    std::set<int32_t> mem, kern;
    for (const auto& m : d.memory)
        if (m.device >= 0) mem.insert(m.device);
    for (const auto& k : d.kernels) kern.insert(k.device);
    const char* why = " (one GPU: kernels numbered by the runtime, [memory] by Device Id)";
    if (mem.empty() && d.device_count == 1 && d.device_id >= 0 && d.device_id <= INT32_MAX) {
        mem.insert(static_cast<int32_t>(d.device_id));
        why = " (one GPU in deviceProperties, numbered by the process; kernels by the runtime's agent)";
    }
    bool one_each = mem.size() == 1 && kern.size() == 1;
    if (one_each && *mem.begin() == *kern.begin()) return;
    if (one_each) {
        int32_t from = *kern.begin(), to = *mem.begin();
        for (auto& kernel : d.kernels) kernel.device = to;
        r.meta["kineto.kernel_device"] = std::to_string(from) + " -> " + std::to_string(to) + why;
        return;
    }
    if (kern.empty()) return;
    auto list = [](const std::set<int32_t>& devices) {
        std::string text;
        for (int32_t device : devices) text += (text.empty() ? "" : ", ") + std::to_string(device);
        return text;
    };
    std::string why_not = d.device_count > 0 ? std::to_string(d.device_count) + " GPUs in deviceProperties"
                                             : std::string("no deviceProperties");
    if (!mem.empty()) why_not += "; [memory] on devices " + list(mem);
    std::string said = list(kern) + " kept: ROCm numbers kernels by the runtime's agent (CPU agents first), not by " +
                       "the process's device index, which the file does not tell (" + why_not + ")";
    r.meta["kineto.kernel_device"] = said;
    r.warnings.push_back("kernels and copies on device " + said);
}

}  // namespace

namespace {

// A trace recorded with memory profiling whose [memory] events are all the host's while GPUs ran
// kernels or copies: the GPUs' allocations were not recorded (PyTorch's caching allocator reports
// them to the profiler; with it turned off, PYTORCH_NO_CUDA_MEMORY_CACHING=1 or its HIP twin, or
// with another allocator, cudaMalloc'd memory is never reported). Its peaks are the host's alone,
// which mhc info printed as the trace's peak without a word (TraceLens's MI300X DDP ResNet-18
// "no_pool" rank: 2,360 kernels on agent 2, 210 host events of 8 B). Said in meta
// kineto.gpu_memory and a warning.
void say_gpu_memory_unrecorded(const KinetoData& data, Result& result) {
    if (data.memory.empty()) return;   // no [memory] event at all: meta 'allocations' says why
    if (std::any_of(data.memory.begin(), data.memory.end(), [](const KMemory& event) { return event.device >= 0; }))
        return;
    std::map<int32_t, std::pair<int64_t, int64_t>> work;   // device -> kernels, copies and memsets
    for (const KKernel& kernel : data.kernels)
        if (kernel.device >= 0)
            ++(kernel.is_copy || kernel.is_memset ? work[kernel.device].second : work[kernel.device].first);
    if (work.empty()) return;
    std::string devices;
    for (const auto& [device, counts] : work)
        devices += (devices.empty() ? "" : ", ") + std::string("device ") + std::to_string(device) + " (" +
                   std::to_string(counts.first) + " kernels, " + std::to_string(counts.second) + " copies and memsets)";
    const std::string said =
        "not recorded: the trace's " + std::to_string(data.memory.size()) +
        " [memory] events are all the host's, while " + devices +
        " ran GPU work; the GPU's allocations did not go through PyTorch's caching allocator while it recorded "
        "(PYTORCH_NO_CUDA_MEMORY_CACHING=1 or PYTORCH_NO_HIP_MEMORY_CACHING=1, or another allocator: the profiler "
        "records only that allocator's), so the peaks are the host's alone";
    result.meta["kineto.gpu_memory"] = said;
    result.warnings.push_back("GPU memory " + said);
}

// The host's [memory] events of PyTorch's CPU allocator: c10's profiled CPU memory reporter
// (CPUAllocator.cpp) updates its count, Total Allocated, only while the profiler records memory.
// Blocks allocated before (the model's parameters, optimizer state, inputs) are not in it, and
// blocks freed while it did not record (after an earlier profile in the process, between a
// schedule's cycles) are never taken off it: torch 2.15 and 2.4.1 both carry a 1 MiB tensor freed
// between two profiles into the second's count. So the host's bytes before its first event (Total
// Allocated less its Bytes) are not memory known to be live: the part that no free of the trace
// shows live is imported as one block alive throughout (as on a GPU, whose count is its caching
// allocator's whole), which the host's peak counts. Said in meta kineto.host_memory_scope with those
// figures, and as a warning where such bytes are counted and the host's is the trace's only memory
// (a CPU run, whose peak mhc info prints as the trace's). tests/import/fixtures/writers/make_options.py
// records both.
void say_host_memory_scope(const KMemoryResult& mem, Result& result) {
    const auto host = std::find_if(mem.devices.begin(), mem.devices.end(), [](const KMemoryDevice& space) {
        return space.device < 0 && !space.mapped && space.process == 0;
    });
    if (host == mem.devices.end()) return;
    const bool host_only = std::none_of(mem.devices.begin(), mem.devices.end(),
                                        [](const KMemoryDevice& space) { return space.device >= 0; });
    std::string said =
        "the CPU allocator's count, which PyTorch updates only while the profiler records memory: blocks allocated "
        "before profiling (the model's parameters, optimizer state, inputs) are not in it, and blocks freed while it "
        "did not record (after an earlier profile in the process, between a schedule's cycles) are never taken off it";
    if (host->baseline > 0)
        said += "; of its " + std::to_string(host->baseline) + " B before the first host event" +
                (host->baseline_recorded ? " (Total Allocated)" : "") + ", " + std::to_string(host->unattributed) +
                " B no free of the trace shows live: imported as one block alive throughout, which the host's peak "
                "counts, though they may be blocks freed unseen";
    result.meta["kineto.host_memory_scope"] = said;
    // Warned where it moves the figure a CPU run's user reads: bytes counted that may be freed.
    if (host_only && host->unattributed > 0) result.warnings.push_back("host memory is " + said);
}

// Kernel launches (runtime and driver calls: cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel,
// cudaGraphLaunch, ...) whose correlation id no kernel, memcpy or memset event of the trace
// carries. In a trace the profiler wrote whole there are none: every launch's kernels follow it
// under its id. Those made while a stream capture of their process was open (between
// cudaStreamBeginCapture and cudaStreamEndCapture, or their HIP twins) were captured into a CUDA
// graph and did not run: said in meta. The others ran and are not in the file (the profiler lost
// the GPU's activity: HazyResearch/zoology's A100 trace holds 260 launches and no GPU event at
// all, which mhc imported as a run of no kernel without a word; or their kernels are events of a
// category mhc does not read, kineto.unread_events): said in meta and a warning, since the kernel
// time, the duration and a simulation of the trace lack them.
void say_launches_without_kernels(const KinetoData& data, Result& result) {
    // (process, correlation id) of the calls whose GPU event is in the trace: ids are per process,
    // and in a file of several processes' traces one id names a call in each (launch_of finds the
    // kernel's own); matched by the id alone, one process's kernel hid another's lost launch.
    std::set<std::pair<int64_t, int64_t>> ran;
    for (const KKernel& kernel : data.kernels)
        if (const KLaunch* call = data.launch_of(kernel)) ran.emplace(call->pid, kernel.correlation);
    // Each process's open captures, [begin, end) (an end never seen: to the end of the trace).
    std::vector<const KCall*> captures;
    for (const KCall& call : data.launch_calls)
        if (call.kind != KCallKind::Launch) captures.push_back(&call);
    std::stable_sort(captures.begin(), captures.end(), [](const KCall* lhs, const KCall* rhs) {
        return lhs->pid != rhs->pid ? lhs->pid < rhs->pid : lhs->ts < rhs->ts;
    });
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> open;   // pid -> [begin, end)
    for (const KCall* call : captures) {
        auto& spans = open[call->pid];
        if (call->kind == KCallKind::CaptureBegin) spans.emplace_back(call->ts, INT64_MAX);
        else if (!spans.empty() && spans.back().second == INT64_MAX) spans.back().second = call->ts;
    }
    auto captured = [&](const KCall& call) {
        auto it = open.find(call.pid);
        if (it == open.end()) return false;
        return std::any_of(it->second.begin(), it->second.end(),
                           [&](const auto& span) { return span.first <= call.ts && call.ts < span.second; });
    };
    int64_t launches = 0, in_capture = 0, lost = 0;
    const KCall* first_lost = nullptr;
    for (const KCall& call : data.launch_calls) {
        if (call.kind != KCallKind::Launch) continue;
        ++launches;
        if (call.correlation >= 0 && ran.count({call.pid, call.correlation}) > 0) continue;
        if (captured(call)) {
            ++in_capture;
        } else if (lost++ == 0) {
            first_lost = &call;
        }
    }
    if (in_capture + lost == 0) return;
    std::string said = std::to_string(in_capture + lost) + " of " + std::to_string(launches) +
                       " kernel launches (runtime and driver calls that launch kernels or CUDA graphs) have no kernel, "
                       "memcpy or memset event of their correlation id";
    if (in_capture > 0)
        said += ": " + std::to_string(in_capture) +
                " made while a stream capture was open (captured into a CUDA graph, not run)";
    if (lost > 0) {
        const std::string which = std::to_string(lost) + " not recorded (the first: traceEvents[" +
                                  std::to_string(first_lost->index) + "] '" + data.strings.list[first_lost->name] +
                                  "')";
        said += (in_capture > 0 ? ", " : ": ") + which;
        result.warnings.push_back(
            std::to_string(lost) + " of the Kineto trace's " + std::to_string(launches) +
            " kernel launches have no kernel, memcpy or memset event in the trace (the first: traceEvents[" +
            std::to_string(first_lost->index) + "] '" + data.strings.list[first_lost->name] +
            "'): the profiler did not record their GPU activity (or wrote it as events mhc does not read: "
            "kineto.unread_events), so the trace's kernel time, its duration and a simulation of it lack them");
    }
    result.meta["kineto.launches_without_kernel"] = said;
}

}   // namespace

void import_kineto(const std::string& in, Rows& rows, Result& result, uint64_t max_input_size, ParseThreads threads) {
    KinetoData data = parse_kineto(in, max_input_size, threads);
    refuse_foreign_trace(in, data);
    int64_t base = kineto_base(data);
    result.events = data.events;

    // [memory] events: Bytes > 0 allocates, Bytes < 0 frees (kineto_memory.hpp has the rules).
    auto mem_by_ts = [](const KMemory& a, const KMemory& b) { return a.ts < b.ts; };
    if (!std::is_sorted(data.memory.begin(), data.memory.end(), mem_by_ts))
        std::stable_sort(data.memory.begin(), data.memory.end(), mem_by_ts);
    KMemoryLabels labels;
    labels.before_recording = rows.intern("(allocated before recording)");
    labels.unattributed = rows.intern("(allocated before recording, unattributed)");
    KMemoryResult mem = map_memory(data.memory, base, labels, in);
    unify_kernel_device(data, result);
    data.learn_lanes();   // again: the kernels' devices may have been renumbered
    const auto& allocs = mem.rows;
    size_t copies = static_cast<size_t>(std::count_if(data.kernels.begin(), data.kernels.end(),
                                                      [](const KKernel& k) { return k.is_copy || k.is_memset; }));
    rows.reserve(allocs.size(), data.kernels.size() - copies, copies);
    for (const auto& allocation : allocs) rows.add(allocation);
    write_kineto_timeline(data, base, rows, result, nullptr);
    say_empty_values(data.empty_values, "the trace", result);
    say_raw_strings(data.raw_strings, "the trace", result);
    say_stray_members(data.members_after_name, "the trace", result);
    result.meta["source"] = "pytorch-kineto";
    result.meta["import.format"] = "kineto";
    result.meta["import.events"] = std::to_string(data.events);
    result.meta["accesses"] = "none";   // Kineto links ops to kernels, not tensors to kernels: see docs/import.md
    result.meta["categories"] = "unknown";
    result.meta["kineto.memory_events"] = std::to_string(data.memory.size());
    write_memory_meta(mem, result);
    say_host_memory_scope(mem, result);
    if (data.host_memory_events)
        result.meta["kineto.host_memory_events"] =
            std::to_string(data.host_memory_events) +
            (data.odd_memory_devices.empty() ? " (Device Type 0: imported on device -1, the host)"
                                             : " (imported on device -1, the host; see kineto.memory_read_as_host)");
    if (data.profile_memory >= 0) result.meta["kineto.profile_memory"] = data.profile_memory ? "on" : "off";
    say_gpu_memory_unrecorded(data, result);
    if (data.memory.empty())
        result.meta["allocations"] =
            data.profile_memory == 1
                ? "none: memory profiling was on (the trace's profile_memory: 1) and nothing was allocated or "
                  "freed while it recorded (a CUDA graph replay allocates nothing); what was in use is not in the file"
            : data.profile_memory == 0
                ? "none: recorded with memory profiling off (the trace's profile_memory: 0)"
                : "none (the trace has no [memory] events: recorded without profile_memory=True, or by PyTorch "
                  "1.8, whose profiler wrote none with it)";
}

}  // namespace mhc::trace::import
