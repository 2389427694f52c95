#pragma once
// Kineto [memory] events -> allocation rows (docs/import.md, "Kineto").
//
// Per device and process (a file of merged ranks holds several processes' allocators: each has
// its own addresses, baseline and Total Allocated; the rows of a device's processes after the
// first one seen there have address 0, as the trace has one address space per device), in time
// order (events at one `ts` in file order):
//  - the live curve is the device's baseline plus the running signed sum of `Bytes`, exactly;
//  - the baseline (bytes live before the first event) is `Total Allocated - Bytes` of the
//    first event where the trace records it, else the least the signed sum requires:
//    max(0, -min running sum); nothing more is reconstructed;
//  - a free ends the live allocation at its `Addr`; in traces without `Addr` (profilers
//    before about PyTorch 1.10) it ends the latest live allocation of its size ("paired by
//    size"): the curve is the same whichever allocation of that size a free ends;
//  - a free that finds none ends bytes of the baseline (a row "allocated before recording",
//    alive from t = 0) and, past the baseline, bytes of the latest live allocations (split
//    where needed), so that the curve stays exact;
//  - times are ns from `base`, made strictly increasing per device (ties moved 1 ns later in
//    file order): an allocation freed at its own `ts` lives 1 ns and counts in the peak, as it
//    counted in the allocator's own `Total Allocated`;
//  - on the host, PyTorch's MapAllocator (file and shared-memory mappings: a DataLoader worker's
//    batches, share_memory_(), from_file, load(mmap=True)) reports each mapping with Total
//    Allocated 0 and Total Reserved its size, each unmapping with both 0: those events are a space
//    of their own in their process (is_mapping), paired apart from the CPU allocator's, their
//    baseline the least their signed sum needs, no Total Allocated check and no reserved bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "kineto_parse.hpp"
#include "mhc/trace/model.hpp"

namespace mhc::trace::import {

struct KMemoryLabels {
    int64_t before_recording = kNoString;   // a piece of the baseline freed during the trace
    int64_t unattributed = kNoString;       // the rest of the baseline, alive throughout
};

struct KMemoryDevice {
    int32_t device = 0;
    int64_t pid = 0;
    int32_t process = 0;             // 0: the device's first process seen; 1, 2, ...: later ones
    bool mapped = false;             // the host's file/shared-memory mappings (MapAllocator's events)
    bool by_size = false;            // some event of the device has no Addr: frees paired by size
    int64_t events = 0;
    int64_t baseline = 0;            // bytes live before the first event
    bool baseline_recorded = false;  // from Total Allocated (else the least the signed sum needs)
    int64_t unattributed = 0;        // of the baseline, bytes no free of the trace ended (alive throughout)
    int64_t reserved_peak = -1;      // max Total Reserved; -1: not recorded
    int64_t reserved_first = -1;     // Total Reserved of the first event that records it; -1: none does
    // Total Allocated against the imported curve (events that record it):
    int64_t checked = 0, mismatches = 0, max_diff = 0;
    int64_t first_index = -1, first_t = 0, first_imported = 0, first_recorded = 0;
};

struct KMemoryResult {
    std::vector<Allocation> rows;   // ids 1..n, in order
    std::vector<KMemoryDevice> devices;
    int64_t by_address = 0, by_size = 0;   // frees that ended an allocation of their address / size
    int64_t reconstructed = 0;             // rows standing for bytes allocated before recording
    int64_t unattributed = 0;              // bytes of the baseline never freed during the trace
    int64_t split = 0;                     // frees that ended bytes of other allocations
    int64_t zero_bytes = 0;                // events with Bytes 0 (ignored)
    int64_t moved = 0, max_move = 0;       // events moved later to keep their order at one ts
    int64_t unaddressed = 0;               // rows of later processes on a device: address 0
    int64_t mapping_events = 0;            // host events read as MapAllocator's (is_mapping)
};

// `events` must be sorted by ts, stably (file order at one ts). Throws mhc::Error naming `in`
// when sums leave int64.
KMemoryResult map_memory(const std::vector<KMemory>& events, int64_t base, const KMemoryLabels& labels,
                         const std::string& in);

// Whether host [memory] event `m` is PyTorch's MapAllocator's (at/MapAllocator.cpp reports a
// mapping as (size, Total Allocated 0, Total Reserved size) and its end as (-size, 0, 0); the CPU
// allocator always reports Total Reserved 0 and its own running Total Allocated). A free with
// both totals 0 is a mapping's when its address is a live mapping's; when its address is a live
// allocation of the CPU allocator, that allocator's; otherwise (allocated before recording) a
// mapping's unless the process's CPU allocator's last Total Allocated was its size (that
// allocator freeing its last bytes). `live_mappings` and `live_cpu` are the addresses live in each
// space of the event's process; `cpu_total` that allocator's last Total Allocated (-1: none yet).
bool is_mapping(const KMemory& event, bool live_mapping, bool live_cpu, int64_t cpu_total);

// One line on where the imported curve and Total Allocated disagree; empty when they agree.
std::string total_allocated_disagreement(const KMemoryDevice& d);

// The meta key suffix of a device's process: ".deviceN", and ".deviceN.pidP" for its later ones.
std::string memory_space_key(const KMemoryDevice& space);

}  // namespace mhc::trace::import
