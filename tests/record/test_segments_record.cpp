// The recorder's segments: driver allocations (PyTorch's cudaMalloc'd segments, recorded without
// --torch) are written as segments rows; pool allocations (--torch: cudaMallocAsync per tensor) and
// modules' static memory are not; the memory a stream-ordered pool holds is, as CUPTI reports it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "helpers.hpp"
#include "translated.hpp"
#include "mhc/record/translator.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/trace/summary.hpp"

using mhc::record::AllocEvent;
using mhc::record::AllocSource;
using mhc::record::FreeEvent;
using mhc::record::PoolEvent;
using mhc::record::Translator;
using mhc::record::TranslatorOptions;
namespace trace = mhc::trace;

TEST_CASE("recorder: driver allocations are segments, pool allocations are not", "[record][segments]") {
    const uint64_t T0 = 1'000'000'000;
    std::string path = (std::filesystem::temp_directory_path() / ("mhc-seg-" + std::to_string(getpid()) + ".db")).string();
    {
        trace::Writer writer(path);
        Translator tr(writer, mhc::record::test::origin_at(T0));
        AllocEvent seg;
        seg.address = 0x7f0000000000;
        seg.bytes = 20 << 20;
        seg.t = seg.t_enter = T0 + 100;
        seg.stream = 3;
        seg.api = "cuMemAlloc";
        tr.on_alloc(seg);
        AllocEvent pooled = seg;
        pooled.address = 0x7f1000000000;
        pooled.bytes = 4096;
        pooled.pool = true;
        pooled.api = "cuMemAllocAsync";
        tr.on_alloc(pooled);
        AllocEvent mapped = seg;
        mapped.address = 0x7f2000000000;
        mapped.bytes = 2 << 20;
        mapped.source = AllocSource::Vmm;
        mapped.api = "cuMemMap";
        tr.on_alloc(mapped);
        FreeEvent release;
        release.address = seg.address;
        release.t = T0 + 500;
        tr.on_free(release);
        tr.finish();
        writer.finish();
    }
    std::vector<trace::Segment> segments;
    trace::Reader(path).for_each([&](const trace::Segment& segment) { segments.push_back(segment); });
    std::filesystem::remove(path);
    REQUIRE(segments.size() == 2);
    CHECK(segments[0].address == 0x7f0000000000);
    CHECK(segments[0].bytes == 20 << 20);
    CHECK(segments[0].t_alloc == 100);
    CHECK(segments[0].t_free == 500);
    CHECK(segments[0].stream == 3);
    CHECK_FALSE(segments[0].expandable);
    CHECK(segments[1].address == 0x7f2000000000);
    CHECK(segments[1].expandable);
    CHECK(segments[1].t_free == trace::kNoTime);
}

namespace {
constexpr uint64_t kT0 = 1'000'000'000;

// Bytes of the segments of device 0 alive at t (t_alloc <= t < t_free).
int64_t reserved_at(const trace::TraceData& data, int64_t time) {
    int64_t sum = 0;
    for (const auto& segment : data.segments)
        if (segment.device == 0 && segment.t_alloc <= time &&
            (segment.t_free == trace::kNoTime || time < segment.t_free))
            sum += segment.bytes;
    return sum;
}

PoolEvent pool_event(uint32_t op, uint64_t size, uint64_t time, uint64_t address = 0x7e0000000000) {
    PoolEvent event;
    event.op = op;
    event.address = address;
    event.size = size;
    event.t = kT0 + time;
    return event;
}
}  // namespace

// The H200 recordings' modules held 626 static allocations (442 KB): with --torch they were the
// only segments rows ("reserved 432.07 KiB peak" beside 556 MiB live), without it 626 of 650.
TEST_CASE("recorder: modules' static memory is an allocation, not a segment", "[record][segments]") {
    trace::TraceData data = mhc::record::test::translate([](Translator& tr) {
        AllocEvent seg;
        seg.address = 0x7f0000000000;
        seg.bytes = 20 << 20;
        seg.t = seg.t_enter = kT0 + 100;
        seg.api = "cuMemAlloc";
        tr.on_alloc(seg);
        for (int i = 0; i < 3; ++i) {
            AllocEvent st;
            st.address = 0x7d0000000000 + static_cast<uint64_t>(i) * 0x1000;
            st.bytes = 256;
            st.t = st.t_enter = kT0 + 10 + static_cast<uint64_t>(i);
            st.source = AllocSource::Activity;
            st.static_memory = true;
            st.api = i == 2 ? "memory:managed-static" : "memory:static";
            tr.on_alloc(st);
        }
    }, mhc::record::test::origin_at(kT0));
    auto report = trace::check_trace(data);
    INFO(mhc::record::test::problems(report));
    REQUIRE(report.ok());
    CHECK(data.allocations.size() == 4);   // still allocations: the program holds that memory
    REQUIRE(data.segments.size() == 1);
    CHECK(data.segments[0].address == 0x7f0000000000);
    CHECK(trace::reserved_peak(data, 0) == 20 << 20);
    CHECK(data.meta.at("record.static_allocations") == "3");
    CHECK(data.meta.at("segments.from_driver") == "1");
    CHECK(data.meta.at("segments.from_pools") == "0");
    CHECK(data.meta.at("segments").find("static memory is not a segment") != std::string::npos);
}

// cudaMallocAsync (--torch): the pool's reserved memory, from the sizes CUPTI reports, as rows whose
// live bytes at every time are the size last reported; growth stacks a row, a trim frees the newest.
TEST_CASE("recorder: a stream-ordered pool's reserved memory becomes segments rows", "[record][segments]") {
    const int64_t MiB = 1 << 20;
    trace::TraceData data = mhc::record::test::translate([&](Translator& tr) {
        tr.on_pool(pool_event(PoolEvent::Created, 0, 10));
        PoolEvent sample = pool_event(PoolEvent::Sampled, 2 * MiB, 100);
        sample.utilized = sample.bytes = 1 * MiB;
        tr.on_pool(sample);
        AllocEvent pooled;   // the allocation itself stays out of segments
        pooled.address = 0x7e0000000000;
        pooled.bytes = 1 * MiB;
        pooled.t = pooled.t_enter = kT0 + 101;
        pooled.pool = true;
        pooled.api = "cuMemAllocAsync";
        tr.on_alloc(pooled);
        tr.on_pool(pool_event(PoolEvent::Sampled, 6 * MiB, 200));
        tr.on_pool(pool_event(PoolEvent::Sampled, 6 * MiB, 250));   // no change: no row
        PoolEvent bad = pool_event(PoolEvent::Sampled, 0, 260);       // the field not filled
        bad.bytes = 1 * MiB;
        tr.on_pool(bad);
        // The trim's record names the pool by another address: the device's only pool.
        tr.on_pool(pool_event(PoolEvent::Trimmed, 3 * MiB, 400, 0x1234));
        tr.on_pool(pool_event(PoolEvent::Sampled, 8 * MiB, 500));
        // Records come late and out of order; sorted by time.
        tr.on_pool(pool_event(PoolEvent::Sampled, 8 * MiB, 450));
        tr.on_pool(pool_event(PoolEvent::Destroyed, 0, 900));
        PoolEvent imported = pool_event(PoolEvent::Sampled, 4242, 300, 0x7c0000000000);
        imported.local = false;   // its size field is another process's id
        tr.on_pool(imported);
    }, mhc::record::test::origin_at(kT0));
    auto report = trace::check_trace(data);
    INFO(mhc::record::test::problems(report));
    REQUIRE(report.ok());
    // size reported: 0 @10, 2 @100, 6 @200, 3 @400 (trim), 8 @450, 0 @900
    CHECK(reserved_at(data, 50) == 0);
    CHECK(reserved_at(data, 100) == 2 * MiB);
    CHECK(reserved_at(data, 199) == 2 * MiB);
    CHECK(reserved_at(data, 200) == 6 * MiB);
    CHECK(reserved_at(data, 300) == 6 * MiB);
    CHECK(reserved_at(data, 400) == 3 * MiB);
    CHECK(reserved_at(data, 449) == 3 * MiB);
    CHECK(reserved_at(data, 450) == 8 * MiB);
    CHECK(reserved_at(data, 899) == 8 * MiB);
    CHECK(reserved_at(data, 900) == 0);
    CHECK(trace::reserved_peak(data, 0) == 8 * MiB);
    // Rows: [0,2) @100-400... the growth to 6 MiB is [2,6), cut at 3 MiB by the trim.
    REQUIRE(data.segments.size() == 4);
    for (const auto& segment : data.segments) {
        CHECK(segment.address >= 0x7e0000000000);
        CHECK_FALSE(segment.reconstructed);
        CHECK_FALSE(segment.expandable);
        CHECK(segment.t_free != trace::kNoTime);
    }
    CHECK(data.segments[0].t_alloc == 100);
    CHECK(data.segments[0].bytes == 2 * MiB);
    CHECK(data.segments[0].t_free == 900);
    CHECK(data.segments[1].t_alloc == 200);
    CHECK(data.segments[1].address == 0x7e0000000000 + 2 * MiB);
    CHECK(data.segments[1].bytes == 4 * MiB);
    CHECK(data.segments[1].t_free == 400);
    CHECK(data.segments[2].t_alloc == 400);
    CHECK(data.segments[2].address == 0x7e0000000000 + 2 * MiB);
    CHECK(data.segments[2].bytes == 1 * MiB);
    CHECK(data.segments[2].t_free == 900);
    CHECK(data.segments[3].t_alloc == 450);
    CHECK(data.segments[3].address == 0x7e0000000000 + 3 * MiB);
    CHECK(data.segments[3].bytes == 5 * MiB);
    CHECK(data.allocations.size() == 1);
    CHECK(data.meta.at("segments.from_pools") == "4");
    CHECK(data.meta.at("segments.from_driver") == "0");
    CHECK(data.meta.at("record.pool_samples") == "5");
    CHECK(data.meta.at("record.pool_samples_skipped") == "1");
    CHECK(data.meta.at("record.pool_records_by_device") == "1");
    CHECK(data.meta.at("record.pool_max_bytes") == std::to_string(8 * MiB));
    CHECK(data.meta.at("record.pools_trimmed") == "1");
}

// A pool still holding memory at the end: its rows stay open (held at the end).
TEST_CASE("recorder: a pool's memory still held at the end stays open", "[record][segments]") {
    trace::TraceData data = mhc::record::test::translate([](Translator& tr) {
        tr.on_pool(pool_event(PoolEvent::Sampled, 32 << 20, 100));
        tr.on_pool(pool_event(PoolEvent::Sampled, 32 << 20, 100, 0x7f0000000000));   // a second pool
    }, mhc::record::test::origin_at(kT0));
    auto report = trace::check_trace(data);
    INFO(mhc::record::test::problems(report));
    REQUIRE(report.ok());
    REQUIRE(data.segments.size() == 2);
    CHECK(data.segments[0].t_free == trace::kNoTime);
    CHECK(trace::reserved_peak(data, 0) == 64 << 20);
}

// The rows stand for sizes, not pages: where the range above the pool's base would meet another
// segment (a cuMemAlloc, another pool), the pool's rows go above every segment of the device, so
// that `mhc check` (and every command that loads the trace) finds no overlap.
TEST_CASE("recorder: pool rows that would meet another segment are laid out above them", "[record][segments]") {
    const int64_t MiB = 1 << 20;
    trace::TraceData data = mhc::record::test::translate([&](Translator& tr) {
        AllocEvent seg;   // inside the range the pool's 4 MiB would take above its base
        seg.address = 0x7e0000000000 + 1 * MiB;
        seg.bytes = 20 * MiB;
        seg.t = seg.t_enter = kT0 + 50;
        seg.api = "cuMemAlloc";
        tr.on_alloc(seg);
        tr.on_pool(pool_event(PoolEvent::Sampled, 4 * MiB, 100));
        tr.on_pool(pool_event(PoolEvent::Sampled, 8 * MiB, 100, 0x7e0000000000 + 2 * MiB));   // a second pool
    }, mhc::record::test::origin_at(kT0));
    auto report = trace::check_trace(data);
    INFO(mhc::record::test::problems(report));
    REQUIRE(report.ok());
    REQUIRE(data.segments.size() == 3);
    CHECK(trace::reserved_peak(data, 0) == 32 * MiB);
    CHECK(data.meta.at("record.pools_moved") == "2");
    for (const auto& segment : data.segments)
        if (segment.bytes != 20 * MiB) CHECK(segment.address >= 0x7e0000000000 + 21 * MiB);
}
