// Every check rule on a small hand-built trace, and the file-level problems.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>

#include "helpers.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/test/temp.hpp"

using namespace mhc::trace;
using mhc::test::TempPath;
using mhc::trace::test::sql_unchecked;

namespace {

Kernel kernel(int64_t id, int64_t stream, int64_t t0, int64_t t1) {
    Kernel k{};
    k.id = id; k.stream = stream; k.t_start = t0; k.t_end = t1;
    return k;
}

// A clean base trace; `edit` adds the flaw under test.
CheckReport check_with(const std::function<void(Writer&)>& edit) {
    TempPath p("check.db");
    {
        Writer w(p.path);
        w.add(Allocation{1, 0, 0x1000, 256, 0, 100, 0, Category::Activation, 0});
        w.add(Allocation{2, 0, 0x2000, 256, 0, 100, 0, Category::Activation, 0});
        w.add(kernel(1, 0, 10, 20));
        w.add(Access{1, 1, AccessMode::Read});
        edit(w);
        w.finish();
    }
    return check_file(p.path);
}

// A sound trace of 20,000 allocations: a file of many pages.
void write_many_pages(const std::string& path) {
    Writer writer(path);
    for (int i = 1; i <= 20000; ++i) writer.add(Allocation{i, 0, 0, 64, i, i + 1, 0, Category::Other, 0});
    writer.finish();
}

bool has(const CheckReport& r, const std::string& rule, const std::string& table, int64_t row) {
    for (auto& p : r.problems)
        if (p.rule == rule && p.table == table && p.row == row) return true;
    return false;
}

}  // namespace

TEST_CASE("a clean trace has no problems", "[check]") {
    auto r = check_with([](Writer&) {});
    CHECK(r.ok());
}

TEST_CASE("each rule names its table and row", "[check]") {
    SECTION("free before alloc") {
        auto r = check_with([](Writer& w) { w.add(Allocation{3, 0, 0x5000, 8, 50, 40, 0, Category::Other, 0}); });
        CHECK(has(r, "free-before-alloc", "allocations", 3));
    }
    SECTION("size <= 0") {
        auto r = check_with([](Writer& w) {
            w.add(Allocation{3, 0, 0x5000, 0, 0, 40, 0, Category::Other, 0});
            w.add(Allocation{4, 0, 0x6000, -8, 0, 40, 0, Category::Other, 0});
        });
        CHECK(has(r, "size", "allocations", 3));
        CHECK(has(r, "size", "allocations", 4));
    }
    SECTION("overlapping live ranges at one address on one device") {
        auto r = check_with([](Writer& w) { w.add(Allocation{3, 0, 0x1000, 64, 50, 150, 0, Category::Other, 0}); });
        CHECK(has(r, "overlap", "allocations", 3));
        REQUIRE(r.problems.size() == 1);
        CHECK(r.problems[0].message.find("allocation 1") != std::string::npos);
    }
    SECTION("the same address on another device is fine") {
        auto r = check_with([](Writer& w) { w.add(Allocation{3, 1, 0x1000, 64, 50, 150, 0, Category::Other, 0}); });
        CHECK(r.ok());
    }
    SECTION("reuse of an address after its free is fine") {
        auto r = check_with([](Writer& w) { w.add(Allocation{3, 0, 0x1000, 64, 100, 150, 0, Category::Other, 0}); });
        CHECK(r.ok());
    }
    SECTION("double free") {
        auto r = check_with([](Writer& w) { w.add(Allocation{3, 0, 0x2000, 256, 50, 100, 0, Category::Other, 0}); });
        CHECK(has(r, "double-free", "allocations", 3));
    }
    SECTION("kernel ends before it starts") {
        auto r = check_with([](Writer& w) { w.add(kernel(2, 1, 30, 25)); });
        CHECK(has(r, "end-before-start", "kernels", 2));
    }
    SECTION("copy and marker end before start") {
        auto r = check_with([](Writer& w) {
            w.add(Copy{5, 0, 0, CopyKind::D2H, 10, 9, 3});
            w.add(Marker{6, 0, 9, 3, MarkerKind::Step, 0});
        });
        CHECK(has(r, "end-before-start", "copies", 5));
        CHECK(has(r, "end-before-start", "markers", 6));
    }
    SECTION("kernels overlapping on one stream") {
        auto r = check_with([](Writer& w) { w.add(kernel(2, 0, 15, 25)); });
        CHECK(has(r, "stream-overlap", "kernels", 2));
    }
    SECTION("kernels overlapping on different streams are fine") {
        auto r = check_with([](Writer& w) { w.add(kernel(2, 1, 15, 25)); });
        CHECK(r.ok());
    }
    SECTION("access outside the allocation's lifetime") {
        auto r = check_with([](Writer& w) {
            w.add(kernel(2, 0, 120, 130));
            w.add(Access{2, 2, AccessMode::Write});
        });
        CHECK(has(r, "access-outside-lifetime", "accesses", 2));
    }
    SECTION("access to an unknown allocation or kernel") {
        auto r = check_with([](Writer& w) {
            w.add(Access{1, 77, AccessMode::Read});
            w.add(Access{88, 1, AccessMode::Read});
        });
        CHECK(has(r, "unknown-id", "accesses", 1));
        CHECK(has(r, "unknown-id", "accesses", 88));
    }
    SECTION("codes outside their enums") {
        auto r = check_with([](Writer& w) {
            w.add(Copy{5, 0, 0, static_cast<CopyKind>(9), 10, 1, 3});
            w.add(Access{1, 2, static_cast<AccessMode>(4)});
        });
        CHECK(has(r, "invalid-code", "copies", 5));
        CHECK(has(r, "invalid-code", "accesses", 1));
    }
}

TEST_CASE("file-level problems are reported, not thrown", "[check]") {
    TempPath p("file.db");
    auto only = [](const CheckReport& r, const std::string& text) {
        REQUIRE(r.problems.size() == 1);
        CHECK(r.problems[0].table == "file");
        CHECK_THAT(r.problems[0].message, Catch::Contains(text));
    };
    SECTION("missing") { only(check_file(p.path), "no such file"); }
    SECTION("empty") {
        std::ofstream(p.path).close();
        only(check_file(p.path), "empty");
    }
    SECTION("not SQLite") {
        std::ofstream(p.path) << std::string(4096, 'x');
        only(check_file(p.path), "not an SQLite database");
    }
    SECTION("truncated") {
        write_many_pages(p.path);
        auto size = std::filesystem::file_size(p.path);
        std::filesystem::resize_file(p.path, size / 2);
        auto r = check_file(p.path);
        REQUIRE_FALSE(r.ok());
        CHECK_THAT(r.problems[0].message, Catch::Contains("truncated or corrupt") ||
                                              Catch::Contains("corrupt"));
    }
    SECTION("corrupt pages") {
        write_many_pages(p.path);
        {
            // Overwrite a whole page in the middle of the allocations b-tree, header included.
            auto size = std::filesystem::file_size(p.path);
            std::fstream f(p.path, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>((size / 2 / 16384) * 16384));
            std::string junk(16384, '\x5a');
            f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
        }
        auto r = check_file(p.path);
        REQUIRE_FALSE(r.ok());
        CHECK(r.problems[0].table == "file");
    }
    SECTION("wrong version") {
        Writer(p.path).finish();   // an empty trace
        sql_unchecked(p.path, "PRAGMA user_version=2");
        only(check_file(p.path), "schema version 2");
    }
    SECTION("missing tables") {
        Writer(p.path).finish();
        sql_unchecked(p.path, "DROP TABLE kernels");
        only(check_file(p.path), "missing table 'kernels'");
    }
}

TEST_CASE("require_ok names the file, the row and how many more", "[check]") {
    CheckReport r;
    r.problems.push_back({"size", "allocations", 12, "size is 0 bytes"});
    r.problems.push_back({"size", "allocations", 13, "size is 0 bytes"});
    CHECK_THROWS_WITH(require_ok(r, "t.db"),
                      Catch::Contains("t.db: allocations row 12: size is 0 bytes") &&
                          Catch::Contains("1 more"));
}

TEST_CASE("overlap follows the order of events at one instant", "[check][event-order]") {
    // At 0x3000, t = 200: a block alive only at 200 (id 3), then a block from 200 on (id 4): the
    // first is freed right after it is made, before the second is made: no overlap.
    auto ok = check_with([](Writer& w) {
        w.add(Allocation{3, 0, 0x3000, 64, 200, 200, 0, Category::Other, 0});
        w.add(Allocation{4, 0, 0x3000, 64, 200, 300, 0, Category::Other, 0});
        w.add(Allocation{5, 0, 0x3000, 64, 300, 300, 0, Category::Other, 0});   // made after id 4 is freed
    });
    CHECK(ok.ok());
    // The other way round: the block from 200 on (id 3) is made first, the one alive only at 200
    // (id 4) is made while it is held.
    auto bad = check_with([](Writer& w) {
        w.add(Allocation{3, 0, 0x3000, 64, 200, 300, 0, Category::Other, 0});
        w.add(Allocation{4, 0, 0x3000, 64, 200, 200, 0, Category::Other, 0});
    });
    CHECK(has(bad, "overlap", "allocations", 4));
}

namespace {
Segment segment(int64_t id, int64_t addr, int64_t bytes, int64_t t_alloc, int64_t t_free) {
    Segment s;
    s.id = id; s.address = addr; s.bytes = bytes; s.t_alloc = t_alloc; s.t_free = t_free;
    return s;
}
}  // namespace

TEST_CASE("segments: overlap, order and allocations outside them are named with table and row", "[check][segments]") {
    TraceData t;
    t.strings = {""};
    t.allocations.push(Allocation{1, 0, 0x1000, 256, 10, 20, 0, Category::Other, 0});
    t.allocations.push(Allocation{2, 0, 0x9000, 256, 10, 20, 0, Category::Other, 0});
    t.allocation_index.build(t.allocations.id);
    t.kernels.access_begin = {0};
    // 1: [0x1000, 0x2000) over [0, 100); 2: the same bytes again (a duplicated row); 3: freed before
    // it was allocated; 4: at 1's place once 1 is freed at 100 (frees first at one time): fine.
    t.segments = {segment(1, 0x1000, 0x1000, 0, 100), segment(2, 0x1000, 0x1000, 0, 100),
                  segment(3, 0x5000, 0x1000, 50, 40), segment(4, 0x1800, 0x1000, 100, kNoTime)};
    auto r = check_trace(t);
    CHECK(has(r, "overlap", "segments", 2));
    CHECK(has(r, "free-before-alloc", "segments", 3));
    CHECK_FALSE(has(r, "overlap", "segments", 4));
    CHECK_FALSE(has(r, "outside-segment", "allocations", 2));   // only where the trace says segments hold its blocks
    t.meta["segments.hold_allocations"] = "true";
    r = check_trace(t);
    CHECK(has(r, "outside-segment", "allocations", 2));        // 0x9000: in no segment
    CHECK_FALSE(has(r, "outside-segment", "allocations", 1));
    for (const auto& p : r.problems)
        if (p.rule == "overlap") CHECK_THAT(p.message, Catch::Contains("segment 1"));
}

// More blocks than segments (every real snapshot): a block's row was taken as a segment's before
// its kind was looked at, an out-of-range element under _GLIBCXX_ASSERTIONS (scripts/sanitize).
TEST_CASE("segments: blocks past the segments' count are judged by the segments alive", "[check][segments]") {
    TraceData trace;
    trace.strings = {""};
    trace.meta["segments.hold_allocations"] = "true";
    for (int64_t i = 0; i < 5; ++i)   // rows 0-4 inside the segment [0x1000, 0x2000)
        trace.allocations.push(Allocation{i + 1, 0, 0x1000 + i * 0x300, 0x100, 10 + i, 50, 0, Category::Other, 0});
    trace.allocations.push(Allocation{6, 0, 0x1f80, 0x100, 20, 50, 0, Category::Other, 0});   // past its end
    trace.allocation_index.build(trace.allocations.id);
    trace.kernels.access_begin = {0};
    trace.segments = {segment(1, 0x1000, 0x1000, 0, 100)};
    CHECK(allocations_outside_segments(trace) == std::vector<size_t>{5});
    auto report = check_trace(trace);
    CHECK(has(report, "outside-segment", "allocations", 6));
    CHECK_FALSE(has(report, "outside-segment", "allocations", 1));
}

TEST_CASE("segments: the Reader's value rules and the row checks on a file", "[check][segments]") {
    TempPath p("segs.db");
    {
        Writer w(p.path);
        w.add(Allocation{1, 0, 0x1000, 256, 10, 20, 0, Category::Other, 0});
        w.add(segment(1, 0x1000, 0x1000, 0, kNoTime));
        w.add(segment(2, 0x1000, 0x1000, 0, kNoTime));
        w.finish();
    }
    auto r = check_file(p.path);
    CHECK(has(r, "overlap", "segments", 2));
    CHECK_THROWS_WITH(load_checked_trace(p.path), Catch::Contains("segments row 2") && Catch::Contains("[overlap]"));
}

// Found by tests/sim/reference_check.py (2026-12-06): each of these went unlisted before.
TEST_CASE("overlap: an allocation is held against every earlier one still held at its address", "[check]") {
    // 3 holds 0x3000 to the end; 4 is made over it and freed at 150 (an overlap); 5, made at 200,
    // still meets 3: it was taken for free once 4, the one before it, was freed.
    auto report = check_with([](Writer& writer) {
        writer.add(Allocation{3, 0, 0x3000, 64, 100, kNoTime, 0, Category::Other, 0});
        writer.add(Allocation{4, 0, 0x3000, 64, 120, 150, 0, Category::Other, 0});
        writer.add(Allocation{5, 0, 0x3000, 64, 200, 250, 0, Category::Other, 0});
        // 6 and 8 end together while 7 (freed first) lies between them: one free applied twice
        writer.add(Allocation{6, 0, 0x4000, 64, 100, 300, 0, Category::Other, 0});
        writer.add(Allocation{7, 0, 0x4000, 64, 110, 200, 0, Category::Other, 0});
        writer.add(Allocation{8, 0, 0x4000, 64, 120, 300, 0, Category::Other, 0});
    });
    CHECK(has(report, "overlap", "allocations", 4));
    CHECK(has(report, "overlap", "allocations", 5));
    CHECK(has(report, "overlap", "allocations", 7));
    CHECK(has(report, "double-free", "allocations", 8));
    CHECK_FALSE(has(report, "overlap", "allocations", 8));
}

TEST_CASE("outside-segment: a block in the longer of two segments at one address lies in a segment", "[check][segments]") {
    TraceData trace;
    trace.strings = {""};
    trace.meta["segments.hold_allocations"] = "true";
    trace.allocations.push(Allocation{1, 0, 0x1800, 0x100, 10, 50, 0, Category::Other, 0});
    trace.allocations.push(Allocation{2, 0, 0x2800, 0x100, 10, 50, 0, Category::Other, 0});
    trace.allocation_index.build(trace.allocations.id);
    trace.kernels.access_begin = {0};
    // the longer segment is made first: the shorter one, later at the same start, hid it
    trace.segments = {segment(1, 0x1000, 0x2000, 0, 100), segment(2, 0x1000, 0x1000, 5, 100)};
    auto report = check_trace(trace);
    CHECK(has(report, "overlap", "segments", 2));
    CHECK_FALSE(has(report, "outside-segment", "allocations", 1));
    CHECK_FALSE(has(report, "outside-segment", "allocations", 2));
}

TEST_CASE("capture-overlap: a kernel meets one still running on another stream behind a longer one on its own", "[check]") {
    // stream 7: kernel 1 [0, 100); stream 8: kernel 2 [10, 50) (listed); stream 7: kernel 3 at 20,
    // while 2 still runs (1, on its own stream, ends later: stream-overlap's, not this rule's)
    TempPath file("capture.db");
    {
        Writer writer(file.path);
        const int64_t name = writer.intern("Model");
        writer.add(Module{1, name, 0, name});
        writer.add(kernel(1, 7, 0, 100));
        writer.add(kernel(2, 8, 10, 50));
        writer.add(kernel(3, 7, 20, 30));
        for (int64_t k = 1; k <= 3; ++k) writer.add(KernelInfo{k, 1, Phase::Forward, 0, 0});
        writer.finish();
    }
    auto report = check_file(file.path);
    CHECK(has(report, "capture-overlap", "kernels", 2));
    CHECK(has(report, "capture-overlap", "kernels", 3));
    CHECK(has(report, "stream-overlap", "kernels", 3));
    CHECK_FALSE(has(report, "capture-overlap", "kernels", 1));
}

TEST_CASE("range: a segment's time counts in the trace's span", "[check][segments]") {
    TraceData trace;
    trace.strings = {""};
    trace.allocations.push(Allocation{1, 0, 0x1000, 0x100, -(int64_t{1} << 62) + 200, -(int64_t{1} << 62) + 300, 0, Category::Other, 0});
    trace.allocation_index.build(trace.allocations.id);
    trace.kernels.access_begin = {0};
    trace.segments = {segment(1, 0x1000, 0x1000, 0, (int64_t{1} << 62) - 10)};
    CHECK(has(check_trace(trace), "range", "segments", 1));
    trace.segments[0].t_free = 100;
    CHECK_FALSE(has(check_trace(trace), "range", "segments", 1));
}

TEST_CASE("run: every stored run its readers refuse is listed, not only the first", "[check]") {
    TempPath file("runs.db");
    {
        Writer writer(file.path);
        writer.add(Allocation{1, 0, 0x1000, 256, 0, 100, 0, Category::Activation, 0});
        writer.finish();
    }
    // run 1: a metric that is no number; run 2: a memory sample below 0 bytes; run 3: sound.
    sql_unchecked(file.path,
                  "INSERT INTO runs (id, kind, name, status, created, base_run) VALUES "
                  "(1,'simulated','a','complete','2026-12-06',0),"
                  "(2,'simulated','b','complete','2026-12-06',0),(3,'simulated','c','complete','2026-12-06',0);"
                  "INSERT INTO run_metrics VALUES (1,'stalls','abc'),(2,'stalls',1.0),(3,'stalls',2.0);"
                  "INSERT INTO run_memory VALUES (2,0,-1,0)");
    auto report = check_file(file.path);
    int refused = 0;
    for (const auto& problem : report.problems)
        if (problem.rule == "run") ++refused;
    CHECK(refused == 2);   // the first run's metric stopped the reading of every run before
}

TEST_CASE("segments: a segment over one that was itself listed as an overlap is listed too", "[check][segments]") {
    TraceData trace;
    trace.strings = {""};
    trace.kernels.access_begin = {0};
    // 1 [0x1000, 0x3000); 2 [0x2000, 0x4000) over 1; 3 [0x3800, 0x4800) over 2 only
    trace.segments = {segment(1, 0x1000, 0x2000, 0, kNoTime), segment(2, 0x2000, 0x2000, 5, kNoTime),
                      segment(3, 0x3800, 0x1000, 5, kNoTime)};
    auto report = check_trace(trace);
    CHECK(has(report, "overlap", "segments", 2));
    CHECK(has(report, "overlap", "segments", 3));
    CHECK_FALSE(has(report, "overlap", "segments", 1));
}
