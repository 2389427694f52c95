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
