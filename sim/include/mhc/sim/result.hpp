#pragma once
// What one simulated run produced: the metrics of docs/design.md §4 and the timeline.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/sim/config.hpp"
#include "mhc/sim/event_order.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::sim {

struct Oom {
    bool happened = false;
    std::string where;            // "allocation 42" / "kernel 7 (name)"
    std::string why;              // one sentence with the numbers
    int64_t time = 0;             // simulated ns
    int64_t recorded = 0;         // recorded ns of the allocation or kernel start that failed
    int64_t allocation = 0;       // allocation id being placed, 0 if none
    int64_t kernel = 0;           // kernel id starting, 0 if none
    int64_t bytes_needed = 0;     // the request (rounded by the allocator model)
    int64_t bytes_short = 0;      // how many more bytes the GPU would have needed
    int64_t bytes_pinned = 0;     // bytes held by running kernels (not evictable)
    bool fragmentation = false;   // the bytes fit, the caching allocator's blocks did not
    int64_t largest_free_block = 0;
};

struct Result {
    Config config;                // as run, capacity resolved
    int32_t device = 0;
    int64_t capacity = 0;         // bytes (kUnlimited when unlimited)
    int64_t host_capacity = 0;
    int64_t baseline_peak = 0;    // unlimited capacity, same allocator model
    int64_t simulated_peak = 0;   // resident + in-flight reservations (or reserved segments)
    // The caching model's own segments at their peak: simulated_peak less the bytes a warm start
    // (a Kineto trace's reserved memory at its first event) held and no segment took; what a
    // replay's arena maps. 0 where not simulated here (then simulated_peak stands).
    int64_t segment_peak = 0;
    double peak_reduction = 0;    // 1 - simulated / baseline
    int64_t baseline_makespan = 0, simulated_makespan = 0;
    // simulated / baseline makespan - 1; after an OOM, the slowdown of the part that ran
    // (docs/simulator.md, Time), reported as metric oom_slowdown, not as a loss
    double throughput_loss = 0;
    int64_t stall_time = 0, stall_count = 0;
    int64_t swap_in_bytes = 0, swap_in_count = 0;
    int64_t swap_out_bytes = 0, swap_out_count = 0;
    int64_t evict_clean_count = 0, prefetch_count = 0;
    int64_t drop_count = 0, recompute_count = 0, recompute_time = 0;
    // Recursive recomputation (DTR): the deepest chain (1: the producer's inputs were all
    // there), and inputs that could be neither swapped in nor recomputed (freed, or beyond
    // the depth bound) and were assumed available.
    int64_t recompute_depth_max = 0, recompute_inputs_assumed = 0;
    int64_t host_peak = 0;
    Oom oom;
    // Demand forecaster (prefetch "forecast"): mean absolute error of the predicted live
    // bytes at each kernel, relative to the actual, and the same for each step's peak.
    double forecast_error = NAN, forecast_peak_error = NAN;
    // ... and of the prediction made forecast_horizon_steps steps before (kernels of steps
    // >= H only; NAN when the trace has no such step).
    double forecast_horizon_error = NAN;
    int64_t forecast_horizon_steps = 0;
    int64_t forecast_evictions = 0;
    // Early (proactive) evictions decided ahead of demand (rule 10 of docs/simulator.md).
    int64_t early_evictions = 0;
    // Coupled (multi-rank) runs: time this rank waited at collectives and receives for other
    // ranks, beyond its own stalls (docs/simulator.md, "Coupled ranks"); 0 for a single rank.
    int64_t coupled_wait_time = 0, coupled_wait_count = 0;
    bool assumed_accesses = false;  // the trace had none; see docs/simulator.md
    bool order_only = false;        // the trace's timing is order only: loss, stalls, makespan are not times
    std::vector<std::string> warnings;  // what the trace lacks for a faithful run (trace_warnings)
    std::string invariant_violation;// empty unless a checked invariant failed
    int64_t rows = 0;               // trace rows the run covered
    double seconds = 0;             // wall time of simulate()

    std::vector<trace::RunEvent> events;
    // What replay needs to rebuild the run's plan: the recorded event behind each of
    // `events` and the allocator calls that are not events (event_order.hpp, PlanLog).
    PlanLog plan_log;
    // Every kernel the run started, at its simulated time, in the order it started (record_events
    // on); how far the run got: kernels started and the last one's id (-1: none).
    std::vector<trace::RunKernelTime> kernel_times;
    int64_t kernels_reached = 0, last_kernel = -1;
    std::vector<trace::RunMemorySample> memory;
};

// Said under every simulated time a user reads (simulate, sweep): the link and kernel model's
// figures are estimates until a replay on a GPU measures them.
inline constexpr const char* kEstimateNote =
    "simulated times are estimates until a GPU measures them (mhc validate --backend cuda)";

std::string to_text(const Result& r);
std::string to_json(const Result& r);
std::vector<std::pair<std::string, double>> metrics(const Result& r);
// A run to store with trace::add_run.
trace::Run to_run(const Result& r);
// The same, taking the result's rows (events, kernel times, memory curve) instead of copying
// them: a large run's rows are held once. The result's other fields stay as they were.
trace::Run take_run(Result& result);

}  // namespace mhc::sim
