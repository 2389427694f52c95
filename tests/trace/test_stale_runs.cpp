// Runs and their data (docs/trace-format.md, "Runs and their data"): a run records the fingerprint
// of the trace it was computed from; list_all_runs leaves out, and load_run refuses, a run whose
// trace was changed since; a run stored before the record is the trace's until its rows change; a
// file made before the column reads as before and gets it with its next store; another file's
// write-ahead log beside a trace is refused before SQLite applies it.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::trace {

using mhc::test::TempPath;
using test::sql;

namespace {

std::string one_value(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

}   // namespace

TEST_CASE("stale runs: a run of rows changed since is left out of lists and refused by id", "[runs][stale]") {
    TempPath file("stale.db");
    test::write_trace(file.path);
    const int64_t id = add_run(file.path, test::small_run("lru@50%"));
    {
        Reader reader(file.path);
        CHECK(one_value(file.path, "SELECT trace_fingerprint FROM runs") == fingerprint(reader.meta(), reader.counts()));
    }
    CHECK(list_all_runs(file.path).stale.empty());
    CHECK(list_runs(file.path).size() == 1);

    SECTION("a row changed (the digest triggers mark the trace edited)") {
        sql(file.path, "UPDATE allocations SET bytes = 8192 WHERE id = 1");
    }
    SECTION("a meta row changed") { sql(file.path, "INSERT INTO meta VALUES ('allocator.conf', 'max_split_size_mb:20')"); }
    const RunList listed = list_all_runs(file.path);
    CHECK(listed.runs.empty());
    REQUIRE(listed.stale.size() == 1);
    CHECK_THAT(listed.note, Catch::StartsWith(file.path + ": run 1 (lru@50%) is not shown: it was computed from other data than " +
                                              file.path + " holds now (trace fingerprint "));
    CHECK_THAT(listed.note, Catch::EndsWith("compute it again from the trace as it is: mhc simulate " + file.path +
                                            " (mhc validate for a replay)"));
    CHECK_THROWS_WITH(load_run(file.path, id), Catch::StartsWith(file.path + ": run 1 (lru@50%) was computed from other data"));
    // check lists it, as its readers refuse it.
    const CheckReport report = check_file(file.path);
    bool listed_by_check = false;
    for (const auto& problem : report.problems)
        listed_by_check |= problem.rule == "run" && problem.message.find("computed from other data") != std::string::npos;
    CHECK(listed_by_check);
    // A run computed again is the trace's.
    const int64_t again = add_run(file.path, test::small_run("lru@50%"));
    CHECK(list_runs(file.path).size() == 1);
    CHECK(load_run(file.path, again).name == "lru@50%");
}

TEST_CASE("stale runs: a run stored before runs recorded their trace is the trace's until its rows change",
          "[runs][stale]") {
    TempPath file("older.db");
    test::write_trace(file.path);
    add_run(file.path, test::small_run("older"));
    SECTION("no fingerprint recorded") { sql(file.path, "UPDATE runs SET trace_fingerprint = NULL"); }
    SECTION("a file made before the column") { sql(file.path, "ALTER TABLE runs DROP COLUMN trace_fingerprint"); }
    CHECK(list_runs(file.path).size() == 1);
    CHECK(load_run(file.path, 1).name == "older");
    CHECK(check_file(file.path).ok());
    sql(file.path, "UPDATE kernels SET t_end = 21 WHERE id = 1");   // content_digest now 'edited:...'
    const RunList listed = list_all_runs(file.path);
    REQUIRE(listed.stale.size() == 1);
    CHECK_THAT(listed.note, Catch::Contains("does not record which data it was computed from"));
    CHECK_THROWS_WITH(load_run(file.path, 1), Catch::Contains("does not record which data it was computed from"));
    // The next store gives the file the column (additive) and its run a fingerprint.
    add_run(file.path, test::small_run("new"));
    CHECK(one_value(file.path, "SELECT count(trace_fingerprint) FROM runs") == "1");
    CHECK(list_runs(file.path).size() == 1);
}

TEST_CASE("stale runs: another file's write-ahead log beside a trace is refused, the trace left as it is",
          "[runs][wal]") {
    TempPath file("t.db"), other("o.db");
    test::write_trace(file.path);
    test::write_trace(other.path, "other");
    // A log of uncheckpointed writes to another file, copied beside this one.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(other.path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; "
                             "UPDATE allocations SET bytes = bytes + 1",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    std::filesystem::copy_file(other.path + "-wal", file.path + "-wal");
    sqlite3_close(db);
    const std::string want = file.path + ": " + file.path + "-wal is there, a write-ahead log that " + file.path +
                             " (not in SQLite's WAL mode) did not leave";
    CHECK_THROWS_WITH(Reader(file.path), Catch::StartsWith(want));
    CHECK_THROWS_WITH(add_run(file.path, test::small_run("x")), Catch::StartsWith(want));
    std::filesystem::remove(file.path + "-wal");
    std::filesystem::remove(file.path + "-shm");
    CHECK(Reader(file.path).meta().at("source") == "test");   // never applied
}

}  // namespace mhc::trace
