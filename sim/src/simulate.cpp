// The simulator's entry points: a run's result before and after the engine (configuration,
// capacities, closing figures), and simulate() itself (mhc/sim/simulate.hpp).
#include <chrono>
#include <cmath>
#include <limits>

#include "engine.hpp"
#include "mhc/sim/simulate.hpp"

namespace mhc::sim {

// `share` of `bytes`, rounded down to a byte; a product within a few ulps of a whole number is that
// number: 70% is the double 0.69999999999999996, and floor(0.7 x 176,686,080) was 123,680,255 where
// 70% of the peak is 123,680,256 bytes (docs/simulator.md, "Capacity").
namespace {
int64_t share_of(double share, int64_t bytes) {
    const double product = share * static_cast<double>(bytes);
    // Past int64 the cast is undefined (a host buffer of 1000 x a capacity near 2^63 bytes).
    if (!(product < static_cast<double>(kUnlimited))) return kUnlimited;
    const double whole = std::nearbyint(product);
    if (std::abs(product - whole) <= 4 * std::numeric_limits<double>::epsilon() * std::abs(product))
        return static_cast<int64_t>(whole);
    return static_cast<int64_t>(std::floor(product));
}
}   // namespace

Result start_result(const Prepared& prep, const Config& config, int64_t& cap, int64_t& host_cap) {
    Result result;
    result.config = config;
    result.config.cancel = nullptr;   // the flag belongs to the caller, not to the result
    result.device = prep.device;
    result.assumed_accesses = prep.assumed_accesses;
    result.warnings = trace_warnings(prep);
    result.order_only = prep.t->order_only();
    result.baseline_peak = baseline_peak(prep, parse_allocator(config.allocator));
    if (std::string said = modelled_reserved_warning(prep, config, result.baseline_peak); !said.empty()) result.warnings.push_back(said);
    cap = config.capacity.fraction > 0 ? share_of(config.capacity.fraction, result.baseline_peak) : config.capacity.bytes;
    host_cap = kUnlimited;
    if (config.cpu_buffer_ratio > 0 && cap < kUnlimited) host_cap = share_of(config.cpu_buffer_ratio, cap);
    result.capacity = cap;
    result.host_capacity = host_cap;
    result.rows = prep.rows;
    return result;
}

void end_result(const Prepared& prep, Result& result, double seconds) {
    result.peak_reduction = result.baseline_peak > 0 ? 1.0 - static_cast<double>(result.simulated_peak) / static_cast<double>(result.baseline_peak) : 0;
    // An OOM run's loss is that of the part that ran: simulated time to the OOM over the
    // recorded time of the event that failed (0 when it failed at the first event). A finished
    // run of a trace whose events are all at one instant has no loss: a share of a zero baseline
    // is not defined (NaN: no metric, null in --json, "-" in a sweep, never within a budget).
    const int64_t recorded_span = result.oom.happened ? result.oom.recorded - prep.t_begin : result.baseline_makespan;
    if (recorded_span > 0)
        result.throughput_loss = static_cast<double>(result.simulated_makespan) / static_cast<double>(recorded_span) - 1.0;
    else result.throughput_loss = result.oom.happened ? 0 : std::numeric_limits<double>::quiet_NaN();
    result.seconds = seconds;
}

Result simulate(const Prepared& prep, const Config& config) {
    validate(config);
    auto t0 = std::chrono::steady_clock::now();
    int64_t cap = 0, host_cap = 0;
    Result result = start_result(prep, config, cap, host_cap);
    with_eviction_policy(parse_eviction(config.eviction), [&]<class Policy>(std::type_identity<Policy>) {
        Engine<Policy>(prep, config, result, cap, host_cap).run();
    });
    end_result(prep, result, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return result;
}

Result simulate(const trace::TraceData& trace_data, const Config& config) {
    auto prep = prepare(trace_data, config.device);
    return simulate(*prep, config);
}

}  // namespace mhc::sim
