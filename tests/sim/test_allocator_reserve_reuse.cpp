// A large block freed in one step and wanted again in the next (cuDNN's RNN reserve space, speech_gru.py):
// state made in between takes part of it, and the next step's request needs a new segment. PyTorch's
// allocator does the same (c10/cuda/CUDACachingAllocator.cpp @001074d2): malloc tries get_free_block
// (best fit: the smallest free block of at least the size, same stream) before alloc_block (a new
// cudaMalloc, or pages mapped at an expandable segment's end), and splits a large block whenever more
// than 1 MiB would be left (should_split); free blocks are given back only by empty_cache or an
// allocation that failed. Scaled from the capture of bench/advise/new_user/speech_gru.py (docs/results.md).
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "mhc/sim/allocator.hpp"

using mhc::sim::CachingAllocator;
using simtest::MiB;

namespace {
// Step 1: activation A (60 MiB), reserve R (400 MiB), gradient G (40 MiB, kept, made while R lives);
// R and A freed; optimizer state S (80 MiB, kept) made after the step. Step 2: A, then R again.
// Returns the reserved bytes after S, after step 2's R, and after step 3's R.
struct Reserved {
    int64_t after_state, step2, step3;
};
Reserved run(const mhc::sim::AllocatorSettings& settings) {
    CachingAllocator ca(80 * 1024 * MiB, settings);
    int32_t act = ca.allocate(60 * MiB);
    int32_t reserve = ca.allocate(400 * MiB);
    ca.allocate(40 * MiB);   // the gradient: lives on
    ca.free(reserve);
    ca.free(act);
    ca.allocate(80 * MiB);   // the optimizer state: lives on
    Reserved out{ca.reserved(), 0, 0};
    act = ca.allocate(60 * MiB);
    reserve = ca.allocate(400 * MiB);
    out.step2 = ca.reserved();
    ca.free(reserve);
    ca.free(act);
    ca.allocate(60 * MiB);
    ca.allocate(400 * MiB);
    out.step3 = ca.reserved();
    return out;
}
}   // namespace

TEST_CASE(
    "caching allocator: state made between steps splits the freed reserve, the next reserve takes a new "
    "segment",
    "[sim][allocator]") {
    // Segments A 60, R 400, G 40 (each request >= 10 MiB: its own cudaMalloc, rounded to 2 MiB) = 500.
    // S (80): the free blocks are A's 60 (too small) and R's 400: S takes R's, split 80 | 320
    // (320 > 1 MiB left). Step 2: A into A's 60; R (400): the largest free block is 320: a new
    // segment, 900 MiB reserved for 580 live. Step 3: R fits the new segment's 400: no growth.
    auto plain = run({});
    CHECK(plain.after_state == 500 * MiB);
    CHECK(plain.step2 == 900 * MiB);
    CHECK(plain.step3 == 900 * MiB);

    // max_split_size_mb:200: R's 400 MiB block is oversize; get_free_block gives an oversize block
    // only to a request of at least max_split_size (and under it + 20 MiB), so S (80) takes a new
    // 80 MiB segment (580) and step 2's R reuses R's segment: reserved = the live peak, 580.
    auto split = run(mhc::sim::parse_allocator_conf("max_split_size_mb:200", "test"));
    CHECK(split.after_state == 580 * MiB);
    CHECK(split.step2 == 580 * MiB);
    CHECK(split.step3 == 580 * MiB);

    // expandable_segments:True: one segment, A [0,60) R [60,460) G [460,500) mapped (20 MiB pages).
    // Freeing R and A leaves [0,460) free (G after it: nothing to grow into); S takes [0,80), step
    // 2's A [80,140), leaving 320 free; R (400) maps 400 MiB after G: 900. The 320 MiB stay mapped
    // (pages are unmapped only by empty_cache or after a failed allocation).
    auto expandable = run(mhc::sim::parse_allocator_conf("expandable_segments:True", "test"));
    CHECK(expandable.after_state == 500 * MiB);
    CHECK(expandable.step2 == 900 * MiB);
    CHECK(expandable.step3 == 900 * MiB);
}

// ---- Under a limit: PyTorch's free-and-retry (sim::caching_under_limit) ----------------------
// malloc (c10/cuda/CUDACachingAllocator.cpp @001074d2): get_free_block, else alloc_block; when
// that cudaMalloc fails, release_available_cached_blocks (max_split_size set: one oversize free
// block covering max(request, max_split_size), else oversize blocks from the largest down) and
// alloc_block again, then release_cached_blocks (every free unsplit segment; free pages of
// expandable segments unmapped) and alloc_block once more; still failing: OutOfMemoryError.
namespace {
using simtest::ms;
using simtest::K;
constexpr int64_t kLate = 100 * ms;   // kept to the end of the step

// T (200 MiB) made and freed, then U (300 MiB): U cannot use T's cached segment.
mhc::trace::TraceData cached_then_larger() {
    return simtest::build({{200 * MiB, 1 * ms, 3 * ms}, {300 * MiB, 4 * ms, 6 * ms}},
                          {K{15 * ms / 10, 25 * ms / 10, {{0, 'w'}}}, K{45 * ms / 10, 55 * ms / 10, {{1, 'w'}}}});
}
// The reserve-reuse step above as a trace: A 60, R 400, G 40 (kept), R and A freed, S 80 (kept),
// then A 60 and R 400 again.
mhc::trace::TraceData reserve_reuse() {
    return simtest::build({{60 * MiB, 1 * ms, 5 * ms},
                           {400 * MiB, 2 * ms, 4 * ms},
                           {40 * MiB, 3 * ms, kLate},
                           {80 * MiB, 6 * ms, kLate},
                           {60 * MiB, 7 * ms, 11 * ms},
                           {400 * MiB, 8 * ms, 10 * ms}},
                          {K{2 * ms + 1, 3 * ms - 1, {{0, 'r'}, {1, 'w'}}}, K{6 * ms + 1, 7 * ms - 1, {{3, 'w'}}},
                           K{8 * ms + 1, 9 * ms, {{4, 'r'}, {5, 'w'}}}});
}
// Whether simulate at `capacity` (caching model, `conf`) ran without moving anything off the GPU.
bool simulate_runs(const mhc::trace::TraceData& trace_data, int64_t capacity, const std::string& conf) {
    mhc::sim::Config config = simtest::config("lru", capacity);
    config.allocator = "caching";
    config.allocator_conf = conf;
    const mhc::sim::Result run = mhc::sim::simulate(trace_data, config);
    return !run.oom.happened && run.swap_out_count == 0 && run.evict_clean_count == 0 && run.drop_count == 0;
}
}   // namespace

TEST_CASE("caching model under a limit: a failed cudaMalloc gives the cached segment back and the step runs",
          "[sim][allocator][limit]") {
    const auto step = cached_then_larger();
    const auto prepared = mhc::sim::prepare(step);
    // Without a limit: T's segment (200) stays cached, U cudaMallocs 300: 500 reserved, 300 live.
    CHECK(mhc::sim::baseline_peak(*prepared, "caching") == 500 * MiB);
    // At 400 MiB: U's cudaMalloc would take 500 > 400 and fails; no max_split_size, so
    // release_available_cached_blocks gives nothing; release_cached_blocks frees T's whole free
    // segment (0 reserved) and the retry takes 300. Peak 300 (the 200 before, 300 after): it runs.
    auto at400 = mhc::sim::caching_under_limit(*prepared, "", 400 * MiB);
    CHECK(at400.runs);
    CHECK(at400.reserved_peak == 300 * MiB);
    CHECK(at400.retries == 1);
    CHECK(simulate_runs(step, 400 * MiB, ""));
    // max_split_size_mb:100: T (200) is oversize. release_available_cached_blocks looks for one free
    // oversize block of at least max(300, 100) = 300: none, so it frees oversize blocks from the
    // largest down: T (200 < 300 wanted: returns false, T already freed); release_cached_blocks
    // then finds nothing more, and the retry takes 300: the same peak.
    auto split = mhc::sim::caching_under_limit(*prepared, "max_split_size_mb:100", 400 * MiB);
    CHECK(split.runs);
    CHECK(split.reserved_peak == 300 * MiB);
    CHECK(split.retries == 1);
    // At 299 MiB U (300) cannot be had even from nothing: PyTorch raises there.
    auto at299 = mhc::sim::caching_under_limit(*prepared, "", 299 * MiB);
    CHECK_FALSE(at299.runs);
    CHECK(at299.failed_row == 1);
    CHECK(at299.bytes_needed == 300 * MiB);
    CHECK_FALSE(simulate_runs(step, 299 * MiB, ""));
    // At or above the unlimited peak nothing fails: the unlimited run itself.
    auto at500 = mhc::sim::caching_under_limit(*prepared, "", 500 * MiB);
    CHECK(at500.runs);
    CHECK(at500.reserved_peak == 500 * MiB);
    CHECK(at500.retries == 0);
}

TEST_CASE("caching model under a limit: a split block holding live state is not given back, the step OOMs",
          "[sim][allocator][limit]") {
    const auto step = reserve_reuse();
    const auto prepared = mhc::sim::prepare(step);
    CHECK(mhc::sim::baseline_peak(*prepared, "caching") == 900 * MiB);   // as worked above: 900 for 580 live
    // At 899 MiB (or anything from the live 580 up): step 2's R (400) finds the 320 left of R's
    // segment too small; its cudaMalloc (900) fails; release_cached_blocks finds no whole free segment
    // (A's holds step 2's A, R's is split by S, G's is in use): the retry fails, OutOfMemoryError.
    for (const int64_t cap : {899 * MiB, 700 * MiB, 600 * MiB}) {
        auto run = mhc::sim::caching_under_limit(*prepared, "", cap);
        CHECK_FALSE(run.runs);
        CHECK(run.failed_row == 5);
        CHECK(run.bytes_needed == 400 * MiB);
        CHECK_FALSE(simulate_runs(step, cap, ""));
    }
    // expandable_segments:True (one segment, 20 MiB pages): S [0,80), step 2's A [80,140), so
    // [140,460) (320) is free and mapped when R comes: 500 reserved, 900 without a limit. At 600
    // mapping 400 more after G [460,500) fails (900 > 600); release_cached_blocks unmaps the free
    // pages [140,460): 180 mapped; the retry maps [500,900): 580. It runs, with one retry, peak 580
    // (step 1's 500, then 580); at 579 the retry fails too.
    auto expandable = mhc::sim::caching_under_limit(*prepared, "expandable_segments:True", 600 * MiB);
    CHECK(expandable.runs);
    CHECK(expandable.reserved_peak == 580 * MiB);
    CHECK(expandable.retries == 1);
    CHECK(simulate_runs(step, 600 * MiB, "expandable_segments:True"));
    CHECK_FALSE(mhc::sim::caching_under_limit(*prepared, "expandable_segments:True", 579 * MiB).runs);
    CHECK_FALSE(simulate_runs(step, 579 * MiB, "expandable_segments:True"));
    // max_split_size_mb:200 keeps R's block whole: 580 without a limit, so it runs at 580.
    auto split = mhc::sim::caching_under_limit(*prepared, "max_split_size_mb:200", 580 * MiB);
    CHECK(split.runs);
    CHECK(split.reserved_peak == 580 * MiB);
    CHECK(simulate_runs(step, 580 * MiB, "max_split_size_mb:200"));
}
