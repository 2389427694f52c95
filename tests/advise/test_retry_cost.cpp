// What running at the capacity costs (docs/advise.md "What running at the capacity costs"): the
// full releases, cudaFree and cudaMalloc calls and bytes of the caching model's walk at the
// capacity against the walk without a limit, and the time that adds to an answer, which the search
// ranks by; the allocator settings the search keeps, chosen by their run at the capacity.
#include <catch2/catch.hpp>

#include "mhc/advise/planner.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "retry_steps.hpp"
#include "tiny.hpp"

using mhc::advise::Advice;
using mhc::advise::Base;
using mhc::advise::Candidate;
using mhc::advise::Evaluator;
using mhc::advise::Memory;
using mhc::advise::PlannerOptions;
using mhc::advise::Setting;
using mhc::advise::make_base;
using mhc::advise::roundup_values;
using mhc::advise::split_size_values;
using mhc::advise::search_allocator_confs;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Two steps of R (300 MiB) and S (200 MiB) (retry_steps.hpp): live at most 340 MiB (R and G).
advisetest::TinyTrace thrash() { return advisetest::retry_steps(2, 200 * kMiB); }

// Two steps of A (300 MiB) and B (302 MiB).
advisetest::TinyTrace near_sizes() { return advisetest::retry_steps(2, 302 * kMiB, "A", "B"); }

struct Step {
    mhc::test::TempPath path{"thrash.db"};
    mhc::trace::TraceData data;
    Base base;
    Step() {
        thrash().write(path.path);
        data = mhc::trace::load_checked_trace(path.path);
        base = make_base(data);
    }
};

Memory at(const Evaluator& ev, const char* conf, int64_t capacity) {
    Setting setting;
    setting.allocator = conf;
    return ev.predict(setting, capacity).memory;
}

}   // namespace

TEST_CASE("an answer that runs by giving cached memory back every step pays for it", "[advise][allocator][retry]") {
    // max_split_size_mb:100: R and S are oversize (>= 100 MiB): never split, and S (200) takes no
    // cached block 20 MiB or more larger than itself (R's 300). Without a limit: R 300, G 40, S 200
    // cudaMalloc'd once each, then reused: 540 MiB reserved, 3 cudaMallocs (540 MiB), no cudaFree.
    // At 440 MiB (PyTorch's malloc: alloc_block, release_available_cached_blocks, then
    // release_cached_blocks, then alloc_block):
    //   step 1: S's cudaMalloc (540 > 440) fails; release_available_cached_blocks gives back one free
    //           oversize block >= max(200, 100): R's 300 (a cudaFree); S is cudaMalloc'd: 240.
    //   step 2: R's cudaMalloc (540) fails; no free oversize block >= 300, so the oversize blocks
    //           from the largest down: S's 200 (a cudaFree; 200 < 300: not enough), then the full
    //           release (a synchronisation; nothing more is free, G is in use) and R is cudaMalloc'd:
    //           340. R freed, S's cudaMalloc fails again: R's 300 given back (a cudaFree), S made: 240.
    // So 3 requests retried, 1 full release, 3 cudaFrees (300 + 200 + 300 = 800 MiB) and 5
    // cudaMallocs (1040 MiB), 2 of them (500 MiB) more than without a limit. The cost (RetryCost):
    // 1 x 50 us + (3 + 2) x 50 us + (800 + 500) MiB x 0.5 ms/GiB (634,765.625 ns, rounded) = 934,766 ns.
    Step step;
    Evaluator ev(step.base, mhc::sim::link_from_spec("pcie4"));
    const Memory split = at(ev, "max_split_size_mb:100", 440 * kMiB);
    CHECK(split.reserved == 540 * kMiB);
    CHECK(split.fits);
    CHECK(split.reserved_at == 340 * kMiB);
    CHECK(split.retries == 3);
    CHECK(split.releases == 1);
    CHECK(split.segments_freed == 3);
    CHECK(split.bytes_freed == 800 * kMiB);
    CHECK(split.segments_remade == 2);
    CHECK(split.bytes_remade == 500 * kMiB);
    CHECK(split.retry_cost == 934766);
    // The same walk through the simulator's own counters.
    const auto prepared = mhc::sim::prepare(step.data);
    const auto walk = mhc::sim::caching_under_limit(*prepared, "max_split_size_mb:100", 440 * kMiB);
    CHECK(walk.retries == 3);
    CHECK(walk.releases == 1);
    CHECK(walk.device_frees == 3);
    CHECK(walk.free_bytes == 800 * kMiB);
    CHECK(walk.device_allocs == 5);
    CHECK(walk.alloc_bytes == 1040 * kMiB);
    // As captured (the default settings, spelt expandable_segments:False) S splits R's free 300
    // block: 340 MiB reserved without a limit, within 440: nothing is given back, nothing to pay.
    const Memory plain = at(ev, "expandable_segments:False", 440 * kMiB);
    CHECK(plain.reserved == 340 * kMiB);
    CHECK(plain.fits);
    CHECK(plain.retries == 0);
    CHECK(plain.retry_cost == 0);
    // At 540 MiB, the reserved peak without a limit, max_split_size_mb:100 gives nothing back either.
    CHECK(at(ev, "max_split_size_mb:100", 540 * kMiB).retry_cost == 0);

    // The search, on the same step captured with PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:100 (meta
    // allocator.conf), under the allocator as captured and max_split_size_mb:1000 (over it: R and S
    // are no longer oversize, S splits R's block as above). Both run at 440 with the same kernels:
    // ranked by step time alone, of equals the shorter setting came first, the step as captured, which
    // gives memory back and makes it again every step. Now that cost is in its time and loss.
    mhc::test::TempPath recorded{"thrash_recorded.db"};
    advisetest::TinyTrace tiny = thrash();
    tiny.meta.emplace_back("allocator.conf", "max_split_size_mb:100");
    tiny.write(recorded.path);
    const auto captured = mhc::trace::load_checked_trace(recorded.path);
    const Base captured_base = make_base(captured);
    Evaluator captured_ev(captured_base, mhc::sim::link_from_spec("pcie4"));
    PlannerOptions opts;
    opts.host_optimizer = opts.fused_optimizer = false;
    opts.split_sizes = opts.roundup_divisions = 0;
    opts.allocator_confs = {"", "max_split_size_mb:1000"};
    opts.capacity = 440 * kMiB;
    opts.top = 5;
    const Advice advice = advise(captured_ev, opts);
    CHECK(advice.baseline.memory.retry_cost == 934766);   // the captured step itself thrashes at 440
    REQUIRE(!advice.ranked.empty());
    CHECK(to_json(advice.ranked[0].setting) == R"({"allocator":"max_split_size_mb:1000"})");
    CHECK(advice.ranked[0].loss == 0);
    CHECK(advice.ranked[0].prediction.memory.retry_cost == 0);
    const Candidate* thrashing = nullptr;
    for (const Candidate& cand : advice.all)
        if (to_json(cand.setting) == "{}") thrashing = &cand;
    REQUIRE(thrashing != nullptr);
    CHECK(thrashing->fits);
    CHECK(thrashing->prediction.step_time == advice.ranked[0].prediction.step_time);
    // In its time a steady step's cost, the second step's (test_steady_cost.cpp: 738,281 ns) for each
    // of the capture's 2 steps; the capture's own 934,766 ns stays in retry_cost.
    CHECK(time_as_captured(thrashing->prediction) == thrashing->prediction.step_time + 934766);
    CHECK(time_at_capacity(thrashing->prediction) == thrashing->prediction.step_time + 2 * 738281);
    // the loss is against the captured step's own time (its step time, without a cost)
    CHECK(thrashing->loss == Approx(2.0 * 738281 / static_cast<double>(advice.baseline.step_time)));
}

TEST_CASE("garbage collection's frees at the capacity are paid for, where the step fits without a limit",
          "[advise][allocator][retry]") {
    // max_split_size_mb:100 with garbage_collection_threshold:0.5 at 600 MiB (the model takes the
    // capacity for the allowed maximum PyTorch collects under): 540 MiB reserved without a limit,
    // within 600, but above 0.5 x 600 = 300, so garbage collection acts there and the step is walked
    // at the capacity. Step 1: S finds no block (R's 300 is oversize and 100 MiB larger): collection
    // (340 > 300) gives back R's free whole segment (a cudaFree of 300 MiB, no synchronisation), S is
    // cudaMalloc'd: 240. Step 2: R finds only S's 200 free: 240 is within 300, no collection; R is
    // cudaMalloc'd again (540); S takes its own cached block back. So no retry, no full release, 1
    // segment given back and 1 made again (300 MiB each): 2 x 50 us + 600 MiB x 0.5 ms/GiB
    // (292,968.75 ns, rounded) = 392,969 ns. Before, a step within the capacity was not walked there.
    Step step;
    Evaluator ev(step.base, mhc::sim::link_from_spec("pcie4"));
    const Memory gc = at(ev, "max_split_size_mb:100,garbage_collection_threshold:0.5", 600 * kMiB);
    CHECK(gc.reserved == 540 * kMiB);
    CHECK(gc.fits);
    CHECK(gc.reserved_at == 540 * kMiB);
    CHECK(gc.retries == 0);
    CHECK(gc.releases == 0);
    CHECK(gc.segments_freed == 1);
    CHECK(gc.bytes_freed == 300 * kMiB);
    CHECK(gc.segments_remade == 1);
    CHECK(gc.bytes_remade == 300 * kMiB);
    CHECK(gc.retry_cost == 392969);
    // At 1100 MiB the threshold (550) is above the reserved peak: nothing is collected.
    CHECK(at(ev, "max_split_size_mb:100,garbage_collection_threshold:0.5", 1100 * kMiB).retry_cost == 0);
}

TEST_CASE("the allocator settings tried on the step above", "[advise][allocator][retry]") {
    // Requests of 300, 200 and 40 MiB: max_split_size_mb 256, 128 and 32 (the classes (200,300],
    // (40,200], (20,40]); roundup_power2_divisions 2 (384 256 48), 4 (320 224 40), 8 (320 208 40) and
    // 16 (304 200 40) each round them otherwise. At 440 MiB the step as captured runs without giving
    // anything back (340 MiB): no value does better, none is kept.
    Step step;
    Evaluator ev(step.base, mhc::sim::link_from_spec("pcie4"));
    PlannerOptions opts;
    opts.host_optimizer = opts.fused_optimizer = false;
    opts.capacity = 440 * kMiB;
    int64_t trials = 0;
    CHECK(split_size_values(step.data, 8) == std::vector<int64_t>{256, 128, 32});
    CHECK(roundup_values(step.data, 4) == std::vector<int64_t>{2, 4, 8, 16});
    CHECK(roundup_values(step.data, 2) == std::vector<int64_t>{2, 4});
    CHECK(search_allocator_confs(ev, opts, trials) == opts.allocator_confs);
    CHECK(trials == 2 + 2 * 3 + 2 * 4);
}

TEST_CASE("roundup_power2_divisions is searched and kept where it runs at the capacity without a retry",
          "[advise][allocator][retry]") {
    // A 300, B 302, G 40 MiB. As captured: B finds A's free 300 too small and is cudaMalloc'd: 642 MiB
    // reserved without a limit; at 360 its cudaMalloc fails, the full release gives A's segment back
    // and B is made (342): 1 retry, 1 release, 1 cudaFree of 300 MiB, nothing made beyond the walk
    // without a limit (A, G, B: 642 MiB both): 50 us + 50 us + 300 MiB x 0.5 ms/GiB (146,484.375 ns,
    // rounded) = 246,484 ns; step 2 reuses B's block for A (split) and again for B. Expandable
    // segments: A [0,300) and G [300,340) mapped; B maps 320 more (660 > 360), fails, the release
    // unmaps A's free 300, B maps 320 after G (360): the same cost, 360 at the capacity.
    // roundup_power2_divisions (300 and 302 lie in [256, 512) MiB): 2 rounds them to 384 and 40 to 48;
    // 4 to 320 (steps of 64 MiB), 8 the same (steps of 32: a class with 4), 16 to 304 and 304 (steps of
    // 16; 40 stays 40): values 2, 4, 16. With 16, B takes A's cached 304 block: 344 MiB without a
    // limit, within 360: nothing given back. It runs there at no cost, before as captured, so it is
    // kept; max_split_size_mb 302, 256, 32 do no better than as captured (256: A's block given back
    // for B in step 1, then reused whole: the same 246,484 ns).
    mhc::test::TempPath path{"near.db"};
    near_sizes().write(path.path);
    const auto data = mhc::trace::load_checked_trace(path.path);
    const Base base = make_base(data);
    Evaluator ev(base, mhc::sim::link_from_spec("pcie4"));
    const Memory plain = at(ev, "", 360 * kMiB);
    CHECK(plain.reserved == 642 * kMiB);
    CHECK(plain.fits);
    CHECK(plain.reserved_at == 342 * kMiB);
    CHECK(plain.retries == 1);
    CHECK(plain.retry_cost == 246484);
    const Memory expandable = at(ev, "expandable_segments:True", 360 * kMiB);
    CHECK(expandable.fits);
    CHECK(expandable.reserved_at == 360 * kMiB);
    CHECK(expandable.retry_cost == 246484);
    const Memory sixteen = at(ev, "roundup_power2_divisions:16", 360 * kMiB);
    CHECK(sixteen.reserved == 344 * kMiB);
    CHECK(sixteen.retry_cost == 0);
    CHECK(at(ev, "max_split_size_mb:256", 360 * kMiB).retry_cost == 246484);
    CHECK(split_size_values(data, 8) == std::vector<int64_t>{302, 256, 32});
    CHECK(roundup_values(data, 4) == std::vector<int64_t>{2, 4, 16});

    PlannerOptions opts;
    opts.host_optimizer = opts.fused_optimizer = false;
    opts.capacity = 360 * kMiB;
    int64_t trials = 0;
    CHECK(search_allocator_confs(ev, opts, trials) ==
          std::vector<std::string>{"", "expandable_segments:True", "roundup_power2_divisions:16"});
    CHECK(trials == 2 + 2 * 3 + 2 * 3);
    const Advice advice = advise(ev, opts);
    CHECK(advice.split_conf == "roundup_power2_divisions:16");
    CHECK(advice.roundup_values == 3);
    CHECK(advice.split_values == 3);
    REQUIRE(!advice.ranked.empty());
    CHECK(to_json(advice.ranked[0].setting) == R"({"allocator":"roundup_power2_divisions:16"})");
    CHECK(advice.ranked[0].loss == 0);
    // Before (no cost, no roundup_power2_divisions): the step as captured, its retry not counted.
}
