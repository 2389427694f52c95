#pragma once
// Plain events the recorder translates into trace rows. The injection library fills them
// from CUPTI activity records (cupti_decode.hpp) and driver callbacks; tests build them by
// hand. Times are raw CUPTI timestamps (ns, one clock for host and device records).
#include <cstdint>
#include <string_view>
#include <vector>

#include "mhc/trace/model.hpp"

namespace mhc::record {

// Where an allocation or free was seen. Driver callbacks see the pointer synchronously (so
// kernel launches can be scanned against it); activity records arrive late but also cover
// paths without a public driver call (graph memory nodes, static module memory).
enum class AllocSource : uint8_t { Driver = 0, Activity, Vmm };

struct AllocEvent {
    uint64_t address = 0;
    uint64_t bytes = 0;
    uint64_t t = 0;         // when the pointer became valid (callback exit / activity time)
    uint64_t t_enter = 0;   // callback entry; equal to t for activity records
    uint32_t device = 0;
    uint64_t stream = 0;    // CUPTI stream id, 0 when the API has none
    AllocSource source = AllocSource::Driver;
    bool pool = false;      // stream-ordered allocation from a memory pool
    // Static memory of a loaded module (`__device__` / `__managed__` variables: CUPTI's
    // DEVICE_STATIC / MANAGED_STATIC memory records): held by the program, not by an allocator.
    bool static_memory = false;
    std::string_view api;   // e.g. "cuMemAlloc", "cuMemAllocAsync", "cuMemMap"
    // CUPTI correlation ids: the driver call's and the enclosing runtime call's (callbacks), the
    // record's (activity: CUpti_ActivityMemory4::correlationId, the id of the API call that made
    // the operation). 0: unknown.
    uint32_t correlation = 0;
    uint32_t runtime_correlation = 0;
};

struct FreeEvent {
    uint64_t address = 0;
    uint64_t bytes = 0;     // VMM unmap: size of the unmapped range; 0 otherwise
    uint64_t t = 0;
    uint32_t device = 0;
    uint64_t stream = 0;    // cuMemFreeAsync: CUPTI id of the stream the free is ordered on; 0 otherwise
    AllocSource source = AllocSource::Driver;
    uint32_t correlation = 0;   // as AllocEvent's
    uint32_t runtime_correlation = 0;
};

struct KernelEvent {
    std::string_view name;
    uint64_t start = 0, end = 0;
    uint32_t device = 0, stream = 0, correlation = 0;
    int32_t grid[3] = {0, 0, 0};
    int32_t block[3] = {0, 0, 0};
    int32_t shared_mem = 0;   // static + dynamic bytes
    int32_t registers = 0;
};

// A kernel launch seen by a driver callback: the 8-byte-aligned words of its parameters
// (see params.hpp), to be matched against live allocations.
struct LaunchEvent {
    uint32_t correlation = 0;          // the driver call's correlation id
    uint32_t runtime_correlation = 0;  // the enclosing runtime call's id, 0 if none
    uint64_t t = 0;
    uint32_t device = 0;
    std::vector<uint64_t> words;
};

struct CopyEvent {
    trace::CopyKind kind = trace::CopyKind::D2D;
    uint64_t bytes = 0;
    uint64_t start = 0, end = 0;
    uint32_t device = 0, stream = 0;
};

// One NVTX marker record: ranges come as a Start and an End with the same id.
struct MarkerEvent {
    enum class Phase : uint8_t { Instant, Start, End };
    uint32_t id = 0;
    Phase phase = Phase::Instant;
    uint64_t t = 0;
    std::string_view name;   // empty for End
};

// Host waits: 1 event synchronize, 2 stream wait event, 3 stream synchronize, 4 context
// synchronize (CUpti_ActivitySynchronizationType), 0 unknown.
struct SyncEvent {
    uint32_t type = 0;
    uint64_t start = 0, end = 0;
    uint32_t stream = 0;
};

// CUPTI's own overhead (buffer flushes, instrumentation, ...).
struct OverheadEvent {
    uint32_t kind = 0;
    uint64_t start = 0, end = 0;
};

// What CUPTI says of a stream-ordered memory pool's size: a `MEMORY_POOL` record
// (CUpti_ActivityMemoryPool3: the pool created, destroyed, trimmed) or the pool's figures that a
// memory record of an allocation or release from it carries (CUpti_ActivityMemory4::
// memoryPoolConfig). Sizes only of pools local to the process (an imported pool's size field
// holds its process id).
struct PoolEvent {
    // 1..3 as CUpti_ActivityMemoryPoolOperationType; Sampled: from a memory record.
    // (constants, not an enum: op holds CUPTI's raw value, which may be one not listed)
    static constexpr uint32_t Invalid = 0, Created = 1, Destroyed = 2, Trimmed = 3, Sampled = 16;
    uint32_t op = Invalid;
    uint32_t device = 0;
    uint64_t address = 0;    // the pool's base address (memoryPoolConfig.address; MemoryPool3::address)
    uint64_t size = 0;       // bytes the pool holds (reserved from the device) after the operation
    uint64_t utilized = 0;   // of which allocated
    uint64_t t = 0;
    bool local = true;       // CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL: size and utilized are valid
    uint64_t bytes = 0;      // Sampled from an allocation record: the allocation's bytes (the pool holds them)
};

struct DeviceEvent {
    uint32_t id = 0;
    std::string_view name;
    uint64_t memory = 0;
    uint32_t cc_major = 0, cc_minor = 0;
    uint32_t multiprocessors = 0;
};

}  // namespace mhc::record
