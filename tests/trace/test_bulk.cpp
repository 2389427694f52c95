// The store writes rows in bulk (chunks of buffered rows through one INSERT … SELECT each) and a
// run's rows in key order: what a reader sees must be what was added, row for row, across chunk
// boundaries, with NULLs, merges and updates of rows still waiting in the buffer.
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::trace {

using mhc::test::TempPath;

namespace {
// The first column of every row `q` returns, as integers (NULL as -999).
std::vector<int64_t> column(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
    std::vector<int64_t> out;
    while (sqlite3_step(stmt) == SQLITE_ROW)
        out.push_back(sqlite3_column_type(stmt, 0) == SQLITE_NULL ? -999 : sqlite3_column_int64(stmt, 0));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out;
}
}  // namespace

TEST_CASE("bulk writes: 30,000 rows per table read back, across chunks, with NULLs and merges", "[store][bulk]") {
    TempPath file("bulk.db");
    constexpr int64_t rows = 30000;   // several chunks of the writer's buffer
    {
        Writer writer(file.path);
        int64_t name = writer.intern("k");
        for (int64_t i = 1; i <= rows; ++i) {
            // Every third allocation is alive at the end (NULL t_free), every fifth has no requested size.
            writer.add(Allocation{i, 0, 0x1000 * i, 512 * i, i, i % 3 == 0 ? kNoTime : i + 10, 7, Category::Activation, 0,
                             i % 5 == 0 ? kNoBytes : 500 * i});
            Kernel kernel{};
            kernel.id = i; kernel.name = name; kernel.t_start = 2 * i; kernel.t_end = 2 * i + 1;
            kernel.step = static_cast<int32_t>(i / 1000);
            kernel.grid[2] = 3; kernel.block[1] = 64; kernel.registers = 32; kernel.correlation = i;
            writer.add(kernel);
            writer.add(Access{i, i, AccessMode::Read});
            writer.add(Copy{i, 0, 8, CopyKind::D2H, i, i, i + 1});
        }
        // Repeats of accesses written earlier (now in the file) and just now (still buffered) merge.
        writer.add(Access{1, 1, AccessMode::Write});
        writer.add(Access{rows, rows, AccessMode::Write});
        // An allocation still in the buffer gets its free time: the update must see it.
        writer.add(Allocation{rows + 1, 0, 0, 64, 5, kNoTime, 7, Category::Other, 0});
        writer.set_free_time(rows + 1, 77);
        writer.finish();
    }
    TraceData trace = load_trace(file.path);
    REQUIRE(trace.allocations.size() == rows + 1);
    REQUIRE(trace.kernels.size() == rows);
    REQUIRE(trace.copies.size() == rows);
    REQUIRE(trace.accesses.size() == rows);
    for (int64_t i = 1; i <= rows; ++i) {
        const size_t row = static_cast<size_t>(i - 1);
        REQUIRE(trace.allocations.id[row] == i);
        REQUIRE(trace.allocations.bytes[row] == 512 * i);
        REQUIRE(trace.allocations.t_free[row] == (i % 3 == 0 ? kNoTime : i + 10));
        REQUIRE(trace.allocations.requested_bytes[row] == (i % 5 == 0 ? kNoBytes : 500 * i));
        REQUIRE(trace.kernels.t_start[row] == 2 * i);
        REQUIRE(trace.kernels.correlation[row] == i);
    }
    CHECK(trace.allocations.t_free[rows] == 77);
    CHECK(trace.accesses.mode[0] == AccessMode::ReadWrite);
    CHECK(trace.accesses.mode[rows - 1] == AccessMode::ReadWrite);
    CHECK(trace.accesses.mode[1] == AccessMode::Read);
    // NULL in the file itself, as sqlite3 users see it (not a sentinel number).
    CHECK(column(file.path, "SELECT count(*) FROM allocations WHERE t_free IS NULL") == std::vector<int64_t>{rows / 3});
    CHECK(column(file.path, "SELECT count(*) FROM allocations WHERE requested_bytes IS NULL") == std::vector<int64_t>{rows / 5 + 1});
    CHECK(column(file.path, "SELECT grid_z + block_y + registers FROM kernels WHERE id = 7") == std::vector<int64_t>{99});
    // The writer's bulk module never enters the file: a plain SQLite file of the trace's tables.
    CHECK(column(file.path, "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%VIRTUAL%' OR name LIKE 'mhc_%'") ==
          std::vector<int64_t>{0});
}

TEST_CASE("bulk writes: a duplicate id fails the write and leaves no file", "[store][bulk]") {
    TempPath file("dup.db");
    {
        Writer writer(file.path);
        writer.add(Allocation{1, 0, 0, 64, 0, 5, 0, Category::Other, 0});
        writer.add(Allocation{1, 0, 0, 64, 0, 5, 0, Category::Other, 0});
        CHECK_THROWS_WITH(writer.finish(), Catch::Contains("UNIQUE constraint failed: allocations.id"));
    }
    CHECK_FALSE(std::filesystem::exists(file.path));
}

TEST_CASE("a run's rows are stored in key order and read back in the simulator's order", "[runs][bulk]") {
    TempPath file("order.db");
    test::write_trace(file.path);
    Run run;
    run.name = "order";
    // Out of time order, with ties at t = 5 in the order given (a, b, c), over several chunks.
    constexpr int64_t rows = 20000;
    for (int64_t i = rows; i >= 1; --i) run.events.push_back({EventKind::SwapOut, 10 + i, 11 + i, i, 0, i});
    run.events.push_back({EventKind::Stall, 5, 6, 0, 101, 0});
    run.events.push_back({EventKind::SwapIn, 5, 7, 2, 0, 64});
    run.events.push_back({EventKind::Prefetch, 5, 5, 1, 0, 0});
    // Kernel times out of order, kernel 2 twice: the later one is kept.
    run.kernel_times = {{3, 30, 31}, {2, 20, 21}, {1, 10, 11}, {2, 22, 23}};
    run.memory = {{0, 64, 0}, {10, 128, 64}};
    const int64_t id = add_run(file.path, run);
    Run back = load_run(file.path, id);
    REQUIRE(back.events.size() == run.events.size());
    CHECK(back.events[0].kind == EventKind::Stall);
    CHECK(back.events[1].kind == EventKind::SwapIn);
    CHECK(back.events[2].kind == EventKind::Prefetch);
    for (size_t i = 3; i < back.events.size(); ++i) REQUIRE(back.events[i].t_start == 10 + static_cast<int64_t>(i) - 2);
    REQUIRE(back.kernel_times.size() == 3);
    CHECK(back.kernel_times[1].kernel == 2);
    CHECK(back.kernel_times[1].t_start == 22);
    CHECK(back.memory.size() == 2);
    // In the file, rowid order is time order: a plain `SELECT * FROM run_events` lists them as the run ran.
    std::vector<int64_t> starts = column(file.path, "SELECT t_start FROM run_events WHERE run = " + std::to_string(id) + " ORDER BY rowid");
    CHECK(std::is_sorted(starts.begin(), starts.end()));
    CHECK(column(file.path, "SELECT count(*) FROM run_events") == std::vector<int64_t>{rows + 3});
}

TEST_CASE("a run's events come back in (start, position) order whatever order they were added in", "[runs][bulk]") {
    TempPath file("near.db");
    test::write_trace(file.path);
    // Shapes of the simulator's order and worse: almost in order with some placed early, many
    // ties, reversed, one late start first (so that every other event is out of order).
    std::mt19937_64 rng(7);
    for (int shape = 0; shape < 4; ++shape) {
        Run run;
        run.name = "shape " + std::to_string(shape);
        for (int64_t i = 0; i < 12000; ++i) {
            int64_t start = i;
            if (shape == 0 && rng() % 20 == 0) start = i - static_cast<int64_t>(rng() % 50);
            if (shape == 1) start = static_cast<int64_t>(rng() % 300);
            if (shape == 2) start = 12000 - i / 3;
            if (shape == 3 && i == 0) start = 1 << 20;
            run.events.push_back({EventKind::SwapOut, start, start + 1, i + 1, 0, i});   // bytes: the position
        }
        std::vector<RunEvent> expected = run.events;
        std::stable_sort(expected.begin(), expected.end(),
                         [](const RunEvent& lhs, const RunEvent& rhs) { return lhs.t_start < rhs.t_start; });
        Run back = load_run(file.path, add_run(file.path, run));
        REQUIRE(back.events.size() == expected.size());
        for (size_t i = 0; i < expected.size(); ++i) {
            INFO("shape " << shape << ", event " << i);
            REQUIRE(back.events[i].t_start == expected[i].t_start);
            REQUIRE(back.events[i].bytes == expected[i].bytes);
        }
    }
}

TEST_CASE("a new runs database has the traces' page size, so a large run takes fewer pages", "[runs][bulk]") {
    TempPath trace("paged.db"), runs_db("paged-runs.db");
    test::write_trace(trace.path);
    Run run;
    run.name = "paged";
    for (int64_t i = 0; i < 1000; ++i) run.events.push_back({EventKind::SwapIn, i, i + 1, 1, 0, 64});
    const int64_t id = add_run(trace.path, run, runs_db.path);
    CHECK(column(trace.path, "PRAGMA page_size") == std::vector<int64_t>{16384});
    CHECK(column(runs_db.path, "PRAGMA page_size") == std::vector<int64_t>{16384});
    CHECK(load_run(trace.path, id, runs_db.path).events.size() == 1000);
}

}  // namespace mhc::trace
