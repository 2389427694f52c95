// The trace's own host memory (allocations on device -1: offloaded tensors, optimizer state on
// the host) counts in host bytes, never against the GPU's capacity (docs/simulator.md, State).
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace simtest;

namespace {

// Two GPU tensors of 2 MiB and a host copy of 3 MiB alive from 1 ms to 4 ms.
mhc::trace::TraceData with_host() {
    mhc::trace::TraceData t = build({{2 * MiB, 0, 5 * ms}, {2 * MiB, 1 * ms, 3 * ms}, {3 * MiB, 1 * ms, 4 * ms}},
                                    {{0, 1 * ms, {{0, 'w'}}}, {1 * ms, 2 * ms, {{1, 'w'}}}, {2 * ms, 3 * ms, {{1, 'r'}}},
                                     {4 * ms, 5 * ms, {{0, 'r'}}}});
    t.allocations.device[2] = -1;
    return t;
}

}  // namespace

TEST_CASE("host allocations of the trace are host bytes, not GPU bytes", "[sim][host]") {
    mhc::trace::TraceData t = with_host();
    auto p = mhc::sim::prepare(t);
    CHECK(mhc::sim::device_of(*p) == 0);
    CHECK(mhc::sim::baseline_peak(*p, "ideal") == 4 * MiB);
    mhc::sim::Result r = mhc::sim::simulate(*p, config("lru", mhc::sim::kUnlimited));
    CHECK(r.simulated_peak == 4 * MiB);
    CHECK(r.host_peak == 3 * MiB);
}

TEST_CASE("swapped-out bytes and the trace's host bytes add up", "[sim][host]") {
    mhc::trace::TraceData t = with_host();
    auto p = mhc::sim::prepare(t);
    // 2 MiB of GPU: tensor 1 needs tensor 0 out (2 MiB to the host at 1 ms, when the 3 MiB host
    // copy is made too): host bytes 5 MiB
    mhc::sim::Result r = mhc::sim::simulate(*p, config("lru", 2 * MiB));
    CHECK(!r.oom.happened);
    CHECK(r.swap_out_count == 1);
    CHECK(r.host_peak == 5 * MiB);
}

TEST_CASE("a host allocation alive only at one instant counts in the host peak", "[sim][host]") {
    // docs/trace-format.md, "Events at one instant": one made and freed at 1.5 ms counts in the
    // peak with what is alive then, as mhc info's host (device -1) peak and `simulate --device -1`
    // count it. The 3 MiB host copy lives 1-4 ms; a 5 MiB one only at 1.5 ms (between the GPU's
    // events at 1 and 2 ms): host peak 8 MiB. Its free sorted before its allocation gave 3 MiB.
    mhc::trace::TraceData trace = build(
        {{2 * MiB, 0, 5 * ms}, {2 * MiB, 1 * ms, 3 * ms}, {3 * MiB, 1 * ms, 4 * ms}, {5 * MiB, 1'500'000, 1'500'000}},
        {{0, 1 * ms, {{0, 'w'}}},
         {1 * ms, 2 * ms, {{1, 'w'}}},
         {2 * ms, 3 * ms, {{1, 'r'}}},
         {4 * ms, 5 * ms, {{0, 'r'}}}});
    trace.allocations.device[2] = trace.allocations.device[3] = -1;
    auto prepared = mhc::sim::prepare(trace);
    CHECK(mhc::sim::simulate(*prepared, config("lru", mhc::sim::kUnlimited)).host_peak == 8 * MiB);
    // the same order as the host's own peak
    CHECK(mhc::sim::baseline_peak(*mhc::sim::prepare(trace, -1), "ideal") == 8 * MiB);
}
