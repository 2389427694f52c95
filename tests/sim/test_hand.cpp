// Traces small enough to work out by hand; each expected number is derived in the comment.
#include <catch2/catch.hpp>

#include <algorithm>

#include "helpers.hpp"
#include "mhc/sim/simulate.hpp"
#include "prepared.hpp"

using namespace simtest;
using namespace mhc;
using trace::kNoTime;

namespace {
// A, B allocated at 0; k1 writes A, k2 writes B, C allocated at 3 ms, k3 writes C,
// k4 reads A, k5 reads B. 1 MiB each, capacity 2 MiB, 1 ms per MiB each way.
std::vector<Tensor> three() { return {{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {MiB, 3 * ms, kNoTime}}; }
std::vector<K> five() {
    return {{1 * ms, 2 * ms, {{0, 'w'}}}, {2 * ms, 3 * ms, {{1, 'w'}}}, {3 * ms, 4 * ms, {{2, 'w'}}},
            {4 * ms, 5 * ms, {{0, 'r'}}}, {5 * ms, 6 * ms, {{1, 'r'}}}};
}
}  // namespace

TEST_CASE("three tensors: LRU and Belady differ as worked out by hand", "[sim][hand]") {
    auto t = build(three(), five());
    // LRU. C at 3 ms: evict A (least recent), dirty: D2H 3-4 ms, C waits 1 ms (shift 1).
    // k4 at 5 ms needs A: evict B (LRU of B@k2, C@k3): D2H 5-6, H2D A 6-7: stall 2 (shift 3).
    // k5 at 8 ms needs B: evict C (LRU of C@k3, A@k4): D2H 8-9, H2D B 9-10: stall 2 (shift 5).
    auto lru = sim::simulate(t, config("lru", 2 * MiB));
    CHECK_FALSE(lru.oom.happened);
    CHECK(lru.invariant_violation.empty());
    CHECK(lru.stall_time == 5 * ms);
    CHECK(lru.stall_count == 3);
    CHECK(lru.swap_out_count == 3);
    CHECK(lru.swap_in_count == 2);
    CHECK(lru.swap_in_bytes == 2 * MiB);
    CHECK(lru.baseline_makespan == 6 * ms);
    CHECK(lru.simulated_makespan == 11 * ms);
    CHECK(lru.throughput_loss == Approx(5.0 / 6.0));
    CHECK(lru.simulated_peak == 2 * MiB);
    CHECK(lru.baseline_peak == 3 * MiB);
    CHECK(lru.peak_reduction == Approx(1.0 / 3.0));
    // Belady. C at 3 ms: evict B (next use k5, farther than A's k4): D2H 3-4, stall 1.
    // k4 at 5 ms: A resident. k5 at 6 ms needs B: A and C are never used again; the tie
    // goes to the lower index, A: D2H 6-7, H2D B 7-8: stall 2. Total 3 ms, one swap-in.
    auto bel = sim::simulate(t, config("belady", 2 * MiB));
    CHECK(bel.stall_time == 3 * ms);
    CHECK(bel.swap_in_count == 1);
    CHECK(bel.swap_out_count == 2);
    CHECK(bel.simulated_makespan == 9 * ms);
    // Stored timeline: every kernel at its time, moved or not. k1 and k2 ran before the first
    // stall (recorded times); k3 (+1), k4 (+1) and k5 (+3) moved: k5 starts at 5 + 3 = 8 ms.
    using KT = trace::RunKernelTime;
    auto same = [](const std::vector<KT>& a, const std::vector<KT>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const KT& x, const KT& y) {
            return x.kernel == y.kernel && x.t_start == y.t_start && x.t_end == y.t_end;
        });
    };
    CHECK(same(bel.kernel_times, {{1, 1 * ms, 2 * ms}, {2, 2 * ms, 3 * ms}, {3, 4 * ms, 5 * ms}, {4, 5 * ms, 6 * ms},
                                  {5, 8 * ms, 9 * ms}}));
    CHECK(bel.kernels_reached == 5);
    CHECK(bel.last_kernel == 5);
}

TEST_CASE("an OOM run stores every kernel it reached and says how far it got", "[sim][hand]") {
    // LRU, capacity 2 MiB: k1 (1-2 ms) and k2 (2-3 ms) run unmoved; C at 3 ms evicts A (dirty:
    // D2H 3-4 ms), a 1 ms stall, so k3 runs 4-5 ms; D (3 MiB) at 5 + 1 = 6 ms evicts B and C
    // (D2H 6-7 and 7-8 ms) and still does not fit in 2 MiB: OOM at 8 ms, before k4 (recorded at
    // 6 ms), which has no time.
    auto t = build({{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {MiB, 3 * ms, kNoTime}, {3 * MiB, 5 * ms, kNoTime}},
                   {{1 * ms, 2 * ms, {{0, 'w'}}}, {2 * ms, 3 * ms, {{1, 'w'}}}, {3 * ms, 4 * ms, {{2, 'w'}}},
                    {6 * ms, 7 * ms, {{0, 'r'}}}});
    auto r = sim::simulate(t, config("lru", 2 * MiB));
    REQUIRE(r.oom.happened);
    CHECK(r.oom.time == 8 * ms);
    REQUIRE(r.kernel_times.size() == 3);
    CHECK((r.kernel_times[0].kernel == 1 && r.kernel_times[0].t_start == 1 * ms && r.kernel_times[0].t_end == 2 * ms));
    CHECK((r.kernel_times[1].kernel == 2 && r.kernel_times[1].t_start == 2 * ms && r.kernel_times[1].t_end == 3 * ms));
    CHECK((r.kernel_times[2].kernel == 3 && r.kernel_times[2].t_start == 4 * ms && r.kernel_times[2].t_end == 5 * ms));
    CHECK(r.kernels_reached == 3);
    CHECK(r.last_kernel == 3);
    // Stored: the metrics say how far it got.
    trace::Run run = sim::to_run(r);
    CHECK(run.metrics.at("kernels_reached") == 3);
    CHECK(run.metrics.at("last_kernel_reached") == 3);
    CHECK(run.kernel_times.size() == 3);
    // Taking the run instead moves its rows out of the result and gives the same run.
    const size_t events = r.events.size(), samples = r.memory.size();
    REQUIRE(events > 0);
    trace::Run taken = sim::take_run(r);
    CHECK((taken.name == run.name && taken.status == run.status && taken.config == run.config &&
           taken.metrics == run.metrics));
    CHECK((taken.events.size() == events && taken.kernel_times.size() == 3 && taken.memory.size() == samples));
    CHECK((r.events.empty() && r.kernel_times.empty() && r.memory.empty() && r.oom.happened));
}

TEST_CASE("a clean eviction is free and a write makes the host copy stale", "[sim][hand]") {
    // A written by k1, read by k2 after being swapped out by B's allocation; then C's
    // allocation evicts A again: A's host copy is still valid (k2 only read it): no D2H.
    // Then k4 writes A (after it is brought back), D's allocation evicts it: dirty again.
    std::vector<Tensor> ts{{MiB, 0, kNoTime}, {MiB, 2 * ms, 4 * ms}, {MiB, 5 * ms, 7 * ms}, {MiB, 9 * ms, kNoTime}};
    std::vector<K> ks{{1 * ms, 2 * ms, {{0, 'w'}}},   // A written
                      {2 * ms, 3 * ms, {{1, 'w'}}},   // B allocated at 2: A swapped out 2-3, stall 1
                      {4 * ms, 5 * ms, {{0, 'r'}}},   // B freed at 4(+1); A in 5-6, stall 1
                      {5 * ms, 6 * ms, {{2, 'w'}}},   // C at 5(+2): A clean -> evicted for free
                      {7 * ms, 8 * ms, {{0, 'x'}}},   // C freed 7; A in again (1 ms), A written
                      {9 * ms, 10 * ms, {{3, 'w'}}}}; // D: A dirty again -> D2H
    auto t = build(ts, ks);
    auto r = sim::simulate(t, config("lru", MiB));
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.evict_clean_count == 1);
    CHECK(r.swap_out_count == 2);
    CHECK(r.swap_in_count == 2);
    CHECK(r.stall_time == 4 * ms);
    CHECK(r.host_peak == MiB);
}

TEST_CASE("an allocation larger than the GPU is an OOM naming it", "[sim][hand]") {
    auto t = build({{MiB, 0, kNoTime}, {3 * MiB, 1 * ms, kNoTime}}, {{2 * ms, 3 * ms, {{1, 'w'}}}});
    auto r = sim::simulate(t, config("lru", 2 * MiB));
    REQUIRE(r.oom.happened);
    CHECK(r.oom.allocation == 2);
    CHECK(r.oom.bytes_needed == 3 * MiB);
    CHECK(r.oom.bytes_short == MiB);   // 3 MiB needed, A evicted, 2 MiB capacity
    CHECK(r.oom.where == "allocation 2");   // unlabelled: no empty "()" after it
    CHECK(r.oom.why.find("short by") != std::string::npos);
}

TEST_CASE("operands pinned by a running kernel cannot be evicted", "[sim][hand]") {
    // k1 runs 1-10 ms using A and B (2 MiB); C (1 MiB) allocated at 5 ms cannot get room.
    auto t = build({{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {MiB, 5 * ms, kNoTime}},
                   {{1 * ms, 10 * ms, {{0, 'r'}, {1, 'r'}}}, {11 * ms, 12 * ms, {{2, 'w'}}}});
    auto r = sim::simulate(t, config("lru", 2 * MiB));
    REQUIRE(r.oom.happened);
    CHECK(r.oom.bytes_pinned == 2 * MiB);
    CHECK(r.oom.bytes_short == MiB);
}

TEST_CASE("lookahead prefetch hides a swap-in behind compute", "[sim][hand]") {
    // A written by k1 and swapped out for B; k2..k5 use B for 4 ms; k6 reads A. On demand
    // the swap-in of A stalls k6; lookahead:8 at k2 cannot (B is pinned, no room), but
    // B is free at 6 ms... Keep it simple: capacity 2 MiB, B freed at k2's end.
    std::vector<Tensor> ts{{MiB, 0, kNoTime}, {2 * MiB, 2 * ms, 3 * ms}, {MiB, 3 * ms, kNoTime}};
    std::vector<K> ks{{1 * ms, 2 * ms, {{0, 'w'}}},
                      {2 * ms, 3 * ms, {{1, 'w'}}},    // B needs all 2 MiB: A swapped out 2-3, stall 1
                      {3 * ms, 4 * ms, {{2, 'w'}}},    // B freed at 3(+1), C allocated
                      {4 * ms, 8 * ms, {{2, 'r'}}},    // a long kernel on C
                      {8 * ms, 9 * ms, {{0, 'r'}}}};   // A needed
    auto t = build(ts, ks);
    auto demand = sim::simulate(t, config("lru", 2 * MiB, "none"));
    CHECK(demand.stall_time == 2 * ms);   // 1 (B) + 1 (A's swap-in at k5)
    auto pre = sim::simulate(t, config("lru", 2 * MiB, "lookahead:4"));
    // At k3 (4 ms, shift 1) lookahead sees A in k5: room exists (C 1 MiB of 2): H2D 4-5,
    // done long before k5 at 9 ms: only B's stall remains.
    CHECK(pre.stall_time == 1 * ms);
    CHECK(pre.prefetch_count == 1);
    CHECK(pre.swap_in_count == 1);
}

// Steps (docs/simulator.md): where fewer than half of a device's kernels carry a step the step
// markers decide, unless the trace's importer found its steps (meta steps_from): it put each kernel
// in its step by its launch, and one in none stays in none. Premise: ProfilerStep#5 to #7, 100 ns
// each; three kernels launched before recording began run in #5's span (in no step: docs/import.md,
// "Steps"), then #6's and #7's own kernel. Before 2026-12-07 the markers counted the three in a step.
TEST_CASE("steps: kernels an importer put in no step stay there, though they are most", "[sim][hand][steps]") {
    auto trace = build({{MiB, 0, 400}}, {{10, 15, {{0, 'r'}}},
                                         {20, 25, {{0, 'r'}}},
                                         {30, 35, {{0, 'r'}}},
                                         {110, 115, {{0, 'r'}}, 6},
                                         {210, 215, {{0, 'r'}}, 7}});
    for (int32_t step = 5; step <= 7; ++step) {
        mhc::trace::Marker marker;
        marker.id = step, marker.t_start = (step - 5) * 100, marker.t_end = (step - 4) * 100;
        marker.kind = mhc::trace::MarkerKind::Step, marker.index = step;
        trace.markers.push(marker);
    }
    // Written by no importer that says where its steps came from: the markers decide.
    CHECK(mhc::sim::prepare(trace)->step_of == std::vector<int32_t>{0, 0, 0, 1, 2});
    trace.meta["steps_from"] = "ProfilerStep#N ranges (the profiler's step markers)";
    CHECK(mhc::sim::prepare(trace)->step_of == std::vector<int32_t>{-1, -1, -1, 0, 1});
}
