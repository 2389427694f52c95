// The two H200 recordings in datasets/recorded/ (2026-12-04, GPT-2 small's first step, written by
// the recorder before segments left static memory out and held pools' reserved memory): their
// allocation rows, fed again to the translator as the events that made them (626 module static
// allocations, then the caching allocator's 24 cuMemAlloc segments or the pool's 165
// cuMemAllocAsync allocations), give the segments the recorder writes now. The traces keep rows,
// not CUPTI records, so the pool's sizes (never stored) cannot come back: a --torch trace of the
// old recorder has no reserved memory to show, rather than its 442 KB of static memory.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/summary.hpp"

using mhc::record::AllocEvent;
using mhc::record::AllocSource;
using mhc::record::FreeEvent;
using mhc::record::Translator;
using mhc::record::TranslatorOptions;
namespace trace = mhc::trace;
namespace record = mhc::record;

namespace {
// The trace, gunzipped into a scratch file and loaded.
trace::TraceData load_gz(const std::string& name) {
    const std::string gz = mhc::test::source_path("datasets/recorded/" + name);
    gzFile in = gzopen(gz.c_str(), "rb");
    REQUIRE(in != nullptr);
    const std::string path = record::test::temp_trace_path();
    std::FILE* out = std::fopen(path.c_str(), "wb");
    REQUIRE(out != nullptr);
    char buf[1 << 16];
    int count;
    while ((count = gzread(in, buf, sizeof buf)) > 0) std::fwrite(buf, 1, static_cast<size_t>(count), out);
    gzclose(in);
    std::fclose(out);
    trace::TraceData data = trace::load_trace(path);
    std::filesystem::remove(path);
    return data;
}

// The allocation rows as the events the recorder saw, in time order (frees first at one time).
trace::TraceData replay(const trace::TraceData& src) {
    const auto& allocs = src.allocations;
    struct Ev { int64_t t; int kind; size_t i; };   // kind 0 free, 1 allocation
    std::vector<Ev> ev;
    for (size_t i = 0; i < allocs.size(); ++i) {
        ev.push_back({allocs.t_alloc[i], 1, i});
        if (allocs.t_free[i] != trace::kNoTime) ev.push_back({allocs.t_free[i], 0, i});
    }
    std::sort(ev.begin(), ev.end(), [](const Ev& lhs, const Ev& rhs) {
        return lhs.t != rhs.t ? lhs.t < rhs.t : lhs.kind != rhs.kind ? lhs.kind < rhs.kind : lhs.i < rhs.i;
    });
    TranslatorOptions opt;
    opt.origin = 0;
    return record::test::translate([&](Translator& translator) {
        for (const Ev& event : ev) {
            const std::string& label = src.str(allocs.label[event.i]);
            const bool is_static = label == "memory:static";
            const bool pool = label.find("(pool)") != std::string::npos;
            if (event.kind == 1) {
                AllocEvent al;
                al.address = static_cast<uint64_t>(allocs.address[event.i]);
                al.bytes = static_cast<uint64_t>(allocs.bytes[event.i]);
                al.t = al.t_enter = static_cast<uint64_t>(event.t);
                al.device = static_cast<uint32_t>(allocs.device[event.i]);
                al.stream = pool ? static_cast<uint64_t>(allocs.stream[event.i]) : 0;
                al.source = is_static ? AllocSource::Activity : AllocSource::Driver;
                al.static_memory = is_static;
                al.pool = pool;
                al.api = is_static ? "memory:static" : pool ? "cuMemAllocAsync" : "cuMemAlloc";
                translator.on_alloc(al);
            } else {
                FreeEvent release;
                release.address = static_cast<uint64_t>(allocs.address[event.i]);
                release.t = static_cast<uint64_t>(event.t);
                release.device = static_cast<uint32_t>(allocs.device[event.i]);
                translator.on_free(release);
            }
        }
    }, opt);
}
}  // namespace

TEST_CASE("recorded H200 traces: static memory is no segment, the caching allocator's segments are", "[record][recorded]") {
    SECTION("native (PyTorch's caching allocator)") {
        const trace::TraceData old = load_gz("h200-gpt2-small-native-first-step.db.gz");
        REQUIRE(old.allocations.size() == 650);
        CHECK(old.segments.size() == 650);   // what the old recorder wrote: static memory among them
        const trace::TraceData replayed = replay(old);
        auto report = trace::check_trace(replayed);
        INFO(record::test::problems(report));
        REQUIRE(report.ok());
        CHECK(replayed.allocations.size() == 650);          // static memory is still held by the program
        REQUIRE(replayed.segments.size() == 24);            // the 24 cuMemAlloc segments
        CHECK(trace::reserved_peak(replayed, 0) == 631'242'752);   // 602.0 MiB, not 631,685,195 B
        CHECK(trace::reserved_peak(old, 0) == 631'685'195);
        CHECK(trace::live_peak(replayed, 0).bytes == trace::live_peak(old, 0).bytes);
        CHECK(replayed.meta.at("record.static_allocations") == "626");
    }
    SECTION("--torch (cudaMallocAsync)") {
        const trace::TraceData old = load_gz("h200-gpt2-small-torch-first-step.db.gz");
        REQUIRE(old.allocations.size() == 791);
        CHECK(trace::reserved_peak(old, 0) == 442'443);   // "reserved 432.07 KiB" beside 556 MiB live
        const trace::TraceData replayed = replay(old);
        auto report = trace::check_trace(replayed);
        INFO(record::test::problems(report));
        REQUIRE(report.ok());
        CHECK(replayed.allocations.size() == 791);
        CHECK(replayed.segments.empty());   // no static memory; the pool's sizes were never stored
        CHECK(trace::reserved_peak(replayed, 0) == -1);
        CHECK(trace::live_peak(replayed, 0).bytes == trace::live_peak(old, 0).bytes);
    }
}
