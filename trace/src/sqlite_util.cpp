#include "sqlite_util.hpp"

namespace mhc::trace::sql {

void fail(sqlite3* db, const std::string& file, const std::string& what) {
    std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
    int code = db ? sqlite3_errcode(db) : SQLITE_CANTOPEN;
    if (code == SQLITE_NOTADB) msg = "not an SQLite database (wrong format or corrupt header)";
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
