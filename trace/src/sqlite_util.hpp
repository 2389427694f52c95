#pragma once
// Thin RAII over the SQLite C API, private to the trace library.
#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "mhc/common/error.hpp"

namespace mhc::trace::sql {

// Throws mhc::Error "<file>: <what>: <sqlite message>".
[[noreturn]] void fail(sqlite3* db, const std::string& file, const std::string& what);

void exec(sqlite3* db, const std::string& file, const char* sql);

class Stmt {
public:
    Stmt() = default;
    Stmt(sqlite3* db, const std::string& file, const char* sql);
    ~Stmt();
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    Stmt(Stmt&& o) noexcept : s_(o.s_), db_(o.db_), file_(std::move(o.file_)) { o.s_ = nullptr; }
    Stmt& operator=(Stmt&& o) noexcept;

    sqlite3_stmt* get() const { return s_; }
    void bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
    void bind(int i, double v) { sqlite3_bind_double(s_, i, v); }
    void bind_null(int i) { sqlite3_bind_null(s_, i); }
    void bind(int i, const std::string& v) {
        sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
    // Runs a statement that returns no rows, then resets it for the next use.
    void run();
    // Steps once; true while a row is available. Throws on error.
    bool step();
    void reset() { sqlite3_reset(s_); }
    int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
    double f64(int col) const { return sqlite3_column_double(s_, col); }
    bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
    std::string text(int col) const;

private:
    sqlite3_stmt* s_ = nullptr;
    sqlite3* db_ = nullptr;
    std::string file_;
};

}  // namespace mhc::trace::sql
