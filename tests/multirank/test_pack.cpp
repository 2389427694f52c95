// Every field of sim::Result survives the MPI transport (mhc/dist/codec.hpp, which packs the
// fields of mhc/sim/result_fields.hpp), and so does a sweep's bisection answer.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "mhc/dist/codec.hpp"
#include "mhc/sim/sweep.hpp"

using namespace mhc;

#define EXPECT(c)                                                       \
    do {                                                                \
        if (!(c)) {                                                     \
            std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
            std::exit(1);                                               \
        }                                                               \
    } while (0)

int main() {
    sim::Result r;
    int64_t v = 1000;
    auto n = [&v] { return ++v; };
    r.config.capacity = {n(), 0.25};
    r.config.cpu_buffer_ratio = 1.5;
    r.config.eviction = "dtr"; r.config.prefetch = "forecast:3"; r.config.allocator = "caching";
    r.config.early_swap_out = false;
    r.config.link.name = "l"; r.config.link.h2d = {1e9, 2e-6}; r.config.link.d2h = {3e9, 4e-6};
    r.config.link.copy_engines = 1; r.config.link.duplex_factor = 0.7; r.config.link.nccl_share = 0.3;
    r.config.link.memcpy_share = 0.2; r.config.link.source = "src"; r.config.link.measured_load_average = 2.5;
    r.config.link.by_chunk = {{n(), 5e9, 6e9, 4e9, 4.5e9}};
    r.config.link.notes = {"duplex factor 1.14 -> 1", "n2"};
    r.config.allocator_conf = "expandable_segments:True";
    r.config.max_swap_ops_per_sec = 77; r.config.device = 3; r.config.check_invariants = true;
    r.config.record_events = false; r.config.memory_samples = 17;
    r.device = 2; r.capacity = n(); r.host_capacity = n(); r.baseline_peak = n(); r.simulated_peak = n();
    r.peak_reduction = 0.1; r.baseline_makespan = n(); r.simulated_makespan = n(); r.throughput_loss = 0.2;
    r.stall_time = n(); r.stall_count = n(); r.swap_in_bytes = n(); r.swap_in_count = n(); r.swap_out_bytes = n();
    r.swap_out_count = n(); r.evict_clean_count = n(); r.prefetch_count = n(); r.drop_count = n();
    r.recompute_count = n(); r.recompute_time = n(); r.recompute_depth_max = n(); r.recompute_inputs_assumed = n();
    r.host_peak = n();
    r.oom = {true, "where", "why", n(), n(), n(), n(), n(), n(), n(), true, n()};
    r.forecast_error = 0.3; r.forecast_peak_error = NAN; r.forecast_horizon_error = 0.4;
    r.forecast_horizon_steps = n(); r.forecast_evictions = n(); r.early_evictions = n();
    r.coupled_wait_time = n(); r.coupled_wait_count = n();
    r.kernels_reached = n(); r.last_kernel = n();
    r.assumed_accesses = true; r.order_only = true; r.warnings = {"w1", "w2"}; r.invariant_violation = "inv"; r.rows = n(); r.seconds = 1.25;
    r.events = {{trace::EventKind::Recompute, n(), n(), n(), n(), n()}};
    r.plan_log.origins = {{sim::Recorded::KernelEnd, true, 7}};
    r.plan_log.releases = {{5, 6, {sim::Recorded::Free, false, 9}, true}};
    r.kernel_times = {{n(), n(), n()}};
    r.memory = {{n(), n(), n()}};

    std::string b = dist::pack(r);
    sim::Result u = dist::unpack(b);
    EXPECT(dist::pack(u) == b);
    EXPECT(u.config.prefetch == "forecast:3" && u.config.link.by_chunk.size() == 1 && u.config.memory_samples == 17);
    EXPECT(u.config.link.by_chunk[0].both_h2d_Bps == 4e9 && u.config.link.by_chunk[0].both_d2h_Bps == 4.5e9);
    EXPECT(u.config.link.notes.size() == 2 && u.config.link.notes[1] == "n2");
    EXPECT(u.config.allocator_conf == "expandable_segments:True" && u.config.link.measured_load_average == 2.5);
    EXPECT(u.config.cancel == nullptr && !u.config.early_swap_out && u.config.link.duplex_factor == 0.7);
    EXPECT(u.oom.happened && u.oom.why == "why" && u.oom.fragmentation && u.oom.largest_free_block == r.oom.largest_free_block);
    EXPECT(std::isnan(u.forecast_peak_error) && u.forecast_horizon_error == 0.4);
    EXPECT(u.coupled_wait_time == r.coupled_wait_time && u.coupled_wait_count == r.coupled_wait_count);
    EXPECT(u.kernels_reached == r.kernels_reached && u.last_kernel == r.last_kernel);
    EXPECT(u.warnings == r.warnings && u.invariant_violation == "inv" && u.seconds == 1.25);
    EXPECT(u.events.size() == 1 && u.events[0].kind == trace::EventKind::Recompute && u.events[0].bytes == r.events[0].bytes);
    EXPECT(u.plan_log.origins[0] == r.plan_log.origins[0] && u.plan_log.origins[0].after_launch);
    EXPECT(u.plan_log.releases[0].failed_allocation && u.plan_log.releases[0].before == 6);
    EXPECT(u.kernel_times[0].t_end == r.kernel_times[0].t_end && u.memory[0].host_bytes == r.memory[0].host_bytes);
    // Every field of the list travels, order_only among them.
    EXPECT(u.order_only);
    sim::BisectAnswer a{"dtr", "periodic", "pcie5", true, 0.375, r};
    sim::BisectAnswer ua = dist::decode<sim::BisectAnswer>(dist::encode(a));
    EXPECT(ua.policy == "dtr" && ua.prefetch == "periodic" && ua.link == "pcie5" && ua.found && ua.fraction == 0.375);
    EXPECT(dist::pack(ua.result) == b);
    // A truncated message is refused, not read past its end.
    bool threw = false;
    try { dist::unpack(b.substr(0, b.size() - 1)); } catch (const std::exception&) { threw = true; }
    EXPECT(threw);
    std::puts("ok");
    return 0;
}
