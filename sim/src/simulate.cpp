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

Result start_result(const Prepared& p, const Config& c, int64_t& cap, int64_t& host_cap) {
    Result r;
    r.config = c;
    r.config.cancel = nullptr;   // the flag belongs to the caller, not to the result
    r.device = p.device;
    r.assumed_accesses = p.assumed_accesses;
    r.warnings = trace_warnings(p);
    r.order_only = p.t->order_only();
    r.baseline_peak = baseline_peak(p, parse_allocator(c.allocator));
    if (std::string said = modelled_reserved_warning(p, c, r.baseline_peak); !said.empty()) r.warnings.push_back(said);
    cap = c.capacity.fraction > 0 ? share_of(c.capacity.fraction, r.baseline_peak) : c.capacity.bytes;
    host_cap = kUnlimited;
    if (c.cpu_buffer_ratio > 0 && cap < kUnlimited) host_cap = share_of(c.cpu_buffer_ratio, cap);
    r.capacity = cap;
    r.host_capacity = host_cap;
    r.rows = p.rows;
    return r;
}

void end_result(const Prepared& p, Result& r, double seconds) {
    r.peak_reduction = r.baseline_peak > 0 ? 1.0 - static_cast<double>(r.simulated_peak) / static_cast<double>(r.baseline_peak) : 0;
    // An OOM run's loss is that of the part that ran: simulated time to the OOM over the
    // recorded time of the event that failed (0 when it failed at the first event). A finished
    // run of a trace whose events are all at one instant has no loss: a share of a zero baseline
    // is not defined (NaN: no metric, null in --json, "-" in a sweep, never within a budget).
    const int64_t recorded_span = r.oom.happened ? r.oom.recorded - p.t_begin : r.baseline_makespan;
    if (recorded_span > 0)
        r.throughput_loss = static_cast<double>(r.simulated_makespan) / static_cast<double>(recorded_span) - 1.0;
    else r.throughput_loss = r.oom.happened ? 0 : std::numeric_limits<double>::quiet_NaN();
    r.seconds = seconds;
}

Result simulate(const Prepared& p, const Config& c) {
    validate(c);
    auto t0 = std::chrono::steady_clock::now();
    int64_t cap = 0, host_cap = 0;
    Result r = start_result(p, c, cap, host_cap);
    with_eviction_policy(parse_eviction(c.eviction), [&]<class Policy>(std::type_identity<Policy>) {
        Engine<Policy>(p, c, r, cap, host_cap).run();
    });
    end_result(p, r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return r;
}

Result simulate(const trace::TraceData& t, const Config& c) {
    auto p = prepare(t, c.device);
    return simulate(*p, c);
}

}  // namespace mhc::sim
