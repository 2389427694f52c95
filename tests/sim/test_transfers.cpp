// Rule 6 of docs/simulator.md on a hand-built trace: a cancelled swap-out keeps its link
// queue busy until its end (its link time is spent), and make room does not wait for it.
// Every number is worked out by hand from the document (helpers.hpp: 1 MiB takes 1 ms each
// way, two copy engines, no latency, no duplex slowdown).
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "helpers.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/sim/simulate.hpp"

using namespace simtest;
using namespace mhc;
using trace::kNoTime;

namespace {
constexpr int64_t us100 = ms / 10;   // 0.1 ms
}  // namespace

TEST_CASE("rule 6: a cancelled swap-out occupies its queue, the next swap-out starts after it", "[sim][spec][transfers]") {
    // Capacity 4 MiB, lru, lookahead:1 (window: the kernel and the next), no early swap-out.
    // Tensors: X 1 MiB [0, -), B 3 MiB [0, -), C 1 MiB [2, 3.5], D 1 MiB [4.6, -).
    // Kernels: k0 [0,1] writes X, B; k1 [3,3.5] writes C; k2 [4,4.2] read-writes X;
    // k3 [4.5,5] reads B.
    //  * LRU clock: X alloc 1, B alloc 2, k0: X 3, B 4.
    //  * C at 2 ms: 4 + 1 > 4, victim X (dirty): D2H 2-3; C waits: stall 1 (shift 1).
    //  * k1 at 4 (3 + 1): the window is {k1, k2}; prefetch X (k2 reads it): room needs a
    //    victim, B (C pinned; B not in the window): D2H 4-7 (3 MiB); the room is not there
    //    now, so the prefetch is skipped (rule 9). C freed at 3.5 + 1 = 4.5 (after k1's end).
    //  * k2 at 5: X on the host, 3 (B in D2H) + 1 <= 4: H2D 5-6; k2 starts at 6: stall 1
    //    (shift 2). Its write makes X dirty.
    //  * k3 at 6.5: B still in D2H (ends 7): the swap-out is cancelled (rule 2), B is on the
    //    GPU; no stall. The D2H queue stays busy until 7.
    //  * D at 6.6: 1 + 3 + 1 > 4, victim X (B pinned by k3), dirty: D2H starts at
    //    max(6.6, queue busy until 7) = 7, ends 8. Make room waits for X's copy (not for the
    //    cancelled one, which frees nothing): D at 8, stall 1.4 (shift 3.4).
    //    Had the cancelled copy freed its queue, X's copy would run 6.6-7.6 (stall 1.0).
    //  * Makespan: last recorded event 5 (k3's end) + 3.4 = 8.4 ms. Stalls 1 + 1 + 1.4 = 3.4.
    auto t = build({{MiB, 0, kNoTime}, {3 * MiB, 0, kNoTime}, {MiB, 2 * ms, 35 * us100}, {MiB, 46 * us100, kNoTime}},
                   {{0, 1 * ms, {{0, 'w'}, {1, 'w'}}},
                    {3 * ms, 35 * us100, {{2, 'w'}}},
                    {4 * ms, 42 * us100, {{0, 'x'}}},
                    {45 * us100, 5 * ms, {{1, 'r'}}}});
    auto c = config("lru", 4 * MiB, "lookahead:1");
    c.early_swap_out = false;
    auto r = sim::simulate(t, c);
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.swap_out_count == 3);
    CHECK(r.swap_out_bytes == 5 * MiB);
    CHECK(r.swap_in_count == 1);
    CHECK(r.prefetch_count == 0);
    CHECK(r.stall_count == 3);
    CHECK(r.stall_time == 34 * us100);
    CHECK(r.simulated_makespan == 84 * us100);
    CHECK(r.host_peak == 4 * MiB);   // X's copy and B's reservation, before the cancellation
    // The swap-outs as the link ran them: X 2-3, B 4-7 (cancelled, still on the link), X 7-8.
    std::vector<std::array<int64_t, 3>> outs;
    for (const auto& e : r.events)
        if (e.kind == trace::EventKind::SwapOut) outs.push_back({e.allocation, e.t_start, e.t_end});
    CHECK(outs == std::vector<std::array<int64_t, 3>>{{1, 2 * ms, 3 * ms}, {2, 4 * ms, 7 * ms}, {1, 7 * ms, 8 * ms}});
}

TEST_CASE("rule 6: make room does not wait for a cancelled swap-out (it frees nothing)", "[sim][spec][transfers]") {
    // The same first 6.5 ms, except that k3 reads X as well as B, and E (1 MiB) comes at 4.6
    // instead of D. At 6.6: 1 (X) + 3 (B) + 1 > 4, both pinned by k3, nothing to evict; the
    // only transfer in flight is B's cancelled copy (ends 7), which frees nothing when it
    // lands: no wait, an OOM at 6.6 ms (had make room waited for it: at 7 ms), short by
    // 1 MiB with 4 MiB pinned.
    auto t = build({{MiB, 0, kNoTime}, {3 * MiB, 0, kNoTime}, {MiB, 2 * ms, 35 * us100}, {MiB, 46 * us100, kNoTime}},
                   {{0, 1 * ms, {{0, 'w'}, {1, 'w'}}},
                    {3 * ms, 35 * us100, {{2, 'w'}}},
                    {4 * ms, 42 * us100, {{0, 'x'}}},
                    {45 * us100, 5 * ms, {{1, 'r'}, {0, 'r'}}}});
    auto c = config("lru", 4 * MiB, "lookahead:1");
    c.early_swap_out = false;
    auto r = sim::simulate(t, c);
    REQUIRE(r.oom.happened);
    CHECK(r.oom.time == 66 * us100);
    CHECK(r.oom.bytes_pinned == 4 * MiB);
    CHECK(r.oom.bytes_short == MiB);
    CHECK(r.stall_time == 2 * ms);   // C's 1 ms and k2's 1 ms, as in the first case
}

TEST_CASE("a transfer past the time range on a trace near its end blames the trace's times, not the link",
          "[sim][transfers]") {
    // X 1 MiB written by k0, then C 1 MiB under a 1 MiB capacity: X goes out (1 ms at the helpers'
    // link) when C arrives. Shifted so the last recorded time is just inside 2^62 ns, the swap-out
    // would end past it: the message said the link was too slow for the trace (a 1 ms copy).
    const int64_t base = (int64_t{1} << 62) - 25 * us100 - 1;
    auto t = build({{MiB, base, kNoTime}, {MiB, base + 2 * ms, base + 25 * us100}},
                   {{base, base + ms, {{0, 'w'}}}, {base + 2 * ms, base + 24 * us100, {{1, 'w'}}}});
    auto c = config("lru", MiB, "none");
    c.early_swap_out = false;
    CHECK_THROWS_WITH(sim::simulate(t, c), Catch::Contains("the trace's times are too close to its end") &&
                                               !Catch::Contains("the link is too slow"));
}

TEST_CASE("an OOM's pinned bytes leave out a recomputation's inputs in every branch", "[sim][oom]") {
    // Rule 7: pinned = the bytes pinned by a kernel; a recomputation's inputs are released before
    // the figures are taken. Kernel 4 needs A (100 MiB, on the GPU), C (512 B, dropped by dtr:
    // recomputed by rerunning kernel 1, whose input B, 3 MiB + 512 B, is pinned meanwhile) and D
    // (39.5 MiB, swapped out), whose swap-in finds no room. Pinned: A and C, 104,858,112 B; the
    // branch of an operand on the host counted B too (108,004,352 B) where the branch of a
    // recomputation that runs out itself did not. (Found by the first reading on random traces.)
    using mhc::trace::Category;
    const std::vector<simtest::Tensor> tensors = {{104'857'600, 55'724, 83'789, Category::Activation},
                                                  {3'146'240, 14'324, 101'678, Category::Activation},
                                                  {512, 3'472, 78'048, Category::Activation},
                                                  {41'418'752, 72'339, 92'590, Category::Activation}};
    const std::vector<simtest::K> kernels = {{49'724, 50'724, {{1, 'x'}, {2, 'x'}}},
                                             {62'339, 67'339, {{0, 'x'}}},
                                             {72'339, 72'339, {{0, 'w'}}},
                                             {73'339, 75'339, {{0, 'x'}, {2, 'r'}, {3, 'w'}}}};
    auto trace = simtest::build(tensors, kernels);
    auto cfg = simtest::config("dtr", 124'886'016);
    cfg.allocator = "ideal";
    cfg.link = mhc::sim::link_from_spec("pcie4");
    auto run = mhc::sim::simulate(trace, cfg);
    REQUIRE(run.oom.happened);
    CHECK(run.recompute_count > 0);   // C was dropped and its producer reran
    CHECK(run.oom.allocation == 4);
    CHECK(run.oom.bytes_pinned == 104'857'600 + 512);
}

TEST_CASE("caching model: make room counts only swap-outs of the request's own pool", "[sim][transfers][pools]") {
    // Five 10 MiB tensors (each its own 10 MiB segment: a request of 10 MiB or more gets a segment
    // of its size), a 30 MiB capacity, A (row 2) in a private pool (a torch.cuda.MemPool: meta as
    // a torch 2.15 snapshot's import writes it), lru.
    // - Dd at 4 ms: B, A, C fill the capacity; LRU: B (k0), A (1.5 ms), C (2 ms). B (dirty) goes
    //   out 4-14 ms; Dd waits for it: 10 ms stall (shift 10).
    // - k3 (7 + 10 = 17 ms) reads B: Dd was freed at 16, B comes back into its block 17-27 ms:
    //   10 ms stall (shift 20). B's host copy stays valid (k3 only reads it).
    // - R at 10 + 20 = 30 ms: A, B, C fill the capacity; LRU: A (1.5), B (17), C (k4, 28.5). A
    //   (dirty) goes out 30-40 ms, but its block then goes back to A's pool, where R cannot use
    //   it: make room does not count it as room for R, evicts B too (clean: at once), and R takes
    //   B's block at 30 ms, no stall. k6 (32 ms) reads A during its copy: cancelled, no stall.
    // Total stall 20 ms. Before 2026-12-05 every swap-out in flight counted: R waited for A's copy
    // (30-40 ms), then evicted B; k6 (at 42) swapped A back in (10 ms): 40 ms of stalls.
    auto trace_data = build({{10 * MiB, 0, kNoTime},          // 0 B
                    {10 * MiB, 0, kNoTime},          // 1 A, the private pool's
                    {10 * MiB, 2 * ms, kNoTime},     // 2 C
                    {10 * MiB, 4 * ms, 6 * ms},      // 3 Dd
                    {10 * MiB, 10 * ms, kNoTime}},   // 4 R
                   {{0, 1 * ms, {{0, 'w'}}},
                    {15 * us100, 18 * us100, {{1, 'w'}}},
                    {2 * ms, 3 * ms, {{2, 'w'}}},
                    {4 * ms, 5 * ms, {{3, 'w'}}},
                    {7 * ms, 8 * ms, {{0, 'r'}}},
                    {85 * us100, 9 * ms, {{2, 'r'}}},
                    {10 * ms, 11 * ms, {{4, 'w'}}},
                    {12 * ms, 13 * ms, {{1, 'r'}}}});
    trace_data.meta["snapshot.pools_from"] = "trace events (pool_id): exact";
    trace_data.meta["snapshot.allocation_pools"] = "0,1:2";
    auto cfg = config("lru", 30 * MiB);
    cfg.allocator = "caching";
    cfg.early_swap_out = false;
    auto res = sim::simulate(trace_data, cfg);
    REQUIRE_FALSE(res.oom.happened);
    std::vector<std::array<int64_t, 4>> evs;   // (kind, allocation id, start, end) of the transfers and evictions
    for (const auto& ev : res.events)
        if (ev.kind != trace::EventKind::Stall) evs.push_back({static_cast<int64_t>(ev.kind), ev.allocation, ev.t_start, ev.t_end});
    const auto out = static_cast<int64_t>(trace::EventKind::SwapOut), in = static_cast<int64_t>(trace::EventKind::SwapIn),
               clean = static_cast<int64_t>(trace::EventKind::EvictClean);
    CHECK(evs == std::vector<std::array<int64_t, 4>>{{out, 1, 4 * ms, 14 * ms},
                                                     {in, 1, 17 * ms, 27 * ms},
                                                     {out, 2, 30 * ms, 40 * ms},
                                                     {clean, 1, 30 * ms, 30 * ms}});
    CHECK(res.stall_time == 20 * ms);
}

namespace {
// The tensors and kernels of a hand-built trace with every time moved by `off` (kNoTime kept).
std::pair<std::vector<simtest::Tensor>, std::vector<simtest::K>> shifted(std::vector<simtest::Tensor> ts,
                                                                         std::vector<simtest::K> ks, int64_t off) {
    for (auto& x : ts) {
        x.t_alloc += off;
        if (x.t_free != kNoTime) x.t_free += off;
    }
    for (auto& k : ks) {
        k.start += off;
        k.end += off;
    }
    return {ts, ks};
}
}  // namespace

TEST_CASE("a trace moved in time simulates the same, moved: negative times down to -2^62 ns", "[sim][transfers]") {
    // Every rule reads differences of times, so moving every recorded time by one offset moves
    // every simulated time by it and changes no figure. The link queues, the cap on swap
    // operations, the GPU's recomputations and the D2H backlog that cost_aware scores with were
    // "free since 0" (the cap's previous transfer at -2^62 ns): a trace with negative times
    // stalled until 0 (makespans of 2^62 ns) or lost its first transfer's slot. Found by the
    // outside reading on random traces moved to the ends of the time range
    // (reference_outside_compare.py --edges=far).
    const std::vector<simtest::Tensor> first = {
        {MiB, 0, kNoTime}, {3 * MiB, 0, kNoTime}, {MiB, 2 * ms, 35 * us100}, {MiB, 46 * us100, kNoTime}};
    const std::vector<simtest::K> first_k = {{0, 1 * ms, {{0, 'w'}, {1, 'w'}}},
                                             {3 * ms, 35 * us100, {{2, 'w'}}},
                                             {4 * ms, 42 * us100, {{0, 'x'}}},
                                             {45 * us100, 5 * ms, {{1, 'r'}}}};
    using trace::Category;
    const std::vector<simtest::Tensor> second = {{104'857'600, 55'724, 83'789, Category::Activation},
                                                 {3'146'240, 14'324, 101'678, Category::Activation},
                                                 {512, 3'472, 78'048, Category::Activation},
                                                 {41'418'752, 72'339, 92'590, Category::Activation}};
    const std::vector<simtest::K> second_k = {{49'724, 50'724, {{1, 'x'}, {2, 'x'}}},
                                              {62'339, 67'339, {{0, 'x'}}},
                                              {72'339, 72'339, {{0, 'w'}}},
                                              {73'339, 75'339, {{0, 'x'}, {2, 'r'}, {3, 'w'}}}};
    struct Case { const char* name; bool first; std::string policy, prefetch; int64_t cap; double ops; };
    const std::vector<Case> cases = {{"lru, lookahead:1, 1000 ops/s", true, "lru", "lookahead:1", 4 * MiB, 1000},
                                     {"lru, lookahead:1", true, "lru", "lookahead:1", 4 * MiB, 0},
                                     {"cost_aware", true, "cost_aware", "none", 4 * MiB, 0},
                                     {"dtr, recomputation", false, "dtr", "none", 150'000'000, 0},
                                     {"dtr, OOM", false, "dtr", "none", 124'886'016, 0}};
    for (const Case& cs : cases) {
        for (int64_t off : {-(int64_t{1} << 62), -5 * ms, int64_t{-1}}) {
            INFO(cs.name << ", moved by " << off << " ns");
            auto c = config(cs.policy, cs.cap, cs.prefetch);
            c.max_swap_ops_per_sec = cs.ops;
            if (!cs.first) {
                c.allocator = "ideal";
                c.link = sim::link_from_spec("pcie4");
            }
            const auto& ts = cs.first ? first : second;
            const auto& ks = cs.first ? first_k : second_k;
            const auto base = sim::simulate(build(ts, ks), c);
            auto moved_rows = shifted(ts, ks, off - (cs.first ? 0 : 3'472));   // the first time at `off`
            const int64_t d = off - (cs.first ? 0 : 3'472);
            const auto moved = sim::simulate(build(moved_rows.first, moved_rows.second), c);
            CHECK(moved.simulated_makespan == base.simulated_makespan);
            CHECK(moved.stall_time == base.stall_time);
            CHECK(moved.stall_count == base.stall_count);
            CHECK(moved.swap_out_count == base.swap_out_count);
            CHECK(moved.swap_in_count == base.swap_in_count);
            CHECK(moved.recompute_count == base.recompute_count);
            CHECK(moved.oom.happened == base.oom.happened);
            if (base.oom.happened) CHECK(moved.oom.time == base.oom.time + d);
            REQUIRE(moved.events.size() == base.events.size());
            for (size_t i = 0; i < base.events.size(); ++i) {
                CHECK(moved.events[i].t_start == base.events[i].t_start + d);
                CHECK(moved.events[i].t_end == base.events[i].t_end + d);
            }
            REQUIRE(moved.kernel_times.size() == base.kernel_times.size());
            for (size_t i = 0; i < base.kernel_times.size(); ++i)
                CHECK(moved.kernel_times[i].t_start == base.kernel_times[i].t_start + d);
        }
    }
}

TEST_CASE("memory samples of a trace spanning 2^61 ns fall in their buckets", "[sim][transfers]") {
    // "Outputs": after each event, the device bytes are offered to bucket
    // floor((r - first) x N / (span + 1)). A 1 MiB tensor at 0 and a 2 MiB one at 2^61 ns, 64
    // buckets: bucket 0 keeps 1 MiB at 0, bucket 63 (2^61 x 64 / (2^61 + 11) is just under 64)
    // 2 MiB at 2^61. (r - first) x N overflowed 64 bits: both in bucket 0, one sample of 2 MiB.
    // Found by the outside reading (reference_outside_compare.py --edges=wide).
    const int64_t far = int64_t{1} << 61;
    auto t = build({{MiB, 0, 10}, {2 * MiB, far, far + 10}}, {});
    auto c = config("lru", 8 * MiB);
    c.memory_samples = 64;
    const auto r = sim::simulate(t, c);
    REQUIRE(r.memory.size() == 2);
    CHECK(r.memory[0].t == 0);
    CHECK(r.memory[0].device_bytes == MiB);
    CHECK(r.memory[1].t == far);
    CHECK(r.memory[1].device_bytes == 2 * MiB);
}

TEST_CASE("cost_aware's backlog is the D2H queue's: with one copy engine, the swap-ins before it", "[sim][spec][transfers]") {
    // "Eviction policies": hide = 1 when ttnu >= backlog + swap out + reload, backlog = the time the
    // D2H queue is busy beyond now; with one copy engine that queue is the one both directions share
    // (rule 8). Until 2026-12-06 the engine took the last swap-out's end, so a swap-in queued on the
    // shared queue hid nothing. Found by a second reading of the learning prefetchers over the third
    // reading's engine (reference_learning_engine_compare.py, seed 11, a one-engine link).
    // One copy engine, 1 MiB per ms each way, no latency, the ideal allocator, capacity 15 MiB; no
    // steps (depth 0.5: factor 1). Tensors: X 10 MiB, Y 1 MiB from 0; T 12 MiB [10, 12]; A 4 MiB and
    // B 1 MiB from 30. Kernels: k0 [0,1] writes X, Y; kT [10,11] writes T; k1 [31,32] writes A, B;
    // k2 [50,51] reads X, Y; kB [60,61] reads B; kA [80,81] reads A.
    //  * T at 10: 11 + 12 > 15. ttnu of X and Y = 50 (k2) - 0 (k0); X: 50/10, Y: 50/1: Y out first
    //    (10-11), then X (11-21): T placed at 21, stall 11.
    //  * k2 at 50 + 11 = 61: X back, 5 + 10 <= 15: H2D 61-71 on the shared queue. Y: 15 + 1 > 15,
    //    victims A (ttnu 80 - 50 = 30, reload 4, swap out 4) and B (ttnu 10, reload 1, swap out 1);
    //    backlog 71 - 61 = 10: A hides (30 >= 18): 30/4 = 7.5; B does not (10 < 12): 0.1 x 10 = 1.
    //    A goes out (71-75). With the last swap-out's end (21: backlog 0) B scored 10 and went.
    const std::vector<simtest::Tensor> ts = {{10 * MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {12 * MiB, 10 * ms, 12 * ms},
                                             {4 * MiB, 30 * ms, kNoTime}, {MiB, 30 * ms, kNoTime}};
    const std::vector<simtest::K> ks = {{0, 1 * ms, {{0, 'w'}, {1, 'w'}}}, {10 * ms, 11 * ms, {{2, 'w'}}},
                                        {31 * ms, 32 * ms, {{3, 'w'}, {4, 'w'}}}, {50 * ms, 51 * ms, {{0, 'r'}, {1, 'r'}}},
                                        {60 * ms, 61 * ms, {{4, 'r'}}}, {80 * ms, 81 * ms, {{3, 'r'}}}};
    auto cfg = config("cost_aware", 15 * MiB);
    cfg.allocator = "ideal";
    cfg.link.copy_engines = 1;
    const auto run = sim::simulate(build(ts, ks), cfg);
    REQUIRE_FALSE(run.oom.happened);
    CHECK(run.invariant_violation.empty());
    const auto outs = swapped_out(run);
    REQUIRE(outs.size() >= 3);
    CHECK(outs[0] == 2);   // Y
    CHECK(outs[1] == 1);   // X
    CHECK(outs[2] == 4);   // A, not B (5)
}
