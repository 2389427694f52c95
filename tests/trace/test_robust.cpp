// Hostile traces, interrupted writes and concurrent writers (docs/trace-format.md): the store either does
// its job or refuses with one sentence naming the file, table and row.
#include <grp.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <thread>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/test/temp.hpp"
#include "helpers.hpp"

using namespace mhc::trace;
using mhc::test::TempPath;
using namespace mhc::trace::test;
namespace fs = std::filesystem;

namespace {

// The message load_trace throws, or "" when it loads.
std::string load_error(const std::string& path) {
    try {
        load_trace(path);
    } catch (const mhc::Error& e) {
        return e.what();
    }
    return "";
}

bool has_rule(const CheckReport& r, const std::string& rule, const std::string& table) {
    for (const auto& p : r.problems)
        if (p.rule == rule && p.table == table) return true;
    return false;
}


}  // namespace

TEST_CASE("a string id past the row count is refused, not used to size an array", "[store][robust]") {
    TempPath p("strid.db");
    write_trace(p.path);
    sql(p.path, "INSERT INTO strings VALUES (134217728, 'far')");
    auto t0 = std::chrono::steady_clock::now();
    std::string e = load_error(p.path);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    CHECK_THAT(e, Catch::Contains(p.path) && Catch::Contains("strings row 134217728") &&
                      Catch::Contains("densely"));
    CHECK(has_rule(check_file(p.path), "range", "strings"));
}

TEST_CASE("int64 extremes of times and sizes are input errors", "[store][robust]") {
    TempPath p("edges.db");
    SECTION("t_alloc = INT64_MIN") {
        write_trace(p.path);
        sql(p.path, "UPDATE allocations SET t_alloc = -9223372036854775808 WHERE id = 2");
        CHECK_THAT(load_error(p.path), Catch::Contains("allocations row 2") && Catch::Contains("t_alloc") &&
                                           Catch::Contains("2^62"));
        CHECK(has_rule(check_file(p.path), "range", "allocations"));
    }
    SECTION("bytes = INT64_MAX") {
        write_trace(p.path);
        sql(p.path, "UPDATE allocations SET bytes = 9223372036854775807 WHERE id = 1");
        CHECK_THAT(load_error(p.path), Catch::Contains("allocations row 1") && Catch::Contains("bytes"));
        CHECK(!check_file(p.path).ok());
    }
    SECTION("all allocations together past 2^62 bytes") {
        write_trace(p.path);
        std::string q;
        for (int i = 0; i < 70; ++i)
            q += "INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category, label) "
                 "VALUES (" + std::to_string(100 + i) +
                 ", 0, 0, 72057594037927936, 0, 10, 7, 0, 0);";
        sql(p.path, q);
        CHECK_THAT(load_error(p.path), Catch::Contains("total-size"));
        CHECK(has_rule(check_file(p.path), "total-size", "allocations"));
    }
    SECTION("a device id beyond 32 bits") {
        write_trace(p.path);
        sql(p.path, "UPDATE kernels SET device = 4294967296 WHERE id = 1");
        CHECK_THAT(load_error(p.path), Catch::Contains("kernels row 1") && Catch::Contains("device"));
    }
}

TEST_CASE("NULL, text and reals in integer columns are refused by every reader", "[store][robust]") {
    TempPath p("types.db");
    write_trace(p.path);
    // SQLite keeps 'abc' as text in an INTEGER column; only a table without NOT NULL holds NULL.
    SECTION("text size") {
        sql(p.path, "UPDATE allocations SET bytes = 'abc' WHERE id = 2");
        CHECK_THAT(load_error(p.path), Catch::Contains("allocations row 2") && Catch::Contains("text 'abc'"));
        auto r = check_file(p.path);
        CHECK(has_rule(r, "type", "allocations"));
        for (const auto& pr : r.problems) CHECK_THAT(pr.message, !Catch::Contains("size is 0"));
    }
    SECTION("text device") {
        sql(p.path, "UPDATE kernels SET device = 'gpu0' WHERE id = 1");
        CHECK_THAT(load_error(p.path), Catch::Contains("kernels row 1") && Catch::Contains("device holds text"));
    }
    SECTION("NULL t_alloc") {
        sql(p.path, "CREATE TABLE a2 AS SELECT * FROM allocations; DROP TABLE allocations; "
                    "ALTER TABLE a2 RENAME TO allocations; UPDATE allocations SET t_alloc = NULL WHERE id = 1");
        CHECK_THAT(load_error(p.path), Catch::Contains("allocations row 1") && Catch::Contains("t_alloc is NULL"));
        CHECK(has_rule(check_file(p.path), "type", "allocations"));
    }
    SECTION("an invalid access mode is refused by loading, not mapped") {
        sql(p.path, "UPDATE accesses SET mode = 9 WHERE kernel = 1 AND allocation = 1");
        CHECK_THAT(load_error(p.path), Catch::Contains("accesses row 1") && Catch::Contains("invalid-code"));
        CHECK(has_rule(check_file(p.path), "invalid-code", "accesses"));
    }
}

TEST_CASE("duplicate allocation ids are refused", "[store][robust]") {
    TempPath p("dup.db");
    write_trace(p.path);
    // A hostile file whose table has no primary key.
    sql(p.path, "CREATE TABLE a2 AS SELECT * FROM allocations; DROP TABLE allocations; "
                "ALTER TABLE a2 RENAME TO allocations; "
                "INSERT INTO allocations SELECT * FROM allocations WHERE id = 2");
    CHECK_THAT(load_error(p.path), Catch::Contains("allocations row 2") && Catch::Contains("twice"));
    CHECK(has_rule(check_file(p.path), "duplicate-id", "allocations"));
}

TEST_CASE("meta format and schema_version are checked", "[store][robust]") {
    TempPath p("meta.db");
    write_trace(p.path);
    SECTION("format") {
        sql(p.path, "UPDATE meta SET value = 'other' WHERE key = 'format'");
        CHECK_THAT(load_error(p.path), Catch::Contains("not an mhc trace"));
    }
    SECTION("schema_version") {
        sql(p.path, "UPDATE meta SET value = '7' WHERE key = 'schema_version'");
        CHECK_THAT(load_error(p.path), Catch::Contains("schema_version"));
    }
}

TEST_CASE("a writer killed mid-commit leaves a journal every reader recovers", "[store][robust]") {
    TempPath p("hot.db");
    write_trace(p.path);
    add_run(p.path, small_run("before"));
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // A big transaction with a tiny cache spills pages into the file before COMMIT: dying
        // now leaves a hot journal, as a SIGKILL while `mhc simulate` stores its run does.
        sqlite3* db = nullptr;
        sqlite3_open(p.path.c_str(), &db);
        sqlite3_exec(db, "PRAGMA cache_size=2; BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        for (int i = 0; i < 2000; ++i)
            sqlite3_exec(db, "INSERT INTO run_events VALUES (1,0,0,1,1,1,4096)", nullptr, nullptr, nullptr);
        sqlite3_exec(db, "UPDATE runs SET name = 'torn'", nullptr, nullptr, nullptr);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(fs::exists(p.path + "-journal"));
    // Without recovery a read-only reader fails with "attempt to write a readonly database".
    auto runs = list_runs(p.path);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].name == "before");
    CHECK(load_run(p.path, runs[0].id).events.size() == 50);
    CHECK(check_file(p.path).ok());
    CHECK(!fs::exists(p.path + "-journal"));
}

TEST_CASE("a read-only trace is read, and refuses runs with a sentence", "[store][robust]") {
    TempPath p("ro.db");
    write_trace(p.path);
    add_run(p.path, small_run("one"));
    fs::permissions(p.path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    CHECK(load_trace(p.path).allocations.size() == 2);
    CHECK(list_runs(p.path).size() == 1);
    CHECK(check_file(p.path).ok());
    // Root writes 0444 files anyway (and CI runs as root): there the refusal is tested in a child
    // that drops to the unprivileged user nobody, which can read the file (in /tmp) but not write it.
    auto refusal = [&]() -> std::string {
        try {
            add_run(p.path, small_run("two"));
        } catch (const mhc::Error& e) {
            return e.what();
        }
        return "stored";
    };
    CHECK_THAT(as_unprivileged(refusal), Catch::Contains(p.path) && Catch::Contains("read-only"));
    CHECK(list_runs(p.path).size() == 1);
    fs::permissions(p.path, fs::perms::owner_read | fs::perms::owner_write);
}

TEST_CASE("concurrent writers all store their runs under distinct ids, readers never fail", "[store][robust]") {
    TempPath p("conc.db");
    write_trace(p.path);
    constexpr int kWriters = 8;
    std::vector<pid_t> kids;
    for (int i = 0; i < kWriters; ++i) {
        pid_t c = fork();
        REQUIRE(c >= 0);
        if (c == 0) {
            int rc = 0;
            try {
                for (int j = 0; j < 5; ++j) add_run(p.path, small_run("w" + std::to_string(i)));
            } catch (...) {
                rc = 1;
            }
            _exit(rc);
        }
        kids.push_back(c);
    }
    int reader_failures = 0, reads = 0;
    for (bool running = true; running;) {
        try {
            load_trace(p.path);
            list_runs(p.path);
            ++reads;
        } catch (const mhc::Error&) {
            ++reader_failures;
        }
        running = false;
        for (pid_t k : kids) running |= waitpid(k, nullptr, WNOHANG) == 0 ? true : false;
        if (!running) break;
    }
    for (pid_t k : kids) {
        int st = 0;
        if (waitpid(k, &st, 0) == k) CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    }
    CHECK(reader_failures == 0);
    auto runs = list_runs(p.path);
    CHECK(runs.size() == kWriters * 5);
    std::set<int64_t> ids;
    for (auto& r : runs) ids.insert(r.id);
    CHECK(ids.size() == runs.size());
}

TEST_CASE("a runs database (--runs-db) stores runs beside a trace, tied to it", "[store][robust]") {
    TempPath p("rdb.db"), other("rdb-other.db"), runs_db("rdb-runs.db");
    write_trace(p.path);
    int64_t id = add_run(p.path, small_run("elsewhere"), runs_db.path);
    CHECK(list_runs(p.path).empty());
    auto runs = list_runs(p.path, runs_db.path);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].id == id);
    CHECK(load_run(p.path, id, runs_db.path).events.size() == 50);
    // Another trace is refused.
    {
        Writer w(other.path);
        w.set_meta("source", "other");
        w.finish();
    }
    CHECK_THROWS_WITH(list_runs(other.path, runs_db.path), Catch::Contains("another trace"));
    CHECK_THROWS_WITH(add_run(other.path, small_run("x"), runs_db.path), Catch::Contains("another trace"));
    // A trace is not a runs database.
    CHECK_THROWS_WITH(add_run(p.path, small_run("x"), other.path), Catch::Contains("not an mhc runs database"));
}

TEST_CASE("OutputFile: refuses an existing target, cleans up after signals and dead processes", "[store][robust]") {
    TempPath p("out.db");
    SECTION("refuse") {
        { std::ofstream(p.path) << "old"; }
        CHECK_THROWS_WITH(mhc::OutputFile(p.path, mhc::IfExists::Refuse), Catch::Contains("--force"));
        CHECK_THROWS_WITH(Writer(p.path, mhc::IfExists::Refuse), Catch::Contains("already exists"));
        std::ifstream in(p.path);
        std::string s;
        in >> s;
        CHECK(s == "old");
    }
    SECTION("a target that appears meanwhile is not replaced") {
        mhc::OutputFile f(p.path, mhc::IfExists::Refuse);
        { std::ofstream(f.temp_path()) << "new"; }
        { std::ofstream(p.path) << "other"; }
        CHECK_THROWS_WITH(f.commit(), Catch::Contains("appeared"));
        CHECK(!fs::exists(f.temp_path()));
    }
    SECTION("a temporary file of a dead process is removed by the next writer") {
        pid_t c = fork();
        if (c == 0) _exit(0);
        waitpid(c, nullptr, 0);
        std::string stale = p.path + ".mhc-tmp-" + std::to_string(c);
        std::string live = p.path + ".mhc-tmp-" + std::to_string(getppid());
        { std::ofstream(stale) << "x"; }
        { std::ofstream(live) << "x"; }
        write_trace(p.path);
        CHECK(!fs::exists(stale));
        CHECK(fs::exists(live));   // its process still runs
        fs::remove(live);
    }
    SECTION("SIGTERM, SIGINT and SIGHUP remove the temporary file") {
        for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
            int fd[2];
            REQUIRE(pipe(fd) == 0);
            pid_t c = fork();
            if (c == 0) {
                close(fd[0]);
                signal(sig, SIG_DFL);
                Writer w(p.path);
                w.add(Allocation{1, 0, 0, 64, 0, kNoTime, 0, Category::Other, 0});
                (void)!write(fd[1], "x", 1);
                pause();
                _exit(0);
            }
            close(fd[1]);
            char b;
            REQUIRE(read(fd[0], &b, 1) == 1);
            close(fd[0]);
            std::string tmp = p.path + ".mhc-tmp-" + std::to_string(c);
            CHECK(fs::exists(tmp));
            kill(c, sig);
            int st = 0;
            waitpid(c, &st, 0);
            CHECK(WIFSIGNALED(st));
            CHECK(WTERMSIG(st) == sig);
            CHECK(!fs::exists(tmp));
            CHECK(!fs::exists(p.path));
        }
    }
}

TEST_CASE("stored runs with rows out of range or of the wrong type are refused, not read as 0", "[store][robust]") {
    TempPath p("badrun.db");
    write_trace(p.path);
    int64_t id = add_run(p.path, small_run("good"));
    std::string run = std::to_string(id);
    auto load_error = [&]() -> std::string {
        try {
            load_run(p.path, id);
        } catch (const mhc::Error& e) {
            return e.what();
        }
        return "";
    };
    REQUIRE(load_error().empty());
    SECTION("an unknown event kind (was read as a stall)") {
        sql(p.path, "UPDATE run_events SET kind = 99 WHERE rowid = (SELECT min(rowid) FROM run_events)");
        CHECK_THAT(load_error(), Catch::Contains(p.path) && Catch::Contains("run_events row") &&
                                     Catch::Contains("(run " + run + ")") && Catch::Contains("kind is 99"));
    }
    SECTION("an event time at INT64_MIN") {
        sql(p.path, "UPDATE run_events SET t_start = -9223372036854775808 WHERE rowid = (SELECT min(rowid) FROM run_events)");
        CHECK_THAT(load_error(), Catch::Contains("t_start is -9223372036854775808"));
    }
    SECTION("text in an event's bytes") {
        sql(p.path, "UPDATE run_events SET bytes = 'abc' WHERE rowid = (SELECT min(rowid) FROM run_events)");
        CHECK_THAT(load_error(), Catch::Contains("bytes holds text 'abc'"));
    }
    SECTION("a kernel time as text, a negative memory sample") {
        sql(p.path, "INSERT INTO run_kernels VALUES (" + run + ", 1, 'x', 5)");
        CHECK_THAT(load_error(), Catch::Contains("run_kernels row 1") && Catch::Contains("t_start holds text"));
        sql(p.path, "DELETE FROM run_kernels; INSERT INTO run_memory VALUES (" + run + ", 0, -1, 0)");
        CHECK_THAT(load_error(), Catch::Contains("run_memory row") && Catch::Contains("device_bytes is -1"));
    }
    SECTION("a metric that is text (was read as 0)") {
        sql(p.path, "UPDATE run_metrics SET value = 'abc' WHERE run = " + run);
        CHECK_THAT(load_error(), Catch::Contains("'peak_bytes' is not a number"));
        CHECK_THROWS_WITH(list_runs(p.path), Catch::Contains(p.path) && Catch::Contains("'peak_bytes' is not a number"));
    }
}

TEST_CASE("a hot journal beside a trace that cannot be written is reported in one sentence", "[store][robust]") {
    // The trace lives in a folder of its own: readable by all, writable by its owner only.
    std::string dir = fs::temp_directory_path() / ("mhc-test-hotro-" + std::to_string(getpid()));
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    std::string path = dir + "/t.db";
    write_trace(path);
    add_run(path, small_run("before"));
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {   // dies mid-commit, as in the test above
        sqlite3* db = nullptr;
        sqlite3_open(path.c_str(), &db);
        sqlite3_exec(db, "PRAGMA cache_size=2; BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        for (int i = 0; i < 2000; ++i)
            sqlite3_exec(db, "INSERT INTO run_events VALUES (1,0,0,1,1,1,4096)", nullptr, nullptr, nullptr);
        sqlite3_exec(db, "UPDATE runs SET name = 'torn'", nullptr, nullptr, nullptr);
        _exit(0);
    }
    waitpid(child, nullptr, 0);
    REQUIRE(fs::exists(path + "-journal"));
    fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    auto reader_error = [&]() -> std::string {
        try {
            list_runs(path);
        } catch (const mhc::Error& e) {
            return e.what();
        }
        return "read";
    };
    std::string msg = as_unprivileged(reader_error);
    CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("interrupted write left") &&
                        Catch::Contains("-journal") && !Catch::Contains("readonly database"));
    CHECK(msg.find('\n') == std::string::npos);
    // Made writable again, the next reader rolls the journal back: the run as it was.
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
    auto runs = list_runs(path);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].name == "before");
    CHECK(!fs::exists(path + "-journal"));
    fs::remove_all(dir);
}

// (The lock is taken before the reader prepares its first statement. A lock that appears between
// prepare and step, as under 8 writers with a zero timeout, takes the other branch of
// reader.cpp's validate(); no test here makes that interleaving happen on demand.)
TEST_CASE("a lock held past the busy timeout while a reader opens the trace is reported as a lock", "[store][robust]") {
    TempPath p("locked.db");
    write_trace(p.path);
    sqlite3* holder = nullptr;
    REQUIRE(sqlite3_open(p.path.c_str(), &holder) == SQLITE_OK);
    REQUIRE(sqlite3_exec(holder, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    setenv("MHC_BUSY_TIMEOUT_MS", "50", 1);
    std::string e = load_error(p.path);
    unsetenv("MHC_BUSY_TIMEOUT_MS");
    sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(holder);
    CHECK_THAT(e, Catch::Contains(p.path) && Catch::Contains("locked") && !Catch::Contains("corrupt"));
    CHECK(load_error(p.path).empty());
}
