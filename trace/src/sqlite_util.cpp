#include "sqlite_util.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "mhc/common/numbers.hpp"

namespace mhc::trace::sql {

int busy_timeout_ms() {
    if (const char* e = std::getenv("MHC_BUSY_TIMEOUT_MS")) {
        const auto ms = parse_integer<int>(e);
        if (!ms || *ms < 0 || *ms > 3600000)
            throw Error(std::string("MHC_BUSY_TIMEOUT_MS='") + e + "': not a whole number of milliseconds in [0, 3600000]");
        return *ms;
    }
    return 600000;   // 10 minutes: a long reader (a multi-GB trace loading) never costs a run
}

namespace {
// "600 s", "0.25 s"
std::string timeout_text() {
    char b[32];
    std::snprintf(b, sizeof b, "%g s", busy_timeout_ms() / 1000.0);
    return b;
}
// A hot journal beside a file whose folder cannot be written: SQLite can roll the file back
// but not delete the journal, and says only "disk I/O error".
bool journal_stuck(const std::string& file) {
    const std::string journal = file + "-journal";
    if (::access(journal.c_str(), F_OK) != 0) return false;
    const size_t slash = file.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
    return ::access(dir.c_str(), W_OK) != 0;
}
}  // namespace

sqlite3* open_existing(const std::string& file, bool writable, std::string& problem) {
    sqlite3* db = nullptr;
    // READWRITE opens read-only by itself when the file is write-protected; opening for writing
    // whenever possible lets SQLite roll back the journal a killed writer left (a "hot journal"),
    // which a read-only connection cannot do.
    int flags = (writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(file.c_str(), &db, flags, nullptr) != SQLITE_OK) {
        problem = file + ": cannot open: " + (db ? sqlite3_errmsg(db) : "error");
        sqlite3_close(db);
        return nullptr;
    }
    sqlite3_busy_timeout(db, busy_timeout_ms());
    sqlite3_extended_result_codes(db, 1);
    return db;
}

void fail(sqlite3* db, const std::string& file, const std::string& what) {
    std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
    int ext = db ? sqlite3_extended_errcode(db) : SQLITE_CANTOPEN;
    int code = ext & 0xff;
    if (code == SQLITE_NOTADB) msg = "not an SQLite database (wrong format or corrupt header)";
    else if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
        throw Busy(file + ": " + what + ": the file stayed locked by another process for " + timeout_text() +
                   " (MHC_BUSY_TIMEOUT_MS; " + msg + ")");
    else if (ext == SQLITE_READONLY_ROLLBACK || (code == SQLITE_IOERR && journal_stuck(file)))
        msg = "an interrupted write left " + file + "-journal, which only a process that can write "
              "the file and its directory can roll back: make them writable and rerun";
    else if (code == SQLITE_CORRUPT) msg = "the file is corrupt or truncated (" + msg + ")";
    throw Error(file + ": " + what + ": " + msg);
}

void exec(sqlite3* db, const std::string& file, const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string m = err ? err : "error";
        sqlite3_free(err);
        fail(db, file, m.empty() ? std::string(sql) : "SQL failed");
    }
}

Stmt::Stmt(sqlite3* db, const std::string& file, const char* sql) : db_(db), file_(file) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) != SQLITE_OK)
        fail(db, file, "cannot prepare query");
}

Stmt::~Stmt() { sqlite3_finalize(s_); }

Stmt& Stmt::operator=(Stmt&& o) noexcept {
    if (this != &o) {
        sqlite3_finalize(s_);
        s_ = o.s_;
        db_ = o.db_;
        file_ = std::move(o.file_);
        o.s_ = nullptr;
    }
    return *this;
}

void Stmt::run() {
    int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) fail(db_, file_, "write failed");
}

bool Stmt::step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, file_, "read failed");
}

std::string Stmt::text(int col) const {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string();
}

}  // namespace mhc::trace::sql
