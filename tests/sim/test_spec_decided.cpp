// Points that docs/simulator.md once left open, each decided there in one sentence and pinned
// here with numbers worked out by hand from the document (helpers.hpp: 1 MiB takes 1 ms each
// way; 1000 B take ceil(1000 / 1048576000 s) = 954 ns, 2000 B 1908 ns). The coupled points are
// in test_multirank.cpp.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"

using namespace simtest;
using namespace mhc;
using trace::kNoTime;

namespace {
sim::Config ideal(const std::string& policy, int64_t capacity, const std::string& prefetch = "none") {
    sim::Config c = config(policy, capacity, prefetch);
    c.allocator = "ideal";
    return c;
}
}  // namespace

TEST_CASE("decided: a kernel's assumed operands are in allocation id order, as a stored accesses table",
          "[sim][spec][decided]") {
    // Rows: id1 = 2000 B at 5 ns, id2 = 1000 B at 0, id3 = 1000 B [50, 80]; kernels [10, 20],
    // [60, 70], [100, 200]; no accesses; 3000 B, lru.
    // Assumed: k1 writes id1 and id2 (first kernel after each allocation, never freed), k3
    // (the last kernel) reads them; k2 writes id3 (ends at 70, by its free at 80).
    // LRU clock: id2 allocated (1), id1 allocated (2); k1's operands in id order: id1 (3),
    // id2 (4). id3 at 50 needs 1000 B: the least recent is id1 (2000 B, dirty): D2H
    // 50 - 1958, and then 3000 - 2000 + 1000 fits: id3 waits 1908 ns. k3 at 100 + 1908 needs
    // id1 back (id3 freed at 80 + 1908): H2D 1908 ns more. Stall 3816 ns; makespan
    // 200 -> 4016 ns. (In allocation order, id2 then id1, LRU would evict id2's 1000 B.)
    const std::vector<Tensor> ts = {{2000, 5, kNoTime}, {1000, 0, kNoTime}, {1000, 50, 80}};
    auto r = sim::simulate(build(ts, {{10, 20, {}}, {60, 70, {}}, {100, 200, {}}}), ideal("lru", 3000));
    REQUIRE(r.assumed_accesses);
    CHECK(r.invariant_violation.empty());
    CHECK(swapped_out(r) == std::vector<int64_t>{1});
    CHECK(r.swap_out_bytes == 2000);
    CHECK(r.swap_in_bytes == 2000);
    CHECK(r.stall_time == 3816);
    CHECK(r.simulated_makespan == 4016);

    // The same accesses written into the trace (listed id2 first): stored and read back in
    // (kernel, allocation) order, they give the same run.
    const std::string path = temp_path("assumed-order.db");
    write(path, ts, {{10, 20, {{1, 'w'}, {0, 'w'}}}, {60, 70, {{2, 'w'}}}, {100, 200, {{1, 'r'}, {0, 'r'}}}});
    auto stored = sim::simulate(trace::load_trace(path), ideal("lru", 3000));
    CHECK_FALSE(stored.assumed_accesses);
    CHECK(swapped_out(stored) == swapped_out(r));
    CHECK(stored.stall_time == r.stall_time);
    CHECK(stored.simulated_makespan == r.simulated_makespan);
}

TEST_CASE("decided: make room waits for every transfer in flight before an OOM, even when they cannot free enough",
          "[sim][spec][decided]") {
    // 2 MiB. A and B (1 MiB each, at 0) written by k1 [1, 2] ms; C (3 MiB) at 5 ms. Make room:
    // 2 + 3 > 2: evict A (D2H 5-6 ms); 2 - 1 + 3 > 2: evict B (D2H 6-7 ms); 2 - 2 + 3 > 2 and
    // no victim left: wait for A (6 ms), then for B (7 ms); nothing in flight, 3 MiB in 2: OOM
    // at 7 ms, not at 5. Makespan 7 ms; the part that ran (to the recorded 5 ms) was
    // 7 / 5 - 1 = 40% slower: oom_slowdown, not a throughput loss (the run did not finish).
    auto r = sim::simulate(build({{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {3 * MiB, 5 * ms, kNoTime}},
                                 {{1 * ms, 2 * ms, {{0, 'w'}, {1, 'w'}}}, {5 * ms, 6 * ms, {{2, 'w'}}}}),
                           ideal("lru", 2 * MiB));
    REQUIRE(r.oom.happened);
    CHECK(swapped_out(r) == std::vector<int64_t>{1, 2});
    CHECK(r.oom.time == 7 * ms);
    CHECK(r.oom.recorded == 5 * ms);
    CHECK(r.oom.bytes_short == MiB);
    CHECK(r.simulated_makespan == 7 * ms);
    CHECK(r.throughput_loss == Approx(0.4));

    // Stored metrics and --json say the same: no peak reduction or throughput loss, the
    // slowdown of the part that ran as oom_slowdown.
    std::map<std::string, double> m;
    for (const auto& [k, v] : sim::metrics(r)) m[k] = v;
    CHECK(m.count("throughput_loss") == 0);
    CHECK(m.count("peak_reduction") == 0);
    CHECK(m.at("oom_slowdown") == Approx(0.4));
    auto j = nlohmann::json::parse(sim::to_json(r)).at("metrics");
    CHECK(j.at("throughput_loss").is_null());
    CHECK(j.at("peak_reduction").is_null());
    CHECK(j.at("oom_slowdown").get<double>() == Approx(0.4));
    // A run that finished has both, and no oom_slowdown.
    auto ok = sim::simulate(build({{MiB, 0, kNoTime}}, {{1, 2, {{0, 'w'}}}}), ideal("lru", MiB));
    std::map<std::string, double> k;
    for (const auto& [key, v] : sim::metrics(ok)) k[key] = v;
    CHECK(k.count("throughput_loss") == 1);
    CHECK(k.count("peak_reduction") == 1);
    CHECK(k.count("oom_slowdown") == 0);
}

TEST_CASE("decided: the assumed reader is the latest-starting kernel, ties to the later row", "[sim][spec][decided]") {
    // No accesses. A (1 MiB) [0, 10 ms]: written by k1 [1, 2]; k2 [3, 4] and k3 [3, 5] (on
    // another stream) start together and both end by A's free: the reader is k3 (the later row), which pins A until
    // 5 ms. B (1 MiB) at 4.5 ms in 1 MiB: A is pinned, nothing else to evict, nothing in
    // flight: OOM at 4.5 ms with 1 MiB pinned. (Were k2 the reader, A would be evictable at
    // 4 ms and B would wait 1 ms for its swap-out.)
    auto r = sim::simulate(build({{MiB, 0, 10 * ms}, {MiB, 4 * ms + ms / 2, kNoTime}},
                                 {{1 * ms, 2 * ms, {}}, {3 * ms, 4 * ms, {}}, {3 * ms, 5 * ms, {}, -1, 1}}),
                           ideal("lru", MiB));
    REQUIRE(r.assumed_accesses);
    REQUIRE(r.oom.happened);
    CHECK(r.oom.time == 4 * ms + ms / 2);
    CHECK(r.oom.bytes_pinned == MiB);
}

namespace {
// Device 0: A (1 MiB, never freed), B [2.5, 2.8] ms; k1 [1, 2] and k2 [3, 4] ms on device 0,
// k3 [5, 6] ms on device 1.
trace::TraceData two_devices() {
    auto t = build({{MiB, 0, kNoTime}, {MiB, 2 * ms + ms / 2, 2 * ms + 8 * ms / 10}},
                   {{1 * ms, 2 * ms, {}}, {3 * ms, 4 * ms, {}}, {5 * ms, 6 * ms, {}}});
    t.kernels.device[2] = 1;
    return t;
}
}  // namespace

TEST_CASE("decided: an allocation never freed is read by the device's last kernel", "[sim][spec][decided]") {
    // A is written by k1 and read by device 0's last kernel, k2 (k3 runs on device 1). B: no
    // kernel starts after 2.5 ms and ends by 2.8 ms, none reads it. 1 MiB: B's allocation
    // evicts A (dirty, D2H 2.5-3.5 ms, stall 1 ms); B is freed at 3.8; k2 at 4 ms needs A:
    // H2D 4-5 ms, stall 1 ms. 2 ms in all; device 0's recorded span 0-4 ms -> 6 ms.
    auto r = sim::simulate(two_devices(), ideal("lru", MiB));
    REQUIRE(r.assumed_accesses);
    CHECK(r.device == 0);
    CHECK(r.invariant_violation.empty());
    CHECK(r.swap_in_count == 1);
    CHECK(r.stall_time == 2 * ms);
    CHECK(r.baseline_makespan == 4 * ms);
    CHECK(r.simulated_makespan == 6 * ms);
}

TEST_CASE("decided: accesses are assumed per device, when the simulated device has none", "[sim][spec][decided]") {
    // The trace above plus C on device 1, accessed by k3: the trace has an access, device 0
    // none. Device 0 is simulated with its accesses assumed, exactly as without C.
    auto t = two_devices();
    t.allocations.id.push_back(3);
    t.allocations.device.push_back(1);
    t.allocations.address.push_back(0);
    t.allocations.bytes.push_back(MiB);
    t.allocations.t_alloc.push_back(0);
    t.allocations.t_free.push_back(kNoTime);
    t.allocations.stream.push_back(0);
    t.allocations.category.push_back(trace::Category::Other);
    t.allocations.label.push_back(0);
    t.accesses.allocation.push_back(2);
    t.accesses.mode.push_back(trace::AccessMode::Read);
    t.kernels.access_begin = {0, 0, 0, 1};
    auto r = sim::simulate(t, ideal("lru", MiB));
    CHECK(r.device == 0);
    CHECK(r.assumed_accesses);
    CHECK(r.swap_in_count == 1);
    CHECK(r.stall_time == 2 * ms);
    // Device 1 has its own access: nothing assumed there.
    auto c = ideal("lru", sim::kUnlimited);
    c.device = 1;
    CHECK_FALSE(sim::simulate(t, c).assumed_accesses);
}

TEST_CASE("decided: early swap-out's link check reads the next kernel's recorded start, even for periodic",
          "[sim][spec][decided][early]") {
    // Two steps, 2 MiB, lru + periodic:1. W1, W2 (1 MiB, never freed) written by each step's
    // first kernel; X (2 MiB) lives across the third kernel of step 0 and after the last
    // kernel of step 1. The third kernel of step 1 (seq 5, the trace's last, on another
    // stream) starts at `next` ms: the only difference between the two runs.
    auto run = [](int64_t next) {
        std::vector<Tensor> ts{{MiB, 0, kNoTime}, {MiB, 0, kNoTime}, {2 * MiB, 2 * ms + ms / 2, 4 * ms},
                               {2 * MiB, 12 * ms + ms / 2, 14 * ms}};
        std::vector<K> ks{{0, 1 * ms, {{0, 'w'}, {1, 'w'}}, 0},           // seq 0
                          {1 * ms, 2 * ms, {}, 0},                          // seq 1
                          {3 * ms, 3 * ms + ms / 2, {{2, 'w'}}, 0, 1},      // seq 2
                          {10 * ms, 11 * ms, {{0, 'x'}, {1, 'x'}}, 1},      // seq 3
                          {11 * ms, 12 * ms, {}, 1},                        // seq 4
                          {next, 13 * ms, {}, 1, 1}};                       // seq 5
        return sim::simulate(build(ts, ks), ideal("lru", 2 * MiB, "periodic:1"));
    };
    // Step 0 on demand: X1 at 2.5 ms evicts W1 (D2H 2.5-3.5) and W2 (3.5-4.5): stall 2 ms.
    // Seq 3 at 12 ms brings both back (H2D 12-13, 13-14): stall 2 ms, shift 4 ms. Seq 4 at
    // 15 ms: W1's learnt next use is 3 kernels on (seq 6, past the end), and the previous
    // step's live bytes at position 2 were 4 MiB > 2: W1 leaves early (D2H 15-16).
    // next = 12 ms (16 simulated): the D2H queue is free by then (16 <= 16): W2 leaves too
    // (16-17); X2 at 16.5 ms waits for it: 0.5 ms.
    auto a = run(12 * ms);
    CHECK(a.invariant_violation.empty());
    CHECK(a.early_evictions == 2);
    CHECK(a.stall_time == 4 * ms + ms / 2);
    // next = 11.5 ms (15.5 simulated): the queue is busy past it (16 > 15.5): the round stops
    // after W1, and seq 5, the last kernel, has no next kernel to swap out for. X2 at 16.5 ms
    // evicts W2 on demand (D2H 16.5-17.5): 1 ms.
    auto b = run(11 * ms + ms / 2);
    CHECK(b.invariant_violation.empty());
    CHECK(b.early_evictions == 1);
    CHECK(b.stall_time == 5 * ms);
}
