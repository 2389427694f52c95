// Golden runs of the caching allocator model alone: seeded random sequences of allocations,
// frees and empty_cache() under a capacity they overflow (so that oversize blocks, whole cached
// segments and expandable pages are given back), for the default settings and every
// PYTORCH_CUDA_ALLOC_CONF option the model follows, on one and on two streams, with a warm
// start of cached segments. Every block's segment, offset and size, the reserved, allocated and
// largest free figures, the segment count and every cudaMalloc/cudaFree/map/unmap are folded
// into one 64-bit FNV-1a digest per case, recorded in tests/sim/golden/allocator_grid.json, so
// that a faster bookkeeping that changes any choice of the model changes a digest.
// To retake it after a deliberate change of the rules: MHC_UPDATE_GOLDEN=1 mhc_sim_tests "[allocator-golden]".
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "golden_file.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/test/paths.hpp"

namespace sim = mhc::sim;

namespace {

constexpr int64_t kMiB = 1 << 20;

struct Digest {
    uint64_t h = 1469598103934665603ull;
    void i64(int64_t value) {
        for (size_t i = 0; i < sizeof value; ++i) h = (h ^ ((static_cast<uint64_t>(value) >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
};

// A request size: mostly small-pool and mid-size tensors, some of tens to hundreds of MiB.
int64_t request(std::mt19937_64& rng) {
    const uint64_t kind = rng() % 10;
    if (kind < 4) return 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(kMiB));
    if (kind < 8) return kMiB + static_cast<int64_t>(rng() % static_cast<uint64_t>(12 * kMiB));
    return 12 * kMiB + static_cast<int64_t>(rng() % static_cast<uint64_t>(200 * kMiB));
}

struct Run { std::string digest; int64_t ooms = 0, device_frees = 0, peak = 0; };

Run run(const std::string& conf, int streams, uint64_t seed) {
    sim::CachingAllocator ca(1536 * kMiB, sim::parse_allocator_conf(conf, "--allocator-conf"));
    std::vector<sim::CachingAllocator::SegmentEvent> log;
    ca.set_log(&log);
    std::mt19937_64 rng(seed);
    Digest digest;
    Run out;
    auto note = [&](int32_t block) {
        digest.i64(block < 0 ? -1 : ca.block_segment(block));
        digest.i64(block < 0 ? -1 : ca.block_offset(block));
        digest.i64(block < 0 ? -1 : ca.block_size(block));
        digest.i64(ca.reserved());
        digest.i64(ca.allocated());
        digest.i64(static_cast<int64_t>(ca.segments()));
        out.peak = std::max(out.peak, ca.reserved());
    };
    // A warm start: cached segments from before a recording, some blocks placed where it had them.
    std::vector<int32_t> live;
    const int32_t large = ca.add_cached_segment(40 * kMiB, 0, false);
    ca.add_cached_segment(2 * kMiB, 0, true);
    ca.add_cached_segment(64 * kMiB, streams - 1, false);
    for (int64_t off : {0, 6, 30}) {
        const int32_t block = ca.allocate_at(large, off * kMiB, 3 * kMiB + 100);
        note(block);
        if (block >= 0) live.push_back(block);
    }
    for (int op = 0; op < 12'000; ++op) {
        const uint64_t what = rng() % 1000;
        if (what < 3) {
            ca.empty_cache();
            note(-2);
        } else if (what < 520 || live.empty()) {
            const int32_t block = ca.allocate(request(rng), static_cast<int64_t>(rng() % static_cast<uint64_t>(streams)));
            note(block);
            if (block >= 0) live.push_back(block);
            else ++out.ooms;
        } else {
            const size_t victim = rng() % live.size();
            ca.free(live[victim]);
            live[victim] = live.back();
            live.pop_back();
            note(-3);
        }
        if (op % 64 == 0) digest.i64(ca.largest_free_block());
    }
    for (const auto& event : log) {
        digest.i64(event.alloc); digest.i64(event.expandable); digest.i64(event.bytes);
        digest.i64(event.stream); digest.i64(event.offset); digest.i64(event.segment);
    }
    digest.i64(ca.device_allocs());
    digest.i64(ca.device_frees());
    out.device_frees = ca.device_frees();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest.h));
    out.digest = hex;
    return out;
}

}  // namespace

TEST_CASE("the caching allocator model gives the golden runs under every setting", "[sim][allocator][allocator-golden]") {
    const simtest::GoldenFile golden(mhc::test::source_path("tests/sim/golden/allocator_grid.json"));
    nlohmann::json got;
    int checked = 0;
    for (const char* conf : {"", "max_split_size_mb:64", "garbage_collection_threshold:0.6",
                             "max_split_size_mb:48,garbage_collection_threshold:0.7",
                             "roundup_power2_divisions:4", "roundup_power2_divisions:[1:2,64:8,>:4],max_non_split_rounding_mb:40,max_split_size_mb:32",
                             "expandable_segments:True", "expandable_segments:True,roundup_power2_divisions:2"})
        for (int streams : {1, 2})
            for (uint64_t seed : {1u, 2u}) {
                const Run got_run = run(conf, streams, seed);
                const std::string key = std::string("conf '") + conf + "' streams " + std::to_string(streams) + " seed " + std::to_string(seed);
                const nlohmann::json entry = {{"digest", got_run.digest}, {"ooms", got_run.ooms},
                                             {"device_frees", got_run.device_frees}, {"peak", got_run.peak}};
                golden.compare(got, checked, key, entry);
                // The sequences reach the capacity and give cached memory back, or they test little.
                CHECK(got_run.ooms > 0);
                CHECK(got_run.device_frees > 0);
            }
    golden.finish(got, checked,
                  "Digests of caching allocator runs (tests/sim/test_allocator_golden.cpp): "
                          "retaken with MHC_UPDATE_GOLDEN=1; say when and why.");
}
