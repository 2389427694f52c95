#pragma once
// `mhc info`: what a trace holds, where its memory peak is and where its time goes.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mhc/trace/columns.hpp"

namespace mhc::trace {

// The peak of live allocation bytes on one device, events at one instant in the order of
// event_order.hpp (a block alive only at one instant counts). Allocations alive at the end
// count until the end.
struct LivePeak {
    int64_t bytes = 0;
    int64_t time = 0;
    std::array<int64_t, kCategoryCount> by_category{};   // live bytes by category at the peak
};
LivePeak live_peak(const TraceData& t, int32_t device);
// The same over the bytes requested (requested_bytes where known, else bytes): what memory_viz
// plots for a snapshot, below the allocator's blocks by their rounding.
int64_t requested_peak(const TraceData& t, int32_t device);
// The peak of reserved bytes (segments alive; at one time frees first), -1 without segments on
// the device.
int64_t reserved_peak(const TraceData& t, int32_t device);

struct Summary {
    std::string path, source, device_name;
    int64_t device_memory = 0;
    int64_t t_begin = 0, t_end = 0;
    int64_t allocations = 0, kernels = 0, accesses = 0, copies = 0, markers = 0;
    std::vector<int32_t> devices;
    int32_t peak_device = 0;
    LivePeak peak;
    struct DeviceMemory {
        int32_t device = 0;
        int64_t peak = 0;            // allocation bytes (the allocator's blocks)
        int64_t requested = -1;      // requested bytes, -1: the trace does not say
        int64_t reserved = -1;       // segments, -1: none recorded
        int64_t peak_time = 0;       // when `peak` was first reached
        // The profiler's own reserved peak where the trace has no segments (Kineto's `Total
        // Reserved`: meta kineto.reserved_peak.deviceN), -1: not recorded.
        int64_t profiler_reserved = -1;
        // Its value at the profiler's first memory event (meta kineto.reserved_first.deviceN: what
        // the allocator held when profiling began), -1: not recorded.
        int64_t profiler_reserved_first = -1;
    };
    std::vector<DeviceMemory> memory;   // per device with allocations, by device
    std::string timing;                 // meta timing: exact, order-only, estimated
    int64_t kernel_time = 0;   // summed kernel durations
    int64_t steps = 0, layers = 0;
    std::vector<int64_t> step_durations;
    struct Top { std::string name; int64_t count = 0, total = 0, bytes = 0; std::string category; };
    std::vector<Top> top_kernels;      // by total time
    std::vector<Top> top_allocations;  // by size
    std::vector<std::pair<std::string, std::string>> meta;
    bool has_accesses = false;
};

// The versions a captured trace was made with, as meta torch_version and transformers_version
// record them ("torch 2.15.0, transformers 5.24.0"); "" for a trace that records none.
std::string capture_versions(const std::map<std::string, std::string>& meta);
// One warning line when traces captured with different versions are used together (fake
// tensors, autocast's lists and model code change between versions), else "". Each entry is a
// trace's path and its capture_versions(); traces that record none are not compared.
std::string version_mismatch(const std::vector<std::pair<std::string, std::string>>& versions);

Summary summarize(const TraceData& t, int top_n = 10);
std::string to_text(const Summary& s);
std::string to_json(const Summary& s);

}  // namespace mhc::trace
