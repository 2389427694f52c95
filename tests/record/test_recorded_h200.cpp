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
#include "mhc/trace/summary.hpp"

using namespace mhc;
using namespace mhc::record;

namespace {
// The trace, gunzipped into a scratch file and loaded.
trace::TraceData load_gz(const std::string& name) {
    const std::string gz = std::string(MHC_RECORDED_DATASETS) + "/" + name;
    gzFile in = gzopen(gz.c_str(), "rb");
    REQUIRE(in != nullptr);
    const std::string path = record::test::temp_trace_path();
    std::FILE* out = std::fopen(path.c_str(), "wb");
    REQUIRE(out != nullptr);
    char buf[1 << 16];
    int n;
    while ((n = gzread(in, buf, sizeof buf)) > 0) std::fwrite(buf, 1, static_cast<size_t>(n), out);
    gzclose(in);
    std::fclose(out);
    trace::TraceData d = trace::load_trace(path);
    std::filesystem::remove(path);
    return d;
}

// The allocation rows as the events the recorder saw, in time order (frees first at one time).
trace::TraceData replay(const trace::TraceData& src) {
    const auto& a = src.allocations;
    struct Ev { int64_t t; int kind; size_t i; };   // kind 0 free, 1 allocation
    std::vector<Ev> ev;
    for (size_t i = 0; i < a.size(); ++i) {
        ev.push_back({a.t_alloc[i], 1, i});
        if (a.t_free[i] != trace::kNoTime) ev.push_back({a.t_free[i], 0, i});
    }
    std::sort(ev.begin(), ev.end(), [](const Ev& x, const Ev& y) {
        return x.t != y.t ? x.t < y.t : x.kind != y.kind ? x.kind < y.kind : x.i < y.i;
    });
    TranslatorOptions opt;
    opt.origin = 0;
    return record::test::translate([&](Translator& t) {
        for (const Ev& e : ev) {
            const std::string label = src.str(a.label[e.i]);
            const bool is_static = label == "memory:static";
            const bool pool = label.find("(pool)") != std::string::npos;
            if (e.kind == 1) {
                AllocEvent al;
                al.address = static_cast<uint64_t>(a.address[e.i]);
                al.bytes = static_cast<uint64_t>(a.bytes[e.i]);
                al.t = al.t_enter = static_cast<uint64_t>(e.t);
                al.device = static_cast<uint32_t>(a.device[e.i]);
                al.stream = pool ? static_cast<uint64_t>(a.stream[e.i]) : 0;
                al.source = is_static ? AllocSource::Activity : AllocSource::Driver;
                al.static_memory = is_static;
                al.pool = pool;
                al.api = is_static ? "memory:static" : pool ? "cuMemAllocAsync" : "cuMemAlloc";
                t.on_alloc(al);
            } else {
                FreeEvent f;
                f.address = static_cast<uint64_t>(a.address[e.i]);
                f.t = static_cast<uint64_t>(e.t);
                f.device = static_cast<uint32_t>(a.device[e.i]);
                t.on_free(f);
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
        const trace::TraceData d = replay(old);
        auto r = trace::check_trace(d);
        INFO(record::test::problems(r));
        REQUIRE(r.ok());
        CHECK(d.allocations.size() == 650);          // static memory is still held by the program
        REQUIRE(d.segments.size() == 24);            // the 24 cuMemAlloc segments
        CHECK(trace::reserved_peak(d, 0) == 631'242'752);   // 602.0 MiB, not 631,685,195 B
        CHECK(trace::reserved_peak(old, 0) == 631'685'195);
        CHECK(trace::live_peak(d, 0).bytes == trace::live_peak(old, 0).bytes);
        CHECK(d.meta.at("record.static_allocations") == "626");
    }
    SECTION("--torch (cudaMallocAsync)") {
        const trace::TraceData old = load_gz("h200-gpt2-small-torch-first-step.db.gz");
        REQUIRE(old.allocations.size() == 791);
        CHECK(trace::reserved_peak(old, 0) == 442'443);   // "reserved 432.07 KiB" beside 556 MiB live
        const trace::TraceData d = replay(old);
        auto r = trace::check_trace(d);
        INFO(record::test::problems(r));
        REQUIRE(r.ok());
        CHECK(d.allocations.size() == 791);
        CHECK(d.segments.empty());   // no static memory; the pool's sizes were never stored
        CHECK(trace::reserved_peak(d, 0) == -1);
        CHECK(trace::live_peak(d, 0).bytes == trace::live_peak(old, 0).bytes);
    }
}
