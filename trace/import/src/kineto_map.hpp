#pragma once
// The Kineto importer in two parts, as Perfetto's JSON importer has them: the tokenizer
// (kineto_parse.cpp) walks the JSON and assembles one event at a time from its keys; the
// mapping (kineto_map.cpp) turns one assembled event into KinetoData rows by the rules below.
// The tokenizer knows no category; the mapping reads no JSON.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kineto_numbers.hpp"   // parse_int
#include "kineto_parse.hpp"

namespace mhc::trace::import {

// One traceEvents entry, as far as the mapping reads it. Absent fields keep these defaults.
// Strings are views into the tokenizer's buffers, valid while map_event runs.
struct KEvent {
    char ph = 0;
    std::string_view cat, name;
    int64_t pid = 0, tid = 0, ts = 0, dur = 0, id = 0;
    bool has_ts = false;
    // args
    int64_t ext = -1, corr = -1, device = 0, stream = 0, bytes = 0, regs = 0, smem = 0;
    int64_t addr = 0, mem_bytes = 0, total = -1, reserved = -1, dev_type = -1, dev_id = 0, rf_id = -1, ev_idx = -1;
    int64_t seq = -1;   // args.Sequence number (autograd), -1: absent
    // args.name: a metadata event's (ph M process_name: the process's name), read for XProf's
    // process names only (KinetoData::xprof_process).
    std::string_view arg_name;
    // args.Process Group Name and args.Process Group Ranks: the process group of an NCCL kernel
    // (Kineto copies them from its record_param_comms op, PyTorch 2.x); empty where absent.
    // group_unreadable: one of them was there but not a string.
    std::string_view group_name, group_ranks;
    bool group_unreadable = false;
    // args.sycl queue: Intel XPU traces (Kineto's XPU plugin) place kernels and copies by their
    // SYCL queue and write no args.stream; -1: absent.
    int64_t sycl_queue = -1;
    bool has_stream = false;   // args.stream was read
    // The stream a GPU lane's 'tid' names: a number, or "stream N" / "Stream N" as a string (Kineto
    // writes a GPU lane's stream there too, PyTorch 1.9's as text); -1: none.
    int64_t tid_stream = -1;
    bool has_device = false;   // args.device was read
    // args.inDevice: the device that ran a peer copy. Kineto writes a CUPTI peer-to-peer memcpy
    // (memcpy2) with fromDevice, inDevice and toDevice and no args.device; -1: absent.
    int64_t in_device = -1;
    int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    bool has_mem = false;    // args.Addr or args.Bytes was read ([memory] events)
    bool has_addr = false;   // args.Addr was read (profilers before about PyTorch 1.10 write none)
    const char* bytes_not_number = nullptr;   // args.bytes was "a string", "null", ...: bad only for a copy
    // args.device or args.stream was not a number (its name, then what it was): bad only for a
    // kernel, copy or memset, the events that read them.
    const char* activity_field_not_number = nullptr;
    const char* activity_field_was = nullptr;
};

// The rules, one event at a time (the tokenizer has counted it in d.events already):
//  - no 'ts': dropped;
//  - ph X, cat kernel|Kernel: a kernel; gpu_memcpy|Memcpy: a copy whose kind the name gives
//    (copy_direction; a name that gives none: device to device, counted in
//    d.copies_without_direction and said); gpu_memset|Memset: a memset;
//  - a kernel, copy or memset without args.stream but with args.sycl queue (Intel XPU) is on
//    the stream of that queue's number;
//  - ph X, cat cuda_runtime|cuda_driver|Runtime|Driver, or the runtime and driver calls of other
//    back-ends (xpu_runtime|xpu_driver, privateuse1_runtime|privateuse1_driver), with a
//    correlation id: the launch of that correlation (where and on which thread the CPU called);
//  - ph X, cat user_annotation|gpu_user_annotation, or cat cpu_op|Operator|python_function
//    named ProfilerStep#N: a range (a CPU one named ProfilerStep#N is step N;
//    gpu_user_annotation ranges are on the GPU timeline);
//  - ph X, cat cpu_op|user_annotation|Operator: also a CPU op (python_function and
//    gpu_user_annotation are not);
//  - a kernel, copy or memset is on args.device; a memcpy without it on args.inDevice (CUPTI peer
//    copies: fromDevice, inDevice, toDevice), counted in d.copies_on_in_device; with neither, on
//    device 0, counted in d.activities_without_device and said;
//  - a kernel, copy or memset without args.stream (nor args.sycl queue) is on the stream its
//    'tid' names (a number, or "stream N") (Kineto writes a GPU lane's stream as its tid; converters from other tools write it
//    there only), counted in d.streams_from_tid; with neither, on stream 0, counted in
//    d.activities_without_stream; both said;
//  - ph i|I named [memory] with args.Addr or args.Bytes: an allocator event, on device
//    args.Device Id when args.Device Type is an accelerator's (is_accelerator: CUDA 1, HIP 6
//    on ROCm, ...), else host memory (device -1), counted by type and id in
//    d.odd_memory_devices unless Device Type is 0; Device Type 6 (HIP) marks the trace ROCm's;
//  - ph C (counter events): counted by category in d.counter_categories, said;
//  - ph i|I named [OutOfMemory] (an allocation PyTorch's allocator could not make): no row;
//    counted in d.out_of_memory, the first kept (its device, bytes asked for, totals), said;
//  - ph s|f, cat ac2g|async_cpu_to_gpu: a CPU-to-GPU flow (s: its start, by flow id);
//  - ph X of any other category: counted by category in d.unread_categories (said in meta and a
//    warning: MTIA's device events, CUPTI range-profiler kernels, ...), except categories that
//    hold no device work (Trace, overhead, cpu_instant_event, cuda_sync, xpu_sync, cuda_event);
//  - ph B|E (a duration written as begin and end halves, which Kineto never writes): counted in
//    d.begin_end_events, said in meta and a warning, not read.
//  - ph M (metadata): no row; a process_name whose args.name is "/device:..." or "/host:..."
//    (TensorFlow's and JAX's profiler) kept in d.xprof_process, one named "Ascend Hardware"
//    (torch_npu's and MindSpore's profilers) marks d.ascend_npu;
//  - every other event counted in d.profiler_events where a rule above reads it (or its category
//    holds no work), else by category in d.foreign_categories (refuse_foreign_trace).
// Negative durations become 0.
void map_event(const KEvent& e, KinetoData& d);

// Whether a runtime or driver call of that name launches kernels (cudaLaunchKernel*, cuLaunchKernel*,
// cudaGraphLaunch, HIP's twins, ...), or begins or ends a stream capture; nullopt for any other
// call. Shared with the nsys importer (nsys writes the same names with a _vNNNN suffix).
std::optional<KCallKind> launch_call_kind(std::string_view name);

// Whether the event is a memcpy or memset, the only events whose args.bytes is read.
bool uses_copy_bytes(const KEvent& e);

// Whether the event is a kernel, memcpy or memset, the only events whose args.device and
// args.stream are read.
bool uses_gpu_placement(const KEvent& event);

// Whether a c10::DeviceType number ([memory] args.Device Type) is a GPU-like accelerator
// whose memory is a device's, not the host's.
bool is_accelerator(int64_t device_type);

// A memcpy's direction from the word after "Memcpy " in its Kineto name: CUPTI's and ROCm's
// ("Memcpy HtoD (Pageable -> Device)"; HtoA, AtoH, AtoA, AtoD, DtoA, DtoD, PtoP, HtoH) or Intel
// PTI's on XPU ("Memcpy M2D (MEMORY(Unknown) -> DEVICE)": X2Y of M, H host and D, S device memory).
// None for a name that gives no direction.
std::optional<CopyKind> copy_direction(std::string_view memcpy_name);
// The same, device to device where the name gives none (the mapping counts those:
// KinetoData::copies_without_direction).
CopyKind copy_kind_of(std::string_view memcpy_name);

}  // namespace mhc::trace::import
