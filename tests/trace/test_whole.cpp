// Nothing stored is ever wrong (docs/trace-format.md, "Durability and concurrency"): a run that
// cannot be stored leaves no trace of itself, a run is stored only in the trace it was computed
// on, a job's runs are stored whole, nothing is written over a file that is not a regular one.
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc::trace;
using namespace mhc::trace::test;
using mhc::test::TempDir;
using mhc::test::TempPath;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const mhc::Error& e) {
        return e.what();
    }
    return "";
}

// A run whose rows do not fit SQLite's page cache (2 MB by default): storing it writes pages
// into the file before the commit, as a long simulation's events do.
Run big_run() {
    Run r = small_run("big");
    for (int i = 0; i < 200000; ++i) r.events.push_back({EventKind::SwapIn, i, i + 7, 2, 1, 1 << 20});
    return r;
}

int64_t count(const std::string& path, const char* query) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, query, -1, &s, nullptr) == SQLITE_OK);
    int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

}  // namespace

TEST_CASE("a run that fails half-way on a full disk leaves no journal and no part of itself", "[store][whole]") {
    TempDir dir("mhc-whole");
    const std::string t = dir.file("t.db");
    write_trace(t);
    add_run(t, small_run("before"));
    const auto size = static_cast<rlim_t>(fs::file_size(t));
    // In a child, a file may not grow past its size + 1 MiB (RLIMIT_FSIZE, as a disk that fills
    // up): the journal fits, the run's pages do not, and the write fails half-way through.
    pid_t c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        signal(SIGXFSZ, SIG_IGN);
        rlimit lim{size + (1 << 20), size + (1 << 20)};
        setrlimit(RLIMIT_FSIZE, &lim);
        int rc = 3;
        try {
            add_run(t, big_run());
        } catch (const mhc::Error& e) {
            rc = std::string(e.what()).find(t) != std::string::npos ? 0 : 2;
        }
        _exit(rc);
    }
    int st = 0;
    waitpid(c, &st, 0);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);   // refused, naming the trace
    // Before the command ends the file is rolled back: no hot journal, and a copy of the file
    // alone (what a user mails or backs up) holds the run it had and no part of the new one.
    CHECK(!fs::exists(t + "-journal"));
    const std::string copy = dir.file("copy.db");
    fs::copy_file(t, copy);
    CHECK(count(copy, "SELECT count(*) FROM runs") == 1);
    CHECK(count(copy, "SELECT count(*) FROM run_events") == 50);
    CHECK(check_file(copy, true).ok());
}

TEST_CASE("a run is stored only in the trace it was computed from", "[store][whole]") {
    TempDir dir("mhc-whole");
    const std::string t = dir.file("t.db"), runs_db = dir.file("runs.db");
    write_trace(t, "first");
    const std::string read = load_trace(t).fingerprint;
    CHECK(read == fingerprint(Reader(t).meta(), Reader(t).counts()));
    CHECK(add_run(t, small_run("same"), "", read) == 1);   // unchanged: stored
    // Another process replaces the trace (generate --force) while the run is computed.
    write_trace(dir.file("new.db"), "second");
    fs::rename(dir.file("new.db"), t);
    const std::string e = error_of([&] { add_run(t, small_run("late"), "", read); });
    CHECK_THAT(e, Catch::Contains(t) && Catch::Contains("changed after it was read") && Catch::Contains(read));
    CHECK(list_runs(t).empty());
    CHECK(!fs::exists(t + "-journal"));
    // Into a runs database the run goes with the trace it was computed from, which is not this one.
    add_run(t, small_run("kept"), runs_db, read);
    CHECK_THAT(error_of([&] { list_runs(t, runs_db); }), Catch::Contains("another trace"));
}

TEST_CASE("a job's runs are stored whole: every rank's or none", "[store][whole]") {
    TempDir dir("mhc-whole");
    std::vector<JobRun> job;
    for (int r = 0; r < 3; ++r) {
        const std::string t = dir.file("job.rank" + std::to_string(r) + ".db");
        write_trace(t, "rank " + std::to_string(r));
        job.push_back({t, load_trace(t).fingerprint, small_run("rank " + std::to_string(r))});
    }
    SECTION("all stored, each in its rank's trace") {
        auto ids = add_job_runs(job);
        REQUIRE(ids.size() == 3);
        for (int r = 0; r < 3; ++r) {
            auto runs = list_runs(job[size_t(r)].trace);
            REQUIRE(runs.size() == 1);
            CHECK(runs[0].name == "rank " + std::to_string(r));
        }
    }
    SECTION("one rank replaced meanwhile: none stored") {
        write_trace(dir.file("x.db"), "another rank 2");
        fs::rename(dir.file("x.db"), job[2].trace);
        CHECK_THAT(error_of([&] { add_job_runs(job); }), Catch::Contains(job[2].trace) && Catch::Contains("changed"));
        for (const auto& j : job) CHECK(list_runs(j.trace).empty());
    }
    SECTION("one rank read-only: none stored") {
        fs::permissions(dir.path, fs::perms::all);
        for (const auto& j : job) fs::permissions(j.trace, fs::perms::all & ~fs::perms::owner_exec & ~fs::perms::group_exec & ~fs::perms::others_exec);
        fs::permissions(job[1].trace, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
        std::string e = as_unprivileged([&] { return error_of([&] { add_job_runs(job); }); });
        CHECK_THAT(e, Catch::Contains(job[1].trace) && Catch::Contains("read-only"));
        for (const auto& j : job) CHECK(list_runs(j.trace).empty());
        fs::permissions(job[1].trace, fs::perms::owner_read | fs::perms::owner_write);
    }
    SECTION("a store killed in the middle of its commit: none stored once a reader has looked") {
        // A child stores a large job and is killed at some moment; whatever it reached, every
        // rank's trace then shows the job's run, or none of them does (a SIGKILL leaves a hot
        // journal, which the next reader rolls back).
        for (auto& j : job) j.run = big_run();
        // The last child is not killed (a delay that lets it finish would depend on the load).
        const useconds_t delays[] = {20000, 150000, 400000, 0};
        for (int round = 0; round < 4; ++round) {
            pid_t c = fork();
            REQUIRE(c >= 0);
            if (c == 0) {
                try { add_job_runs(job); } catch (...) {}
                _exit(0);
            }
            if (delays[round]) {
                usleep(delays[round]);
                kill(c, SIGKILL);
            }
            waitpid(c, nullptr, 0);
            size_t stored = 0;
            for (const auto& j : job) stored += list_runs(j.trace).size();
            CHECK((stored % 3) == 0);
            CHECK(stored / 3 <= size_t(round) + 1);
        }
        CHECK(list_runs(job[0].trace).size() >= 1);   // the last child, not killed, stored its job
    }
    SECTION("in one runs database, each run with its rank's trace") {
        const std::string runs_db = dir.file("job-runs.db");
        auto ids = add_job_runs(job, runs_db);
        REQUIRE(ids.size() == 3);
        for (int r = 0; r < 3; ++r) {
            auto runs = list_runs(job[size_t(r)].trace, runs_db);
            REQUIRE(runs.size() == 1);
            CHECK(runs[0].name == "rank " + std::to_string(r));
            CHECK(load_run(job[size_t(r)].trace, runs[0].id, runs_db).events.size() == 50);
        }
        CHECK(list_runs(job[0].trace).empty());
        // A second job run into it, and a run of one rank alone: the database belongs to the job.
        add_job_runs(job, runs_db);
        add_run(job[1].trace, small_run("rank 1 alone"), runs_db);
        CHECK(list_runs(job[1].trace, runs_db).size() == 3);
        CHECK(list_runs(job[2].trace, runs_db).size() == 2);
        // A runs database of one trace does not take the runs of a job.
        const std::string single = dir.file("rank0-runs.db");
        add_run(job[0].trace, small_run("alone"), single);
        CHECK_THAT(error_of([&] { add_job_runs(job, single); }), Catch::Contains("holds runs of another trace"));
        CHECK(list_runs(job[0].trace, single).size() == 1);
    }
    SECTION("more ranks than one transaction can span: refused, and stored whole in a runs database") {
        std::vector<JobRun> big;
        for (int r = 0; r < max_job_files() + 1; ++r) {
            const std::string t = dir.file("big.rank" + std::to_string(r) + ".db");
            write_trace(t, "big rank " + std::to_string(r));
            big.push_back({t, "", small_run("r" + std::to_string(r))});
        }
        CHECK_THAT(error_of([&] { add_job_runs(big); }), Catch::Contains("--runs-db"));
        for (const auto& j : big) CHECK(list_runs(j.trace).empty());
        CHECK(add_job_runs(big, dir.file("big-runs.db")).size() == big.size());
    }
}

TEST_CASE("nothing is written over a device, a FIFO or through a link to one", "[store][whole]") {
    TempDir dir("mhc-whole");
    const std::string fifo = dir.file("fifo"), link = dir.file("null.db"), t = dir.file("t.db");
    REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
    fs::create_symlink("/dev/null", link);
    for (const std::string& p : {fifo, link, std::string("/dev/null")})
        for (auto mode : {mhc::IfExists::Refuse, mhc::IfExists::Replace}) {
            INFO(p);
            CHECK_THAT(error_of([&] { mhc::OutputFile f(p, mode); }), Catch::Contains("not a regular file"));
            CHECK_THAT(error_of([&] { Writer w(p, mode); }), Catch::Contains("not a regular file"));
        }
    CHECK(fs::is_fifo(fifo));
    CHECK(fs::is_symlink(link));
    // A runs database, and so its journal, only as (or beside) a regular file.
    write_trace(t);
    for (const std::string& p : {fifo, link, std::string("/dev/null")})
        CHECK_THAT(error_of([&] { add_run(t, small_run("x"), p); }), Catch::Contains("not a regular file"));
    // A link to a regular file is replaced by the new file; the file it pointed to stays as it was.
    const std::string target = dir.file("target.db"), to_target = dir.file("to-target.db");
    { std::ofstream(target) << "old"; }
    fs::create_symlink(target, to_target);
    CHECK_THAT(error_of([&] { mhc::OutputFile f(to_target, mhc::IfExists::Refuse); }),
               Catch::Contains("symbolic link to " + target));
    write_trace(to_target);
    CHECK(!fs::is_symlink(to_target));
    CHECK(Reader(to_target).counts().allocations == 2);
    std::ifstream in(target);
    std::string s;
    in >> s;
    CHECK(s == "old");
}

TEST_CASE("a legal name of 253 bytes is written, its temporary name stays within the limit", "[store][whole]") {
    TempDir dir("mhc-whole");
    const std::string name = std::string(250, 'a') + ".db";
    const std::string out = dir.file(name);
    const std::string tmp = mhc::temp_name(out, 4194304);
    CHECK(fs::path(tmp).parent_path() == fs::path(out).parent_path());   // beside the output
    CHECK(fs::path(tmp).filename().string().size() + std::string("-journal").size() <= 255);
    CHECK(mhc::temp_name(dir.file("t.db"), 42) == dir.file("t.db.mhc-tmp-42"));
    write_trace(out);
    CHECK(Reader(out).counts().kernels == 1);
    CHECK(dir.entries() == 1);
    // Its runs cannot go beside it (NAME-journal is too long): said, with what to do instead.
    CHECK_THAT(error_of([&] { add_run(out, small_run("x")); }), Catch::Contains("255") && Catch::Contains("--runs-db"));
    add_run(out, small_run("x"), dir.file("runs.db"));
    CHECK(list_runs(out, dir.file("runs.db")).size() == 1);
    // A temporary file of a killed process with the shortened name is found and removed.
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, nullptr, 0);
    { std::ofstream(mhc::temp_name(out, c)) << "x"; }
    CHECK(mhc::remove_stale_temps(out) == 1);
}

TEST_CASE("a job's files appear together or none of them", "[store][whole]") {
    TempDir dir("mhc-whole");
    std::vector<std::unique_ptr<Writer>> w;
    for (int r = 0; r < 3; ++r) {
        w.push_back(std::make_unique<Writer>(dir.file("j" + std::to_string(r) + ".db"), mhc::IfExists::Refuse));
        w.back()->set_meta("source", "rank " + std::to_string(r));
    }
    for (auto& x : w) x->close();
    CHECK(dir.entries() == 3);   // complete, still temporary
    for (int r = 0; r < 3; ++r) CHECK(!fs::exists(dir.file("j" + std::to_string(r) + ".db")));
    // The last one's name is taken meanwhile: the first two, already moved, are removed again.
    { std::ofstream(dir.file("j2.db")) << "someone else's"; }
    CHECK_THAT(error_of([&] { finish_together({w[0].get(), w[1].get(), w[2].get()}); }), Catch::Contains("j2.db"));
    w.clear();
    CHECK(!fs::exists(dir.file("j0.db")));
    CHECK(!fs::exists(dir.file("j1.db")));
    CHECK(dir.entries() == 1);
}

TEST_CASE("a private temporary file (a pipe's copy) is removed on signals and by the next one after a kill",
          "[store][whole]") {
    auto ours = [] {
        int n = 0;
        for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
            n += e.path().filename().string().rfind("mhc-wholetest-", 0) == 0;
        return n;
    };
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGKILL}) {
        int fd[2];
        REQUIRE(pipe(fd) == 0);
        pid_t c = fork();
        if (c == 0) {
            close(fd[0]);
            for (int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_DFL);
            mhc::TempFile f("wholetest");
            (void)!write(fd[1], f.path().data(), f.path().size());
            close(fd[1]);
            pause();
            _exit(0);
        }
        close(fd[1]);
        char b[4096];
        ssize_t n = read(fd[0], b, sizeof b);
        close(fd[0]);
        REQUIRE(n > 0);
        const std::string path(b, size_t(n));
        CHECK(path.find("mhc-wholetest-" + std::to_string(c) + "-") != std::string::npos);   // named with the pid
        CHECK(fs::exists(path));
        kill(c, sig);
        waitpid(c, nullptr, 0);
        if (sig == SIGKILL) {
            CHECK(fs::exists(path));   // no handler sees a SIGKILL: the next TempFile removes it
            mhc::TempFile next("wholetest");
            CHECK(!fs::exists(path));
            CHECK(ours() == 1);
        } else {
            CHECK(!fs::exists(path));
        }
    }
    CHECK(ours() == 0);
}

TEST_CASE("check --full finds a damaged index that the quick check does not", "[store][whole]") {
    TempPath p("index.db");
    write_trace(p.path);
    Run run = small_run("r");
    for (int64_t t = 0; t < 100; ++t) run.memory.push_back({t, (t % 7) << 20, t % 5});
    add_run(p.path, run);
    // The index's definition no longer matches its entries: what a half-rolled-back write leaves.
    sql(p.path, "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX run_memory_by_run ON "
                "run_memory (run, device_bytes)' WHERE name = 'run_memory_by_run'");
    CHECK(check_file(p.path).ok());
    CheckReport full = check_file(p.path, true);
    REQUIRE(!full.ok());
    CHECK(full.problems.front().rule == "corrupt");
    CHECK_THAT(full.problems.front().message, Catch::Contains("index"));
}

TEST_CASE("a lock is not a problem of the trace, and its timeout is said as set", "[store][whole]") {
    TempPath p("lock.db");
    write_trace(p.path);
    sqlite3* holder = nullptr;
    REQUIRE(sqlite3_open(p.path.c_str(), &holder) == SQLITE_OK);
    REQUIRE(sqlite3_exec(holder, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    setenv("MHC_BUSY_TIMEOUT_MS", "250", 1);
    std::string e = error_of([&] { check_file(p.path); });
    setenv("MHC_BUSY_TIMEOUT_MS", "soon", 1);
    std::string bad = error_of([&] { check_file(p.path); });
    unsetenv("MHC_BUSY_TIMEOUT_MS");
    sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(holder);
    CHECK_THAT(e, Catch::Contains("locked") && Catch::Contains("0.25 s"));
    CHECK_THAT(bad, Catch::Contains("MHC_BUSY_TIMEOUT_MS") && Catch::Contains("soon"));
    CHECK(check_file(p.path).ok());
}

TEST_CASE("a hot journal beside a writable trace in a read-only folder gets the journal's sentence", "[store][whole]") {
    TempDir dir("mhc-whole");
    const std::string t = dir.file("t.db");
    write_trace(t);
    add_run(t, small_run("before"));
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {   // dies mid-commit: a hot journal
        sqlite3* db = nullptr;
        sqlite3_open(t.c_str(), &db);
        sqlite3_exec(db, "PRAGMA cache_size=2; BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        for (int i = 0; i < 2000; ++i)
            sqlite3_exec(db, "INSERT INTO run_events VALUES (1,0,0,1,1,1,4096)", nullptr, nullptr, nullptr);
        _exit(0);
    }
    waitpid(child, nullptr, 0);
    REQUIRE(fs::exists(t + "-journal"));
    // The trace and its journal may be written by anyone, the folder by no one but root (whom
    // the reader below is not: as root it runs as nobody).
    const auto read_exec = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                           fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec;
    fs::permissions(dir.path, read_exec);
    for (const auto& f : {t, t + "-journal"})
        fs::permissions(f, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                               fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
    std::string msg = as_unprivileged([&] { return error_of([&] { list_runs(t); }); });
    CHECK_THAT(msg, Catch::Contains(t) && Catch::Contains("interrupted write left") && !Catch::Contains("disk I/O"));
    fs::permissions(dir.path, fs::perms::owner_all, fs::perm_options::add);
    CHECK(list_runs(t).size() == 1);   // a process that can write the folder rolls it back
    CHECK(!fs::exists(t + "-journal"));
}

TEST_CASE("stored_size says about how much storing runs adds to a file", "[store][whole]") {
    TempDir dir("mhc-whole");
    const std::string t = dir.file("t.db");
    write_trace(t);
    std::vector<Run> runs;
    int64_t estimate = 0;
    for (int i = 0; i < 50; ++i) {
        Run r = small_run("sized " + std::to_string(i));
        for (int e = 0; e < 2000; ++e) r.events.push_back({EventKind::SwapIn, e * 10 + i, e * 10 + i + 5, e % 97 + 1, e % 13 + 1, 4096 + e});
        for (int m = 0; m < 1000; ++m) r.memory.push_back({m * 100 + i, int64_t(m) << 20, int64_t(m) << 10});
        for (int k = 0; k < 500; ++k) r.kernel_times.push_back({k + 1, k * 50, k * 50 + 40 + i});
        for (int c = 0; c < 20; ++c) r.config["key." + std::to_string(c)] = "value " + std::to_string(c * i);
        for (int m = 0; m < 30; ++m) r.metrics["metric." + std::to_string(m)] = m * 1.5 + i;
        estimate += stored_size(r);
        runs.push_back(std::move(r));
    }
    const auto before = static_cast<int64_t>(fs::file_size(t));
    add_runs(t, runs);
    const auto grown = static_cast<int64_t>(fs::file_size(t)) - before;
    INFO("estimate " << estimate << " bytes, grown " << grown << " bytes");
    CHECK(estimate > grown * 4 / 5);
    CHECK(estimate < grown * 5 / 4);
}
