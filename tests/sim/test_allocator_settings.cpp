// The caching model under PYTORCH_CUDA_ALLOC_CONF settings, on hand-built sequences whose
// segments are worked out from PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp @001074d2;
// the function each case follows is named), and `mhc allocator`'s comparison.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/allocator_compare.hpp"

using namespace simtest;
using namespace mhc;
using sim::AllocatorSettings;
using sim::CachingAllocator;

namespace {
AllocatorSettings conf(const std::string& text) { return sim::parse_allocator_conf(text, "--allocator-conf"); }
constexpr int64_t kBig = INT64_MAX / 2;
}  // namespace

TEST_CASE("allocator conf: PYTORCH_CUDA_ALLOC_CONF syntax, round trip and refusals", "[sim][allocator][conf]") {
    auto s = conf("expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.8,"
                  "roundup_power2_divisions:[1:2,4:4,>:8],release_lock_on_cudamalloc:True");
    CHECK(s.expandable_segments);
    CHECK(s.max_split_size == 128 * MiB);
    CHECK(s.garbage_collection_threshold == Approx(0.8));
    // parseRoundUpPower2Divisions: the first entry also fills the intervals below it, '>' the last
    // entry's own interval and those after it (std::fill from last_index), an interval between
    // entries keeps its value (0).
    CHECK(s.roundup_power2_divisions[0] == 2);   // [1, 2) MiB and below
    CHECK(s.roundup_power2_divisions[1] == 0);   // [2, 4) MiB
    CHECK(s.roundup_power2_divisions[2] == 8);   // [4, 8) MiB: `4:4` overwritten by `>:8`
    CHECK(s.roundup_power2_divisions[3] == 8);
    CHECK(s.roundup_power2_divisions[15] == 8);
    CHECK(conf(s.conf()) == s);
    CHECK(conf("").conf().empty());
    CHECK(conf("roundup_power2_divisions:4").conf() == "roundup_power2_divisions:4");

    auto refused = [](const std::string& text) {
        try {
            conf(text);
        } catch (const Error& e) {
            CHECK(e.exit_code() == 2);
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    // torch 2.15 takes 20 (c10/core/AllocatorConfig.cpp: at least kLargeBuffer); refused before 2026-12-05
    CHECK(refused("max_split_size_mb:20") == "(accepted)");
    CHECK(refused("max_non_split_rounding_mb:20") == "(accepted)");
    // The one form of a refused value (docs/cli.md): the item quoted whole, what is wrong, what the key
    // takes; it said "--allocator-conf: max_split_size_mb: 'abc' is not ..." before 2026-12-06.
    CHECK(refused("max_split_size_mb:19") ==
          "--allocator-conf: 'max_split_size_mb:19': 19 is below 20; max_split_size_mb takes a whole number of MiB, 20 to 1073741824");
    CHECK(refused("max_split_size_mb:abc") ==
          "--allocator-conf: 'max_split_size_mb:abc': 'abc' is not a whole number; max_split_size_mb takes a whole number of MiB, 20 to 1073741824");
    CHECK(refused("expandable_segments:yes") ==
          "--allocator-conf: 'expandable_segments:yes': 'yes' is not True or False; expandable_segments takes True or False");
    CHECK(refused("garbage_collection_threshold:1.0") ==
          "--allocator-conf: 'garbage_collection_threshold:1.0': 1.0 is not strictly between 0 and 1; "
          "garbage_collection_threshold takes a number strictly between 0 and 1");
    CHECK(refused("roundup_power2_divisions:3") ==
          "--allocator-conf: 'roundup_power2_divisions:3': the divisions '3' are not a power of 2 (or 0); "
          "roundup_power2_divisions takes a power of 2 (or 0), or a list [MiB:divisions,...,>:divisions] of them");
    CHECK(refused("roundup_power2_divisions:[3:2]") ==
          "--allocator-conf: 'roundup_power2_divisions:[3:2]': the interval '3' is not a power of 2 (MiB); "
          "roundup_power2_divisions takes a power of 2 (or 0), or a list [MiB:divisions,...,>:divisions] of them");
    CHECK(refused("expandable_segments") ==
          "--allocator-conf: 'expandable_segments': expected key:value (PYTORCH_CUDA_ALLOC_CONF syntax)");
    CHECK(refused("backend:cudaMallocAsync") ==
          "--allocator-conf: 'backend:cudaMallocAsync': cudaMallocAsync is not the caching allocator this model "
          "follows; backend takes native (the caching allocator)");
    CHECK(refused("max_splitsize_mb:64") ==
          "--allocator-conf: 'max_splitsize_mb:64': max_splitsize_mb is not an option of PYTORCH_CUDA_ALLOC_CONF this "
          "model knows; use expandable_segments, max_split_size_mb, roundup_power2_divisions, "
          "garbage_collection_threshold or max_non_split_rounding_mb; did you mean max_split_size_mb?");
}

TEST_CASE("allocator: default settings keep the earlier model's numbers", "[sim][allocator][conf]") {
    // The sequence of test_allocator.cpp's first case, with an explicit stream 0.
    CachingAllocator ca(40 * MiB, conf(""));
    int32_t a = ca.allocate(6 * MiB, 0);
    ca.allocate(6 * MiB, 0);
    CHECK(ca.reserved() == 20 * MiB);
    CHECK(ca.largest_free_block() == 8 * MiB);
    ca.free(a);
    CHECK(ca.device_allocs() == 1);
    CHECK(ca.device_frees() == 0);
}

TEST_CASE("allocator: per-stream pools", "[sim][allocator][conf]") {
    // get_free_block searches the pool by (stream, size): a block freed on stream 1 is not
    // handed to stream 2.
    CachingAllocator ca(kBig);
    int32_t a = ca.allocate(6 * MiB, 1);   // 20 MiB segment of stream 1
    ca.free(a);
    CHECK(ca.reserved() == 20 * MiB);
    int32_t b = ca.allocate(6 * MiB, 2);   // stream 2: a segment of its own
    CHECK(ca.reserved() == 40 * MiB);
    CHECK(ca.block_segment(b) == 1);
    int32_t c = ca.allocate(6 * MiB, 1);   // stream 1 reuses its cached block
    CHECK(ca.reserved() == 40 * MiB);
    CHECK(ca.block_segment(c) == 0);
    CHECK(ca.device_allocs() == 2);
}

TEST_CASE("allocator: max_split_size_mb", "[sim][allocator][conf]") {
    // get_free_block: a request under max_split_size takes no block of max_split_size or more; a
    // request of max_split_size or more takes one at most kLargeBuffer (20 MiB) larger.
    // should_split: blocks are split only for requests under max_split_size.
    CachingAllocator ca(kBig, conf("max_split_size_mb:64"));
    int32_t a = ca.allocate(100 * MiB);   // a 100 MiB segment
    ca.free(a);
    int32_t b = ca.allocate(30 * MiB);    // 30 < 64 and the cached 100 MiB block is oversize: new 30 MiB segment
    CHECK(ca.reserved() == 130 * MiB);
    CHECK(ca.block_segment(b) == 1);
    int32_t c = ca.allocate(90 * MiB);    // 90 >= 64: the 100 MiB block (100 < 90 + 20), not split
    CHECK(ca.block_segment(c) == 0);
    CHECK(ca.block_size(c) == 100 * MiB);
    ca.free(c);
    int32_t d = ca.allocate(70 * MiB);    // 100 >= 70 + 20: refused, a new 70 MiB segment
    CHECK(ca.block_segment(d) == 2);
    CHECK(ca.reserved() == 200 * MiB);

    // Without the setting the 30 MiB request splits the cached 100 MiB block.
    CachingAllocator plain(kBig);
    plain.free(plain.allocate(100 * MiB));
    int32_t e = plain.allocate(30 * MiB);
    CHECK(plain.reserved() == 100 * MiB);
    CHECK(plain.block_size(e) == 30 * MiB);

    // release_available_cached_blocks: when the segment does not fit, one cached oversize block
    // of at least max(request, max_split_size) is given back and the cudaMalloc retried.
    CachingAllocator lim(150 * MiB, conf("max_split_size_mb:64"));
    lim.free(lim.allocate(100 * MiB));
    lim.allocate(30 * MiB);                 // 130 MiB reserved
    int32_t f = lim.allocate(40 * MiB);     // 130 + 40 > 150: the 100 MiB block goes, then 30 + 40
    REQUIRE(f >= 0);
    CHECK(lim.reserved() == 70 * MiB);
    CHECK(lim.device_frees() == 1);
}

TEST_CASE("allocator: roundup_power2_divisions", "[sim][allocator][conf]") {
    // round_size / roundup_power2_next_division: above 512 x divisions, a size rounds up to the
    // next of `divisions` equal steps between the powers of two around it.
    CachingAllocator four(kBig, conf("roundup_power2_divisions:4"));
    CHECK(four.rounded(1200) == 1536);              // 1200 <= 512 x 4: plain 512-byte rounding
    CHECK(four.rounded(5 * MiB + 1) == 6 * MiB);    // [4, 8) MiB in steps of 1 MiB
    CHECK(four.rounded(8 * MiB) == 8 * MiB);        // a power of two stays
    CHECK(four.rounded(3000) == 3072);              // [2048, 4096) in steps of 512
    int32_t b = four.allocate(5 * MiB + 1);
    CHECK(four.block_size(b) == 6 * MiB);           // from a 20 MiB segment, split 6 + 14
    CHECK(four.reserved() == 20 * MiB);
    CHECK(four.largest_free_block() == 14 * MiB);
    CachingAllocator list(kBig, conf("roundup_power2_divisions:[1:2,4:4,>:8]"));
    CHECK(list.rounded(3 * MiB + 1) == 3 * MiB + 512);    // [2, 4) MiB: 0 divisions
    // [4, 8) MiB: 8, not 4: `>` fills from the last entry's own interval on (PyTorch's
    // parseRoundUpPower2Divisions: std::fill from last_index), so it overwrites `4:4`; steps of 512 KiB
    CHECK(list.rounded(5 * MiB + 1) == 5 * MiB + 512 * 1024);
    CHECK(list.rounded(9 * MiB + 1) == 10 * MiB);         // [8, 16) MiB: 8, steps of 1 MiB
    CHECK(list.rounded(1536 * 1024 + 1) == 2 * MiB);      // [1, 2) MiB: 2, steps of 512 KiB
    // `>` alone (last_index starts at 0) sets every interval, the first one included; before
    // 2026-12-05 the model left [1, 2) MiB (and below) at plain rounding: 1.5 MiB + 512
    CachingAllocator rest(kBig, conf("roundup_power2_divisions:[>:2]"));
    CHECK(rest.rounded(1536 * 1024 + 1) == 2 * MiB);
    CHECK(rest.rounded(3 * MiB + 1) == 4 * MiB);
}

TEST_CASE("allocator: expandable_segments' address space holds any trace at unlimited capacity", "[sim][allocator][conf]") {
    // A segment's address space is 9/8 of the capacity; at an unlimited one, 2^62 bytes (every
    // allocation of a trace together is at most that). It stopped at 2^50 bytes before 2026-12-05:
    // a 2^51-byte request (a row may hold 2^56) never fitted, and `mhc simulate --capacity
    // unlimited` ran out of memory (found by tests/sim/reference_allocator_outside_compare.py).
    for (int64_t cap : {kBig, int64_t{INT64_MAX / 4}}) {
        CachingAllocator ca(cap, conf("expandable_segments:True"));
        const int64_t big = int64_t{1} << 51;
        const int32_t a = ca.allocate(big);
        REQUIRE(a >= 0);
        CHECK(ca.block_size(a) == big);
        CHECK(ca.reserved() == (big + 20 * MiB - 1) / (20 * MiB) * (20 * MiB));
        const int32_t b = ca.allocate(int64_t{1} << 56);   // a row's largest
        REQUIRE(b >= 0);
        CHECK(ca.block_segment(b) == ca.block_segment(a));   // the same segment grows
    }
    // A limited capacity keeps 9/8 of it: 100 MiB gives 120 MiB (6 pages of 20 MiB, 112.5 rounded up).
    CachingAllocator small(100 * MiB, conf("expandable_segments:True"));
    CHECK(small.allocate(90 * MiB) >= 0);
    CHECK(small.allocate(40 * MiB) < 0);   // 100 MiB mapped at most
}

TEST_CASE("allocator: expandable_segments", "[sim][allocator][conf]") {
    // try_allocate_expandable_block / map_block: one segment per stream and pool grows by pages
    // of 20 MiB (large pool) or 2 MiB (small pool); should_split: any rest >= 512 B is split.
    CachingAllocator ca(kBig, conf("expandable_segments:True"));
    std::vector<CachingAllocator::SegmentEvent> log;
    ca.set_log(&log);
    int32_t a = ca.allocate(6 * MiB);       // maps one 20 MiB page, split 6 + 14
    CHECK(ca.reserved() == 20 * MiB);
    int32_t b = ca.allocate(16 * MiB);      // the free 14 MiB grows by one more page: 34, split 16 + 18
    CHECK(ca.reserved() == 40 * MiB);
    CHECK(ca.block_segment(b) == ca.block_segment(a));
    CHECK(ca.block_offset(b) == 6 * MiB);
    CHECK(ca.largest_free_block() == 18 * MiB);
    int32_t s = ca.allocate(1000);          // small pool: its own segment, one 2 MiB page
    CHECK(ca.reserved() == 42 * MiB);
    REQUIRE(log.size() == 3);
    CHECK(log[0].expandable);
    CHECK(log[0].bytes == 20 * MiB);
    CHECK(log[1].offset == 20 * MiB);
    CHECK(log[2].bytes == 2 * MiB);
    CHECK(ca.segments() == 2);
    // release_cached_blocks: the free pages are unmapped (one range per free block), a segment
    // left wholly unmapped is released.
    ca.free(a);
    ca.free(b);
    ca.free(s);
    ca.empty_cache();
    CHECK(ca.reserved() == 0);
    CHECK(ca.device_frees() == 2);
    CHECK(ca.segments() == 0);
    // Without the setting the second request is a 16 MiB segment of its own.
    CachingAllocator plain(kBig);
    plain.allocate(6 * MiB);
    plain.allocate(16 * MiB);
    CHECK(plain.reserved() == 36 * MiB);
}

TEST_CASE("allocator: expandable_segments avoid a fragmentation OOM", "[sim][allocator][conf]") {
    // 40 MiB: x, y 6 MiB in one 20 MiB segment, x freed (6 free | 6 used | 8 free), z 12 MiB,
    // w 10 MiB. cudaMalloc'd: z is a 12 MiB segment (32 reserved), w needs 10 more: 42 > 40 and
    // no segment is wholly free: OOM with 18 MiB in use. Expandable: z grows the 8 MiB free block
    // by a page (40 reserved, 16 MiB left free after z), w fits in that.
    auto run = [](const std::string& c) {
        CachingAllocator ca(40 * MiB, conf(c));
        int32_t x = ca.allocate(6 * MiB);
        ca.allocate(6 * MiB);
        ca.free(x);
        ca.allocate(12 * MiB);
        return ca.allocate(10 * MiB) >= 0;
    };
    CHECK_FALSE(run(""));
    CHECK(run("expandable_segments:True"));
}

TEST_CASE("allocator: garbage_collection_threshold", "[sim][allocator][conf]") {
    // garbage_collect_cached_blocks: above threshold x capacity, whole large-pool blocks at least
    // as old as the average (in get_free_block calls since they were cached) are given back until
    // reserved is under the threshold.
    CachingAllocator ca(100 * MiB, conf("garbage_collection_threshold:0.5"));
    ca.free(ca.allocate(30 * MiB));   // call 1; cached at count 1
    ca.free(ca.allocate(40 * MiB));   // call 2: 30 < 40, new segment (70 reserved); cached at count 2
    int32_t c = ca.allocate(50 * MiB);   // call 3: no fit; 70 > 50: ages 2 and 1, average 1.5:
    REQUIRE(c >= 0);                      // the 30 MiB block goes (enough), the 40 MiB one stays
    CHECK(ca.reserved() == 90 * MiB);
    CHECK(ca.device_frees() == 1);
    int32_t d = ca.allocate(40 * MiB);   // the kept 40 MiB block
    CHECK(ca.block_segment(d) == 1);
    CHECK(ca.reserved() == 90 * MiB);
    // Without it, the 50 MiB segment does not fit (70 + 50 > 100): every cached segment goes.
    CachingAllocator plain(100 * MiB);
    plain.free(plain.allocate(30 * MiB));
    plain.free(plain.allocate(40 * MiB));
    REQUIRE(plain.allocate(50 * MiB) >= 0);
    CHECK(plain.reserved() == 50 * MiB);
    CHECK(plain.device_frees() == 2);
}

namespace {

// One allocation on device 0: bytes, t_alloc, t_free, address, stream.
struct A { int64_t bytes, t_alloc, t_free, address = 0, stream = 0; };

trace::TraceData allocations(const std::vector<A>& v) {
    trace::TraceData t;
    t.path = "hand.db";
    t.strings = {""};
    for (size_t i = 0; i < v.size(); ++i) {
        trace::Allocation a;
        a.id = static_cast<int64_t>(i) + 1;
        a.bytes = v[i].bytes;
        a.t_alloc = v[i].t_alloc;
        a.t_free = v[i].t_free;
        a.address = v[i].address;
        a.stream = v[i].stream;
        t.allocations.push(a);
    }
    return t;
}

trace::Segment seg(int64_t addr, int64_t bytes, int64_t t_alloc, int64_t t_free, bool recon = false) {
    trace::Segment s;
    s.address = addr;
    s.bytes = bytes;
    s.t_alloc = t_alloc;
    s.t_free = t_free;
    s.reconstructed = recon;
    return s;
}

}  // namespace

TEST_CASE("mhc allocator: a recording the model follows exactly", "[sim][allocator][compare]") {
    // 6 MiB at 10 (a 20 MiB segment), freed at 20; 16 MiB at 30 (the cached 20 MiB block fits
    // it: no new segment); 25 MiB at 40 (a 26 MiB segment).
    auto t = allocations({{6 * MiB, 10, 20}, {16 * MiB, 30, 50}, {25 * MiB, 40, 60}});
    std::vector<trace::Segment> s{seg(0x1000000, 20 * MiB, 10, trace::kNoTime), seg(0x9000000, 26 * MiB, 40, trace::kNoTime)};
    auto c = sim::compare_allocator(t, s, -1, "");
    CHECK(c.recorded_peak == 46 * MiB);
    CHECK(c.model_peak == 46 * MiB);
    CHECK(c.recorded_segments == 2);
    CHECK(c.model_segments == 2);
    CHECK(c.model_mallocs == 2);
    CHECK(c.recorded_mallocs == 2);
    CHECK(c.max_abs_diff == 0);
    CHECK_FALSE(c.diverged);
    CHECK(c.settings_source == "defaults (no settings recorded)");
    // The model's reserved bytes after each event time (what the viewer draws): 20 MiB from 10,
    // still 20 at 20 (cached) and 30, 46 from 40 on (segments are not released at the frees).
    CHECK(c.sample_times == std::vector<int64_t>{10, 20, 30, 40, 50, 60});
    CHECK(c.model_reserved == std::vector<int64_t>{20 * MiB, 20 * MiB, 20 * MiB, 46 * MiB, 46 * MiB, 46 * MiB});
}

TEST_CASE("mhc allocator: the first divergence and why", "[sim][allocator][compare]") {
    // The recording made one 36 MiB segment up front (not PyTorch's rule for 6 MiB); the model
    // makes 20 MiB at 10 and 16 MiB at 30: they differ from t = 10 on.
    auto t = allocations({{6 * MiB, 10, 100}, {16 * MiB, 30, 100}});
    std::vector<trace::Segment> s{seg(0x1000000, 36 * MiB, 10, trace::kNoTime)};
    auto c = sim::compare_allocator(t, s, 0, "");
    CHECK(c.recorded_peak == 36 * MiB);
    CHECK(c.model_peak == 36 * MiB);
    CHECK(c.model_segments == 2);
    CHECK(c.segment_error() == Approx(1.0));
    REQUIRE(c.diverged);
    CHECK(c.diverge_time == 10);
    CHECK(c.diverge_allocation == 1);
    CHECK(c.max_abs_diff == 16 * MiB);
    // |diff| 16 MiB from 10 to 30, 0 after: time-weighted over 10..100.
    CHECK(c.mean_abs_diff == Approx(16.0 * MiB * 20 / 90));
    CHECK(c.why.find("at 10 ns (allocation 1, 6.00 MiB, stream 0): model cudaMalloc 20.00 MiB (stream 0); "
                     "recording cudaMalloc 36.00 MiB (stream 0)") == 0);
}

TEST_CASE("mhc allocator: warm start from the segments held before recording", "[sim][allocator][compare]") {
    // A 20 MiB segment held before recording with a 6 MiB block at its offset 4 MiB: free are
    // 4 MiB before it and 10 MiB after. 12 MiB at 10 fits neither: a new 12 MiB segment, as
    // recorded; 9 MiB at 30 takes the 10 MiB block (the 1 MiB rest is not split).
    const int64_t base = 0x7f0000000;
    auto t = allocations({{6 * MiB, 0, trace::kNoTime, base + 4 * MiB}, {12 * MiB, 10, 20}, {9 * MiB, 30, 40}});
    std::vector<trace::Segment> s{seg(base, 20 * MiB, 0, trace::kNoTime, true), seg(0x900000000, 12 * MiB, 10, trace::kNoTime)};
    auto c = sim::compare_allocator(t, s, 0, "");
    CHECK(c.seeded_segments == 1);
    CHECK(c.seeded_blocks == 1);
    CHECK(c.model_peak == 32 * MiB);
    CHECK(c.recorded_peak == 32 * MiB);
    CHECK(c.model_mallocs == 1);    // the 9 MiB request at 30 fits the 10 MiB free after the 6 MiB block
    CHECK_FALSE(c.diverged);
    // From an empty cache: 6 MiB opens a 20 MiB segment whose 14 MiB rest takes 12 MiB and later 9 MiB.
    CHECK(c.cold_peak == 20 * MiB);
    CHECK(c.cold_segments == 1);
    // --allocator-conf over the recorded settings.
    auto e = sim::compare_allocator(t, s, 0, "expandable_segments:True");
    CHECK(e.settings == "expandable_segments:True");
    CHECK(e.settings_source == "defaults (no settings recorded), then --allocator-conf");
}

TEST_CASE("mhc allocator: segment frees with an allocation between them are two empty_cache calls", "[sim][allocator][compare]") {
    // Two 12 MiB blocks (own segments) from 10, freed at 20; empty_cache frees their segments at
    // 30 and 40 (one call: no allocation between); 14 MiB at 50 (a new segment), freed at 60;
    // a second empty_cache frees it at 70.
    auto t = allocations({{12 * MiB, 10, 20}, {12 * MiB, 10, 20}, {14 * MiB, 50, 60}});
    std::vector<trace::Segment> s{seg(0x1000000, 12 * MiB, 10, 30), seg(0x3000000, 12 * MiB, 10, 40),
                                  seg(0x5000000, 14 * MiB, 50, 70)};
    auto c = sim::compare_allocator(t, s, 0, "");
    CHECK(c.empty_cache_calls == 2);
    CHECK(c.empty_cache_segment_frees == 3);
    CHECK(c.empty_cache_span_ns == 10);   // 30..40; the second call is one instant
    CHECK(c.max_abs_diff == 0);           // compared at 10, 20, 40, 50, 60, 70
    CHECK_FALSE(c.diverged);
    CHECK(c.model_frees == 3);
    // The model's curve is sampled at its own events (a recorded segment event counts at the
    // next of them): it empties its cache at the call's last free (40); the recording's free at
    // 30 is not a sample, the model holding 24 MiB from 20 to 40 either way.
    CHECK(c.sample_times == std::vector<int64_t>{10, 20, 40, 50, 60, 70});
    CHECK(c.model_reserved == std::vector<int64_t>{24 * MiB, 24 * MiB, 0, 14 * MiB, 14 * MiB, 0});
}

TEST_CASE("mhc allocator: an empty_cache call's span is left out of the mean |diff|", "[sim][allocator][compare]") {
    // 6 MiB at 10 (the model: a 20 MiB segment), freed at 20; the recording made 36 + 4 MiB at 10.
    // An empty_cache() frees them at 30 and 90 (one call, span 30..90); 14 MiB at 100 gets a new
    // 14 MiB segment on both sides (the model emptied its cache at 90). Samples: 10, 20, 90, 100, 110.
    // |diff|: 20 MiB at 10 (held 10 ns) and at 20 (held to 90, of which 30..90 is the span: 10 ns),
    // 0 at 90 and 100 (10 ns each): mean 20 MiB x 20 / 40 = 10 MiB. Counting the span with the
    // sample before it gave 20 MiB x 80 / 100 = 16 MiB.
    auto trace_data = allocations({{6 * MiB, 10, 20}, {14 * MiB, 100, 110}});
    std::vector<trace::Segment> segs{seg(0x1000000, 36 * MiB, 10, 30), seg(0x4000000, 4 * MiB, 10, 90),
                                     seg(0x9000000, 14 * MiB, 100, trace::kNoTime)};
    auto cmp = sim::compare_allocator(trace_data, segs, 0, "");
    CHECK(cmp.empty_cache_calls == 1);
    CHECK(cmp.empty_cache_span_ns == 60);
    CHECK(cmp.sample_times == std::vector<int64_t>{10, 20, 90, 100, 110});
    CHECK(cmp.max_abs_diff == 20 * MiB);
    CHECK(cmp.mean_abs_diff == Approx(10.0 * MiB));
}

TEST_CASE("mhc allocator: a pool given back when an allocation is made is given back then",
          "[sim][allocator][compare][pools]") {
    // 12 MiB at 10 in pool (0, 1) (its own 12 MiB segment, row 1), freed at 20; the recording gives
    // the pool back at 30 (row 1 freed), when 12 MiB of the default pool is made (row 2, a new
    // segment): no empty_cache call (an allocation is made then), but the pool's last segment
    // free. Given back before that allocation: 12 MiB reserved throughout, as recorded; kept, the
    // pool's cached 12 MiB made it 24 MiB from 30 on (the default pool cannot use its block).
    auto trace_data = allocations({{12 * MiB, 10, 20}, {12 * MiB, 30, 40}});
    trace_data.meta["snapshot.pools_from"] = "trace events (pool_id): exact";
    trace_data.meta["snapshot.allocation_pools"] = "0,1:1";
    trace_data.meta["snapshot.segment_row_pools"] = "0,1:1";
    std::vector<trace::Segment> segs{seg(0x1000000, 12 * MiB, 10, 30), seg(0x3000000, 12 * MiB, 30, trace::kNoTime)};
    segs[0].id = 1;
    segs[1].id = 2;
    auto cmp = sim::compare_allocator(trace_data, segs, 0, "");
    CHECK(cmp.private_pools == 1);
    CHECK(cmp.private_pools_given_back == 1);
    CHECK(cmp.empty_cache_calls == 0);
    CHECK(cmp.recorded_peak == 12 * MiB);
    CHECK(cmp.model_peak == 12 * MiB);
    CHECK(cmp.model_frees == 1);
    CHECK(cmp.max_abs_diff == 0);
    CHECK_FALSE(cmp.diverged);
}

TEST_CASE("private pools: a malformed exact pool list is bad input naming the meta key", "[sim][allocator][pools]") {
    auto trace_data = allocations({{6 * MiB, 10, 20}, {6 * MiB, 30, 40}});
    trace_data.meta["snapshot.pools_from"] = "trace events (pool_id): exact";
    trace_data.meta["snapshot.allocation_pools"] = "0,1:2";
    auto pools = sim::private_pools(trace_data, 0);
    CHECK(pools.exact);
    CHECK(pools.allocation == std::vector<int64_t>{0, 1});   // row id 2 is the second row
    CHECK(pools.given_back_at == std::vector<int64_t>{trace::kNoTime, trace::kNoTime});   // no segment row said
    trace_data.meta["snapshot.allocation_pools"] = "0,1:2-x";
    CHECK_THROWS_WITH(sim::private_pools(trace_data, 0),
                      "hand.db: meta snapshot.allocation_pools: entry '0,1:2-x' has a bad id range '2-x' (import the "
                      "snapshot again)");
    trace_data.meta["snapshot.allocation_pools"] = "pool:2";
    CHECK_THROWS_WITH(sim::private_pools(trace_data, 0), Catch::Contains("is not FIRST,SECOND:ID-ID,ID..."));
}

TEST_CASE("mhc allocator: a trace without segments is refused", "[sim][allocator][compare]") {
    auto t = allocations({{6 * MiB, 10, 20}});
    CHECK_THROWS_WITH(sim::compare_allocator(t, {}, -1, ""),
                      Catch::StartsWith("hand.db: no segments recorded"));
    std::vector<trace::Segment> s{seg(0x1000000, 20 * MiB, 10, trace::kNoTime)};
    CHECK_THROWS_WITH(sim::compare_allocator(t, s, 3, ""), "hand.db: no segments recorded on device 3");
    // a recording's cudaMallocAsync pool (mhc record --torch) is not the caching allocator's
    t.meta["segments.from_pools"] = "1";
    CHECK_THROWS_WITH(sim::compare_allocator(t, s, -1, ""),
                      Catch::StartsWith("hand.db: 1 of its segments rows are a stream-ordered pool's reserved memory"));
    t.meta["segments.from_pools"] = "0";
    CHECK_NOTHROW(sim::compare_allocator(t, s, -1, ""));
    CHECK_THROWS_WITH(sim::compare_allocator(t, s, 0, "max_split_size_mb:1"),
                      "--allocator-conf: 'max_split_size_mb:1': 1 is below 20; max_split_size_mb takes a whole number of MiB, 20 to 1073741824");
}

#if defined(MHC_HAVE_IMPORT)
#include <filesystem>

#include <fstream>

#include "mhc/test/paths.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/store.hpp"
#include "pickle_writer.hpp"

namespace {
sim::AllocatorComparison compare_public(const std::string& rel, const std::string& conf_text = "",
                                        const std::string& folder = mhc::test::public_datasets()) {
    std::string in = folder + "/" + rel;
    std::string db = temp_path(std::filesystem::path(rel).stem().string() + ".db");
    trace::import::import_file(in, db);
    auto t = trace::load_trace(db);
    std::vector<trace::Segment> s;
    trace::Reader(db).for_each([&](const trace::Segment& g) { s.push_back(g); });
    std::filesystem::remove(db);
    return sim::compare_allocator(t, s, -1, conf_text);
}
}  // namespace

// A snapshot in the shape of a real one (device_traces of alloc, free_requested, free_completed,
// segment_alloc and segment_free entries with addr, size, stream and time_us; end-state segments
// with their blocks; allocator_settings): a step allocates 597 blocks of 12 to 38 MiB, each in its
// own segment (a request of 10 MiB or more gets a segment of its size rounded to 2 MiB when no
// cached block fits), frees them, and torch.cuda.empty_cache() gives the 597 segments (14 GiB)
// back one cudaFree after another, 89 us apart (53 ms, as one real snapshot recorded it); the
// next step allocates three blocks again and frees them (their segments stay cached).
// A MemPool under expandable_segments:True (PyTorch at the commit read maps pages of a private
// pool's own segment): 6 MiB in the pool (a 20 MiB page), freed; 6 MiB in the default pool, which
// the pool's free block must not serve (a 20 MiB page of the default pool's segment: 40 MiB
// reserved; one pool would have reserved 20); 26 MiB in the pool, from its free 20 MiB block and
// a second page mapped after it, across the segment's two mapped rows.
TEST_CASE("mhc allocator: a private pool's expandable segment keeps its blocks from the default pool",
          "[sim][allocator][compare][pools]") {
    using ::test::event;
    using ::test::Py;
    const int64_t P = 0x7f0000000000, D = 0x7f8000000000;
    std::vector<Py> evs{event("segment_map", P, 20 * MiB, 0, 1000),       event("alloc", P, 6 * MiB, 0, 1000),
                        event("free_requested", P, 6 * MiB, 0, 1010),    event("free_completed", P, 6 * MiB, 0, 1010),
                        event("segment_map", D, 20 * MiB, 0, 1020),       event("alloc", D, 6 * MiB, 0, 1020),
                        event("segment_map", P + 20 * MiB, 20 * MiB, 0, 1030), event("alloc", P, 26 * MiB, 0, 1030)};
    auto block = [](int64_t addr, int64_t bytes, bool live) {
        return Py::dict({{"address", addr}, {"size", bytes}, {"requested_size", live ? bytes : 0},
                         {"state", live ? "active_allocated" : "inactive"}});
    };
    auto segment = [&](int64_t addr, int64_t used, int64_t pool) {
        return Py::dict({{"device", 0}, {"address", addr}, {"total_size", pool ? 40 * MiB : 20 * MiB},
                         {"allocated_size", used}, {"active_size", used}, {"stream", 0}, {"segment_type", "large"},
                         {"segment_pool_id", Py::list({Py(int64_t{0}), Py(pool)})}, {"is_expandable", Py::boolean(true)},
                         {"blocks", Py::list({block(addr, used, true),
                                              block(addr + used, (pool ? 40 * MiB : 20 * MiB) - used, false)})}});
    };
    Py settings = Py::dict({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}, {"max_split_size", int64_t{-1}},
                            {"expandable_segments", Py::boolean(true)}});
    Py snap = Py::dict({{"segments", Py::list({segment(P, 26 * MiB, 1), segment(D, 6 * MiB, 0)})},
                        {"device_traces", Py::list({Py::list(evs)})}, {"allocator_settings", settings}});
    const std::string in = temp_path("mempool-expandable.pickle"), db = temp_path("mempool-expandable.db");
    std::filesystem::remove(db);
    { std::ofstream(in, std::ios::binary) << snap.pickle(); }
    trace::import::import_file(in, db);
    auto t = trace::load_trace(db);
    CHECK(t.meta.at("snapshot.segment_pools") == "0:0,1:" + std::to_string(P) + ":" + std::to_string(40 * MiB));
    std::vector<trace::Segment> s;
    trace::Reader(db).for_each([&](const trace::Segment& g) { s.push_back(g); });
    auto c = sim::compare_allocator(t, s, -1, "");
    CHECK(c.settings == "expandable_segments:True");
    CHECK(c.private_pools == 1);
    CHECK(c.private_pool_segments == 2);      // the pool's two mapped rows
    CHECK(c.private_pool_allocations == 2);   // 6 MiB and 26 MiB (across both rows)
    CHECK(c.recorded_peak == 60 * MiB);
    CHECK(c.model_peak == 60 * MiB);          // one pool: 40 MiB (the 6 MiB default block in the pool's page)
    CHECK(c.model_mallocs == 3);
    CHECK(c.max_abs_diff == 0);
    CHECK_FALSE(c.diverged);
    std::filesystem::remove(db);
    std::filesystem::remove(in);
}

namespace {
// A snapshot in the shape torch 2.15 writes (synthetic: no CUDA device here; pool_id on every
// trace entry, a tuple), with PyTorch's sizes (a request under 10 MiB gets a 20 MiB segment, a
// larger one a segment of its size rounded to 2 MiB; a large block is split when more than 1 MiB
// is left): 9 MiB of the default pool in a 20 MiB segment D (1000 us); a torch.cuda.MemPool (0, 1)
// makes a 14 MiB segment P for 14 MiB (1010: D's 11 MiB free block is too small, and the default
// pool's anyway) and frees the block (1020); 12 MiB of the default pool: D's free block is too
// small and P's is the MemPool's: a new 12 MiB segment E (1030); the MemPool, destroyed, gives P
// back (segment_free, 1040); E's block is freed (1050); 22 MiB: no free block that large (D 11,
// E 12 MiB): a 22 MiB segment F (1060). Recorded reserved: 20, 34, 46 (1030), 32 (1040), 54 MiB.
// `pool_ids` false: the same file as torch before 2.15 writes it (no pool_id).
trace::TraceData mempool_given_back(const std::string& name, bool pool_ids, std::vector<trace::Segment>* segments) {
    using ::test::Py;
    const int64_t seg_d = 0x7f0000000000, seg_p = 0x7f1000000000, seg_e = 0x7f2000000000, seg_f = 0x7f3000000000;
    auto ev = [&](const char* action, int64_t addr, int64_t bytes, int64_t pool, double us) {
        return pool_ids ? ::test::pool_event(action, addr, bytes, pool, us) : ::test::event(action, addr, bytes, 0, us);
    };
    std::vector<Py> evs{ev("segment_alloc", seg_d, 20 * MiB, 0, 1000),  ev("alloc", seg_d, 9 * MiB, 0, 1000),
                        ev("segment_alloc", seg_p, 14 * MiB, 1, 1010),  ev("alloc", seg_p, 14 * MiB, 1, 1010),
                        ev("free_requested", seg_p, 14 * MiB, 1, 1020),  ev("free_completed", seg_p, 14 * MiB, 1, 1020),
                        ev("segment_alloc", seg_e, 12 * MiB, 0, 1030),  ev("alloc", seg_e, 12 * MiB, 0, 1030),
                        ev("segment_free", seg_p, 14 * MiB, 1, 1040),   ev("free_requested", seg_e, 12 * MiB, 0, 1050),
                        ev("free_completed", seg_e, 12 * MiB, 0, 1050), ev("segment_alloc", seg_f, 22 * MiB, 0, 1060),
                        ev("alloc", seg_f, 22 * MiB, 0, 1060)};
    auto block = ::test::snapshot_block;
    auto segment = ::test::snapshot_segment;
    Py snap = Py::dict(
        {{"segments", Py::list({segment(seg_d, 20 * MiB, {block(seg_d, 9 * MiB, true), block(seg_d + 9 * MiB, 11 * MiB, false)}),
                                segment(seg_e, 12 * MiB, {block(seg_e, 12 * MiB, false)}),
                                segment(seg_f, 22 * MiB, {block(seg_f, 22 * MiB, true)})})},
         {"device_traces", Py::list({Py::list(evs)})}});
    const std::string in = temp_path(name + ".pickle"), db = temp_path(name + ".db");
    std::filesystem::remove(db);
    { std::ofstream(in, std::ios::binary) << snap.pickle(); }
    trace::import::import_file(in, db);
    auto trace_data = trace::load_trace(db);
    if (segments) trace::Reader(db).for_each([&](const trace::Segment& seg) { segments->push_back(seg); });
    std::filesystem::remove(in);
    return trace_data;
}
}   // namespace

TEST_CASE("mhc allocator and simulate: a private pool given back during the trace releases its memory",
          "[sim][allocator][compare][pools]") {
    std::vector<trace::Segment> segs;
    auto trace_data = mempool_given_back("mempool-given-back", true, &segs);
    auto pools = sim::private_pools(trace_data, 0);
    CHECK(pools.exact);
    CHECK(pools.pools == 1);
    CHECK(pools.allocations == 1);
    CHECK(pools.segments_held == 0);
    CHECK(pools.given_back_at[1] == 1040 * 1000 - 1000 * 1000 + 1);   // ns from the first event, +1
    auto cmp = sim::compare_allocator(trace_data, segs, -1, "");
    INFO(sim::to_text(cmp));
    CHECK(cmp.private_pools == 1);
    CHECK(cmp.private_pool_allocations == 1);
    CHECK(cmp.private_pools_given_back == 1);
    CHECK(sim::to_text(cmp).find("1 pools given back during the trace, released by the model too") != std::string::npos);
    CHECK(cmp.recorded_peak == 54 * MiB);
    // The model: D and P (in its pool) 34 MiB; E's 12 MiB cannot use P's free block: a new segment
    // (46 MiB); the recording's segment_free of P, when nothing is allocated, is an empty_cache
    // of that pool: P goes (32 MiB), as recorded; F's 22 MiB fits no free block: 54 MiB.
    CHECK(cmp.model_peak == 54 * MiB);
    CHECK(cmp.model_mallocs == 4);
    CHECK(cmp.model_frees == 1);
    CHECK(cmp.empty_cache_calls == 1);
    CHECK(cmp.max_abs_diff == 0);
    CHECK_FALSE(cmp.diverged);
    // simulate --allocator caching at unlimited capacity (prepare's baseline and the engine):
    // the pool is given back at the first allocation or free recorded after 1040 us (E's free:
    // 32 MiB), so F's segment makes 54 MiB, as recorded; kept, the pool made it 68 MiB.
    sim::Config config;
    config.allocator = "caching";
    config.capacity = sim::parse_capacity("unlimited");
    const auto run = sim::simulate(*sim::prepare(trace_data), config);
    CHECK(run.baseline_peak == 54 * MiB);
    CHECK(run.simulated_peak == 54 * MiB);
    // The same file as older PyTorch writes it (no pool_id): nothing says the segment P was a
    // pool's, so the model puts its block in the default pool, where E's request reuses it: the
    // model diverges at 1030 (34 MiB where the recording made a 12 MiB segment; docs/import.md)
    // and ends at 56 MiB (F beside P's segment, which E held when the recording gave P back).
    std::vector<trace::Segment> s_old;
    auto old = mempool_given_back("mempool-given-back-old", false, &s_old);
    CHECK(old.meta.count("snapshot.pools_from") == 0);
    auto old_cmp = sim::compare_allocator(old, s_old, -1, "");
    CHECK(old_cmp.private_pools == 0);
    CHECK(old_cmp.model_mallocs == 3);
    CHECK(old_cmp.model_peak == 56 * MiB);
    CHECK(old_cmp.diverged);
    std::filesystem::remove(temp_path("mempool-given-back.db"));
    std::filesystem::remove(temp_path("mempool-given-back-old.db"));
}

TEST_CASE("mhc allocator: one empty_cache() freeing 597 segments over 53 ms is one call", "[sim][allocator][compare]") {
    using ::test::event;
    using ::test::Py;
    std::vector<Py> evs;
    int64_t us = 1000;   // time_us: whole microseconds, as PyTorch records them
    const int64_t base = 0x7f0000000000;
    std::vector<std::pair<int64_t, int64_t>> step;   // (address, bytes)
    int64_t addr = base, total = 0;
    for (int i = 0; i < 597; ++i) {
        const int64_t bytes = (12 + 2 * (i % 14)) * MiB;
        evs.push_back(event("segment_alloc", addr, bytes, 0, us += 6));   // the cudaMalloc, then the block in it
        evs.push_back(event("alloc", addr, bytes, 0, us));
        step.emplace_back(addr, bytes);
        total += bytes;
        addr += bytes + 2 * MiB;
    }
    for (auto [a, b] : step) {
        evs.push_back(event("free_requested", a, b, 0, us += 3));
        evs.push_back(event("free_completed", a, b, 0, us += 1));
    }
    us += 500;
    const int64_t cache_start = us;
    for (auto [a, b] : step) evs.push_back(event("segment_free", a, b, 0, us += 89));
    const int64_t cache_end = us;
    std::vector<Py> end_segments;
    for (int i = 0; i < 3; ++i) {
        const int64_t bytes = 20 * MiB;
        evs.push_back(event("segment_alloc", addr + i * bytes, bytes, 0, us += 50));
        evs.push_back(event("alloc", addr + i * bytes, bytes, 0, us));
    }
    for (int i = 0; i < 3; ++i) {
        const int64_t bytes = 20 * MiB;
        evs.push_back(event("free_requested", addr, bytes, 0, us += 20));
        evs.push_back(event("free_completed", addr, bytes, 0, us += 1));
        Py block = Py::dict({{"address", addr}, {"size", bytes}, {"requested_size", bytes}, {"state", "inactive"}});
        end_segments.push_back(Py::dict({{"device", 0}, {"address", addr}, {"total_size", bytes}, {"allocated_size", 0},
                                         {"active_size", 0}, {"stream", 0}, {"segment_type", "large"},
                                         {"is_expandable", Py::boolean(false)}, {"blocks", Py::list({block})}}));
        addr += bytes;
    }
    Py settings = Py::dict({{"PYTORCH_CUDA_ALLOC_CONF", ""}, {"max_split_size", int64_t{-1}},
                            {"expandable_segments", Py::boolean(false)}});
    Py snap = Py::dict({{"segments", Py::list(end_segments)}, {"device_traces", Py::list({Py::list(evs)})},
                        {"allocator_settings", settings}});
    const std::string in = temp_path("empty-cache.pickle"), db = temp_path("empty-cache.db");
    std::filesystem::remove(db);
    { std::ofstream(in, std::ios::binary) << snap.pickle(); }
    trace::import::import_file(in, db);
    auto t = trace::load_trace(db);
    std::vector<trace::Segment> s;
    trace::Reader(db).for_each([&](const trace::Segment& g) { s.push_back(g); });
    auto c = sim::compare_allocator(t, s, -1, "");
    CHECK(c.allocations == 600);
    CHECK(total > 14 * 1024 * MiB);
    // One call of 597 segment frees (not 596 or 597 calls), over the recorded 53 ms.
    CHECK(c.empty_cache_calls == 1);
    CHECK(c.empty_cache_segment_frees == 597);
    CHECK(c.empty_cache_span_ns == (cache_end - cache_start - 89) * 1000);   // 596 x 89 us
    CHECK(c.recorded_peak == total);
    CHECK(c.model_peak == total);
    CHECK(c.model_mallocs == 600);
    CHECK(c.model_frees == 597);
    // Compared outside the call's span the model follows the recording exactly (inside it the
    // recording is part-way through: 14 GiB apart at its first free when compared there).
    CHECK(c.max_abs_diff == 0);
    CHECK(c.mean_abs_diff == 0);
    CHECK_FALSE(c.diverged);
    const std::string text = sim::to_text(c);
    CHECK_THAT(text, Catch::Contains("1 empty_cache calls mirrored (597 segment frees over 53.04 ms"));
    CHECK_THAT(text, Catch::Contains("reserved over time (model - recorded, outside the empty_cache calls' 53.04 ms): max |diff| 0 B"));
    CHECK_THAT(sim::to_json(c), Catch::Contains("\"empty_cache_calls\":1,\"empty_cache_segment_frees\":597"));
    std::filesystem::remove(db);
    std::filesystem::remove(in);
}

// The figures of docs/results.md "Caching allocator model against recorded segments".
TEST_CASE("mhc allocator on the public snapshots: the figures of docs/results.md", "[sim][allocator][compare][public]") {
    SECTION("stanford-cs336 training step: every segment held before recording") {
        auto c = compare_public("torch-snapshot/stanford-cs336-training-step.pickle");
        CHECK(c.settings.empty());   // recorded expandable_segments:False, nothing else set
        CHECK(c.allocations == 1950);
        CHECK(c.seeded_segments == 216);
        CHECK(c.seeded_blocks == 229);   // the blocks alive before the first event (at 1 ns)
        CHECK(c.recorded_peak == 14180941824);
        CHECK(c.model_peak == 14180941824);   // within 0.5%: exactly
        CHECK(c.recorded_segments == 216);
        CHECK(c.model_segments == 216);       // within 2%: exactly
        CHECK(c.recorded_mallocs == 0);
        CHECK(c.model_mallocs == 0);
        CHECK(c.max_abs_diff == 0);
        CHECK_FALSE(c.diverged);
        CHECK(c.blocks_outside_segments == 0);   // a consistent recording
        // From an empty cache the model reserves 0.65% less in 24 more segments.
        CHECK(c.cold_peak == 14088667136);
        CHECK(c.cold_segments == 240);
        auto e = compare_public("torch-snapshot/stanford-cs336-training-step.pickle", "expandable_segments:True");
        CHECK(e.cold_peak == 13941866496);
        CHECK(e.cold_segments == 247);
    }
    SECTION("snapshots with cudaMalloc events: the model makes the recorded segments when the recording did") {
        // The importer keeps each segment_alloc 1 ns before the alloc that needed it; the
        // comparison counts it at that alloc, so no difference is seen between the two.
        for (auto [file, segments] : {std::pair{"torch-snapshot/cs336-silmont2000-memory.pickle", 9},
                                      std::pair{"torch-snapshot/decomfl-memory.pickle.gz", 61}}) {
            INFO(file);
            auto c = compare_public(file);
            CHECK(c.recorded_mallocs == segments);
            CHECK(c.model_mallocs == segments);
            CHECK(c.max_abs_diff == 0);
            CHECK_FALSE(c.diverged);
        }
    }
    SECTION("GPT-2 small on an H200 with expandable segments (our recording): the model to the byte") {
        // datasets/recorded/README.md: 20 training steps, torch 2.11, the allocator's history from
        // before the model moved to the GPU. max_memory_reserved() of that run: 14,250,147,840 B.
        auto rec = compare_public("h200-gpt2-small-expandable-segments.pickle.gz", "", mhc::test::source_path("datasets/recorded"));
        CHECK(rec.settings == "expandable_segments:True");   // recorded in the snapshot
        CHECK(rec.allocations == 28289);
        CHECK(rec.seeded_segments == 0);   // recorded from an empty cache
        CHECK(rec.recorded_peak == 14250147840);
        CHECK(rec.model_peak == 14250147840);
        CHECK(rec.recorded_segments == 139);
        CHECK(rec.model_segments == 139);
        CHECK(rec.max_abs_diff == 0);
        CHECK_FALSE(rec.diverged);
        CHECK(rec.blocks_outside_segments == 0);
        // The same program run again with PyTorch's default allocator (no snapshot) reserved
        // 14,971,568,128 B (torch.cuda.max_memory_reserved): the model, given this recording's
        // allocations and the default settings, reserves exactly that.
        auto d = compare_public("h200-gpt2-small-expandable-segments.pickle.gz", "expandable_segments:False",
                                mhc::test::source_path("datasets/recorded"));
        CHECK(d.model_peak == 14971568128);
        CHECK(d.model_segments == 140);
    }
    SECTION("private memory pools (a torch.cuda.MemPool, CUDA graphs' pools): each allocation in its own pool") {
        // slime's Megatron RL snapshot (THUDM/slime): 297 of its 298 end-state segments in the
        // MemPool (0, 1), 412 segments made and 114 given back by two empty_cache calls; the
        // recording reserved 38,780,534,784 B at its peak (snapshot_accounting.py). With one pool
        // per stream the model reserved 36,821,794,816 B (-5.05%, 343 segments, 28 given back):
        // the default pool's free blocks served the MemPool's requests and the reverse.
        auto c = compare_public("torch-snapshot/slime-megatron-mempool-device3.pickle.gz");
        CHECK(c.private_pools == 1);
        CHECK(c.private_pool_segments == 297);
        CHECK(c.private_pool_allocations == 800);
        CHECK(c.recorded_peak == 38780534784);
        CHECK(c.model_peak == 38780534784);
        CHECK(c.recorded_segments == 412);
        CHECK(c.model_segments == 412);
        CHECK(c.model_frees == 114);   // the MemPool's segments are never given back
        CHECK(c.max_abs_diff == 0);
        CHECK_FALSE(c.diverged);
        // verl's end state (no trace events; pools (0, 1) and (0, 2) beside the default one): the
        // warm start holds every segment, so only the cold start models anything. It reserved
        // 25,631,391,744 B with one pool per stream, 25,652,363,264 B now: 2.05% under the
        // recording's 26,189,234,176 B (the end state's cached free blocks, which the model from
        // an empty cache has no reason to make).
        auto v = compare_public("torch-snapshot/verl-megatron-vllm-end-state.pickle.gz");
        CHECK(v.private_pools == 2);
        CHECK(v.private_pool_segments == 68);
        CHECK(v.private_pool_allocations == 339);
        CHECK(v.recorded_peak == 26189234176);
        CHECK(v.model_peak == 26189234176);
        CHECK(v.cold_peak == 25652363264);
        CHECK(v.cold_segments == 125);
    }
    SECTION("simulate's caching model puts each allocation in the same private pool as mhc allocator") {
        // The same slime snapshot through prepare and the engine (mhc simulate --allocator caching,
        // sweep's baseline, mhc advise): 800 allocations in the MemPool, the rest in the default
        // pool. With one pool per stream simulate reserved 36,821,794,816 B (-5.05%) at unlimited
        // capacity; now the recording's and mhc allocator's 38,780,534,784 B.
        const std::string db = temp_path("slime-simulate.db");
        trace::import::import_file(std::string(mhc::test::public_datasets()) + "/torch-snapshot/slime-megatron-mempool-device3.pickle.gz", db);
        auto t = trace::load_trace(db);
        sim::Config config;
        config.allocator = "caching";
        config.capacity = sim::parse_capacity("unlimited");
        const auto run = sim::simulate(*sim::prepare(t), config);
        CHECK(run.baseline_peak == 38780534784);
        CHECK(run.simulated_peak == 38780534784);
        CHECK(sim::private_pools(t, 3).allocations == 800);
        // Under 90% of it (34,902,481,305 B) blocks are evicted, each freed into its own pool, and
        // the run stays within the capacity (the engine's invariants checked).
        config.capacity = sim::parse_capacity("90%");
        config.check_invariants = true;
        const auto limited = sim::simulate(*sim::prepare(t), config);
        CHECK(limited.baseline_peak == 38780534784);
        CHECK(limited.capacity == 34902481305);
        CHECK(limited.swap_out_count == 628);
        CHECK(limited.simulated_peak == 34850471936);
        CHECK_FALSE(limited.oom.happened);
        std::filesystem::remove(db);
    }
    SECTION("mosaic (synthetic): its segments cannot hold its own blocks, so the import leaves them out") {
        // 520 of its 537 allocations lie in no segment: mhc import drops the 5 rows with a
        // warning (meta segments), and there is nothing to compare with.
        CHECK_THROWS_WITH(compare_public("torch-snapshot/mosaic-synthetic.pickle"),
                          Catch::Contains("no segments recorded"));
    }
}
#endif

TEST_CASE("mhc allocator: allocations outside the recorded segments are counted and said", "[sim][allocator][compare]") {
    // Inside: 6 MiB in a 20 MiB segment; 30 MiB across two adjacent rows of one expandable
    // segment (its mapped pages); outside: 4 MiB where no segment is, and 1 MiB in a segment
    // made only after it (t 3 < 5).
    const int64_t E = 0xA000000;
    auto t = allocations({{6 * MiB, 10, 20, 0x1000000}, {30 * MiB, 8, 30, E + 10 * MiB},
                          {4 * MiB, 50, 55, 0x5000000}, {1 * MiB, 3, 4, E}});
    std::vector<trace::Segment> s{seg(0x1000000, 20 * MiB, 10, trace::kNoTime), seg(E, 20 * MiB, 5, trace::kNoTime),
                                  seg(E + 20 * MiB, 20 * MiB, 5, trace::kNoTime)};
    s[1].expandable = s[2].expandable = true;
    auto c = sim::compare_allocator(t, s, 0, "");
    CHECK(c.blocks_outside_segments == 2);
    CHECK(sim::to_text(c).find("recording inconsistent: 2 of 4 allocations lie outside") != std::string::npos);
    CHECK(sim::to_json(c).find("\"blocks_outside_segments\":2") != std::string::npos);
}

TEST_CASE("mhc allocator: blocks outside the segments as mhc check judges them", "[sim][allocator][compare]") {
    // docs/trace-format.md "Events at one instant", as mhc check's outside-segment reads it: at one
    // time the segments made then come first, then the allocations, then the segments freed then.
    // 6 MiB made at 10 with its 20 MiB segment; 1 MiB alive only at 20, the instant the segment is
    // freed: both lie in it (the model before counted the second outside, 1 of 2, where mhc check
    // passes the recording). 2 MiB at 30, after the free, lies in none. 1 MiB at address 0 (not
    // known) is not judged, as mhc check does not (the model before counted it too: 3).
    auto trace_data = allocations({{6 * MiB, 10, 15, 0x1000000}, {1 * MiB, 20, 20, 0x1000000 + 19 * MiB},
                                   {2 * MiB, 30, 40, 0x1000000}, {1 * MiB, 50, 60, 0}});
    std::vector<trace::Segment> segs{seg(0x1000000, 20 * MiB, 10, 20)};
    auto cmp = sim::compare_allocator(trace_data, segs, 0, "");
    CHECK(cmp.blocks_outside_segments == 1);
}

TEST_CASE("mhc allocator on an order-only trace names the divergence by event", "[sim][allocator][compare][order-only]") {
    // 6 MiB at event 10 in a recorded 8 MiB segment; the model makes its 20 MiB one.
    auto t = allocations({{6 * MiB, 10, 20}});
    std::vector<trace::Segment> s{seg(0x1000000, 8 * MiB, 10, trace::kNoTime)};
    t.meta["timing"] = "order-only";
    auto c = sim::compare_allocator(t, s, 0, "");
    REQUIRE(c.diverged);
    CHECK(c.why.rfind("at event #10 ", 0) == 0);
    t.meta["timing"] = "exact";
    CHECK(sim::compare_allocator(t, s, 0, "").why.rfind("at 10 ns ", 0) == 0);
}

TEST_CASE("simulate: the caching model against a profiler's recorded reserved peak", "[sim][allocator][kineto]") {
    // 12 MiB, freed, then 14 MiB: the default large pool keeps the 12 MiB segment cached and
    // takes another of 14 MiB (26 MiB); expandable segments map 20 MiB pages and reuse them (20 MiB).
    auto trace = allocations({{12 * MiB, 10, 20}, {14 * MiB, 30, 40}});
    auto prep = [&] { return sim::prepare(trace, 0); };
    sim::Config config;
    config.allocator = "caching";
    config.capacity = sim::parse_capacity("unlimited");
    REQUIRE(sim::simulate(*prep(), config).baseline_peak == 26 * MiB);
    sim::Config expandable = config;
    expandable.allocator_conf = "expandable_segments:True";
    REQUIRE(sim::simulate(*prep(), expandable).simulated_peak == 20 * MiB);
    // no recorded peak (not a Kineto trace), or one within 5%: nothing said
    CHECK(sim::modelled_reserved_warning(*prep(), config, 26 * MiB).empty());
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(26 * MiB + MiB);
    CHECK(sim::modelled_reserved_warning(*prep(), config, 26 * MiB).empty());
    // 26 MiB against a recorded 20 MiB: said, with what expandable segments reserve (20 MiB)
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(20 * MiB);
    const std::string said = sim::modelled_reserved_warning(*prep(), config, 26 * MiB);
    CHECK_THAT(said, Catch::StartsWith("the caching allocator model reserves 26.00 MiB at unlimited capacity where the "
                                    "profiler recorded a reserved peak of 20.00 MiB (Total Reserved, x1.300)"));
    CHECK_THAT(said, Catch::EndsWith("with expandable segments it reserves 20.00 MiB (x1.000): the run may have used them "
                                  "(--allocator-conf expandable_segments:True)"));
    // "more than 5%" in whole bytes: a model of 21 MiB is exactly 5% over 20 MiB (not said; the
    // ratios' difference in doubles, 1.05 - 1, said it before 2026-12-06), a byte more is said
    CHECK(sim::modelled_reserved_warning(*prep(), config, 21 * MiB).empty());
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), config, 21 * MiB + 1), Catch::Contains("(Total Reserved, x1.050)"));
    CHECK(sim::modelled_reserved_warning(*prep(), config, 19 * MiB).empty());
    // the what-if is offered where it is within 5% by less than a byte (20 MiB against 19,972,877 B:
    // 998,643 B over, R / 20 = 998,643.85), and not to a run whose settings (the last key wins) have
    // expandable segments already
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(20 * MiB * 20 / 21 + 1);
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), config, 26 * MiB), Catch::Contains("it reserves 20.00 MiB"));
    sim::Config switched = config;
    switched.allocator_conf = "expandable_segments:True,expandable_segments:False";
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), switched, 26 * MiB), Catch::Contains("it reserves 20.00 MiB"));
    switched.allocator_conf = "expandable_segments:False,expandable_segments:True";
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), switched, 26 * MiB), Catch::EndsWith("a share of the model's figure"));
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(20 * MiB);
    // the warning is one of the run's warnings
    const auto run = sim::simulate(*prep(), config);
    CHECK(std::find(run.warnings.begin(), run.warnings.end(), said) != run.warnings.end());
    // recorded 13 MiB: expandable segments do not explain it either, so no what-if is offered
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(13 * MiB);
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), config, 26 * MiB), Catch::EndsWith("a share of the model's figure"));
    // a run already under expandable segments, or the ideal allocator: no what-if, or nothing
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(20 * MiB);
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), expandable, 26 * MiB), Catch::EndsWith("a share of the model's figure"));
    config.allocator = "ideal";
    CHECK(sim::modelled_reserved_warning(*prep(), config, 26 * MiB).empty());
}

TEST_CASE("simulate: the caching model starts from the reserved bytes a profiler recorded at its first event",
          "[sim][allocator][kineto]") {
    // 12 MiB, freed, then 14 MiB: from an empty cache 26 MiB (the case above). The profiler recorded
    // 40 MiB reserved at its first memory event and no more after: before the first allocation after
    // t = 0 the model holds 40 MiB, from which its 12 and 14 MiB segments are taken (40 MiB, never more).
    auto trace = allocations({{12 * MiB, 10, 20}, {14 * MiB, 30, 40}});
    trace.meta["kineto.reserved_first.device0"] = std::to_string(40 * MiB);
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(40 * MiB);
    auto prep = [&] { return sim::prepare(trace, 0); };
    sim::Config config;
    config.allocator = "caching";
    config.capacity = sim::parse_capacity("unlimited");
    const auto run = sim::simulate(*prep(), config);
    CHECK(run.baseline_peak == 40 * MiB);
    CHECK(run.simulated_peak == 40 * MiB);
    // said, with the figure from an empty cache (26 of 40 MiB: x0.650); no mismatch to report
    const std::string said = sim::modelled_reserved_warning(*prep(), config, run.baseline_peak);
    CHECK(said ==
          "the caching allocator model starts from the 40.00 MiB the profiler recorded reserved at its "
          "first memory event (Total Reserved): memory the allocator held before profiling, which the "
          "model's new segments take before the GPU's (the trace does not say how it was laid out); from an "
          "empty cache the model reserves 26.00 MiB (x0.650)");
    CHECK(std::find(run.warnings.begin(), run.warnings.end(), said) != run.warnings.end());
    // expandable segments: the 12 MiB request maps one page of 20 MiB from the 40 held, the 14 MiB one
    // fits in it once the 12 MiB are freed: 20 mapped + 20 held
    sim::Config expandable = config;
    expandable.allocator_conf = "expandable_segments:True";
    CHECK(sim::simulate(*prep(), expandable).simulated_peak == 40 * MiB);
    // under a capacity of 30 MiB the model holds what fits (30 MiB); both segments come from it
    config.capacity = sim::parse_capacity("30MiB");
    const auto tight = sim::simulate(*prep(), config);
    CHECK_FALSE(tight.oom.happened);
    CHECK(tight.simulated_peak == 30 * MiB);
    // bytes live before recording (a row at t = 0, 4 MiB: a segment of 20 MiB) come first; 20 MiB are
    // held, and the 12 and 14 MiB requests fit in that segment's free 16 MiB in turn: 40 MiB
    auto before = allocations({{4 * MiB, 0, trace::kNoTime}, {12 * MiB, 10, 20}, {14 * MiB, 30, 40}});
    before.meta = trace.meta;
    config.capacity = sim::parse_capacity("unlimited");
    CHECK(sim::simulate(*sim::prepare(before, 0), config).baseline_peak == 40 * MiB);
}

TEST_CASE("simulate: the held bytes of a profiler's first figure count in the peak when the first call fails",
          "[sim][allocator][kineto]") {
    // 4 MiB live before recording (a 20 MiB segment), then a 22 MiB request at t = 10 under a capacity
    // of 30 MiB, the profiler having recorded 40 MiB: the model holds 30 MiB (10 held), the 22 MiB
    // segment does not fit (20 + 10 held - 10 + 22 > 30), the held bytes go back, the 4 MiB block is
    // swapped out and its segment given back, and the 22 MiB one is made. Reserved was 30 MiB from the
    // top-up until that failed call: the peak (it was 22 MiB when the top-up came in the failing call).
    auto trace = allocations({{4 * MiB, 0, trace::kNoTime}, {22 * MiB, 10, 20}});
    trace.meta["kineto.reserved_first.device0"] = std::to_string(40 * MiB);
    sim::Config config;
    config.allocator = "caching";
    config.capacity = sim::parse_capacity("30MiB");
    const auto run = sim::simulate(*sim::prepare(trace, 0), config);
    CHECK_FALSE(run.oom.happened);
    CHECK(run.swap_out_bytes == 4 * MiB);
    CHECK(run.simulated_peak == 30 * MiB);
}

TEST_CASE("simulate: the reserved warning names why the model is below the profiler's peak",
          "[sim][allocator][kineto]") {
    auto trace = allocations({{12 * MiB, 10, 20}, {14 * MiB, 30, 40}});
    trace.meta["kineto.reserved_peak.device0"] = std::to_string(40 * MiB);
    auto prep = [&] { return sim::prepare(trace, 0); };
    sim::Config config;
    config.allocator = "caching";
    config.capacity = sim::parse_capacity("unlimited");
    // a trace imported before the first event's figure was kept: starts empty (26 MiB), says to import again
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), config, 26 * MiB),
               Catch::Contains("(Total Reserved, x0.650): the trace does not say what the allocator held at its "
                               "first memory event (imported by an earlier mhc: import it again)"));
    // 20 MiB at the first event, 40 MiB at the peak: the run's allocator grew during the trace more than
    // the model, whose 12 MiB segment comes from the 20 held and whose 14 MiB one from the 8 still held
    // and 6 from the GPU: 26 MiB, as from an empty cache
    trace.meta["kineto.reserved_first.device0"] = std::to_string(20 * MiB);
    const auto run = sim::simulate(*prep(), config);
    REQUIRE(run.baseline_peak == 26 * MiB);
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), config, run.baseline_peak),
               Catch::StartsWith("the caching allocator model reserves 26.00 MiB at unlimited capacity where the "
                                 "profiler recorded a reserved peak of 40.00 MiB (Total Reserved, x0.650): the run's "
                                 "allocator reserved more during the trace than "
                                 "the model does from the 20.00 MiB held at its first memory event"));
    // 0 B at the first event is a figure (the cache was empty when profiling began), not a missing one
    trace.meta["kineto.reserved_first.device0"] = "0";
    CHECK_THAT(sim::modelled_reserved_warning(*prep(), config, 26 * MiB),
               Catch::Contains("(Total Reserved, x0.650): the run's allocator reserved more during the trace than "
                               "the model does from the 0 B held at its first memory event"));
}

TEST_CASE("caching allocator: bytes held from a warm start serve new segments and go back first", "[sim][allocator]") {
    CachingAllocator ca(100 * MiB);
    CHECK(ca.top_up(90 * MiB) == 90 * MiB);
    CHECK(ca.reserved() == 90 * MiB);
    CHECK(ca.top_up(40 * MiB) == 0);   // already that much reserved
    // a 30 MiB segment is taken from the 90 held (reserved stays 90), freed: a whole free segment
    int32_t first = ca.allocate(30 * MiB);
    REQUIRE(first >= 0);
    CHECK(ca.held() == 60 * MiB);
    ca.free(first);
    // 40 MiB: the cached 30 MiB block is too small; a new segment from the held bytes (20 left)
    REQUIRE(ca.allocate(40 * MiB) >= 0);
    CHECK(ca.reserved() == 90 * MiB);
    CHECK(ca.held() == 20 * MiB);
    // 44 MiB (sizes here are whole 2 MiB, as large segments are rounded): the 20 held and 24 from the
    // GPU would make 114 > 100: cudaMalloc fails, the held 20 and the free 30 MiB segment go back
    // (40 left), and 40 + 44 = 84 fits
    REQUIRE(ca.allocate(44 * MiB) >= 0);
    CHECK(ca.held() == 0);
    CHECK(ca.reserved() == 84 * MiB);
    // a segment takes what is held and the rest from the GPU: 10 held + 14 = 24 MiB reserved
    CachingAllocator part(100 * MiB);
    part.top_up(10 * MiB);
    REQUIRE(part.allocate(24 * MiB) >= 0);
    CHECK(part.held() == 0);
    CHECK(part.reserved() == 24 * MiB);
    // at most the capacity is held; empty_cache gives held bytes back
    CachingAllocator small(50 * MiB);
    CHECK(small.top_up(60 * MiB) == 50 * MiB);
    small.empty_cache();
    CHECK(small.reserved() == 0);
}
