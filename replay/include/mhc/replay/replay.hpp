#pragma once
// Executes a plan on a backend and measures it (docs/validation.md).
//
// Host backend: the device arena and the host arena are RAM, swaps are the kernels library's
// host SwapEngine (a copy thread per direction, memcpy by chunks, checksums), kernels run on
// one worker thread per recorded stream as stand-ins of their recorded duration (x time
// scale) that touch every 4 KiB page of their operands, and Sinkhorn-Knopp kernels run the
// real CPU Sinkhorn-Knopp on buffers of their real size. CUDA backend: the same through the
// CUDA SwapEngine (cudaMalloc'd arena, a stream per copy direction), CUDA stand-ins (a stream
// per recorded stream) and the CUDA Sinkhorn kernel.
//
// A control thread walks the plan. Timed actions (allocations, frees, kernel starts and ends)
// happen at their recorded time x scale + the lag accumulated so far; whatever makes one later
// (an operand still in transfer, a kernel running over, an allocation waiting for a swap-out)
// adds to the lag: the measured counterpart of the simulator's global shift.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mhc/kernels/swap.hpp"
#include "mhc/replay/plan.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::replay {

class PageMapper;   // pages.hpp

enum class Backend { Host, Cuda };
Backend parse_backend(const std::string& s);   // "host" | "cuda"; throws mhc::Error
const char* to_string(Backend b);

struct Options {
    Backend backend = Backend::Host;
    double time_scale = 1.0;        // recorded durations and gaps are multiplied by this
    size_t chunk_bytes = 2 << 20;   // swap chunk
    int copy_threads = 1;           // host backend: copy threads per direction (unpaced)
    // Host backend: the emulated link's pace, real bytes per second per direction (and the
    // factor for a transfer started while the other direction copies): kernels::SwapConfig
    // says how. 0 = unpaced, copies as fast as the host lets them.
    double pace_h2d_Bps = 0, pace_d2h_Bps = 0, pace_duplex = 1.0;
    double pace_h2d_latency_s = 0, pace_d2h_latency_s = 0;   // the emulated link's per-transfer latency
    int sinkhorn_threads = 1;       // host backend: CPU Sinkhorn threads
    bool real_sinkhorn = true;      // run Sinkhorn-Knopp for kernels named "*sinkhorn*"
    // Test hooks: called before each action with the number done; returning true stops the
    // replay (replay() throws Cancelled). A fault injected into the first swap of `fault_dir`.
    std::function<bool(size_t)> cancel;
    kernels::SwapEngine::Fault fault = kernels::SwapEngine::Fault::None;
    kernels::SwapDir fault_dir = kernels::SwapDir::DeviceToHost;
    // Progress (actions done, total), from the control thread.
    std::function<void(size_t, size_t)> progress;
    // Device pages shared by replays (mhc validate maps one pool for all its configurations:
    // allocating and populating a pool of GiBs per replay cost more than the replays). Used when
    // it holds the run's pool (replay_capacity) and virtual range; otherwise the replay makes
    // its own; a replay that swaps also when the pool's pages alias (PageMapper::distinct_pages).
    // Every replay leaves it as it found it (nothing mapped).
    PageMapper* mapper = nullptr;
    // A host arena shared by replays the same way (host: zeroing GiBs per replay cost seconds;
    // CUDA: pinned memory, kernels::pinned_host_memory, whose pinning per replay cost more than
    // the replays); used when it holds host_arena_bytes(). Its content is not relied on.
    unsigned char* host_memory = nullptr;
    size_t host_memory_bytes = 0;
};

// The device capacity a replay's pool has: the run's capacity, or for an unlimited run its
// predicted peak plus 1/64 (caching) or 1/8 (ideal) of it and a margin (an eighth of it, between
// 4 and 64 MiB) of room for placement.
int64_t replay_capacity(int64_t capacity, int64_t predicted_peak, const std::string& allocator);
// The host arena a replay of `plan` uses: what the simulator held on the host at once, with
// room for placement, never more than all the bytes swapped out (each plus the margin: an
// eighth, between 4 and 64 MiB).
int64_t host_arena_bytes(const trace::TraceData& trace, const Plan& plan);
// How much of it a replay is expected to fill: what the simulator held on the host at once
// (the first-fit arena's high water where nothing fragments; 4.13 of gpt2-small's 6.26 GB at
// 70%) plus the margin, never more than the arena. mhc validate faults in only these bytes
// before the replays.
int64_t host_arena_populated_bytes(const trace::TraceData& trace, const Plan& plan);

struct Cancelled : std::exception {
    const char* what() const noexcept override { return "replay cancelled"; }
};

struct Measured {
    trace::RunStatus status = trace::RunStatus::Complete;   // Complete, Oom or Failed
    std::string failure;               // why, when failed
    int64_t capacity = 0;
    int64_t peak = 0;                  // highest arena bytes in use: pool pages in use x 2 MiB
    int64_t high_water = 0;            // highest pool page ever used + 1, x 2 MiB
    int64_t makespan_ns = 0;           // wall time, divided by the time scale (trace ns)
    int64_t lag_ns = 0;                // final lag, divided by the time scale
    int64_t stall_ns = 0, stalls = 0;  // kernel starts that waited for operands
    int64_t swap_in_bytes = 0, swap_ins = 0, swap_out_bytes = 0, swap_outs = 0;
    int64_t evict_clean = 0, drops = 0, recomputes = 0;
    int64_t unplanned_swap_ins = 0;    // operands the plan kept resident that replay had released
    int64_t diverged_allocations = 0;  // FailedAlloc actions that fitted (the model left the simulator's path)
    int64_t checksums = 0, mismatches = 0;   // end-to-end and per-transfer checks
    int64_t overruns = 0;              // kernels that ran longer than their scaled duration
    int64_t overrun_ns = 0;            // their total excess (trace ns)
    int64_t sinkhorn_kernels = 0;
    int64_t host_arena_bytes = 0;
    int64_t host_arena_high_water = 0;   // highest end of a host copy ever placed in it
    double link_h2d_Bps = 0, link_d2h_Bps = 0;   // achieved by the transfers (bytes / busy time)
    int64_t late_transfers = 0;        // paced: transfers the host could not copy at the pace
    int64_t late_ns = 0;               // by how much in all (trace ns)
    // OOM: the action that did not fit.
    bool oom = false, oom_fragmentation = false;
    int64_t oom_allocation = -1, oom_kernel = -1;   // dense indices
    int64_t oom_bytes = 0, oom_short = 0, oom_largest_free = 0;
    std::string oom_where;
    double seconds = 0;                // wall time of the whole replay
    double map_seconds = 0;            // wall time mapping/unmapping pages (the replay clock paused)
    // CUDA: of that, the time with copies queued or in flight, which the GPU ran meanwhile (the
    // replay's clock did not see them take it: a transfer can finish sooner than it measures).
    int64_t paused_with_copies_ns = 0;
    std::vector<trace::RunEvent> events;            // measured, in trace ns (t0 = t_begin)
    std::vector<trace::RunKernelTime> kernel_times; // measured start/end of every kernel
    std::vector<trace::RunMemorySample> memory;

    // The replay did not run as planned: it failed, or a checksum did not match.
    bool failed() const { return status == trace::RunStatus::Failed || mismatches != 0; }
};

// Executes `plan` (made from a run of `trace`). Throws mhc::Error when the backend is not
// usable (cuda without a CUDA build or a GPU), Cancelled when options.cancel says so.
Measured replay(const trace::TraceData& trace, const Plan& plan, const Options& options);

}  // namespace mhc::replay
