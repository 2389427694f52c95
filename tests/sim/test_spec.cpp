// One test per rule of docs/simulator.md that the code and the document once read
// differently. Every expected number is worked out by hand in the comment,
// from the document alone; traces are hand-built (helpers.hpp: 1 MiB takes 1 ms each way).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/sim/event_order.hpp"
#include "mhc/sim/simulate.hpp"

using namespace simtest;
using namespace mhc;
using trace::kNoTime;

TEST_CASE("spec: LRU's clock is advanced by every allocation and every operand access", "[sim][spec]") {
    // A and B allocated at 0 (clock 1, 2), k1 [1,2] reads A (clock 3), C at 3 ms needs room in
    // 2 MiB: the least recent is B (2 < 3), dirty: D2H 3-4 ms, C waits 1 ms. A kernel-seq clock
    // would tie A and B (both allocated before any kernel).
    auto t = build({{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {MiB, 3 * ms, kNoTime}},
                   {{1 * ms, 2 * ms, {{0, 'r'}}}, {4 * ms, 5 * ms, {{2, 'w'}}}});
    auto r = sim::simulate(t, config("lru", 2 * MiB));
    CHECK(r.invariant_violation.empty());
    CHECK(swapped_out(r) == std::vector<int64_t>{2});
    CHECK(r.stall_time == 1 * ms);

    // A snapshot (no kernels): allocations at one instant tick in (t_alloc, row) order, so
    // the first allocated is the least recent: C at 1 ms evicts A.
    auto snap = build({{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {MiB, 1 * ms, kNoTime}}, {});
    auto s = sim::simulate(snap, config("lru", 2 * MiB));
    CHECK(swapped_out(s) == std::vector<int64_t>{1});
}

TEST_CASE("spec: the host (device -1) is simulated only when asked for", "[sim][spec]") {
    // Host buffers of 3 MiB (device -1) beside 1 MiB on device 0: the host's peak is larger,
    // and still device 0 is picked.
    auto t = build({{3 * MiB, 0, 5 * ms}, {MiB, 0, 5 * ms}}, {{1 * ms, 2 * ms, {{1, 'w'}}}});
    t.allocations.device[0] = -1;
    CHECK(sim::device_of(*sim::prepare(t)) == 0);
    auto r = sim::simulate(t, config("lru", sim::kUnlimited));
    CHECK(r.device == 0);
    CHECK(r.baseline_peak == MiB);
    CHECK(sim::device_of(*sim::prepare(t, -1)) == -1);
    auto c = config("lru", sim::kUnlimited);
    c.device = -1;
    CHECK(sim::simulate(t, c).baseline_peak == 3 * MiB);
    CHECK(sim::to_map(config("lru", MiB)).at("device") == "auto");

    // Only host memory: refused by default (bad input), naming --device -1.
    auto host_only = build({{MiB, 0, kNoTime}}, {});
    host_only.allocations.device[0] = -1;
    try {
        sim::prepare(host_only);
        FAIL("prepare picked the host");
    } catch (const Error& e) {
        CHECK(e.exit_code() == 2);
        CHECK(std::string(e.what()).find("--device -1") != std::string::npos);
    }
}

TEST_CASE("spec: an allocation never freed is read by the device's last kernel (assumed accesses)", "[sim][spec]") {
    // No accesses. A (never freed): written by k1 [1,2], read by the last kernel k3 [5,6].
    // B [2, 4.5] ms: written by k2 [3,4]; no later kernel ends by its free: no read.
    // Capacity 1 MiB: B's allocation at 2 ms evicts A (dirty): D2H 2-3, stall 1 (shift 1).
    // k3 at 6 ms needs A (B freed at 5.5): H2D 6-7, stall 1. Total 2 ms, one swap-in.
    auto t = build({{MiB, 0, kNoTime}, {MiB, 2 * ms, 4 * ms + ms / 2}},
                   {{1 * ms, 2 * ms, {}}, {3 * ms, 4 * ms, {}}, {5 * ms, 6 * ms, {}}});
    auto r = sim::simulate(t, config("lru", MiB));
    CHECK(r.assumed_accesses);
    CHECK(r.invariant_violation.empty());
    CHECK(r.swap_in_count == 1);
    CHECK(r.stall_time == 2 * ms);
    CHECK(r.simulated_makespan == 8 * ms);
}

TEST_CASE("spec: an assumed writer ends by the free (rule 4 holds for assumed accesses)", "[sim][spec]") {
    // One allocation [0, 10], one kernel [5, 15], no accesses: the kernel would run past the
    // free, so it is not assumed to write it; unlimited capacity is the recorded timeline.
    auto t = build({{MiB, 0, 10}}, {{5, 15, {}}});
    auto r = sim::simulate(t, config("lru", sim::kUnlimited));
    CHECK(r.assumed_accesses);
    CHECK(r.invariant_violation.empty());
    CHECK(r.simulated_makespan == r.baseline_makespan);
    CHECK(r.simulated_makespan == 15);
    // A kernel that ends by the free is its writer, and pins it while it runs: A [0, 3 ms],
    // k1 [1, 2] writes it; B (1 MiB) at 1.5 ms cannot evict A in 1 MiB: an OOM.
    auto w = build({{MiB, 0, 3 * ms}, {MiB, ms + ms / 2, kNoTime}}, {{1 * ms, 2 * ms, {}}});
    auto rw = sim::simulate(w, config("lru", MiB));
    REQUIRE(rw.oom.happened);
    CHECK(rw.oom.bytes_pinned == MiB);
}

TEST_CASE("spec: transfer times are rounded up to whole ns, at least 1 ns", "[sim][spec]") {
    // 1000 B at 3e9 B/s = 333.33 ns -> 334 ns: B's allocation waits for A's swap-out.
    auto t = build({{1000, 0, kNoTime}, {1000, 1000, kNoTime}}, {{0, 1000, {{0, 'w'}}}, {1000, 2000, {{1, 'w'}}}});
    auto c = config("lru", 1000);
    c.link.h2d.bandwidth_Bps = c.link.d2h.bandwidth_Bps = 3e9;
    auto r = sim::simulate(t, c);
    CHECK(r.stall_time == 334);
    // 1 B at 1e12 B/s = 0.001 ns -> 1 ns.
    auto one = build({{1, 0, kNoTime}, {1, 1000, kNoTime}}, {{0, 1000, {{0, 'w'}}}, {1000, 2000, {{1, 'w'}}}});
    auto c1 = config("lru", 1);
    c1.link.h2d.bandwidth_Bps = c1.link.d2h.bandwidth_Bps = 1e12;
    CHECK(sim::simulate(one, c1).stall_time == 1);
}

TEST_CASE("spec: a zero-length kernel ends right after its start, before the next start of its instant", "[sim][spec]") {
    // Capacity 1 MiB. C written by k0 [0,1]; A allocated at 1 ms evicts C (D2H 1-2, stall 1).
    // At recorded 2 ms (simulated 3): Z [2,2] reads A, then Z ends (A unpinned), then K2
    // [2,3] needs C: evict A (never written: D2H 3-4), then H2D C 4-5: stall 2. Total 3 ms,
    // makespan 3 -> 6 ms. Had Z ended after K2's start, A would be pinned: an OOM.
    auto t = build({{MiB, 0, kNoTime}, {MiB, 1 * ms, kNoTime}},
                   {{0, 1 * ms, {{0, 'w'}}}, {2 * ms, 2 * ms, {{1, 'r'}}}, {2 * ms, 3 * ms, {{0, 'r'}}}});
    auto r = sim::simulate(t, config("lru", MiB));
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.stall_time == 3 * ms);
    CHECK(r.swap_out_count == 2);
    CHECK(r.swap_in_count == 1);
    CHECK(r.simulated_makespan == 6 * ms);
}

TEST_CASE("spec: an OOM run's makespan ends at the OOM and its loss is that of the part that ran", "[sim][spec]") {
    // Capacity 1 MiB. A written by k1 [1,2]; B at 2 ms evicts A (D2H 2-3, stall 1, shift 1);
    // C (3 MiB) at recorded 4 ms = simulated 5: B evicted (D2H 5-6), waited for, and still
    // 3 MiB do not fit: OOM at 6 ms. Makespan 6 ms; loss = 6 / 4 (recorded OOM instant) - 1.
    auto t = build({{MiB, 0, kNoTime}, {MiB, 2 * ms, kNoTime}, {3 * MiB, 4 * ms, kNoTime}},
                   {{1 * ms, 2 * ms, {{0, 'w'}}}, {2 * ms, 3 * ms, {{1, 'w'}}}, {4 * ms, 5 * ms, {{2, 'w'}}}});
    auto r = sim::simulate(t, config("lru", MiB));
    REQUIRE(r.oom.happened);
    CHECK(r.oom.time == 6 * ms);
    CHECK(r.oom.recorded == 4 * ms);
    CHECK(r.stall_time == 1 * ms);
    CHECK(r.simulated_makespan == 6 * ms);
    CHECK(r.throughput_loss == Approx(0.5));
}

TEST_CASE("spec: assumed_accesses only where there is something to assume", "[sim][spec]") {
    // kernels and allocations, no accesses: assumed
    CHECK(sim::simulate(build({{MiB, 0, kNoTime}}, {{1, 2, {}}}), config("lru", sim::kUnlimited)).assumed_accesses);
    // a snapshot (allocations, no kernels): nothing is accessed, nothing assumed
    CHECK_FALSE(sim::simulate(build({{MiB, 0, kNoTime}}, {}), config("lru", sim::kUnlimited)).assumed_accesses);
    // kernels without allocations: nothing to access
    CHECK_FALSE(sim::simulate(build({}, {{1, 2, {}}}), config("lru", sim::kUnlimited)).assumed_accesses);
}

TEST_CASE("spec: a zero-length kernel at its operand's free instant skips that operand", "[sim][spec]") {
    // A [0, 5 ms], read by k1 [1,2] and by the zero-length Z [5,5]: frees come before starts
    // at an instant, so A is gone when Z starts; Z needs nothing for no time. No violation,
    // no swap-in, the recorded timeline, at any capacity that holds A.
    auto t = build({{MiB, 0, 5 * ms}}, {{1 * ms, 2 * ms, {{0, 'w'}}}, {5 * ms, 5 * ms, {{0, 'r'}}}});
    auto r = sim::simulate(t, config("lru", MiB));
    CHECK(r.invariant_violation.empty());
    CHECK_FALSE(r.oom.happened);
    CHECK(r.swap_in_count == 0);
    CHECK(r.simulated_makespan == 5 * ms);
}

TEST_CASE("spec: the event order (shared by the engine and replay's plan)", "[sim][spec]") {
    // At 2 ms: k1's end, A's free, B's allocation, Z's start, Z's end (zero length), K3's start.
    auto t = build({{MiB, 0, 2 * ms}, {MiB, 2 * ms, kNoTime}},
                   {{1 * ms, 2 * ms, {{0, 'w'}}}, {2 * ms, 2 * ms, {{1, 'r'}}}, {2 * ms, 3 * ms, {{1, 'r'}}}});
    auto ev = sim::event_streams(t, 0);
    sim::EventCursor c(ev, t);
    using R = sim::Recorded;
    std::vector<std::pair<R, int32_t>> got;
    for (sim::RecordedEvent e; c.next(e);) got.push_back({e.what, e.row});
    std::vector<std::pair<R, int32_t>> want{{R::Allocation, 0}, {R::KernelStart, 0}, {R::KernelEnd, 0},
                                            {R::Free, 0},       {R::Allocation, 1},  {R::KernelStart, 1},
                                            {R::KernelEnd, 1},  {R::KernelStart, 2}, {R::KernelEnd, 2}};
    CHECK(got == want);
}

TEST_CASE("spec: blocks alive only at one instant are allocated, counted and freed", "[sim][spec][event-order]") {
    // A snapshot's shape: 1 MiB alive throughout, and five 512 MiB blocks each allocated and
    // freed at one instant (alloc and free_completed with the same time_us), one at 3 ms
    // beside a 2 MiB block that stays. The baseline peak is 1 + 2 + 512 MiB (the last block is
    // made while the 2 MiB one is alive); unlimited capacity gives it back, and 600 MiB holds it.
    std::vector<Tensor> tensors{{MiB, 0, kNoTime}};
    for (int i = 0; i < 4; ++i) tensors.push_back({512 * MiB, (i + 1) * ms / 2, (i + 1) * ms / 2});
    tensors.push_back({2 * MiB, 3 * ms, kNoTime});
    tensors.push_back({512 * MiB, 3 * ms, 3 * ms});
    auto t = build(tensors, {});
    auto ev = sim::event_streams(t, 0);
    sim::EventCursor c(ev, t);
    using R = sim::Recorded;
    std::vector<std::pair<R, int32_t>> got;
    for (sim::RecordedEvent e; c.next(e);) got.push_back({e.what, e.row});
    std::vector<std::pair<R, int32_t>> want{{R::Allocation, 0}, {R::Allocation, 1}, {R::Free, 1},
                                            {R::Allocation, 2}, {R::Free, 2},       {R::Allocation, 3},
                                            {R::Free, 3},       {R::Allocation, 4}, {R::Free, 4},
                                            {R::Allocation, 5}, {R::Allocation, 6}, {R::Free, 6}};
    CHECK(got == want);
    for (const char* allocator : {"ideal", "caching"}) {
        INFO(allocator);
        auto cfg = config("lru", sim::kUnlimited);
        cfg.allocator = allocator;
        auto r = sim::simulate(t, cfg);
        CHECK(r.invariant_violation.empty());
        CHECK(r.simulated_peak == r.baseline_peak);
        CHECK(r.throughput_loss == 0);
        // Caching: the 2 MiB block splits the cached 512 MiB segment, so the last 512 MiB block
        // needs a segment of its own: 2 MiB (small pool) + 2 x 512 MiB.
        CHECK(r.baseline_peak == (std::string(allocator) == "ideal" ? 515 * MiB : 1026 * MiB));
    }
    auto cfg = config("lru", 600 * MiB);
    auto r = sim::simulate(t, cfg);
    CHECK_FALSE(r.oom.happened);
    CHECK(r.throughput_loss == 0);
    CHECK(r.swap_out_count == 0);
}

TEST_CASE("recompute is recursive: a dropped input of the producer is recomputed first", "[sim][spec][recompute]") {
    // Activations X (written by k1 [1, 1.1 ms]) and Y (k2 [2, 2.1 ms] reads X, writes Y), never
    // freed. Z (2 MiB, [3, 5 ms]) needs the whole 2 MiB: dtr drops X and Y (recompute 0.1 ms
    // each, cheaper than a 2 ms round trip). k4 [6, 7] reads Y: Y's producer k2 needs X, which
    // is dropped too: X is recomputed first (6 - 6.1 ms, depth 2), then Y (6.1 - 6.2 ms, depth
    // 1): k4 waits 0.2 ms (the one-kernel-deep model charged 0.1 ms and never brought X back).
    using trace::Category;
    const int64_t us = 1000;
    auto t = build({{MiB, 0, kNoTime, Category::Activation}, {MiB, 0, kNoTime, Category::Activation},
                    {2 * MiB, 3 * ms, 5 * ms}},
                   {{1 * ms, 1 * ms + 100 * us, {{0, 'w'}}},
                    {2 * ms, 2 * ms + 100 * us, {{0, 'r'}, {1, 'w'}}},
                    {3 * ms, 4 * ms, {{2, 'w'}}},
                    {6 * ms, 7 * ms, {{1, 'r'}}}});
    auto r = sim::simulate(t, config("dtr", 2 * MiB));
    REQUIRE_FALSE(r.oom.happened);
    CHECK(r.invariant_violation.empty());
    CHECK(r.drop_count == 2);
    CHECK(r.recompute_count == 2);
    CHECK(r.recompute_time == 200 * us);
    CHECK(r.recompute_depth_max == 2);
    CHECK(r.recompute_inputs_assumed == 0);
    CHECK(r.stall_time == 200 * us);
    CHECK(r.simulated_makespan == 7 * ms + 200 * us);
    CHECK(r.swap_in_count == 0);
}

TEST_CASE("prefetch names are parsed once, into types, unknown names are errors", "[sim][config]") {
    auto p = sim::parse_prefetch("lookahead:12");
    CHECK(p.kind == sim::PrefetchKind::Lookahead);
    CHECK(p.window == 12);
    CHECK(sim::parse_prefetch("forecast").kind == sim::PrefetchKind::Forecast);
    CHECK(sim::parse_prefetch("forecast").window == 8);
    CHECK(sim::parse_prefetch("periodic:3").window == 3);
    CHECK_THROWS_AS(sim::parse_prefetch("lookahed:8"), Error);   // was silently "none"
    CHECK_THROWS_AS(sim::parse_prefetch("lookahead:x"), Error);  // was std::stoi's exception
    CHECK_THROWS_AS(sim::parse_prefetch("lookahead:0"), Error);
    // the window follows the options' number grammar: 08 was read as 8
    CHECK_THROWS_WITH(sim::parse_prefetch("lookahead:08"), "'lookahead:08': the window '08': a whole number "
                                                           "starts with no 0 (it is decimal, not octal)");
    CHECK_THROWS_WITH(sim::parse_prefetch("periodic:1_0"), Catch::Contains("'1_0': not a whole number"));
    CHECK_THROWS_WITH(sim::parse_prefetch("lookahead:-1"), Catch::Contains("'-1': must be 0 or more"));
    CHECK_THROWS_WITH(sim::parse_prefetch("capuchin:3"), Catch::Contains("takes no argument"));
    auto c = config("lru", MiB, "nonesuch");
    CHECK_THROWS_AS(sim::simulate(build({{MiB, 0, kNoTime}}, {{1, 2, {{0, 'w'}}}}), c), Error);
}

TEST_CASE("spec: an order-only trace's run says its time figures are not times", "[sim][spec][order-only]") {
    // Event numbers as times (a snapshot without time_us): a swap-out's cost in ns is compared
    // with 1 ns per event, so loss, stalls and makespan mean nothing; the peaks stand.
    auto t = build({{MiB, 1, kNoTime}, {MiB, 2, 3}, {MiB, 4, kNoTime}}, {});
    t.meta["timing"] = "order-only";
    auto r = sim::simulate(t, config("lru", 2 * MiB));
    CHECK(r.order_only);
    REQUIRE_FALSE(r.warnings.empty());
    CHECK(r.warnings.front().find("order only") != std::string::npos);
    std::string text = sim::to_text(r);
    CHECK(text.find("makespan       not a time") != std::string::npos);
    CHECK(text.find("(throughput loss") == std::string::npos);
    CHECK(text.find("peak           baseline 2.00 MiB") != std::string::npos);
    CHECK(nlohmann::json::parse(sim::to_json(r))["timing"] == "order-only");
    t.meta["timing"] = "exact";
    CHECK(sim::to_text(sim::simulate(t, config("lru", 2 * MiB))).find("(throughput loss") != std::string::npos);
}
