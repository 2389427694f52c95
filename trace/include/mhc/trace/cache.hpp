#pragma once
// A columnar copy of what readers derive from a trace, kept inside the trace file (table
// `trace_cache`, docs/trace-format.md) so that the next reader copies arrays instead of
// decoding and checking rows one by one. An entry is named by a key ("trace": load_trace's
// columns; the simulator adds its own) and holds named arrays of trivially copyable values.
//
// An entry is used only while it describes the file as it is: it carries the trace's
// fingerprint, triggers on the trace tables delete every entry when a row is inserted, changed
// or deleted (by mhc, sqlite3, pandas or anything else), a checksum covers its bytes, and a
// cache format version covers this code's layout. Anything else — an entry of another
// fingerprint, a checksum that fails, a column of the wrong width — reads as "no entry", and
// the caller takes the slow path. Writing is best effort: one transaction through the rollback
// journal, skipped when the file cannot be written, is locked by another process, or changed
// since it was read (the caller's change counter).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

struct sqlite3;

namespace mhc::trace {

// The arrays of one entry, as given to write_cache: views of the caller's vectors, which must
// outlive the write.
class CacheWriter {
public:
    template <class T>
    void put(const std::string& name, const std::vector<T>& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        add(name, sizeof(T), v.size(), v.data(), std::is_integral_v<T> || std::is_enum_v<T>);
    }

    struct Column {
        std::string name;
        uint32_t width;
        uint64_t count;
        const void* data;
        bool integer;   // of width 1, 2, 4 or 8: an arithmetic sequence can be stored as two values
    };
    const std::vector<Column>& columns() const { return columns_; }

private:
    void add(const std::string& name, size_t width, size_t count, const void* data, bool integer);
    std::vector<Column> columns_;
};

// One entry being read: get() fills the caller's vectors, finish() says whether every byte
// read matched the entry's checksum (when it does not, discard what get() filled).
class CacheReader {
public:
    ~CacheReader();
    CacheReader(const CacheReader&) = delete;
    CacheReader& operator=(const CacheReader&) = delete;

    template <class T>
    bool get(const std::string& name, std::vector<T>& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        const int64_t n = count(name, sizeof(T));
        if (n < 0) return false;
        if (v.capacity() < static_cast<size_t>(n)) {
            std::vector<T>().swap(v);
            v.reserve(static_cast<size_t>(n));
            prepare_buffer(v.data(), static_cast<size_t>(n) * sizeof(T));
        }
        v.resize(static_cast<size_t>(n));
        return fill(name, v.data());
    }
    bool finish();

    struct Column;
    struct Impl;
    explicit CacheReader(std::unique_ptr<Impl> impl);

private:
    const Column* find(const std::string& name, size_t width);
    int64_t count(const std::string& name, size_t width);
    static void prepare_buffer(void* p, size_t bytes);   // -1: no such column of that width
    bool fill(const std::string& name, void* out);
    std::unique_ptr<Impl> impl_;
};

// Bump when what any entry holds changes meaning (a column's layout, the checks a cached
// prepared form has passed): entries of another version read as absent.
inline constexpr uint32_t kCacheVersion = 2;   // 2: tagged with the user's secret key (2026-12-06)

// The entry `key` of the trace file `path` if it holds one for `fingerprint` (and this version),
// else nullptr. Never throws for the cache's sake: an unreadable entry is no entry.
std::unique_ptr<CacheReader> read_cache(const std::string& path, const std::string& key, const std::string& fingerprint);

// The same on an open connection (the Reader's, inside its read transaction); `own`: close it
// with the reader (or at once when there is no entry).
std::unique_ptr<CacheReader> read_cache(sqlite3* db, const std::string& key, const std::string& fingerprint, bool own);

// Writes (replaces) the entries, each (key, arrays), for `fingerprint` in one transaction when
// the file's change counter is still `change_counter` (what trace::change_counter said when the
// data were read). Returns whether they were written; a read-only file, a lock held by another
// process, a full disk or a changed file leave the file as it was and return false.
bool write_cache(const std::string& path, const std::string& fingerprint, int64_t change_counter,
                 const std::vector<std::pair<std::string, const CacheWriter*>>& entries);

// SQLite's file change counter (bytes 24..27 of the header): it changes with every committed
// write. -1 when the file cannot be read. Read through the connection's own file handle: opening
// and closing another descriptor of the file would drop every POSIX lock this process holds on it
// (SQLite's locks included), letting other processes write in the middle of a transaction.
int64_t change_counter(sqlite3* db);

// Whether the cache is used at all: MHC_TRACE_CACHE=0 (or off) turns it off, reads and writes;
// 1 or on, or unset, keeps it; any other value throws mhc::Error naming the variable.
bool cache_enabled();

}  // namespace mhc::trace
