#pragma once
// The SQLite store. Writer streams rows into a new file in batched transactions with
// prepared statements and makes it appear atomically (temp file + rename); Reader opens a
// trace read-only, refuses files that are not traces of this schema version, and streams
// rows back. docs/trace-format.md documents the schema.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mhc/common/output_file.hpp"
#include "mhc/trace/model.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace mhc::trace {

inline constexpr int kSchemaVersion = 1;
// Written into meta as "format" so that a foreign SQLite file is told apart from a trace.
inline constexpr const char* kFormatName = "mhc-trace";

// Rows per table of a trace.
struct TableCounts {
    int64_t allocations = 0, kernels = 0, accesses = 0, copies = 0, markers = 0, strings = 0;
    int64_t total() const { return allocations + kernels + accesses + copies + markers + strings; }
};

// The bytes a trace of `counts` rows takes on disk, about (within 10% of generated traces of
// every preset, 2026-12-03: allocations 43 B a row, kernels 48, accesses 15, markers and copies
// 34, strings 60, indexes included, and 16 KiB for each of the schema's tables).
int64_t estimated_file_bytes(const TableCounts& counts);

class Writer {
public:
    // Creates `path` on finish(); until then rows go to a temporary file beside it (an
    // OutputFile: removed on failure, on SIGINT/SIGTERM/SIGHUP, or by the next writer of
    // `path` after a SIGKILL). `if_exists`: whether an existing `path` is an error (the CLI's
    // default, --force to replace) or replaced atomically (tests, benchmarks).
    explicit Writer(std::string path, mhc::IfExists if_exists = mhc::IfExists::Replace);
    // A writer that only counts: no file, every add() and intern() counted in rows_written()
    // and counts() (how large a trace would be before writing it: mhc generate's estimate).
    struct CountOnly {};
    explicit Writer(CountOnly);
    ~Writer();   // without finish(): the temporary file is removed, `path` untouched
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Returns the id of `text` in the string table, adding it once.
    int64_t intern(std::string_view text);
    void set_meta(const std::string& key, const std::string& value);

    void add(const Allocation& a);
    void add(const Kernel& k);
    void add(const Access& a);
    void add(const Copy& c);
    void add(const Marker& m);
    void add(const Segment& s);
    void add(const Module& m);
    void add(const KernelInfo& k);
    void add(const SavedTensor& s);

    // Sets t_free of an allocation already added (importers learn frees late).
    void set_free_time(int64_t allocation_id, int64_t t_free);

    int64_t rows_written() const { return rows_; }
    // Rows added so far per table (strings: those interned, "" not counted).
    const TableCounts& counts() const { return counts_; }
    // Builds indexes, writes the schema version, commits and renames into place. `verify`, when
    // given, runs on the complete temporary file first (name it as path() in errors); if it
    // throws, `path` is left as it was.
    void finish(const std::function<void(const std::string& temp_path)>& verify = {});
    // finish() without the rename: the temporary file is complete and closed, and stays
    // temporary (removed with the Writer) until finish() or finish_together().
    void close(const std::function<void(const std::string& temp_path)>& verify = {});
    const std::string& path() const { return path_; }
    // The meta rows as written so far; after close(), with what close() adds (format, schema
    // version, content digest).
    const std::map<std::string, std::string>& meta() const { return meta_; }

private:
    friend void finish_together(const std::vector<Writer*>& writers);
    void row_done();
    struct Statements;
    std::string path_, tmp_path_;
    std::unique_ptr<OutputFile> out_;
    sqlite3* db_ = nullptr;
    std::unique_ptr<Statements> st_;
    std::unordered_map<std::string, int64_t> strings_;
    std::map<std::string, std::string> meta_;
    TableCounts counts_;
    bool counting_ = false;
    int64_t rows_ = 0, rows_in_txn_ = 0;
    bool closed_ = false, finished_ = false;
};

// Closes every writer, then moves all their files into place together (mhc::commit_together):
// a job's rank files appear all at once or not at all.
void finish_together(const std::vector<Writer*>& writers);

// The trace tables a Reader projects (Reader::scan).
enum class TraceTable : uint8_t { Allocations, Kernels, Accesses, Copies, Markers };

// A column projection of one trace table, row by row in the order of Reader::for_each. Values
// are read as stored, without the value rules: for browsing paths that map unknown codes
// themselves (the viewer). Every path that computes on a trace uses for_each.
class Scan {
public:
    ~Scan();
    Scan(Scan&&) noexcept;
    Scan& operator=(Scan&&) noexcept;
    // Steps to the next row; false after the last. Throws mhc::Error naming the file.
    bool next();
    // Column `i` of the projection, in the order asked: NULL reads as 0 (is_null tells).
    int64_t operator[](int i) const;
    bool is_null(int i) const;

private:
    friend class Reader;
    struct Impl;
    explicit Scan(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// One access to an allocation, with its kernel's place on the timeline (Reader::accesses_to).
struct TimedAccess {
    int64_t kernel = 0, stream = 0, t_start = 0, t_end = 0;
    int32_t device = 0;
    AccessMode mode = AccessMode::Read;
};

// What ties a run to the trace it was computed on (docs/trace-format.md, "Runs databases"): a
// 64-bit FNV-1a hash, in 16 hex digits, of the trace's meta rows and its tables' row counts, which
// change whenever a trace is regenerated or reimported differently.
std::string fingerprint(const std::map<std::string, std::string>& meta, const TableCounts& counts);

class Reader {
public:
    // Throws mhc::Error naming the file: missing, not SQLite, truncated or corrupt, not a
    // trace, a different schema version, missing tables.
    // `name`, when given, is what errors call the file (path() returns it).
    explicit Reader(std::string path, std::string name = "");
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    const std::string& path() const { return path_; }
    // Throws mhc::Error when what this Reader read may mix two versions of the file: a trace in
    // SQLite's WAL mode in a folder this process cannot write is read without a lock (docs/cli.md),
    // and another process wrote it since it was opened. Readers call it once they have read.
    void require_unchanged() const;
    std::map<std::string, std::string> meta() const;
    TableCounts counts() const;
    // fingerprint() of this trace as it is: of meta(), but with content_digest recomputed from the
    // rows when the file lacks the triggers that keep it true (docs/trace-format.md, "Content digest").
    std::string fingerprint(const TableCounts& counts) const;
    // strings[id]; id 0 is the empty name.
    std::vector<std::string> strings() const;

    // Stream rows in id order (accesses by kernel, then allocation). Every value is checked
    // against the value rules first (docs/trace-format.md): NULL or text where an integer
    // belongs, an out-of-range value or code, a repeated id throw mhc::Error naming the row.
    void for_each(const std::function<void(const Allocation&)>& fn) const;
    void for_each(const std::function<void(const Kernel&)>& fn) const;
    void for_each(const std::function<void(const Access&)>& fn) const;
    void for_each(const std::function<void(const Copy&)>& fn) const;
    void for_each(const std::function<void(const Marker&)>& fn) const;
    // Segments: a trace written before the segments table existed has none (has_segments false).
    bool has_segments() const;
    // allocations.requested_bytes: traces written before the column existed lack it (read as
    // kNoBytes).
    bool has_requested_bytes() const;
    void for_each(const std::function<void(const Segment&)>& fn) const;

    // A model capture's tables: traces from other sources, or written before the tables
    // existed, have none (has_table false: nothing is read).
    bool has_table(const std::string& name) const;
    void for_each(const std::function<void(const Module&)>& fn) const;
    void for_each(const std::function<void(const KernelInfo&)>& fn) const;
    void for_each(const std::function<void(const SavedTensor&)>& fn) const;

    // Column projection: `columns` of `table` (names as in docs/trace-format.md), in id order
    // (accesses: by kernel, then allocation). A name the table lacks throws mhc::Error.
    Scan scan(TraceTable table, std::initializer_list<std::string_view> columns) const;
    // The accesses to one allocation with their kernels' times, by kernel start; a mode code
    // outside 1..3 reads as ReadWrite. An index lookup where the file has an index of accesses by
    // allocation (accesses_indexed_by_allocation: files written before 2026-12-02, or one a user
    // made); otherwise each call reads the whole accesses table (docs/trace-format.md, "Indexes"),
    // so a reader asking often builds its own lookup instead (the viewer: AccessIndex).
    std::vector<TimedAccess> accesses_to(int64_t allocation_id) const;
    int64_t access_count(int64_t allocation_id) const;
    bool accesses_indexed_by_allocation() const;
    // One kernel, one allocation by id, and the accesses of one kernel by allocation id (primary
    // key lookups, for a viewer's details pane); false / empty when the id does not exist.
    // Values as stored (as scan reads them); a mode code outside 1..3 reads as ReadWrite.
    bool kernel(int64_t id, Kernel& out) const;
    bool allocation(int64_t id, Allocation& out) const;
    std::vector<Access> accesses_of_kernel(int64_t kernel_id) const;
    // Memory-maps up to `bytes` of the file (SQLite mmap_size; the Reader starts at 1 GiB):
    // one sequential pass over a large file then reads it without a copy per page.
    void map_up_to(int64_t bytes) const;

    // The connection, for the trace library's own files (runs, checks): SQL stays inside trace/.
    sqlite3* handle() const { return db_; }

private:
    std::string path_;
    sqlite3* db_ = nullptr;
};

// Problems that make a file unreadable as a trace, without throwing: empty when the file
// opens as a trace of this version. Used by `mhc check` to report instead of stop.
std::string open_problem(const std::string& path);

// A file another process holds locked is waited for, up to MHC_BUSY_TIMEOUT_MS (10 minutes by
// default). With `on`, the wait is said on stderr once per file after a second
// ("mhc: T.db: locked by another process; waiting for it ..."): front-ends turn it on unless
// told to be quiet (-q), terminal or not, so that a long wait does not read as a hang.
void set_lock_wait_note(bool on);

// The environment variables the trace library reads, checked at once (front-ends call it before
// any work): MHC_BUSY_TIMEOUT_MS and MHC_TRACE_CACHE. Throws mhc::Error naming the variable.
void check_environment();

}  // namespace mhc::trace
