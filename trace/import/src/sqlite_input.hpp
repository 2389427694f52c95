#pragma once
// Opening another tool's SQLite file (an Nsight Systems export) to read it, never to change it.
#include <sqlite3.h>

#include <string>

#include "mhc/common/error.hpp"
#include "source.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace::import {

// `path` opened read-only, or mhc::Error naming it. Refused before SQLite opens it: a write-ahead
// log beside a file not in WAL mode (another file's, which SQLite would read over the file's rows
// and beside which it would write FILE-shm). A file another process holds locked (an export still
// being written) is waited for as every mhc command waits (MHC_BUSY_TIMEOUT_MS), then refused
// saying so: it was "corrupt or truncated: database is locked" at once, or under --format nsys
// "stayed locked ... for 600 s" after no wait at all. Refused after: a journal left by an
// interrupted write (a hot journal), which SQLite rolls back before any read and a read-only
// connection cannot, so it said "attempt to write a readonly database" (taken for a corrupt file).
inline sqlite3* open_sqlite_input(const std::string& path) {
    if (const std::string stray = sql::stray_log(path); !stray.empty()) throw Error(stray);
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        std::string message = db ? sqlite3_errmsg(db) : "cannot open";
        sqlite3_close(db);
        throw Error(where(path, "cannot open as SQLite: " + message));
    }
    sqlite3_extended_result_codes(db, 1);
    try {
        sql::wait_when_busy(db, path);
    } catch (...) {   // a bad MHC_BUSY_TIMEOUT_MS
        sqlite3_close(db);
        throw;
    }
    // One read transaction for the whole import: its first read takes a shared lock that it keeps,
    // so a writer committing between two of the importer's queries cannot make it read two
    // versions of the file (each statement had a snapshot of its own).
    const int rc = sqlite3_exec(db, "BEGIN; SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    if (rc == SQLITE_READONLY_ROLLBACK) {
        sqlite3_close(db);
        throw Error(where(path, "an interrupted write left " + path +
                                    "-journal, which SQLite must roll back before the file can be read, and an "
                                    "import only reads its input: open it once with sqlite3 " + path +
                                    " (which rolls it back) or export it again, and rerun"));
    }
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
        try {
            sql::fail(db, path, "cannot read");
        } catch (...) {
            sqlite3_close(db);
            throw;
        }
    }
    return db;   // other errors: the caller's first query says them. Closing it ends the transaction.
}

}   // namespace mhc::trace::import
