// Early (proactive) swap-out, rule 10 of docs/simulator.md; every number worked out by hand.
// Link: 1 MiB per ms each way, no latency, no duplex slowdown (helpers.cpp slow_link).
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "mhc/sim/simulate.hpp"

using namespace simtest;
using namespace mhc;
using trace::kNoTime;

namespace {
sim::Config no_early(sim::Config c) {
    c.early_swap_out = false;
    return c;
}
}  // namespace

TEST_CASE("early swap-out hides completely behind compute: zero stall", "[sim][hand][early]") {
    // A, B 1 MiB at 0; C 1 MiB allocated at 5 ms, freed at 8 ms. Capacity 2 MiB.
    // Live bytes at the kernel starts (seq 0..6): 2, 2, 2, 3, 3, 2, 2 MiB.
    std::vector<Tensor> ts{{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {MiB, 5 * ms, 8 * ms}};
    std::vector<K> ks{{1 * ms, 2 * ms, {{0, 'w'}}},               // seq 0: A written
                      {2 * ms, 3 * ms, {{1, 'w'}}},               // seq 1
                      {3 * ms, 4 * ms, {{1, 'r'}}},               // seq 2
                      {5 * ms, 6 * ms, {{2, 'w'}}},               // seq 3: C allocated at 5 ms
                      {6 * ms, 7 * ms, {{1, 'r'}, {2, 'r'}}},     // seq 4
                      {8 * ms, 9 * ms, {{1, 'r'}}},               // seq 5: C freed at 8 ms
                      {9 * ms, 10 * ms, {{0, 'r'}}}};             // seq 6: A needed again
    auto t = build(ts, ks);
    // belady + lookahead:2. At seq 1 (2 ms) the only evictable allocation is A (B is
    // pinned); A's next use is seq 6, outside the window 1..3; the live bytes while A is
    // away (seqs 2..5) peak at 3 MiB, nothing is off the GPU: 3 > 2 MiB, so A leaves now:
    // D2H 2-3 ms, and the queue is free by the next kernel (3 ms) but nothing else is
    // evictable. C's allocation at 5 ms finds 1 MiB free: no stall. The window reaches A at
    // seq 4 (6 ms), when B and C are pinned: no room; at seq 5 (8 ms) C has been freed:
    // prefetch H2D 8-9 ms, ready exactly when seq 6 starts at 9 ms.
    auto r = sim::simulate(t, config("belady", 2 * MiB, "lookahead:2"));
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.stall_time == 0);
    CHECK(r.early_evictions == 1);
    CHECK(r.swap_out_count == 1);
    CHECK(r.swap_in_count == 1);
    CHECK(r.prefetch_count == 1);
    CHECK(r.simulated_peak == 2 * MiB);
    CHECK(r.baseline_makespan == 10 * ms);
    CHECK(r.simulated_makespan == 10 * ms);
    CHECK(r.throughput_loss == 0.0);
    // The same oracle evicting only on demand: C's allocation at 5 ms waits for A's D2H
    // 5-6 ms (stall 1, shift 1); C is freed at 9, seq 5 at 9 prefetches A (9-10), ready for
    // seq 6 at 10 ms: 1 ms in all.
    auto d = sim::simulate(t, no_early(config("belady", 2 * MiB, "lookahead:2")));
    CHECK(d.stall_time == 1 * ms);
    CHECK(d.early_evictions == 0);
    CHECK(d.simulated_makespan == 11 * ms);
    // On demand both ways (none): the same 1 ms, then A's swap-in at seq 6 (10-11): 2 ms.
    auto n = sim::simulate(t, config("belady", 2 * MiB, "none"));
    CHECK(n.stall_time == 2 * ms);
    CHECK(n.early_evictions == 0);
}

TEST_CASE("a saturated link: the stall equals the transfer time that compute cannot hide",
          "[sim][hand][early]") {
    // A 4 MiB written by seq 0 (0-1 ms), needed again by seq 4 at 10 ms. B 4 MiB lives
    // 3-5 ms. Capacity 4 MiB: A must be entirely off the GPU before B's allocation at 3 ms.
    // Live bytes at the kernel starts: 4, 4, 8, 4, 4 MiB.
    std::vector<Tensor> ts{{4 * MiB, 0, kNoTime}, {4 * MiB, 3 * ms, 5 * ms}};
    std::vector<K> ks{{0, 1 * ms, {{0, 'w'}}},     // seq 0
                      {1 * ms, 3 * ms, {}},        // seq 1: compute that can hide 2 ms of copy
                      {3 * ms, 4 * ms, {{1, 'w'}}},// seq 2
                      {5 * ms, 10 * ms, {}},       // seq 3
                      {10 * ms, 11 * ms, {{0, 'r'}}}};
    auto t = build(ts, ks);
    // Early: at seq 1 (1 ms) A is evictable, its absence spans seqs 2..3 whose peak is
    // 8 MiB > 4: D2H 1-5 ms (4 MiB at 1 MiB/ms). B at 3 ms waits for it: stall 5 - 3 =
    // 2 ms = 4 ms of transfer - 2 ms of compute before the need. Then B lives 5-7, seq 3
    // at 7 ms prefetches A (7-11), ready before seq 4 at 12 ms.
    auto r = sim::simulate(t, config("belady", 4 * MiB, "lookahead:1"));
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.stall_time == 2 * ms);
    CHECK(r.stall_count == 1);
    CHECK(r.early_evictions == 1);
    CHECK(r.swap_out_bytes == 4 * MiB);
    CHECK(r.swap_in_bytes == 4 * MiB);
    CHECK(r.prefetch_count == 1);
    CHECK(r.simulated_makespan == 13 * ms);
    CHECK(r.throughput_loss == Approx(2.0 / 11.0));
    // On demand the whole 4 ms transfer is exposed (D2H 3-7 ms).
    auto d = sim::simulate(t, no_early(config("belady", 4 * MiB, "lookahead:1")));
    CHECK(d.stall_time == 4 * ms);
    // A faster link (2 MiB/ms): D2H 1-3 ms, B at 3 ms fits exactly: no stall.
    auto f = config("belady", 4 * MiB, "lookahead:1");
    f.link.h2d.bandwidth_Bps = f.link.d2h.bandwidth_Bps = 2.0 * MiB * 1000.0;
    auto rf = sim::simulate(t, f);
    CHECK(rf.stall_time == 0);
}

TEST_CASE("early swap-out never fires when the foreseen demand fits", "[sim][early]") {
    // The same trace with 8 MiB of capacity: nothing to do, identical to the recording.
    std::vector<Tensor> ts{{4 * MiB, 0, kNoTime}, {4 * MiB, 3 * ms, 5 * ms}};
    std::vector<K> ks{{0, 1 * ms, {{0, 'w'}}}, {1 * ms, 3 * ms, {}}, {3 * ms, 4 * ms, {{1, 'w'}}},
                      {5 * ms, 10 * ms, {}}, {10 * ms, 11 * ms, {{0, 'r'}}}};
    auto t = build(ts, ks);
    for (const char* pf : {"lookahead:1", "lookahead:100", "periodic", "forecast"}) {
        auto r = sim::simulate(t, config("belady", 8 * MiB, pf));
        CHECK(r.early_evictions == 0);
        CHECK(r.swap_out_count == 0);
        CHECK(r.stall_time == 0);
    }
}

TEST_CASE("periodic learns the previous step's demand and evicts early", "[sim][hand][early]") {
    // Two steps of 10 ms. W (1 MiB, lives throughout) is used by each step's first kernel;
    // X1/X2 (2 MiB) live 3-5 ms of their step. Capacity 2 MiB: W must leave before X.
    std::vector<Tensor> ts{{MiB, 0, kNoTime}, {2 * MiB, 3 * ms, 5 * ms}, {2 * MiB, 13 * ms, 15 * ms}};
    std::vector<K> ks{{0, 1 * ms, {{0, 'w'}}, 0},         // seq 0 (step 0)
                      {1 * ms, 3 * ms, {}, 0},            // seq 1
                      {3 * ms, 4 * ms, {{1, 'w'}}, 0},    // seq 2
                      {5 * ms, 10 * ms, {}, 0},           // seq 3
                      {10 * ms, 11 * ms, {{0, 'x'}}, 1},  // seq 4 (step 1): W rewritten
                      {11 * ms, 13 * ms, {}, 1},          // seq 5
                      {13 * ms, 14 * ms, {{2, 'w'}}, 1},  // seq 6
                      {15 * ms, 20 * ms, {}, 1}};         // seq 7
    auto t = build(ts, ks);
    // Step 0 has nothing learnt: on demand. X1 at 3 ms: W D2H 3-4, stall 1 (shift 1).
    // Seq 4 at 11 ms needs W: H2D 11-12, stall 1 (shift 2); W is written (dirty).
    // Seq 5 at 13 ms: W is evictable and not in the window; the previous step's live bytes
    // over the rest of the step (seqs 2..3) peak at 3 MiB, nothing is off the GPU:
    // 3 > 2 MiB, so W leaves now: D2H 13-14 ms. X2 at 15 ms fits: no stall. Total 2 ms.
    auto r = sim::simulate(t, config("lru", 2 * MiB, "periodic:1"));
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.early_evictions == 1);
    CHECK(r.swap_out_count == 2);
    CHECK(r.stall_time == 2 * ms);
    // On demand in step 1 too: X2 at 15 ms waits for W's D2H 15-16: 3 ms in all.
    auto d = sim::simulate(t, no_early(config("lru", 2 * MiB, "periodic:1")));
    CHECK(d.stall_time == 3 * ms);
    CHECK(d.early_evictions == 0);
    // capuchin and none never evict early.
    CHECK(sim::simulate(t, config("lru", 2 * MiB, "none")).early_evictions == 0);
    CHECK(sim::simulate(t, config("lru", 2 * MiB, "capuchin")).early_evictions == 0);
}
