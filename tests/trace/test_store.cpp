#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/test/temp.hpp"

using namespace mhc::trace;
using mhc::test::TempPath;
using mhc::trace::test::sql_unchecked;

namespace {

// A small trace: two kernels on one stream, three allocations, accesses, a copy and a step.
void write_small(const std::string& path) {
    Writer w(path);
    w.set_meta("source", "test");
    int64_t k1 = w.intern("gemm"), k2 = w.intern("softmax"), lab = w.intern("weights");
    w.add(Allocation{1, 0, 0x1000, 4096, 0, kNoTime, 7, Category::Param, lab});
    w.add(Allocation{2, 0, 0x3000, 1024, 5, 40, 7, Category::Activation, kNoString});
    w.add(Allocation{3, 1, 0x1000, 512, 0, 100, 7, Category::Workspace, kNoString});
    Kernel a{}; a.id = 1; a.stream = 7; a.name = k1; a.t_start = 10; a.t_end = 20; a.step = 0;
    a.grid[0] = 128; a.block[0] = 256; a.registers = 64; a.correlation = 99;
    Kernel b = a; b.id = 2; b.name = k2; b.t_start = 25; b.t_end = 30;
    w.add(a);
    w.add(b);
    w.add(Access{1, 1, AccessMode::Read});
    w.add(Access{1, 2, AccessMode::Write});
    w.add(Access{2, 2, AccessMode::Read});
    w.add(Copy{1, 0, 7, CopyKind::H2D, 4096, 1, 4});
    w.add(Marker{1, w.intern("step 0"), 0, 35, MarkerKind::Step, 0});
    w.finish();
}

}  // namespace

TEST_CASE("a column projection reads the named columns in id order, unchecked", "[store]") {
    TempPath p("scan.db");
    write_small(p.path);
    Reader r(p.path);
    Scan s = r.scan(TraceTable::Allocations, {"t_free", "id", "category"});
    std::vector<std::vector<int64_t>> rows;
    std::vector<bool> null_free;
    while (s.next()) {
        rows.push_back({s[0], s[1], s[2]});
        null_free.push_back(s.is_null(0));
    }
    // t_free NULL (alive at the end) reads as 0 with is_null set; columns come in the order asked.
    CHECK(rows == std::vector<std::vector<int64_t>>{{0, 1, 0}, {40, 2, 3}, {100, 3, 4}});
    CHECK(null_free == std::vector<bool>{true, false, false});
    Scan acc = r.scan(TraceTable::Accesses, {"allocation", "mode"});
    std::vector<int64_t> flat;
    while (acc.next()) { flat.push_back(acc[0]); flat.push_back(acc[1]); }
    CHECK(flat == std::vector<int64_t>{1, 1, 2, 2, 2, 1});   // by kernel, then allocation
    // Only the table's own columns: a name it lacks is refused before any SQL is built.
    CHECK_THROWS_WITH(r.scan(TraceTable::Kernels, {"id", "bytes"}),
                      Catch::Contains("table kernels has no column 'bytes'"));
    CHECK_THROWS_WITH(r.scan(TraceTable::Copies, {"id; DROP TABLE copies"}), Catch::Contains("has no column"));
}

TEST_CASE("a new trace has no index of accesses by allocation, one a user makes is used", "[store]") {
    // Building that index was about half of writing a large trace (docs/results.md, "Trace store"):
    // new files go without it, and accesses_to reads the table when the file lacks it.
    TempPath path("no_access_index.db");
    write_small(path.path);
    std::vector<TimedAccess> scanned;
    {
        Reader reader(path.path);
        CHECK_FALSE(reader.accesses_indexed_by_allocation());
        sqlite3_stmt* count = nullptr;
        REQUIRE(sqlite3_prepare_v2(reader.handle(),
                                   "SELECT count(*) FROM sqlite_master WHERE type='index' AND tbl_name='accesses'", -1,
                                   &count, nullptr) == SQLITE_OK);
        REQUIRE(sqlite3_step(count) == SQLITE_ROW);
        CHECK(sqlite3_column_int64(count, 0) == 0);   // the key is the table's own (WITHOUT ROWID): no index object
        sqlite3_finalize(count);
        scanned = reader.accesses_to(2);
    }
    // The one statement docs/trace-format.md gives users who query by allocation.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE INDEX accesses_by_allocation ON accesses (allocation)", nullptr, nullptr,
                         nullptr) == SQLITE_OK);
    sqlite3_close(db);
    Reader reader(path.path);
    CHECK(reader.accesses_indexed_by_allocation());
    std::vector<TimedAccess> looked_up = reader.accesses_to(2);
    REQUIRE(looked_up.size() == scanned.size());
    REQUIRE(scanned.size() == 2);
    for (size_t i = 0; i < scanned.size(); ++i) {
        CHECK(looked_up[i].kernel == scanned[i].kernel);
        CHECK(looked_up[i].mode == scanned[i].mode);
    }
}

TEST_CASE("the accesses to an allocation come with their kernels' times, by start", "[store]") {
    TempPath p("accesses_to.db");
    write_small(p.path);
    Reader r(p.path);
    CHECK(r.access_count(2) == 2);
    CHECK(r.access_count(3) == 0);
    std::vector<TimedAccess> a = r.accesses_to(2);
    REQUIRE(a.size() == 2);
    CHECK(a[0].kernel == 1);
    CHECK(a[0].mode == AccessMode::Write);
    CHECK(a[0].t_start == 10);
    CHECK(a[0].t_end == 20);
    CHECK(a[0].stream == 7);
    CHECK(a[1].kernel == 2);
    CHECK(a[1].mode == AccessMode::Read);
    CHECK(a[1].t_start == 25);
    CHECK(r.accesses_to(3).empty());
}

TEST_CASE("a written trace reads back row for row", "[store]") {
    TempPath p("small.db");
    write_small(p.path);
    Reader r(p.path);
    auto meta = r.meta();
    CHECK(meta["source"] == "test");
    CHECK(meta["format"] == kFormatName);
    auto c = r.counts();
    CHECK(c.allocations == 3);
    CHECK(c.kernels == 2);
    CHECK(c.accesses == 3);
    CHECK(c.copies == 1);
    CHECK(c.markers == 1);
    auto strings = r.strings();
    REQUIRE(strings.size() == 5);
    CHECK(strings[1] == "gemm");

    std::vector<Allocation> allocs;
    r.for_each([&](const Allocation& a) { allocs.push_back(a); });
    REQUIRE(allocs.size() == 3);
    CHECK(allocs[0].t_free == kNoTime);
    CHECK(allocs[1].t_free == 40);
    CHECK(allocs[2].device == 1);
    CHECK(allocs[0].category == Category::Param);

    std::vector<Kernel> kernels;
    r.for_each([&](const Kernel& k) { kernels.push_back(k); });
    REQUIRE(kernels.size() == 2);
    CHECK(kernels[0].grid[0] == 128);
    CHECK(kernels[0].block[0] == 256);
    CHECK(kernels[0].registers == 64);
    CHECK(kernels[0].correlation == 99);
    CHECK(kernels[1].t_start == 25);
}

TEST_CASE("the columnar loader groups accesses by kernel", "[store]") {
    TempPath p("cols.db");
    write_small(p.path);
    TraceData t = load_trace(p.path);
    REQUIRE(t.kernels.size() == 2);
    REQUIRE(t.kernels.access_begin.size() == 3);
    CHECK(t.kernels.access_begin[1] - t.kernels.access_begin[0] == 2);
    CHECK(t.kernels.access_begin[2] - t.kernels.access_begin[1] == 1);
    CHECK(t.accesses.allocation[0] == 0);   // dense index of allocation id 1
    CHECK(t.accesses.mode[1] == AccessMode::Write);
    CHECK(t.str(t.kernels.name[1]) == "softmax");
    CHECK(t.allocation_at(3) == 2);
    CHECK(t.allocation_at(4) == -1);
    CHECK(t.dangling_accesses.empty());
    TraceData moved = std::move(t);   // indices hold no pointers into the moved-from columns
    CHECK(moved.kernel_at(2) == 1);
}

TEST_CASE("a kernel's repeated accesses to one allocation merge their modes", "[store]") {
    TempPath p("merge.db");
    {
        Writer w(p.path);
        w.add(Allocation{1, 0, 0, 64, 0, 50, 0, Category::Other, 0});
        Kernel k{}; k.id = 1; k.t_start = 1; k.t_end = 2;
        w.add(k);
        w.add(Access{1, 1, AccessMode::Read});
        w.add(Access{1, 1, AccessMode::Write});
        w.finish();
    }
    TraceData t = load_trace(p.path);
    REQUIRE(t.accesses.size() == 1);
    CHECK(t.accesses.mode[0] == AccessMode::ReadWrite);
}

TEST_CASE("ids need not be contiguous", "[store]") {
    TempPath p("sparse.db");
    {
        Writer w(p.path);
        w.add(Allocation{10, 0, 0, 64, 0, 50, 0, Category::Other, 0});
        w.add(Allocation{30, 0, 0, 64, 0, 50, 0, Category::Other, 0});
        Kernel k{}; k.id = 5; k.t_start = 1; k.t_end = 2;
        w.add(k);
        w.add(Access{5, 30, AccessMode::Read});
        w.finish();
    }
    TraceData t = load_trace(p.path);
    CHECK(t.allocation_at(30) == 1);
    CHECK(t.allocation_at(20) == -1);
    CHECK(t.accesses.allocation.at(0) == 1);
}

TEST_CASE("an unfinished writer leaves nothing behind", "[store]") {
    TempPath p("abandoned.db");
    {
        Writer w(p.path);
        w.add(Allocation{1, 0, 0, 64, 0, 50, 0, Category::Other, 0});
    }
    CHECK_FALSE(std::filesystem::exists(p.path));
    for (auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
        CHECK(e.path().string().find(p.path + ".tmp") == std::string::npos);
}

TEST_CASE("a finished writer replaces an existing file atomically", "[store]") {
    TempPath p("replace.db");
    write_small(p.path);
    {
        Writer w(p.path);
        w.add(Allocation{1, 0, 0, 64, 0, 50, 0, Category::Other, 0});
        // Before finish(), the old trace is still the one readers see.
        CHECK(Reader(p.path).counts().allocations == 3);
        w.finish();
    }
    CHECK(Reader(p.path).counts().allocations == 1);
}

TEST_CASE("the reader refuses files that are not traces", "[store]") {
    TempPath p("bad.db");
    SECTION("missing") {
        CHECK_THROWS_WITH(Reader(p.path), Catch::Contains("no such file"));
    }
    SECTION("empty") {
        std::ofstream(p.path).close();
        CHECK_THROWS_WITH(Reader(p.path), Catch::Contains("empty"));
    }
    SECTION("not SQLite") {
        std::ofstream(p.path) << "this is a text file, long enough to look like something........"
                                 "........................................................";
        CHECK_THROWS_WITH(Reader(p.path), Catch::Contains("not an SQLite database"));
    }
    SECTION("SQLite but not a trace") {
        sql_unchecked(p.path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
        CHECK_THROWS_WITH(Reader(p.path), Catch::Contains("not an mhc trace"));
    }
    SECTION("another schema version") {
        write_small(p.path);
        sql_unchecked(p.path, "PRAGMA user_version=99");
        CHECK_THROWS_WITH(Reader(p.path), Catch::Contains("schema version 99"));
    }
    SECTION("a missing table") {
        write_small(p.path);
        sql_unchecked(p.path, "DROP TABLE copies");
        CHECK_THROWS_WITH(Reader(p.path), Catch::Contains("missing table 'copies'"));
    }
}

TEST_CASE("columns: row(i) gives back the row push() took") {
    mhc::trace::AllocationColumns allocations;
    mhc::trace::Allocation made{7, 1, 4096, 1 << 20, 10, 500, 3, mhc::trace::Category::Activation, 5};
    made.requested_bytes = 1000000;
    allocations.push(made);
    mhc::trace::Allocation unknown{8, 0, 8192, 512, 20, mhc::trace::kNoTime, 3, mhc::trace::Category::Param, 0};
    allocations.push(unknown);
    const auto back = allocations.row(0);
    CHECK(back.id == 7);
    CHECK(back.device == 1);
    CHECK(back.address == 4096);
    CHECK(back.bytes == (1 << 20));
    CHECK(back.t_alloc == 10);
    CHECK(back.t_free == 500);
    CHECK(back.stream == 3);
    CHECK(back.category == mhc::trace::Category::Activation);
    CHECK(back.label == 5);
    CHECK(back.requested_bytes == 1000000);
    CHECK(allocations.row(1).requested_bytes == mhc::trace::kNoBytes);
    CHECK(allocations.row(1).t_free == mhc::trace::kNoTime);

    mhc::trace::KernelColumns kernels;
    mhc::trace::Kernel launched;
    launched.id = 4; launched.device = 2; launched.stream = 9; launched.name = 6;
    launched.t_start = 100; launched.t_end = 250; launched.step = 1; launched.correlation = 42;
    kernels.push(launched);
    const auto kb = kernels.row(0);
    CHECK(kb.id == 4);
    CHECK(kb.device == 2);
    CHECK(kb.stream == 9);
    CHECK(kb.name == 6);
    CHECK(kb.t_start == 100);
    CHECK(kb.t_end == 250);
    CHECK(kb.step == 1);
    CHECK(kb.correlation == 42);
}
