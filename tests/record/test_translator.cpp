// Events -> rows, written through the store and checked with check_trace.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "translated.hpp"
#include "mhc/trace/summary.hpp"

using mhc::record::AllocEvent;
using mhc::record::AllocSource;
using mhc::record::FreeEvent;
using mhc::record::KernelEvent;
using mhc::record::LaunchEvent;
using mhc::record::MarkerEvent;
using mhc::record::Translator;
using mhc::record::TranslatorOptions;
using mhc::record::test::problems;
using mhc::record::test::require_valid;
using mhc::record::test::translate;
namespace trace = mhc::trace;

namespace {
constexpr uint64_t T0 = 1'000'000'000;   // raw CUPTI time of the trace origin

AllocEvent driver_alloc(uint64_t addr, uint64_t bytes, uint64_t time, const char* api = "cuMemAlloc") {
    AllocEvent event;
    event.address = addr;
    event.bytes = bytes;
    event.t = T0 + time;
    event.t_enter = T0 + time - 100;
    event.source = AllocSource::Driver;
    event.api = api;
    return event;
}
AllocEvent activity_alloc(uint64_t addr, uint64_t bytes, uint64_t time, bool pool = false) {
    AllocEvent event;
    event.address = addr;
    event.bytes = bytes;
    event.t = event.t_enter = T0 + time;
    event.stream = 7;
    event.source = AllocSource::Activity;
    event.pool = pool;
    event.api = pool ? "memory:pool" : "memory:device";
    return event;
}
FreeEvent free_event(uint64_t addr, uint64_t time, AllocSource source = AllocSource::Driver) {
    FreeEvent event;
    event.address = addr;
    event.t = T0 + time;
    event.source = source;
    return event;
}
LaunchEvent launch(uint32_t corr, uint64_t time, std::vector<uint64_t> words, uint32_t rcorr = 0) {
    LaunchEvent event;
    event.correlation = corr;
    event.runtime_correlation = rcorr;
    event.t = T0 + time;
    event.words = std::move(words);
    return event;
}
KernelEvent kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t stream = 1,
                   const char* name = "k") {
    KernelEvent event;
    event.name = name;
    event.start = T0 + start;
    event.end = T0 + end;
    event.stream = stream;
    event.correlation = corr;
    event.grid[0] = 64, event.grid[1] = 2, event.grid[2] = 1;
    event.block[0] = 256, event.block[1] = 1, event.block[2] = 1;
    event.shared_mem = 4096;
    event.registers = 40;
    return event;
}
TranslatorOptions at_origin() { return mhc::record::test::origin_at(T0); }
}  // namespace

TEST_CASE("translator: kernels, launches and accesses, times from the origin") {
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x10000, 4096, 1000));
        translator.on_alloc(driver_alloc(0x20000, 256, 2000));
        translator.on_launch(launch(11, 3000, {0x10000, 0x20080, 0x99999999, 5}));
        translator.on_launch(launch(12, 3500, {0x10fff}));
        translator.on_kernel(kernel(11, 5000, 6000, 1, "gemm"));
        translator.on_kernel(kernel(12, 6000, 6500, 1, "relu"));
        translator.on_kernel(kernel(13, 7000, 7100, 1, "no_launch_seen"));
        translator.on_free(free_event(0x10000, 9000));
    }, at_origin());
    require_valid(data);
    REQUIRE(data.kernels.size() == 3);
    CHECK(data.str(data.kernels.name[0]) == "gemm");
    CHECK(data.kernels.t_start[0] == 5000);
    CHECK(data.kernels.t_end[0] == 6000);
    CHECK(data.kernels.correlation[0] == 11);
    CHECK(data.kernels.stream[0] == 1);
    REQUIRE(data.allocations.size() == 2);
    CHECK(data.allocations.t_alloc[0] == 1000);
    CHECK(data.allocations.t_free[0] == 9000);
    CHECK(data.allocations.t_free[1] == trace::kNoTime);
    CHECK(data.allocations.address[0] == 0x10000);
    CHECK(data.str(data.allocations.label[0]) == "cuMemAlloc");
    // gemm touched both allocations, relu the first, the third kernel nothing.
    REQUIRE(data.kernels.access_begin == std::vector<int64_t>{0, 2, 3, 3});
    CHECK(data.accesses.allocation[0] == 0);
    CHECK(data.accesses.allocation[1] == 1);
    CHECK(data.accesses.allocation[2] == 0);
    CHECK(data.accesses.mode[0] == trace::AccessMode::ReadWrite);
    CHECK(data.meta.at("accesses") == "inferred");
    CHECK(data.meta.at("record.launches") == "2");
    CHECK(data.meta.at("record.launches_unmatched") == "0");
}

TEST_CASE("translator: kernel records correlated through the runtime call's id") {
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x10000, 4096, 1000));
        translator.on_launch(launch(501, 2000, {0x10008}, /*runtime*/ 500));
        translator.on_kernel(kernel(500, 3000, 4000));   // carries the runtime id
    }, at_origin());
    require_valid(data);
    REQUIRE(data.accesses.size() == 1);
    CHECK(data.meta.at("record.launches_unmatched") == "0");
}

TEST_CASE("translator: stream-ordered free extends the lifetime to the last accessing kernel") {
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x10000, 1024, 1000, "cuMemAllocAsync"));
        translator.on_launch(launch(1, 2000, {0x10000}));
        translator.on_free(free_event(0x10000, 2500));             // host returns at once
        translator.on_alloc(driver_alloc(0x10000, 1024, 3000, "cuMemAllocAsync"));   // reused
        translator.on_launch(launch(2, 3500, {0x10000}));
        translator.on_kernel(kernel(1, 4000, 8000));               // ran after both host calls
        translator.on_kernel(kernel(2, 8000, 9000));
        translator.on_free(free_event(0x10000, 9500));
    }, at_origin());
    require_valid(data);   // no overlap at 0x10000, no access outside a lifetime
    REQUIRE(data.allocations.size() == 2);
    CHECK(data.allocations.t_free[0] == 8000);   // extended from 2500
    CHECK(data.allocations.t_alloc[1] == 8000);  // delayed from 3000
    CHECK(data.allocations.t_free[1] == 9500);
    CHECK(data.meta.at("record.lifetimes_extended") == "1");
    CHECK(data.meta.at("record.allocations_delayed") == "1");
    CHECK(data.meta.at("record.lifetime_conflicts") == "0");
    CHECK(data.meta.at("record.lifetimes") ==
          "1 of 2 allocations freed at their last kernel's end, not at the free call; 1 started at the previous "
          "holder's end, not at the call (0 left with no time, 0 with a kernel before that start)");
}

TEST_CASE("translator: activity records of callback allocations are merged, not repeated") {
    auto data = translate([](Translator& translator) {
        // Callbacks come first; the activity buffer with the same operations comes later.
        translator.on_alloc(driver_alloc(0x10000, 1024, 1000));
        translator.on_free(free_event(0x10000, 2000));
        translator.on_alloc(driver_alloc(0x10000, 512, 3000));
        translator.on_free(free_event(0x10000, 4000));
        translator.on_alloc(activity_alloc(0x10000, 1024, 950));    // inside the first call
        translator.on_free(free_event(0x10000, 1990, AllocSource::Activity));
        translator.on_alloc(activity_alloc(0x10000, 512, 2950));
        translator.on_free(free_event(0x10000, 3990, AllocSource::Activity));
    }, at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 2);
    CHECK(data.allocations.bytes[0] == 1024);
    CHECK(data.allocations.bytes[1] == 512);
    CHECK(data.allocations.stream[0] == 7);   // filled from the activity record
    CHECK(data.meta.at("record.activity_merged") == "2");
    CHECK(data.meta.at("record.frees_unmatched") == "0");
}

TEST_CASE("translator: activity-only allocations (graph memory, pool) become rows") {
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x50000, 64, 5000));          // a later callback allocation
        translator.on_alloc(activity_alloc(0x50000, 64, 1000, true));  // earlier, seen only by activity
        translator.on_free(free_event(0x50000, 2000, AllocSource::Activity));
        translator.on_alloc(activity_alloc(0x60000, 128, 1500, true));
        translator.on_launch(launch(3, 6000, {0x60010, 0x50000}));
        translator.on_kernel(kernel(3, 7000, 7500));
    }, at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 3);
    // Row ids follow arrival; the activity one at 0x50000 lived [1000, 2000].
    CHECK(data.allocations.t_alloc[1] == 1000);
    CHECK(data.allocations.t_free[1] == 2000);
    CHECK(data.str(data.allocations.label[1]) == "memory:pool");
    CHECK(data.allocations.t_free[0] == trace::kNoTime);   // the callback one is still live
    CHECK(data.allocations.t_free[2] == trace::kNoTime);
    // The kernel saw the live callback allocation and the pool one.
    REQUIRE(data.accesses.size() == 2);
    CHECK(data.meta.at("record.allocations_activity") == "2");
    CHECK(data.meta.at("record.allocations_driver") == "1");
}

TEST_CASE("translator: a missed free is closed by the next allocation at that address") {
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x70000, 64, 100));
        translator.on_alloc(driver_alloc(0x70000, 64, 300));
        translator.on_free(free_event(0x70000, 400));
        translator.on_free(free_event(0x70000, 500));   // nothing live there any more
    }, at_origin());
    require_valid(data);
    CHECK(data.allocations.t_free[0] == 300);
    CHECK(data.allocations.t_free[1] == 400);
    CHECK(data.meta.at("record.implicit_frees") == "1");
    CHECK(data.meta.at("record.frees_unmatched") == "1");
}

TEST_CASE("translator: VMM mappings are allocations until unmapped") {
    auto data = translate([](Translator& translator) {
        AllocEvent mapping = driver_alloc(0x100000, 2 << 20, 100, "cuMemMap");
        mapping.source = AllocSource::Vmm;
        translator.on_alloc(mapping);
        AllocEvent m2 = driver_alloc(0x300000, 2 << 20, 150, "cuMemMap");
        m2.source = AllocSource::Vmm;
        translator.on_alloc(m2);
        translator.on_launch(launch(9, 200, {0x100000 + 4096}));
        translator.on_kernel(kernel(9, 300, 400));
        FreeEvent unmap = free_event(0x100000, 1000, AllocSource::Vmm);
        unmap.bytes = 4 << 20;   // one unmap covering both mappings
        translator.on_free(unmap);
    }, at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 2);
    CHECK(data.allocations.t_free[0] == 1000);
    CHECK(data.allocations.t_free[1] == 1000);
    CHECK(data.meta.at("record.allocations_vmm") == "2");
    REQUIRE(data.accesses.size() == 1);
}

TEST_CASE("translator: NVTX ranges become step, layer and range markers, kernels get steps") {
    auto data = translate([](Translator& translator) {
        using P = MarkerEvent::Phase;
        translator.on_marker({1, P::Start, T0 + 100, "ProfilerStep#4"});
        translator.on_marker({2, P::Start, T0 + 150, "layer 0"});
        translator.on_launch(launch(20, 200, {}));
        translator.on_marker({2, P::End, T0 + 250, ""});
        translator.on_marker({1, P::End, T0 + 300, ""});
        translator.on_marker({3, P::Start, T0 + 400, "ProfilerStep#5"});
        translator.on_launch(launch(21, 450, {}));
        translator.on_marker({4, P::Instant, T0 + 460, "checkpoint"});
        // Kernels run on the GPU after their step ended on the host.
        translator.on_kernel(kernel(20, 350, 380));
        translator.on_kernel(kernel(21, 500, 600));
        translator.on_kernel(kernel(22, 700, 800));   // no launch seen: step from its start time
        translator.on_marker({9, P::End, T0 + 900, ""});   // an end without a start
        translator.on_sync({3, T0 + 610, T0 + 650, 1});
        // ProfilerStep#5 is still open: closed at the latest time seen.
    }, at_origin());
    require_valid(data);
    REQUIRE(data.kernels.size() == 3);
    CHECK(data.kernels.step[0] == 4);
    CHECK(data.kernels.step[1] == 5);
    CHECK(data.kernels.step[2] == 5);   // inside the open step 5
    REQUIRE(data.markers.size() == 5);
    // Written as they close: layer 0, step 4, checkpoint, sync, then step 5 at finish.
    CHECK(data.str(data.markers.name[0]) == "layer 0");
    CHECK(data.markers.kind[0] == trace::MarkerKind::Layer);
    CHECK(data.markers.index[0] == 0);
    CHECK(data.markers.kind[1] == trace::MarkerKind::Step);
    CHECK(data.markers.index[1] == 4);
    CHECK(data.markers.t_start[1] == 100);
    CHECK(data.markers.t_end[1] == 300);
    CHECK(data.markers.kind[2] == trace::MarkerKind::Range);
    CHECK(data.markers.t_start[2] == data.markers.t_end[2]);
    CHECK(data.str(data.markers.name[3]) == "cuda-sync:stream");
    CHECK(data.markers.t_end[3] - data.markers.t_start[3] == 40);
    CHECK(data.str(data.markers.name[4]) == "ProfilerStep#5");
    CHECK(data.markers.t_end[4] == 900);
    CHECK(data.meta.at("record.markers_left_open") == "1");
    CHECK(data.meta.at("record.marker_ends_unmatched") == "1");
}

TEST_CASE("translator: origin from the first event, earlier records clamped and counted") {
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x10000, 64, 1000));   // origin = T0 + 1000
        translator.on_copy({trace::CopyKind::H2D, 64, T0 + 1500, T0 + 1600, 0, 3});
        translator.on_copy({trace::CopyKind::Memset, 64, T0 + 900, T0 + 1200, 0, 3});
    });
    require_valid(data);
    CHECK(data.meta.at("time_origin_ns") == std::to_string(T0 + 1000));
    REQUIRE(data.copies.size() == 2);
    CHECK(data.copies.t_start[0] == 500);
    CHECK(data.copies.kind[0] == trace::CopyKind::H2D);
    CHECK(data.copies.bytes[0] == 64);
    CHECK(data.copies.stream[0] == 3);
    CHECK(data.copies.t_start[1] == 0);   // clamped
    CHECK(data.copies.t_end[1] == 200);
    CHECK(data.meta.at("record.times_clamped") == "1");
}

TEST_CASE("translator: without access inference no accesses and meta says none") {
    TranslatorOptions options = at_origin();
    options.accesses = false;
    auto data = translate([](Translator& translator) {
        translator.on_alloc(driver_alloc(0x10000, 64, 10));
        translator.on_launch(launch(1, 20, {0x10000}));
        translator.on_kernel(kernel(1, 30, 40));
    }, options);
    require_valid(data);
    CHECK(data.accesses.size() == 0);
    CHECK(data.meta.at("accesses") == "none");
}

TEST_CASE("translator: records without timestamps and zero-size allocations are skipped") {
    auto data = translate([](Translator& translator) {
        KernelEvent untimed = kernel(1, 0, 0);
        untimed.start = untimed.end = 0;   // CUPTI: timestamps not collected
        translator.on_kernel(untimed);
        KernelEvent backwards = kernel(2, 500, 400);
        translator.on_kernel(backwards);
        translator.on_alloc(driver_alloc(0x10000, 0, 10));
        translator.on_free(free_event(0, 20));   // cudaFree(nullptr)
    }, at_origin());
    require_valid(data);
    CHECK(data.kernels.size() == 0);
    CHECK(data.allocations.size() == 0);
    CHECK(data.meta.at("record.kernels_without_time") == "2");
    CHECK(data.meta.at("record.frees_unmatched") == "0");
}

namespace {
// The stream-ordered pool's reuse pattern (PyTorch with backend:cudaMallocAsync): one address is
// allocated, launched on, freed with cuMemFreeAsync and allocated again, `count` times, while the host
// runs ahead of the GPU; the activity records of these allocations and frees come in a buffer
// after all of it. Host times (callbacks): alloc i returns at 1000 + 1000 i (entered 100 ns
// before), its kernel is launched at + 200, the free returns at + 500. GPU times: kernel i runs
// [50000 + 3000 i, 52000 + 3000 i]. `corr`: the callbacks and records carry CUPTI's correlation
// ids (alloc i: 1000 + i, free i: 2000 + i); `release_at_gpu`: the release records are stamped
// when the stream reaches the free (just after the kernel's end) instead of at the API call.
void pool_reuse(Translator& tr, int count, bool corr, bool release_at_gpu) {
    constexpr uint64_t kAddr = 0x7f0000200000;
    for (int i = 0; i < count; ++i) {
        const uint64_t ta = 1000 + 1000 * static_cast<uint64_t>(i);
        AllocEvent alloc = driver_alloc(kAddr, 4096, ta, "cuMemAllocAsync");
        alloc.pool = true;
        alloc.stream = 7;
        if (corr) alloc.correlation = 1000 + static_cast<uint32_t>(i);
        tr.on_alloc(alloc);
        tr.on_launch(launch(100 + static_cast<uint32_t>(i), ta + 200, {kAddr}));
        FreeEvent rel = free_event(kAddr, ta + 500);
        if (corr) rel.correlation = 2000 + static_cast<uint32_t>(i);
        tr.on_free(rel);
    }
    for (int i = 0; i < count; ++i)
        tr.on_kernel(kernel(100 + static_cast<uint32_t>(i), 50000 + 3000 * static_cast<uint64_t>(i),
                            52000 + 3000 * static_cast<uint64_t>(i), 7));
    for (int i = 0; i < count; ++i) {
        const uint64_t ta = 1000 + 1000 * static_cast<uint64_t>(i);
        AllocEvent rec = activity_alloc(kAddr, 4096, ta - 50, true);   // inside the call
        if (corr) rec.correlation = 1000 + static_cast<uint32_t>(i);
        tr.on_alloc(rec);
        FreeEvent rel = free_event(kAddr, release_at_gpu ? 52100 + 3000 * static_cast<uint64_t>(i) : ta + 450,
                                   AllocSource::Activity);
        if (corr) rel.correlation = 2000 + static_cast<uint32_t>(i);
        tr.on_free(rel);
    }
}

// Worked by hand: allocation i holds the address on the GPU from the end of kernel i-1 (52000 + 3000 (i-1);
// the first from its host call, 1000) to the end of its own kernel (52000 + 3000 i).
void require_pool_lifetimes(const trace::TraceData& data, int count) {
    REQUIRE(data.allocations.size() == static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        const auto row = static_cast<size_t>(i);
        CHECK(data.allocations.t_alloc[row] == (i == 0 ? 1000 : 52000 + 3000 * (i - 1)));
        CHECK(data.allocations.t_free[row] == 52000 + 3000 * i);
    }
    CHECK(data.accesses.size() == static_cast<size_t>(count));
    CHECK(data.meta.at("record.activity_merged") == std::to_string(count));
    CHECK(data.meta.at("record.allocations_activity") == "0");
    CHECK(data.meta.at("record.frees_unmatched") == "0");
    CHECK(data.meta.at("record.lifetimes_extended") == std::to_string(count));
    CHECK(data.meta.at("record.allocations_delayed") == std::to_string(count - 1));
    CHECK(data.meta.at("record.lifetime_conflicts") == "0");
}
}   // namespace

// Before 2026-12-04 only the last 8 allocations at an address were kept for matching activity
// records: on the H200 (GPT-2, --torch, 20 steps) the pool reused hot addresses more often than
// that before CUPTI delivered its buffer, most records became second rows of allocations already
// recorded (53,168 rows where PyTorch made about 28,300), and `mhc check` found 55,546 problems.
TEST_CASE("translator: a pool address reused many times before the activity buffer comes, matched by address") {
    const int count = 40;
    auto data = translate([&](Translator& tr) { pool_reuse(tr, count, false, false); }, at_origin());
    require_valid(data);
    require_pool_lifetimes(data, count);
}

TEST_CASE("translator: activity records matched to their calls by correlation id, whatever their time") {
    const int count = 40;
    auto data = translate([&](Translator& tr) { pool_reuse(tr, count, true, true); }, at_origin());
    require_valid(data);
    require_pool_lifetimes(data, count);
    CHECK(data.meta.at("record.activity_by_correlation") == std::to_string(2 * count));
}

// Delays can start several allocations at one address at one time; `mhc check` orders those by
// id, and all but the one that holds the memory after that time must come first. Here an
// activity-only allocation (graph memory: no callback, so a later id) lies on the host between
// callback ones, and the callback ones are delayed to the end of the previous one's kernel:
//   A (id 1) [10000, 60000]; C (id 4) [16500, 17500]; B (id 2) made at 20000, kernel
//   [60000, 70000]; D (id 3) made at 30000, kernel [70000, 80000].
// In the order they were made, C is emptied at 60000, B holds [60000, 70000], D [70000, 80000].
// In the check's order B comes before C at 60000 and D before C at 70000: C moves to [80000, 80000].
TEST_CASE("translator: allocations delayed to one time are settled in the check's order") {
    constexpr uint64_t kAddr = 0x10000;
    auto data = translate(
        [](Translator& tr) {
            tr.on_alloc(driver_alloc(kAddr, 1024, 10000, "cuMemAllocAsync"));
            tr.on_launch(launch(1, 12000, {kAddr}));
            tr.on_free(free_event(kAddr, 15000));
            tr.on_alloc(driver_alloc(kAddr, 1024, 20000, "cuMemAllocAsync"));
            tr.on_launch(launch(2, 22000, {kAddr}));
            tr.on_free(free_event(kAddr, 25000));
            tr.on_alloc(driver_alloc(kAddr, 1024, 30000, "cuMemAllocAsync"));
            tr.on_launch(launch(3, 32000, {kAddr}));
            tr.on_free(free_event(kAddr, 35000));
            tr.on_kernel(kernel(1, 50000, 60000));
            tr.on_kernel(kernel(2, 60000, 70000));
            tr.on_kernel(kernel(3, 70000, 80000));
            tr.on_alloc(activity_alloc(kAddr, 1024, 16500, true));
            tr.on_free(free_event(kAddr, 17500, AllocSource::Activity));
        },
        at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 4);
    CHECK(data.allocations.t_free[0] == 60000);
    CHECK(data.allocations.t_alloc[1] == 60000);
    CHECK(data.allocations.t_free[1] == 70000);
    CHECK(data.allocations.t_alloc[2] == 70000);
    CHECK(data.allocations.t_free[2] == 80000);
    CHECK(data.allocations.t_alloc[3] == 80000);
    CHECK(data.allocations.t_free[3] == 80000);
    CHECK(data.meta.at("record.allocations_delayed") == "3");
    CHECK(data.meta.at("record.lifetimes_emptied") == "1");
    CHECK(data.meta.at("record.lifetime_conflicts") == "0");
    CHECK(data.meta.at("record.implicit_frees") == "0");
    CHECK(data.meta.at("record.frees_unmatched") == "0");
}

// A memory record of a VMM mapping (if CUPTI gives one) is the mapping's, as for cuMemAlloc: before
// 2026-12-04 only callback allocations of the fine layer were candidates, and the record became a
// second row (and segment) at the mapping's address.
TEST_CASE("translator: an activity record at a cuMemMap mapping is merged into it") {
    constexpr uint64_t kBase = 0x100000;
    auto data = translate(
        [](Translator& tr) {
            AllocEvent map = driver_alloc(kBase, 2 << 20, 100, "cuMemMap");
            map.source = AllocSource::Vmm;
            tr.on_alloc(map);
            tr.on_launch(launch(9, 200, {kBase + 4096}));
            tr.on_kernel(kernel(9, 300, 400));
            FreeEvent unmap = free_event(kBase, 1000, AllocSource::Vmm);
            unmap.bytes = 2 << 20;
            tr.on_free(unmap);
            tr.on_alloc(activity_alloc(kBase, 2 << 20, 90));   // inside the cuMemMap call
            tr.on_free(free_event(kBase, 990, AllocSource::Activity));
        },
        at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 1);
    CHECK(data.allocations.t_alloc[0] == 100);
    CHECK(data.allocations.t_free[0] == 1000);
    CHECK(data.segments.size() == 1);
    CHECK(data.meta.at("record.activity_merged") == "1");
    CHECK(data.meta.at("record.frees_unmatched") == "0");
}

// cudaMallocAsync: the host runs ahead of the GPU, so an allocation call returns long before its
// stream reaches it, and a cuMemFreeAsync before the stream has run the kernels enqueued ahead of
// it. On the GPU's timeline an allocation starts when its stream reached the call (the end of the
// kernel launched before it on that stream) and ends when the stream reached the free.
TEST_CASE("translator: stream-ordered allocations live when their stream reaches them") {
    auto pool_alloc = [](uint64_t addr, uint64_t time) {
        AllocEvent alloc = driver_alloc(addr, 1 << 20, time, "cuMemAllocAsync");
        alloc.pool = true;
        alloc.stream = 7;
        return alloc;
    };
    auto pool_free = [](uint64_t addr, uint64_t time) {
        FreeEvent release = free_event(addr, time);
        release.stream = 7;
        return release;
    };
    auto data = translate([&](Translator& translator) {
        translator.on_alloc(pool_alloc(0x100000, 100));     // C
        translator.on_launch(launch(1, 500, {0x100000}));   // K0 uses C; runs at 3000-5000 on the GPU
        translator.on_free(pool_free(0x100000, 900));       // C freed on the host long before K0 ran
        translator.on_alloc(pool_alloc(0x300000, 1000));    // A: the stream reaches it when K0 ends
        translator.on_launch(launch(2, 1100, {0x300000}));  // K1 uses A: 5000-6000
        translator.on_launch(launch(3, 1150, {}));          // K2 uses nothing: 6000-7000
        translator.on_free(pool_free(0x300000, 1200));      // A's free: reached after K2
        translator.on_kernel(kernel(1, 3000, 5000, 7));
        translator.on_kernel(kernel(2, 5000, 6000, 7));
        translator.on_kernel(kernel(3, 6000, 7000, 7));
    }, at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 2);
    CHECK(data.allocations.t_alloc[0] == 100);    // the stream had nothing before it
    CHECK(data.allocations.t_free[0] == 5000);    // the end of K0 (its last use and the stream's point)
    CHECK(data.allocations.t_alloc[1] == 5000);   // not 1000: K0 was launched before it
    CHECK(data.allocations.t_free[1] == 7000);    // not 6000 (K1, its last use): K2 was ahead of the free
    // C and A never live at once on the GPU: the peak is one of them, not both.
    CHECK(trace::live_peak(data, 0).bytes == 1 << 20);
    CHECK(data.meta.at("record.allocations_stream_started") == "1");
    CHECK(data.meta.at("record.frees_stream_ordered") == "2");   // C: at K0's end, also its last use
    CHECK(data.meta.at("record.lifetimes").find("; stream-ordered: 1 started when their stream reached the call") !=
          std::string::npos);
}

// A kernel on another stream that uses the allocation before its own stream reaches it (a race, or
// an event the recorder does not follow): the allocation starts no later than that kernel.
TEST_CASE("translator: a stream-ordered start never passes a kernel that uses the allocation") {
    auto data = translate([&](Translator& translator) {
        AllocEvent alloc = driver_alloc(0x300000, 4096, 1000, "cuMemAllocAsync");
        alloc.pool = true;
        alloc.stream = 7;
        translator.on_launch(launch(1, 500, {}));            // stream 7: 3000-5000
        translator.on_alloc(alloc);
        translator.on_launch(launch(2, 1100, {0x300000}));   // stream 9: 4000-4500
        translator.on_kernel(kernel(1, 3000, 5000, 7));
        translator.on_kernel(kernel(2, 4000, 4500, 9));
    }, at_origin());
    require_valid(data);
    CHECK(data.allocations.t_alloc[0] == 4000);
}
