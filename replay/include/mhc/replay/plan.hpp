#pragma once
// A plan: what a simulated run did, as an ordered list of actions with the dependencies
// replay honours (docs/validation.md). It keeps the *order* of the simulator's decisions,
// never their simulated times: timed actions carry their recorded time (the workload's own
// host gaps and kernel durations), everything else is executed as soon as its dependencies
// allow.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/sim/result.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::replay {

enum class Op : uint8_t {
    Alloc,        // place the allocation in the arena (waits for pending releases)
    Free,         // release it (deferred while a transfer of it is in flight)
    KernelStart,  // launch: waits for every operand to be resident
    KernelEnd,    // the kernel's operands are no longer pinned
    SwapOut,      // D2H; the device range is released by its Release action
    SwapIn,       // place it again, then H2D (after its swap-out completed)
    EvictClean,   // the host copy is valid: release the device range now
    Drop,         // release now; recomputed before its next use
    Recompute,    // place it again and rerun its producer (on the needing kernel's stream)
    Release,      // a swap-out's device block goes back, where the simulator released it
                  // (waits for that copy to complete; the wait is measured delay)
    FailedAlloc,  // caching model: an allocation the simulator tried here and could not place,
                  // which released the model's cached free segments; replay makes the same call
};
const char* to_string(Op op);
inline bool timed(Op op) { return op <= Op::KernelEnd; }

struct Action {
    Op op = Op::Alloc;
    bool prefetch = false;   // SwapIn decided by the prefetcher (not on demand)
    int32_t alloc = -1;      // dense allocation index
    int32_t kernel = -1;     // dense kernel index (KernelStart/End; Recompute: the producer)
    int64_t recorded = 0;    // recorded ns (timed ops)
};

struct Plan {
    int32_t device = 0;
    int64_t capacity = 0;        // bytes (the run's, resolved)
    std::string allocator;       // ideal | caching
    std::string allocator_conf;  // the run's --allocator-conf (over the trace's recorded settings)
    int64_t t_begin = 0, t_end = 0;   // recorded span of the device
    int64_t predicted_peak = 0;
    int64_t predicted_host_peak = 0;   // host copies held at once (sim::Result::host_peak)
    std::vector<Action> actions;
    // The simulator's OOM, when the run ended with one: replay must meet the same.
    bool oom = false;
    int64_t oom_allocation = -1, oom_kernel = -1;   // dense indices, -1 if none
    // Per dense kernel index: its stream's number among the device's streams (0..S-1);
    // -1 for kernels of other devices.
    std::vector<int32_t> stream_of;
    int32_t streams = 0;
    // Per allocation row: its private memory pool (sim::private_pools, the simulator's rule), for
    // the caching arena; empty when the trace names none (every allocation in the default pool).
    std::vector<int64_t> pool_of;
    int64_t pool(int32_t alloc) const { return pool_of.empty() ? 0 : pool_of[static_cast<size_t>(alloc)]; }
    // Per pool number: when the recording gave the pool back (sim::PrivatePools::given_back_at, as
    // the simulator reads it); empty without private pools.
    std::vector<int64_t> pool_given_back_at;
    // A window (with_window): the actions before window_begin only bring the replay to the
    // state the run had when the window began (executed at once, unpaced, not timed); time is
    // measured from action window_begin on, whose recorded time is window_t. 0: no window.
    size_t window_begin = 0;
    int64_t window_t = 0;
};

// The peak a replay's arena is held to: the caching model's own segments (sim::Result::segment_peak,
// which leaves out memory a warm start held that no segment took: the replay starts from an
// empty device), else the simulated peak.
inline int64_t predicted_arena_peak(const sim::Result& run) {
    return run.segment_peak > 0 ? run.segment_peak : run.simulated_peak;
}

// Builds the plan of a run of `trace` (the Result must have been simulated on this trace with
// record_events on; sim::Result::event_origin ties each event to the recorded event that
// decided it). Throws mhc::Error when the Result has no event origins.
Plan make_plan(const trace::TraceData& trace, const sim::Result& run);

// The most streams a replay runs. Each stream's kernels run on a thread of their own (and, on
// the CUDA backend, a CUDA stream of their own), while a GPU runs at most 128 kernels at once
// (CUDA C++ Programming Guide, "Maximum number of resident grids per device"): a trace of
// 100,002 streams spent 110 s starting threads, then ended "internal error: Resource
// temporarily unavailable".
inline constexpr int32_t kMaxReplayStreams = 1024;
// Refuses (mhc::Error naming `path`) a device whose kernels run on more streams than that.
void refuse_streams_past_bound(const trace::TraceData& trace, int32_t device, const std::string& path);
// Whether the plan swaps anything out (its replay reads back what it wrote, checksummed).
bool has_swaps(const Plan& plan);

// The plan with its timed actions (and span) at `clock`'s times: a trace with the same rows as
// the one the plan was made on, other times (retime.hpp). Validation predicts on the trace
// moved onto the baseline replay's clock, whose gaps hold the replay's own overheads, and
// replays the recorded one: replaying the moved trace would add those overheads twice.
Plan on_clock_of(Plan plan, const trace::TraceData& clock);

// The first kernel (dense index) of the last `steps` training steps of `device`'s kernels, by
// recorded start: where a replay of those steps begins. -1 when the kernels have no step
// numbers or no more steps than that (the window would be the whole trace).
int32_t window_first_kernel(const trace::TraceData& trace, int32_t device, int steps);
// The plan with a window that begins at the start of kernel `first_kernel` (Plan::window_begin).
// Throws mhc::Error when the plan never starts that kernel (a run that ran out of memory before).
Plan with_window(Plan plan, int32_t first_kernel);

// Checks that the plan respects the dependencies replay relies on, by walking it with the
// states of the allocations: every kernel starts with its operands resident (allocated, swapped
// in or recomputed before), every victim is resident and not accessed by a running kernel,
// every swap-in follows a swap-out or clean eviction of the same allocation, nothing is used
// after its free, and the bytes placed never exceed the capacity (ideal allocator; swap-outs
// hold their bytes until a later action needs them). Returns "" or the first violation.
std::string check_plan(const trace::TraceData& trace, const Plan& plan);

}  // namespace mhc::replay
