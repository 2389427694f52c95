#pragma once
// Every field of a run's result, listed once. `fields(x, visit)` calls visit(field, member) for
// each member of x in a fixed order; the binary codec of the distributed runs (dist/), the
// run's metrics, the stored run and --json all read their fields from here, so that a field
// added to a struct is added to every one of them by adding it to its list below.
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "mhc/sim/result.hpp"

namespace mhc::sim {

// When a field of Result is one of the run's metrics (docs/simulator.md, "What the output says").
enum class MetricWhen : uint8_t {
    Never,      // not a metric
    Always,
    Finished,   // only when the run did not stop at an OOM
    OnOom,      // only when it did
    Known,      // only when not NaN
    Positive,   // only when > 0
    Reached,    // only when >= 0
};

struct Field {
    const char* name;                  // the member's name
    const char* metric = nullptr;      // its name among the metrics
    MetricWhen when = MetricWhen::Never;
    bool unlimited_as_minus_one = false;   // a capacity: kUnlimited is stored as -1
    const char* metric_after_oom = nullptr;   // its name after an OOM, where a Finished metric has one
    const char* json = nullptr;        // its key in --json's "oom" object (Oom only)
};

template <class S, class T>
concept FieldsOf = std::same_as<std::remove_const_t<S>, T>;

// MHC_FIELDS(Type, a, b, ...) defines fields() for a struct whose fields carry nothing but their
// names (no metric, no JSON key): it visits v(Field{"a"}, s.a), then v(Field{"b"}, s.b), ... in
// the order given, so that each name is written once. Structs with metrics list theirs by hand.
#define MHC_FIELDS(Type, ...)                                  \
    template <FieldsOf<Type> S, class V>                       \
    void fields(S& object, V&& visit) {                        \
        MHC_FIELDS_EACH(MHC_FIELDS_VISIT, __VA_ARGS__)         \
    }
#define MHC_FIELDS_VISIT(member) visit(Field{#member}, object.member);
// MHC_FIELDS_EACH(m, x, y, ...) is m(x) m(y) ...: each step leaves the call of the next one for a
// later rescan, which MHC_FIELDS_RESCAN forces 64 times (lists of up to 64 members).
#define MHC_FIELDS_EACH(macro, ...) __VA_OPT__(MHC_FIELDS_RESCAN(MHC_FIELDS_STEP(macro, __VA_ARGS__)))
#define MHC_FIELDS_STEP(macro, first, ...) macro(first) __VA_OPT__(MHC_FIELDS_NEXT MHC_FIELDS_PARENS(macro, __VA_ARGS__))
#define MHC_FIELDS_NEXT() MHC_FIELDS_STEP
#define MHC_FIELDS_PARENS ()
#define MHC_FIELDS_RESCAN(...) MHC_FIELDS_RESCAN16(MHC_FIELDS_RESCAN16(MHC_FIELDS_RESCAN16(MHC_FIELDS_RESCAN16(__VA_ARGS__))))
#define MHC_FIELDS_RESCAN16(...) MHC_FIELDS_RESCAN4(MHC_FIELDS_RESCAN4(MHC_FIELDS_RESCAN4(MHC_FIELDS_RESCAN4(__VA_ARGS__))))
#define MHC_FIELDS_RESCAN4(...) MHC_FIELDS_RESCAN1(MHC_FIELDS_RESCAN1(MHC_FIELDS_RESCAN1(MHC_FIELDS_RESCAN1(__VA_ARGS__))))
#define MHC_FIELDS_RESCAN1(...) __VA_ARGS__

MHC_FIELDS(Capacity, bytes, fraction)

MHC_FIELDS(Direction, bandwidth_Bps, latency_s)

MHC_FIELDS(LinkModel::Chunk, bytes, h2d_Bps, d2h_Bps, both_h2d_Bps, both_d2h_Bps)

MHC_FIELDS(LinkModel, name, h2d, d2h, copy_engines, duplex_factor, nccl_share, memcpy_share, source, by_chunk, notes,
           measured_load_average)

// Config::cancel is left out: a pointer into the caller's process, never part of a result.
MHC_FIELDS(Config, capacity, cpu_buffer_ratio, eviction, prefetch, allocator, allocator_conf, early_swap_out, link,
           max_swap_ops_per_sec, device, check_invariants, record_events, memory_samples)

template <FieldsOf<Oom> S, class V>
void fields(S& s, V&& v) {
    using W = MetricWhen;
    v(Field{.name = "happened", .metric = "oom", .when = W::Always}, s.happened);
    v(Field{.name = "where", .json = "where"}, s.where);
    v(Field{.name = "why", .json = "why"}, s.why);
    v(Field{.name = "time", .metric = "oom_time_ns", .when = W::OnOom, .json = "time_ns"}, s.time);
    v(Field{.name = "recorded"}, s.recorded);
    v(Field{.name = "allocation", .json = "allocation"}, s.allocation);
    v(Field{.name = "kernel", .json = "kernel"}, s.kernel);
    v(Field{.name = "bytes_needed", .metric = "oom_bytes_needed", .when = W::OnOom, .json = "bytes_needed"}, s.bytes_needed);
    v(Field{.name = "bytes_short", .metric = "oom_bytes_short", .when = W::OnOom, .json = "bytes_short"}, s.bytes_short);
    v(Field{.name = "bytes_pinned", .metric = "oom_bytes_pinned", .when = W::OnOom, .json = "bytes_pinned"}, s.bytes_pinned);
    v(Field{.name = "fragmentation", .metric = "oom_fragmentation", .when = W::OnOom, .json = "fragmentation"},
      s.fragmentation);
    v(Field{.name = "largest_free_block", .json = "largest_free_block"}, s.largest_free_block);
}

MHC_FIELDS(EventOrigin, what, after_launch, index)

MHC_FIELDS(PlanLog::Release, alloc, before, origin, failed_allocation)

MHC_FIELDS(PlanLog, origins, releases)

MHC_FIELDS(trace::RunEvent, kind, t_start, t_end, allocation, kernel, bytes)

MHC_FIELDS(trace::RunKernelTime, kernel, t_start, t_end)

MHC_FIELDS(trace::RunMemorySample, t, device_bytes, host_bytes)

template <FieldsOf<Result> S, class V>
void fields(S& s, V&& v) {
    using W = MetricWhen;
    v(Field{"config"}, s.config);
    v(Field{"device"}, s.device);
    v(Field{.name = "capacity", .metric = "capacity_bytes", .when = W::Always, .unlimited_as_minus_one = true}, s.capacity);
    v(Field{.name = "host_capacity", .metric = "host_capacity_bytes", .when = W::Always, .unlimited_as_minus_one = true},
      s.host_capacity);
    v(Field{"baseline_peak", "baseline_peak_bytes", W::Always}, s.baseline_peak);
    v(Field{"simulated_peak", "simulated_peak_bytes", W::Always}, s.simulated_peak);
    v(Field{"peak_reduction", "peak_reduction", W::Finished}, s.peak_reduction);
    v(Field{"baseline_makespan", "baseline_makespan_ns", W::Always}, s.baseline_makespan);
    v(Field{"simulated_makespan", "simulated_makespan_ns", W::Always}, s.simulated_makespan);
    // After an OOM: the slowdown of the part that ran, under its own name (not a loss).
    v(Field{.name = "throughput_loss", .metric = "throughput_loss", .when = W::Finished, .metric_after_oom = "oom_slowdown"},
      s.throughput_loss);
    v(Field{"stall_time", "stall_ns", W::Always}, s.stall_time);
    v(Field{"stall_count", "stalls", W::Always}, s.stall_count);
    v(Field{"swap_in_bytes", "swap_in_bytes", W::Always}, s.swap_in_bytes);
    v(Field{"swap_in_count", "swap_ins", W::Always}, s.swap_in_count);
    v(Field{"swap_out_bytes", "swap_out_bytes", W::Always}, s.swap_out_bytes);
    v(Field{"swap_out_count", "swap_outs", W::Always}, s.swap_out_count);
    v(Field{"evict_clean_count", "clean_evictions", W::Always}, s.evict_clean_count);
    v(Field{"prefetch_count", "prefetches", W::Always}, s.prefetch_count);
    v(Field{"drop_count", "drops", W::Always}, s.drop_count);
    v(Field{"recompute_count", "recomputations", W::Always}, s.recompute_count);
    v(Field{"recompute_time", "recompute_ns", W::Always}, s.recompute_time);
    v(Field{"recompute_depth_max", "recompute_depth_max", W::Always}, s.recompute_depth_max);
    v(Field{"recompute_inputs_assumed", "recompute_inputs_assumed", W::Always}, s.recompute_inputs_assumed);
    v(Field{"host_peak", "host_peak_bytes", W::Always}, s.host_peak);
    v(Field{"oom"}, s.oom);
    v(Field{"forecast_error", "forecast_error", W::Known}, s.forecast_error);
    v(Field{"forecast_peak_error", "forecast_peak_error", W::Known}, s.forecast_peak_error);
    v(Field{"forecast_horizon_error", "forecast_horizon_error", W::Known}, s.forecast_horizon_error);
    v(Field{"forecast_horizon_steps", "forecast_horizon_steps", W::Positive}, s.forecast_horizon_steps);
    v(Field{"forecast_evictions", "forecast_evictions", W::Positive}, s.forecast_evictions);
    v(Field{"early_evictions", "early_evictions", W::Always}, s.early_evictions);
    v(Field{"coupled_wait_time"}, s.coupled_wait_time);
    v(Field{"coupled_wait_count"}, s.coupled_wait_count);
    v(Field{"assumed_accesses", "assumed_accesses", W::Always}, s.assumed_accesses);
    v(Field{"order_only"}, s.order_only);
    v(Field{"warnings"}, s.warnings);
    v(Field{"invariant_violation"}, s.invariant_violation);
    v(Field{"rows"}, s.rows);
    v(Field{"seconds", "sim_seconds", W::Always}, s.seconds);
    v(Field{"events"}, s.events);
    v(Field{"plan_log"}, s.plan_log);
    v(Field{"kernel_times"}, s.kernel_times);
    v(Field{"kernels_reached", "kernels_reached", W::Always}, s.kernels_reached);
    v(Field{"last_kernel", "last_kernel_reached", W::Reached}, s.last_kernel);
    v(Field{"memory"}, s.memory);
}

}  // namespace mhc::sim
