// The page check before a store (check_run_pages): it reads what the store reads (the last pages
// of the trees it appends to, the free-page list), so a damaged page there is refused before the
// work, and a damaged page of older runs, which no store reads, costs no store.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"

using mhc::test::TempPath;
using mhc::trace::add_runs;
using mhc::trace::check_run_pages;
using mhc::trace::check_runs_db;
using mhc::trace::CheckReport;
using mhc::trace::EventKind;
using mhc::trace::load_run;
using mhc::trace::Run;
using mhc::trace::test::small_run;
using mhc::trace::test::sql;
using mhc::trace::test::write_trace;

namespace {

// One value of `query` on `path` (sqlite3 with its dbstat table, as a user would look).
int64_t one(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
    const int64_t value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return value;
}

// Overwrites `bytes` at `offset` of page `page` (pages count from 1) of `path`.
void overwrite(const std::string& path, int64_t page, int64_t offset, const std::string& bytes) {
    const int64_t size = one(path, "PRAGMA page_size");
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp((page - 1) * size + offset);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(file.good());
}

// A page header no reader accepts (hostile_pass4_test.sh's damage).
void damage(const std::string& path, int64_t page) { overwrite(path, page, 0, std::string(12, '\xff')); }

// A runs database of `runs` runs of 2,000 events each beside trace `trace`: run_events spans
// many leaves under an interior page.
void runs_db_of(const std::string& trace, const std::string& runs_db, int runs) {
    write_trace(trace);
    std::vector<Run> all;
    for (int i = 0; i < runs; ++i) {
        Run run = small_run("r" + std::to_string(i));
        run.events.clear();
        for (int e = 0; e < 2000; ++e) run.events.push_back({EventKind::SwapOut, e, e + 1, 1, 1, 64});
        run.memory.push_back({0, 1, 0});
        all.push_back(run);
    }
    add_runs(trace, all, runs_db);
}

// The first and the last leaf of table or index `name`, by their place in the tree.
int64_t first_leaf(const std::string& path, const std::string& name) {
    return one(path,
               "SELECT pageno FROM dbstat WHERE name = '" + name + "' AND pagetype = 'leaf' ORDER BY path LIMIT 1");
}
int64_t last_leaf(const std::string& path, const std::string& name) {
    return one(
        path, "SELECT pageno FROM dbstat WHERE name = '" + name + "' AND pagetype = 'leaf' ORDER BY path DESC LIMIT 1");
}

}   // namespace

TEST_CASE("a damaged page of older runs, which no store reads, costs no store, and check lists it", "[store][pages]") {
    TempPath trace_db("t.db"), runs_db("r.db");
    runs_db_of(trace_db.path, runs_db.path, 20);
    REQUIRE(one(runs_db.path, "SELECT count(*) FROM dbstat WHERE name = 'run_events' AND pagetype = 'leaf'") > 20);
    const int64_t page = first_leaf(runs_db.path, "run_events");   // run 1's first events
    damage(runs_db.path, page);
    CHECK_NOTHROW(check_run_pages(trace_db.path, runs_db.path));
    CHECK(add_runs(trace_db.path, {small_run("after")}, runs_db.path) == std::vector<int64_t>{21});
    CHECK(load_run(trace_db.path, 21, runs_db.path).events.size() == 50);
    // Whoever reads the damaged rows meets it, and check, which reads every page, names it.
    CHECK_THROWS_AS(load_run(trace_db.path, 1, runs_db.path), mhc::Error);
    const CheckReport report = check_runs_db(trace_db.path, runs_db.path);
    REQUIRE_FALSE(report.ok());
    CHECK_THAT(report.problems.front().message, Catch::Contains("Page " + std::to_string(page) + ": "));
}

TEST_CASE("a damaged page a store reads is refused before the work, naming it", "[store][pages]") {
    TempPath trace_db("t.db"), runs_db("r.db"), copy_db("c.db");
    runs_db_of(trace_db.path, runs_db.path, 20);
    // The last leaf of run_events (below its root) and of run_memory's index, where the next
    // run's rows go, and the root of run_metrics.
    struct Case {
        const char* tree;
        bool last_leaf;
    };
    for (const Case& at : {Case{"run_events", true}, Case{"run_memory_by_run", true}, Case{"run_metrics", false}}) {
        std::filesystem::copy_file(runs_db.path, copy_db.path, std::filesystem::copy_options::overwrite_existing);
        const int64_t page = at.last_leaf
                                 ? last_leaf(copy_db.path, at.tree)
                                 : one(copy_db.path, std::string("SELECT rootpage FROM sqlite_master WHERE name = '") +
                                                         at.tree + "'");
        damage(copy_db.path, page);
        INFO(at.tree << " page " << page);
        CHECK_THROWS_WITH(check_run_pages(trace_db.path, copy_db.path),
                          Catch::StartsWith(copy_db.path + ": the file is truncated or corrupt: Page " +
                                            std::to_string(page) + ": "));
    }
}

TEST_CASE("a damaged free-page list, where a store takes new pages, is refused before the work", "[store][pages]") {
    TempPath trace_db("t.db"), runs_db("r.db");
    runs_db_of(trace_db.path, runs_db.path, 20);
    sql(runs_db.path, "DELETE FROM run_events WHERE run <= 10");   // about half of its pages become free
    std::ifstream in(runs_db.path, std::ios::binary);
    unsigned char header[100];
    in.read(reinterpret_cast<char*>(header), sizeof header);
    // The first trunk page of the free-page list: the header's big-endian number at offset 32.
    const int64_t first = (int64_t{header[32]} << 24) | (int64_t{header[33]} << 16) | (int64_t{header[34]} << 8) |
                          header[35];
    REQUIRE(first > 1);
    CHECK_NOTHROW(check_run_pages(trace_db.path, runs_db.path));
    overwrite(runs_db.path, first, 4, std::string(4, '\x7f'));   // it lists more free pages than a page holds
    CHECK_THROWS_WITH(check_run_pages(trace_db.path, runs_db.path),
                      Catch::StartsWith(runs_db.path + ": the file is truncated or corrupt: ") &&
                          Catch::Contains("runs cannot be stored in it"));
}

TEST_CASE("a sound runs database in WAL mode with free pages passes the check and takes a run", "[store][pages]") {
    TempPath trace_db("t.db"), runs_db("r.db");
    runs_db_of(trace_db.path, runs_db.path, 20);
    sql(runs_db.path, "PRAGMA journal_mode=WAL; DELETE FROM run_events WHERE run <= 10");
    REQUIRE(one(runs_db.path, "PRAGMA freelist_count") > 0);
    CHECK_NOTHROW(check_run_pages(trace_db.path, runs_db.path));
    CHECK(add_runs(trace_db.path, {small_run("after")}, runs_db.path) == std::vector<int64_t>{21});
}

TEST_CASE("the trace's own run tables: a damaged page a store reads is refused, one of older runs is not",
          "[store][pages]") {
    TempPath trace_db("t.db"), copy_db("c.db");
    runs_db_of(trace_db.path, "", 20);
    std::filesystem::copy_file(trace_db.path, copy_db.path);
    damage(copy_db.path, last_leaf(copy_db.path, "run_events"));
    CHECK_THROWS_WITH(check_run_pages(copy_db.path), Catch::Contains("the file is truncated or corrupt: Page "));
    damage(trace_db.path, first_leaf(trace_db.path, "run_events"));
    CHECK_NOTHROW(check_run_pages(trace_db.path));
}
