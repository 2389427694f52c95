// A run's events are found by their rowid range (run_event_rows) instead of an index on run:
// a run read back that way must equal the run written, on files with several runs, runs deleted
// or changed by hand, ranges that no longer fit, runs databases and attached job traces, and
// files made before the table (which still read, and get it on their next store).
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::trace {

using mhc::test::TempDir;
using test::sql;

namespace {

// The integers of the first column of every row `q` returns.
std::vector<int64_t> ints(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
    std::vector<int64_t> out;
    while (sqlite3_step(stmt) == SQLITE_ROW) out.push_back(sqlite3_column_int64(stmt, 0));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out;
}

// A run of `n` events shaped like the simulator's (in time order, one in ten placed early, ties);
// `bytes` numbers them so that an event read back can be told from another.
Run shaped_run(const std::string& name, int64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Run run;
    run.name = name;
    run.metrics["peak_bytes"] = 1;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t start = i / 2 - (rng() % 10 == 0 ? static_cast<int64_t>(rng() % 40) : 0);
        run.events.push_back({static_cast<EventKind>(rng() % 8), start, start + 7, 1 + i % 2, 1, static_cast<int64_t>(seed) * 1000000 + i});
    }
    run.kernel_times = {{1, 10, 20}};
    return run;
}

// What load_run must give back: the events by start, ties in the order they were given.
std::vector<RunEvent> by_start(std::vector<RunEvent> events) {
    std::stable_sort(events.begin(), events.end(), [](const RunEvent& lhs, const RunEvent& rhs) { return lhs.t_start < rhs.t_start; });
    return events;
}

void require_events(const std::vector<RunEvent>& got, const std::vector<RunEvent>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        INFO("event " << i);
        REQUIRE(got[i].kind == want[i].kind);
        REQUIRE(got[i].t_start == want[i].t_start);
        REQUIRE(got[i].t_end == want[i].t_end);
        REQUIRE(got[i].allocation == want[i].allocation);
        REQUIRE(got[i].kernel == want[i].kernel);
        REQUIRE(got[i].bytes == want[i].bytes);
    }
}

// The file as a store made before run_event_rows left it: no table, no triggers, the index on run.
void make_old(const std::string& path) {
    sql(path, "DROP TRIGGER run_event_rows_insert; DROP TRIGGER run_event_rows_update; "
              "DROP TRIGGER run_event_rows_delete; DROP TABLE run_event_rows; "
              "CREATE INDEX IF NOT EXISTS run_events_by_run ON run_events (run, t_start)");
}

int64_t range_rows(const std::string& path) { return ints(path, "SELECT count(*) FROM run_event_rows").at(0); }

}  // namespace

TEST_CASE("runs read back by their rowid range equal the runs written, and those read by run", "[runs][event_rows]") {
    TempDir dir("mhc-event-rows");
    const std::string trace = dir.file("t.db");
    test::write_trace(trace);
    // A new file keeps no index on run_events: the ranges stand in for it.
    CHECK(ints(trace, "SELECT count(*) FROM sqlite_master WHERE type='index' AND tbl_name='run_events'") ==
          std::vector<int64_t>{0});
    std::vector<Run> runs = {shaped_run("a", 20000, 1), shaped_run("empty", 0, 2), shaped_run("b", 9000, 3)};
    std::vector<int64_t> ids = add_runs(trace, runs);   // three in one transaction
    runs.push_back(shaped_run("c", 30000, 4));
    ids.push_back(add_run(trace, runs.back()));
    REQUIRE(range_rows(trace) == 4);
    CHECK(ints(trace, "SELECT last_row - first_row + 1 FROM run_event_rows ORDER BY run") ==
          std::vector<int64_t>{20000, 0, 9000, 30000});
    // The same runs read by run, as from a file without the ranges.
    const std::string by_run = dir.file("by_run.db");
    std::filesystem::copy_file(trace, by_run);
    sql(by_run, "DELETE FROM run_event_rows");
    for (size_t i = 0; i < runs.size(); ++i) {
        INFO("run " << runs[i].name);
        const std::vector<RunEvent> want = by_start(runs[i].events);
        require_events(load_run(trace, ids[i]).events, want);
        require_events(load_run(by_run, ids[i]).events, want);
    }
}

TEST_CASE("runs deleted or changed by hand drop their ranges and still read whole", "[runs][event_rows]") {
    TempDir dir("mhc-event-rows");
    const std::string trace = dir.file("t.db");
    test::write_trace(trace);
    Run run_a = shaped_run("a", 5000, 1), run_b = shaped_run("b", 5000, 2), run_c = shaped_run("c", 5000, 3);
    const int64_t ia = add_run(trace, run_a), ib = add_run(trace, run_b), ic = add_run(trace, run_c);
    SECTION("the last run deleted: its rowids are given again to the next run") {
        sql(trace, "DELETE FROM run_events WHERE run = " + std::to_string(ic) + "; DELETE FROM runs WHERE id = " + std::to_string(ic));
        CHECK(range_rows(trace) == 2);
        Run run_d = shaped_run("d", 7000, 4);
        const int64_t id = add_run(trace, run_d);
        require_events(load_run(trace, id).events, by_start(run_d.events));
        require_events(load_run(trace, ia).events, by_start(run_a.events));
        require_events(load_run(trace, ib).events, by_start(run_b.events));
    }
    SECTION("only the last run's runs row deleted: the next run takes a new id and none of its rows") {
        sql(trace, "DELETE FROM runs WHERE id = " + std::to_string(ic));
        Run run_d = shaped_run("d", 700, 4);
        run_d.metrics = {{"own_metric", 2}};
        const int64_t id = add_run(trace, run_d);
        CHECK(id > ic);
        const Run back = load_run(trace, id);
        require_events(back.events, by_start(run_d.events));
        CHECK(back.metrics == run_d.metrics);
        CHECK(back.kernel_times.size() == run_d.kernel_times.size());
    }
    SECTION("a middle run deleted: the others keep their ranges") {
        sql(trace, "DELETE FROM run_events WHERE run = " + std::to_string(ib) + "; DELETE FROM runs WHERE id = " + std::to_string(ib));
        CHECK(ints(trace, "SELECT run FROM run_event_rows ORDER BY run") == std::vector<int64_t>{ia, ic});
        require_events(load_run(trace, ia).events, by_start(run_a.events));
        require_events(load_run(trace, ic).events, by_start(run_c.events));
    }
    SECTION("a middle run deleted, then VACUUM (which may renumber the rows after it): every run still reads whole") {
        sql(trace, "DELETE FROM run_events WHERE run = " + std::to_string(ib) + "; DELETE FROM runs WHERE id = " + std::to_string(ib));
        sql(trace, "VACUUM");
        require_events(load_run(trace, ia).events, by_start(run_a.events));
        require_events(load_run(trace, ic).events, by_start(run_c.events));
        Run run_d = shaped_run("d", 3000, 4);
        const int64_t id = add_run(trace, run_d);
        require_events(load_run(trace, id).events, by_start(run_d.events));
        require_events(load_run(trace, ic).events, by_start(run_c.events));
    }
    SECTION("an event added to a run that is not the last: read by run, with it") {
        sql(trace, "INSERT INTO run_events VALUES (" + std::to_string(ia) + ", 5, 3, 9, 0, 1, 0)");
        CHECK(ints(trace, "SELECT run FROM run_event_rows ORDER BY run") == std::vector<int64_t>{ib, ic});
        std::vector<RunEvent> want = run_a.events;
        want.push_back({EventKind::Stall, 3, 9, 0, 1, 0});
        require_events(load_run(trace, ia).events, by_start(want));
    }
    SECTION("an event moved: read by run, in its new place") {
        sql(trace, "UPDATE run_events SET t_start = -1000 WHERE rowid = (SELECT max(rowid) FROM run_events WHERE run = " +
                   std::to_string(ib) + ")");
        CHECK(ints(trace, "SELECT run FROM run_event_rows ORDER BY run") == std::vector<int64_t>{ia, ic});
        const std::vector<RunEvent> back = load_run(trace, ib).events;
        REQUIRE(back.size() == run_b.events.size());
        CHECK(back.front().t_start == -1000);
        require_events(load_run(trace, ic).events, by_start(run_c.events));
    }
    SECTION("a range that no longer fits its rows (renumbered, written without the triggers) is not used") {
        for (const char* wrong : {"first_row = first_row + 1", "last_row = last_row - 1", "first_row = first_row - 1",
                                  "last_row = last_row + 1", "first_row = 1, last_row = 4611686018427387904"}) {
            INFO(wrong);
            sql(trace, std::string("UPDATE run_event_rows SET ") + wrong + " WHERE run = " + std::to_string(ib));
            require_events(load_run(trace, ib).events, by_start(run_b.events));
            sql(trace, "DELETE FROM run_event_rows WHERE run = " + std::to_string(ib));
            require_events(load_run(trace, ib).events, by_start(run_b.events));
        }
    }
}

TEST_CASE("a file made before run_event_rows reads, and its next store adds the table", "[runs][event_rows]") {
    TempDir dir("mhc-event-rows");
    const std::string trace = dir.file("t.db"), runs_db = dir.file("runs.db");
    test::write_trace(trace);
    Run old_run = shaped_run("old", 4000, 1);
    const int64_t old_id = add_run(trace, old_run);
    const int64_t old_in_db = add_run(trace, old_run, runs_db);
    make_old(trace);
    make_old(runs_db);
    require_events(load_run(trace, old_id).events, by_start(old_run.events));
    require_events(load_run(trace, old_in_db, runs_db).events, by_start(old_run.events));
    Run next = shaped_run("next", 6000, 2);
    const int64_t next_id = add_run(trace, next), next_in_db = add_run(trace, next, runs_db);
    for (const std::string& file : {trace, runs_db}) {
        INFO(file);
        // Only the run stored with the table has a range; the old one is read by run.
        CHECK(ints(file, "SELECT run FROM run_event_rows") == std::vector<int64_t>{file == trace ? next_id : next_in_db});
        CHECK(ints(file, "SELECT count(*) FROM sqlite_master WHERE type='trigger' AND name LIKE 'run_event_rows_%'") ==
              std::vector<int64_t>{3});
    }
    require_events(load_run(trace, old_id).events, by_start(old_run.events));
    require_events(load_run(trace, next_id).events, by_start(next.events));
    require_events(load_run(trace, next_in_db, runs_db).events, by_start(next.events));
}

TEST_CASE("a job's traces made before run_event_rows get it, each in its own file", "[runs][event_rows]") {
    TempDir dir("mhc-event-rows");
    const std::string r0 = dir.file("r0.db"), r1 = dir.file("r1.db");
    test::write_trace(r0, "rank 0");
    test::write_trace(r1, "rank 1");
    make_old(r0);
    make_old(r1);
    std::vector<JobRun> job = {{r0, "", shaped_run("rank 0", 3000, 1)}, {r1, "", shaped_run("rank 1", 4000, 2)}};
    const std::vector<int64_t> ids = add_job_runs(job);
    for (size_t i = 0; i < job.size(); ++i) {
        INFO(job[i].trace);
        CHECK(ints(job[i].trace, "SELECT last_row - first_row + 1 FROM run_event_rows") ==
              std::vector<int64_t>{static_cast<int64_t>(job[i].run.events.size())});
        require_events(load_run(job[i].trace, ids[i]).events, by_start(job[i].run.events));
    }
}

TEST_CASE("a run begun with no events and finished with them gets its range", "[runs][event_rows]") {
    TempDir dir("mhc-event-rows");
    const std::string trace = dir.file("t.db");
    test::write_trace(trace);
    add_run(trace, shaped_run("before", 1000, 1));
    const int64_t id = begin_run(trace, RunKind::Replayed, "replay");
    CHECK(ints(trace, "SELECT last_row - first_row + 1 FROM run_event_rows WHERE run = " + std::to_string(id)) ==
          std::vector<int64_t>{0});
    Run done = shaped_run("replay", 2500, 2);
    done.kind = RunKind::Replayed;
    finish_run(trace, id, done);
    CHECK(ints(trace, "SELECT last_row - first_row + 1 FROM run_event_rows WHERE run = " + std::to_string(id)) ==
          std::vector<int64_t>{2500});
    require_events(load_run(trace, id).events, by_start(done.events));
}

// The event kinds' names are written twice: in trace/schema.sql's event_kinds (what the Python
// package and SQL readers join on) and in to_string (what mhc prints and exports). Kept equal here.
TEST_CASE("every event kind's name is the one the trace's event_kinds table holds", "[runs]") {
    TempDir dir("mhc-event-kinds");
    const std::string trace = dir.file("t.db");
    test::write_trace(trace);
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(trace.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT id, name FROM event_kinds ORDER BY id", -1, &stmt, nullptr) == SQLITE_OK);
    std::vector<std::pair<int64_t, std::string>> table;
    while (sqlite3_step(stmt) == SQLITE_ROW)
        table.emplace_back(sqlite3_column_int64(stmt, 0), reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    REQUIRE(table.size() == static_cast<size_t>(kEventKindCount));
    for (const auto& [code, name] : table) {
        INFO("event kind " << code);
        CHECK(to_string(static_cast<EventKind>(code)) == name);
    }
}

}  // namespace mhc::trace
