#pragma once
// The simulator's entry points. prepare() does the per-trace work once (event order,
// next-use tables, step structure, contention intervals, baseline peaks); simulate() runs
// one configuration over it and may be called from many threads at once.
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::sim {

struct Prepared;   // opaque, read-only once built (sim/src/prepared.hpp)

// Validates the trace (trace::check_trace; throws mhc::Error naming the file and row).
// device kAutoDevice: the GPU device (>= 0) with the largest live peak, never the host (-1);
// a trace whose only memory is the host's then throws mhc::Error (bad input) naming --device -1.
std::shared_ptr<const Prepared> prepare(const trace::TraceData& t, int32_t device = kAutoDevice);

// prepare(), or the prepared form kept in the trace file by keep_prepared (trace/cache.hpp:
// valid while the trace is unchanged; the trace's checks passed when it was made).
std::shared_ptr<const Prepared> prepare_cached(const trace::TraceData& t, int32_t device = kAutoDevice);
// Keeps a prepared form that prepare_cached computed (and the trace's columns, when they were read
// from the rows) in the trace file for the next reader, when the file can be written and has not
// changed since it was read but for `writes_since_read` write transactions of the caller's own
// (its stored runs: 1 after add_runs into the trace, 0 without a store or with a runs database)
// (MHC_TRACE_CACHE=0: never). Commands call it after storing their runs, so that a failed store
// leaves the file as it was.
void keep_prepared(const Prepared& p, int writes_since_read);
// prepare_cached, then keep_prepared(p, 0) at once: for a command that has written nothing to the
// trace since reading it (validate, whose runs are stored later).
std::shared_ptr<const Prepared> prepare_kept(const trace::TraceData& t, int32_t device = kAutoDevice);

// Thrown by simulate() when Config::cancel was set while it ran.
struct Cancelled : std::exception {
    const char* what() const noexcept override { return "simulation cancelled"; }
};

Result simulate(const Prepared& p, const Config& c);
Result simulate(const trace::TraceData& t, const Config& c);

// The trace's peak at unlimited capacity under an allocator model (a name: parse_allocator).
int64_t baseline_peak(const Prepared& p, AllocatorKind allocator);
int64_t baseline_peak(const Prepared& p, const std::string& allocator);
// The caching allocator model run over the trace's recorded events with `capacity` as the GPU's
// limit (a segment that would take the reserved bytes above it fails, as cudaMalloc does on a full
// GPU), under `allocator_conf` over the trace's recorded settings: on a failed cudaMalloc the model
// gives cached memory back and retries as PyTorch does (CachingAllocator::allocate); a request it
// still cannot serve is where PyTorch raises OutOfMemoryError, and the walk stops there. Nothing is
// evicted. At a capacity at or above the unlimited reserved peak it is that run (runs, no retries),
// unless garbage_collection_threshold is set (it collects above that share of the capacity).
struct CachingUnderLimit {
    bool runs = true;            // no request failed after the free-and-retry
    int64_t reserved_peak = 0;   // reserved bytes at their peak (never above the capacity), up to a failure
    int64_t retries = 0;         // requests served after a failed cudaMalloc gave cached memory back
    int64_t releases = 0;        // full releases (release_cached_blocks: a device synchronisation each)
    // cudaMalloc calls (or page maps) and cudaFree calls (or unmaps) of the walk, and their bytes:
    // garbage collection's and the releases' frees, and the segments made again after them.
    int64_t device_allocs = 0, device_frees = 0, alloc_bytes = 0, free_bytes = 0;
    // The capture's steps (its step markers; 0: none), and the counters above from the first
    // allocation of its second step on (the steps after the first: a steady step's share).
    int64_t steps = 0;
    int64_t later_releases = 0, later_allocs = 0, later_frees = 0, later_alloc_bytes = 0, later_free_bytes = 0;
    int64_t failed_row = -1;     // the allocation (row index) that raised, when !runs
    int64_t bytes_needed = 0;    // its request, rounded as the model rounds it
};
CachingUnderLimit caching_under_limit(const Prepared& prepared, const std::string& allocator_conf, int64_t capacity);
int32_t device_of(const Prepared& p);
// The devices the trace's allocations are on, each once, in order (-1: the host).
std::vector<int32_t> devices_with_allocations(const trace::TraceData& trace);
// Throws mhc::Error (bad input, naming `path`) when the prepared device has no allocations, so
// nothing is to be simulated or replayed under a memory limit: a trace without any (a timeline
// only), or one whose allocations are all on other devices (the host's -1, another GPU), which
// the message lists. `requested`: the --device given, or kAutoDevice.
void require_allocations(const trace::TraceData& trace, const Prepared& prepared, int32_t requested,
                         const std::string& path);
bool assumed_accesses(const Prepared& p);
// True when the prepared device's recorded events are all at one instant (not order-only): its
// baseline makespan is 0, so a throughput loss is not defined (Result::throughput_loss is NaN).
bool zero_duration(const Prepared& prepared);
// What the prepared device's trace lacks for a faithful simulation, one sentence each: no
// kernels (losses then come from swap-outs only), no accesses (assumed), no allocations.
// simulate() copies them into Result::warnings.
std::vector<std::string> trace_warnings(const Prepared& p);
// Said when the caching allocator model's reserved peak (`modelled`, the recorded settings) is
// more than 5% off the reserved peak the trace's profiler recorded (Kineto's Total Reserved), with
// what expandable segments would reserve when that comes within 5% (the profiler does not record
// the allocator's settings); "" otherwise.
std::string modelled_reserved_warning(const Prepared& prepared, const Config& config, int64_t modelled);

}  // namespace mhc::sim
