#pragma once
// What the store's tests share: a small trace, a small run, SQL on a file, and running a step as
// the unprivileged user nobody (root writes read-only files anyway, and CI runs as root).
#include <grp.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::trace::test {

// Runs `fn` as the unprivileged user nobody when this process is root (root writes 0444 files
// anyway, and CI runs as root), else in this process; returns what `fn` returned.
inline std::string as_unprivileged(const std::function<std::string()>& fn) {
    if (geteuid() != 0) return fn();
    int fd[2];
    REQUIRE(pipe(fd) == 0);
    pid_t c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        close(fd[0]);
        std::string m = "could not become nobody";
        if (setgroups(0, nullptr) == 0 && setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0)
            m = fn();
        (void)!write(fd[1], m.data(), m.size());
        _exit(0);
    }
    close(fd[1]);
    std::string msg;
    char buf[512];
    for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
    close(fd[0]);
    waitpid(c, nullptr, 0);
    return msg;
}

// Two allocations and a kernel; `source` (meta) tells traces apart.
inline void write_trace(const std::string& path, const std::string& source = "test") {
    Writer w(path);
    w.set_meta("source", source);
    int64_t k = w.intern("gemm");
    w.add(Allocation{1, 0, 0x1000, 4096, 0, kNoTime, 7, Category::Param, kNoString});
    w.add(Allocation{2, 0, 0x3000, 1024, 5, 40, 7, Category::Activation, kNoString});
    Kernel a{}; a.id = 1; a.stream = 7; a.name = k; a.t_start = 10; a.t_end = 20; a.step = 0;
    w.add(a);
    w.add(Access{1, 1, AccessMode::Read});
    w.add(Access{1, 2, AccessMode::Write});
    w.finish();
}

inline void sql(const std::string& path, const std::string& q) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, q.c_str(), nullptr, nullptr, &err);
    INFO((err ? err : "") << " in " << q);
    sqlite3_free(err);
    sqlite3_close(db);
    REQUIRE(rc == SQLITE_OK);
}

// Runs `q` on the file at `path` as a user's sqlite3 would, asserting nothing: what it did is
// for the reader or the check under test to find.
inline void sql_unchecked(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, query.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
}

inline Run small_run(const std::string& name) {
    Run r;
    r.name = name;
    r.metrics["peak_bytes"] = 1;
    for (int i = 0; i < 50; ++i) r.events.push_back({EventKind::SwapOut, i, i + 1, 1, 1, 64});
    return r;
}

}  // namespace mhc::trace::test
