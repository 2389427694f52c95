// Host swap engine: every transfer checksummed and compared; faults are caught.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <random>

#include "mhc/common/error.hpp"
#include "mhc/kernels/swap.hpp"
#include "reference.hpp"

namespace k = mhc::kernels;

namespace {
void fill_random(std::mt19937_64& rng, void* p, size_t bytes) {
    auto* b = static_cast<unsigned char*>(p);
    for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(rng());
}
}  // namespace

TEST_CASE("kernels: checksum64 parts, positions and damage", "[kernels][swap]") {
    std::mt19937_64 rng(ref::seed() + 20);
    std::vector<unsigned char> buf(100003);
    fill_random(rng, buf.data(), buf.size());
    const uint64_t whole = k::checksum64(buf.data(), buf.size());
    // Any split at 8-byte boundaries, summed in any order, gives the same value.
    for (size_t cut : {8ul, 4096ul, 50000ul, 99992ul}) {
        uint64_t s = k::checksum64_partial(buf.data() + cut, buf.size() - cut, cut / 8) +
                     k::checksum64_partial(buf.data(), cut, 0);
        CHECK(k::checksum64_finish(s, buf.size()) == whole);
    }
    // Every single-bit flip at random places changes it.
    for (int i = 0; i < 2000; ++i) {
        size_t pos = rng() % buf.size();
        int bit = rng() % 8;
        buf[pos] ^= 1 << bit;
        REQUIRE(k::checksum64(buf.data(), buf.size()) != whole);
        buf[pos] ^= 1 << bit;
    }
    // Swapping two different words, a shorter length, all-zero data: all differ.
    auto swapped = buf;
    std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 800);
    CHECK(k::checksum64(swapped.data(), swapped.size()) != whole);
    CHECK(k::checksum64(buf.data(), buf.size() - 1) != whole);
    std::vector<unsigned char> z1(4096, 0), z2(4104, 0);
    CHECK(k::checksum64(z1.data(), z1.size()) != k::checksum64(z2.data(), z2.size()));
}

TEST_CASE("kernels: host swap moves data and verifies every transfer", "[kernels][swap]") {
    std::mt19937_64 rng(ref::seed() + 21);
    for (int threads : {1, 3}) {
        k::SwapConfig c;
        c.device_bytes = 8 << 20;
        c.host_bytes = 8 << 20;
        c.chunk_bytes = 64 << 10;
        c.threads_per_direction = threads;
        auto e = k::make_swap_engine(k::Device::Cpu, c);
        auto* host = static_cast<unsigned char*>(e->host_arena());
        auto* dev = static_cast<unsigned char*>(e->device_arena());
        fill_random(rng, host, 4 << 20);
        fill_random(rng, dev + (4 << 20), 4 << 20);
        // Swap in [0, 4 MiB) host -> device while swapping out the upper half, in pieces of
        // odd sizes and offsets, both directions queued at once.
        std::vector<uint64_t> ids;
        size_t off = 0;
        while (off < (4u << 20)) {
            size_t len = std::min<size_t>((4u << 20) - off, 1 + rng() % (300 << 10));
            ids.push_back(e->submit(k::SwapDir::HostToDevice, off, off, len));
            ids.push_back(e->submit(k::SwapDir::DeviceToHost, off + (4 << 20), off + (4 << 20), len));
            off += len;
        }
        for (uint64_t id : ids) {
            auto r = e->wait_checked(id);
            CHECK(r.verified);
            CHECK(r.ok);
            CHECK(r.end_s >= r.start_s);
        }
        CHECK(std::memcmp(host, dev, 8 << 20) == 0);
        auto s = e->stats();
        CHECK(s.transfers == ids.size());
        CHECK(s.verified == ids.size());
        CHECK(s.mismatches == 0);
        CHECK(s.bytes_h2d == (4u << 20));
        CHECK(s.bytes_d2h == (4u << 20));
        CHECK(e->drain().empty());
        CHECK_THROWS_AS(e->wait(ids.front()), mhc::Error);  // already collected
    }
}

TEST_CASE("kernels: host swap detects corrupted and dropped chunks", "[kernels][swap]") {
    std::mt19937_64 rng(ref::seed() + 22);
    const bool paced = GENERATE(false, true);   // the emulated link copies through the same path
    k::SwapConfig c;
    c.device_bytes = c.host_bytes = 4 << 20;
    c.chunk_bytes = 256 << 10;
    if (paced) c.pace_h2d_Bps = c.pace_d2h_Bps = 2e9;
    auto e = k::make_swap_engine(k::Device::Cpu, c);
    fill_random(rng, e->host_arena(), 4 << 20);
    fill_random(rng, e->device_arena(), 4 << 20);
    for (auto dir : {k::SwapDir::HostToDevice, k::SwapDir::DeviceToHost})
        for (auto fault : {k::SwapEngine::Fault::Corrupt, k::SwapEngine::Fault::Drop}) {
            fill_random(rng, e->host_arena(), 1 << 20);
            fill_random(rng, e->device_arena(), 1 << 20);
            e->inject_fault(dir, fault);
            auto bad = e->submit(dir, 0, 0, 1 << 20);
            auto good = e->submit(dir, 1 << 20, 1 << 20, 1 << 20);  // the fault is one-shot
            auto r = e->wait(bad);
            CHECK(r.verified);
            CHECK_FALSE(r.ok);
            CHECK(r.source_sum != r.dest_sum);
            CHECK(e->wait(good).ok);
            e->inject_fault(dir, fault);
            CHECK_THROWS_WITH(e->wait_checked(e->submit(dir, 0, 0, 1 << 20)), Catch::Contains("checksum"));
        }
    CHECK(e->stats().mismatches == 8);
}

TEST_CASE("kernels: host swap checks ranges and limits the rate", "[kernels][swap]") {
    k::SwapConfig c;
    c.device_bytes = c.host_bytes = 1 << 20;
    c.chunk_bytes = 4096;
    c.max_ops_per_s = 500;
    auto e = k::make_swap_engine(k::Device::Cpu, c);
    CHECK_THROWS_AS(e->submit(k::SwapDir::HostToDevice, (1 << 20) - 10, 0, 11), mhc::Error);
    CHECK_THROWS_AS(e->submit(k::SwapDir::DeviceToHost, 0, 1 << 20, 1), mhc::Error);
    // 40 operations at 500/s cannot finish in less than 39 periods (a lower bound only).
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
        e->submit(k::SwapDir::HostToDevice, 0, 0, 4096);
        e->submit(k::SwapDir::DeviceToHost, 8192, 8192, 4096);
    }
    auto results = e->drain();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(results.size() == 40);
    CHECK(secs >= 39.0 / 500 * 0.99);
    k::SwapConfig badc;
    badc.chunk_bytes = 12;
    CHECK_THROWS_AS(k::make_swap_engine(k::Device::Cpu, badc), mhc::Error);
}

TEST_CASE("kernels: the copy with its checksum equals a copy and the checksum of the source", "[kernels][swap]") {
    std::mt19937_64 rng(ref::seed() + 23);
    for (size_t bytes : {0ul, 5ul, 8ul, 4096ul, 65541ul, (2ul << 20) + 3}) {
        std::vector<unsigned char> src(bytes + 1), dst(bytes + 1, 0xee);
        fill_random(rng, src.data(), bytes);
        for (uint64_t first : {0ull, 7ull, 1000003ull}) {
            std::fill(dst.begin(), dst.end(), 0xee);
            CHECK(k::checksum64_copy_partial(dst.data(), src.data(), bytes, first) == k::checksum64_partial(src.data(), bytes, first));
            CHECK(std::memcmp(dst.data(), src.data(), bytes) == 0);
            CHECK(dst[bytes] == 0xee);   // not a byte past the end
        }
    }
}

// The emulated link (SwapConfig::pace_*): a transfer never completes before bytes / pace, the
// duplex factor applies to one that starts while the other direction copies, and time the
// caller's clock stood still moves the completion. Lower bounds only: what the pace promises.
TEST_CASE("kernels: a paced host link is never faster than its pace", "[kernels][swap][pace]") {
    std::mt19937_64 rng(ref::seed() + 24);
    std::atomic<int64_t> paused{0};
    k::SwapConfig c;
    c.device_bytes = c.host_bytes = 48 << 20;
    c.chunk_bytes = 1 << 20;
    c.pace_h2d_Bps = c.pace_d2h_Bps = 400e6;
    c.pace_duplex = 0.5;
    c.paused_ns = &paused;
    auto e = k::make_swap_engine(k::Device::Cpu, c);
    fill_random(rng, e->host_arena(), 48 << 20);
    fill_random(rng, e->device_arena(), 48 << 20);
    const size_t mib8 = 8 << 20;
    auto took = [](const k::SwapResult& r) { return r.end_s - r.start_s; };

    // Alone: 8 MiB at 400 MB/s is 21 ms at least; data and checksums as unpaced.
    auto r = e->wait(e->submit(k::SwapDir::HostToDevice, 0, 0, mib8));
    CHECK(r.ok);
    CHECK(took(r) >= mib8 / 400e6);
    CHECK(std::memcmp(e->host_arena(), e->device_arena(), mib8) == 0);

    // Started while the other direction copies (a 32 MiB swap-out: 84 ms): half the pace.
    auto out = e->submit(k::SwapDir::DeviceToHost, 16 << 20, 16 << 20, 32 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto in = e->wait(e->submit(k::SwapDir::HostToDevice, 8 << 20, 8 << 20, mib8));
    CHECK(took(in) >= mib8 / 200e6);
    CHECK(e->wait(out).ok);

    // The clock stood still 30 ms during a transfer: it completes that much later.
    auto id = e->submit(k::SwapDir::DeviceToHost, 0, 0, 2 * mib8);   // 42 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(20));     // picked up, not yet due
    paused += 30'000'000;
    auto p = e->wait(id);
    CHECK(took(p) >= 2 * mib8 / 400e6 + 0.030);
    CHECK(p.late_s == 0);   // the pause is not lateness

    // A GPU has a real link: pacing is refused there; a negative pace anywhere.
    k::SwapConfig bad = c;
    bad.paused_ns = nullptr;
    CHECK_THROWS_WITH(k::make_swap_engine(k::Device::Cuda, bad), Catch::Contains("paced link"));
    bad.pace_h2d_Bps = -1;
    CHECK_THROWS_AS(k::make_swap_engine(k::Device::Cpu, bad), mhc::Error);
    bad.pace_h2d_Bps = 1e9;
    bad.pace_duplex = 0;
    CHECK_THROWS_AS(k::make_swap_engine(k::Device::Cpu, bad), mhc::Error);
}

TEST_CASE("kernels: a paced host link pays its latency per transfer, queued ones too", "[kernels][swap][pace]") {
    k::SwapConfig c;
    c.device_bytes = c.host_bytes = 4 << 20;
    c.chunk_bytes = 1 << 20;
    c.pace_h2d_Bps = c.pace_d2h_Bps = 1e12;   // bytes take no time: what remains is latency
    c.pace_h2d_latency_s = 0.020;
    auto e = k::make_swap_engine(k::Device::Cpu, c);
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    // As the simulator: start = max(submitted, the previous transfer's end), end = start +
    // latency + bytes / pace. Three transfers queued at once end 20, 40 and 60 ms after.
    auto t0 = Clock::now();
    auto a = e->submit(k::SwapDir::HostToDevice, 0, 0, 4096);
    auto b = e->submit(k::SwapDir::HostToDevice, 4096, 4096, 4096);
    auto d = e->submit(k::SwapDir::HostToDevice, 8192, 8192, 4096);
    e->wait(a);
    CHECK(since(t0) >= 0.020);
    e->wait(b);
    CHECK(since(t0) >= 0.040);
    auto rd = e->wait(d);
    CHECK(since(t0) >= 0.060);
    CHECK(rd.end_s - rd.start_s >= 0.020);
    // A latency is emulated on a paced direction only; never negative.
    k::SwapConfig bad = c;
    bad.pace_h2d_Bps = 0;
    CHECK_THROWS_WITH(k::make_swap_engine(k::Device::Cpu, bad), Catch::Contains("paced link only"));
    bad = c;
    bad.pace_d2h_latency_s = -1;
    CHECK_THROWS_AS(k::make_swap_engine(k::Device::Cpu, bad), mhc::Error);
}
