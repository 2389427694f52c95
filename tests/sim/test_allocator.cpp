// The caching allocator model against PyTorch's rules, and fragmentation OOMs.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/simulate.hpp"

using namespace simtest;
using namespace mhc;
using sim::CachingAllocator;

TEST_CASE("caching allocator: rounding and segment sizes follow PyTorch", "[sim][allocator]") {
    CHECK(CachingAllocator::round_size(1) == 512);
    CHECK(CachingAllocator::round_size(512) == 512);
    CHECK(CachingAllocator::round_size(513) == 1024);
    CHECK(CachingAllocator::segment_size(MiB) == 2 * MiB);          // small pool
    CHECK(CachingAllocator::segment_size(MiB + 512) == 20 * MiB);   // 1-10 MiB
    CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);    // >= 10 MiB: rounded to 2 MiB
    CHECK(CachingAllocator::segment_size(11 * MiB) == 12 * MiB);
}

TEST_CASE("caching allocator: best fit, splitting, merging, release on retry", "[sim][allocator]") {
    CachingAllocator ca(40 * MiB);
    int32_t a = ca.allocate(6 * MiB);   // new 20 MiB segment, split 6 + 14
    int32_t b = ca.allocate(6 * MiB);   // from the 14 MiB rest: 6 + 8
    CHECK(ca.reserved() == 20 * MiB);
    CHECK(ca.allocated() == 12 * MiB);
    CHECK(ca.largest_free_block() == 8 * MiB);
    int32_t s1 = ca.allocate(1000);     // small pool: its own 2 MiB segment
    CHECK(ca.reserved() == 22 * MiB);
    CHECK(ca.block_size(s1) == 1024);
    ca.free(a);                         // 6 free | 6 used | 8 free: no merge across b
    CHECK(ca.largest_free_block() == 8 * MiB);
    int32_t c = ca.allocate(5 * MiB);   // best fit: the 6 MiB hole, rest 1 MiB not split (large needs > 1 MiB)
    CHECK(ca.block_size(c) == 6 * MiB);
    ca.free(c);
    ca.free(b);                         // merges 6 + 6 + 8 back into one 20 MiB free segment
    CHECK(ca.largest_free_block() == 20 * MiB);
    // 30 MiB request: 22 reserved + 30 > 40: release the free 20 MiB segment, then fits.
    int32_t d = ca.allocate(30 * MiB);
    REQUIRE(d >= 0);
    CHECK(ca.reserved() == 32 * MiB);
    ca.free(s1);
    CHECK(ca.allocate(9 * MiB) == -1);  // 32 + 20 > 40 even after releasing the 2 MiB segment
    CHECK(ca.reserved() == 30 * MiB);   // (the small segment was released on the retry)
}

TEST_CASE("a capacity below the allocator's unit says so, not fragmentation", "[sim][allocator]") {
    // One 512 B allocation under 1.5 MiB: the bytes fit, the small pool's 2 MiB segment does not.
    // Nothing is fragmented (nothing is reserved); the OOM said "fragmentation" and short by 0.
    auto small = build({{512, 0, trace::kNoTime}}, {{1 * ms, 2 * ms, {{0, 'w'}}}});
    auto conf = config("lru", 3 * MiB / 2);
    conf.allocator = "caching";
    auto run = sim::simulate(small, conf);
    REQUIRE(run.oom.happened);
    CHECK(run.oom.why.find("not the segment it takes for it (2.00 MiB)") != std::string::npos);
    CHECK(run.oom.why.find("fragmentation") == std::string::npos);
    conf.allocator_conf = "expandable_segments:True";
    run = sim::simulate(small, conf);
    REQUIRE(run.oom.happened);
    CHECK(run.oom.why.find("not the pages it maps for it (2.00 MiB)") != std::string::npos);
}

TEST_CASE("a capacity that fits the bytes but not the blocks is a fragmentation OOM", "[sim][allocator]") {
    // A, B: 6 MiB each, pinned by k1 (1-10 ms); C: 12 MiB allocated at 5 ms.
    // Ideal: 24 MiB of 30 fit. Caching: A+B share one 20 MiB segment (8 MiB free in it), C
    // needs a new 12 MiB segment: 20 + 12 > 30, and nothing is free to release.
    auto t = build({{6 * MiB, 0, trace::kNoTime}, {6 * MiB, 0, trace::kNoTime}, {12 * MiB, 5 * ms, trace::kNoTime}},
                   {{1 * ms, 10 * ms, {{0, 'r'}, {1, 'r'}}}, {11 * ms, 12 * ms, {{2, 'w'}}}});
    auto ideal = sim::simulate(t, config("lru", 30 * MiB));
    CHECK_FALSE(ideal.oom.happened);
    auto c = config("lru", 30 * MiB);
    c.allocator = "caching";
    auto r = sim::simulate(t, c);
    REQUIRE(r.oom.happened);
    CHECK(r.oom.fragmentation);
    CHECK(r.oom.bytes_needed == 12 * MiB);
    CHECK(r.oom.bytes_pinned == 12 * MiB);
    CHECK(r.oom.largest_free_block == 8 * MiB);
    CHECK(r.oom.why.find("fragmentation") != std::string::npos);
    CHECK(r.baseline_peak == 32 * MiB);   // unlimited caching: 20 + 12 MiB reserved
}

TEST_CASE("caching allocator: a private pool (CUDA graph, torch.cuda.MemPool) keeps its own segments",
          "[sim][allocator][pools]") {
    // PyTorch (get_pool, release_cached_blocks): a request made in a private pool is served only
    // from that pool's free blocks, and its segments are not given back by empty_cache or an
    // out-of-memory retry while the pool lives; the reserved figure counts every pool.
    CachingAllocator ca(60 * MiB);
    int32_t a = ca.allocate(6 * MiB, 0, 1);   // pool 1: a 20 MiB segment
    CHECK(ca.reserved() == 20 * MiB);
    CHECK(ca.reserved_private() == 20 * MiB);
    int32_t b = ca.allocate(6 * MiB);         // the default pool does not take pool 1's 14 MiB rest
    CHECK(ca.reserved() == 40 * MiB);
    int32_t c = ca.allocate(6 * MiB, 0, 2);   // nor does pool 2
    CHECK(ca.reserved() == 60 * MiB);
    int32_t d = ca.allocate(6 * MiB, 0, 1);   // pool 1's rest serves pool 1
    CHECK(ca.reserved() == 60 * MiB);
    CHECK(ca.block_segment(d) == ca.block_segment(a));
    ca.free(a);
    ca.free(d);
    ca.free(b);
    ca.free(c);
    ca.empty_cache();                          // only the default pool's segment goes
    CHECK(ca.reserved() == 40 * MiB);
    CHECK(ca.reserved_private() == 40 * MiB);
    CHECK(ca.device_frees() == 1);
    // An out-of-memory retry gives back no private segment either: 40 + 30 > 60.
    CHECK(ca.allocate(30 * MiB) == -1);
    CHECK(ca.reserved() == 40 * MiB);
    // Pool 1's free segment serves pool 1 (no new segment).
    int32_t e = ca.allocate(16 * MiB, 0, 1);
    REQUIRE(e >= 0);
    CHECK(ca.reserved() == 40 * MiB);
    // With expandable segments a private pool maps pages of its own segment (alloc_block at the
    // commit read: try_allocate_expandable_block with the private BlockPool and its unmapped
    // ranges), which neither the default pool shares nor empty_cache unmaps.
    sim::AllocatorSettings set;
    set.expandable_segments = true;
    CachingAllocator ex(INT64_MAX / 2, set);
    std::vector<CachingAllocator::SegmentEvent> log;
    ex.set_log(&log);
    int32_t f = ex.allocate(6 * MiB, 7, 1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].expandable);
    CHECK(log[0].bytes == 20 * MiB);
    CHECK(log[0].stream == 7);
    CHECK(log[0].pool == 1);
    CHECK(ex.block_size(f) == 6 * MiB);
    int32_t g = ex.allocate(6 * MiB, 7);       // the default pool: its own segment's pages
    REQUIRE(log.size() == 2);
    CHECK(log[1].expandable);
    CHECK(log[1].pool == 0);
    CHECK(ex.block_segment(g) != ex.block_segment(f));
    CHECK(ex.reserved() == 40 * MiB);
    ex.free(f);
    ex.free(g);
    ex.empty_cache();
    CHECK(ex.reserved() == 20 * MiB);
    CHECK(ex.reserved_private() == 20 * MiB);
}
