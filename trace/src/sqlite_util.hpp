#pragma once
// Thin RAII over the SQLite C API, private to the trace library.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mhc/common/error.hpp"

namespace mhc::trace::sql {

// How long any connection waits for another process's lock before giving up: writers wait
// for readers to finish a read and for other writers to commit; readers wait for a commit.
// MHC_BUSY_TIMEOUT_MS overrides it (tests use a short one to see a refusal quickly); a value
// that is not a whole number of milliseconds in [0, 3600000] throws mhc::Error.
int busy_timeout_ms();

// Sets `db`'s busy handler: wait up to busy_timeout_ms() for another process's lock, saying so
// on stderr once after a second when set_lock_note(true) (trace/store.hpp) was called.
void wait_when_busy(sqlite3* db, const std::string& file);
void set_lock_note(bool on);

// A lock another process held past the busy timeout: the file is fine, it was only busy.
class Busy : public Error {
public:
    using Error::Error;
};

// Opens an existing SQLite file with the busy timeout set. `writable`: read-write, or read-only
// when the file or its directory cannot be written (then an interrupted writer's journal cannot
// be rolled back, and the open fails with a sentence saying so). Returns nullptr and sets
// `problem` (naming `file`) on failure.
// Why SQLite could not open `opened` (the file, or the temporary file made for `file`), naming
// `file`: SQLite's words, or, for a full path of 512 bytes or more, which SQLite's unix files cannot
// open (MAX_PATHNAME), that limit ("unable to open database file" said nothing of it).
std::string open_failure(sqlite3* db, const std::string& file, const std::string& opened, const char* doing);
sqlite3* open_existing(const std::string& file, bool writable, std::string& problem);

// Reads `bytes` bytes of `file` at `offset` (its header, before SQLite opens it) through SQLite's
// VFS, never by a descriptor of its own: closing one would drop every POSIX lock this process's
// connections hold on the file. False when the file cannot be opened or is shorter.
bool read_bytes(const std::string& file, unsigned char* out, int bytes, int64_t offset);

// What a file SQLite calls "not a database" is when it is gzip-compressed (a trace downloaded or
// kept as .db.gz): "gzip-compressed: decompress it first (gunzip ...)"; "" otherwise.
// "" or why SQLite cannot open `file`: one of the files it keeps beside it ("-journal", "-wal",
// "-shm") is there but no regular file (a folder: SQLite says only "unable to open database file").
std::string side_file_in_the_way(const std::string& file);
// "" or why `file` is not opened: FILE-wal is an SQLite write-ahead log but the file is not in WAL
// mode, so the log is another file's (copied or left beside it), which SQLite would apply over
// it, read-only connections included. open_existing refuses it (docs/cli.md).
std::string stray_log(const std::string& file);
// "" or why what an immutable connection (a WAL-mode file in a folder this process cannot write,
// read without a lock) read of `file` may be torn: the file changed since it was opened (a
// checkpoint of another process). Other connections: "" (their locks kept them whole).
std::string changed_while_read(sqlite3* db, const std::string& file);
std::string gzip_note(const std::string& file);

// Throws mhc::Error "<file>: <what>: <sqlite message>" (Busy for a lock held past the timeout).
[[noreturn]] void fail(sqlite3* db, const std::string& file, const std::string& what);
// What a write says of a file whose name another process took (mv over it) or removed while the
// write had it open ("FILE" + this): SQLite's SQLITE_READONLY_DBMOVED, RunWriter::commit.
inline constexpr const char* kMovedDuringWrite = ": was replaced or removed by another process during this write";

void exec(sqlite3* db, const std::string& file, const char* sql);

// No trigger runs on `db` from now on (statements prepared after the call): mhc writes what it
// computed. A trigger a file holds (another program's, or one written into it by hand) rewrote the
// rows as they were stored (AFTER INSERT ON run_metrics ... UPDATE run_metrics SET value = 12345:
// every metric of the run stored as 12345, and check passed it), or made a command that only
// reads (its cache written into the file) delete the stored runs. The files' own triggers
// (schema.sql: run_event_rows, the content digest; the cache's) are for writers other than mhc's.
void no_triggers(sqlite3* db);

// SQLite's quick_check of `db` (every page of the file), or of one table and its indexes when
// `table` is given: each problem it finds, on one line ("Page 16: btreeInitPage() returns error
// code 11"; SQLite's "*** in database main ***" heading left out). Empty when the pages are sound.
std::vector<std::string> quick_check(sqlite3* db, const std::string& file, const std::string& table = "",
                                     bool full = false);

// The pages an append to `table` reads, read: its b-tree's and each index's last `entries`
// entries in key order (the path from the root to the last leaf, and the leaves before it that
// a page split takes in). "" when they read; else SQLite's word for what failed ("database disk
// image is malformed"). Reads about depth + entries / (entries per page) pages of each tree,
// whatever the table's size. A lock held past the timeout throws Busy.
std::string read_table_end(sqlite3* db, const std::string& file, const std::string& table, int entries);

// The pages a write takes new pages from, read: the trunk pages of the file's free-page list
// (schema "main"), checked as SQLite checks them when it allocates (a page number past the
// file's end, more leaves than a trunk holds, a loop). "" when sound; else what is wrong. Reads
// one page per (page size / 4 - 2) free pages; nothing in WAL mode (the file's pages may be older
// than the log's).
std::string read_freelist(sqlite3* db, const std::string& file);

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
