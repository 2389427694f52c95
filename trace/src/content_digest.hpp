#pragma once
// A trace's content digest, version 2 (docs/trace-format.md, "Content digest"): an order-free sum
// over every value of the content tables, so that a writer computes it as the rows go in (the
// Writer: no second scan) and a reader recomputes it with one unordered scan (`mhc check`).
// Private to trace/. mhc-torch's store computes the same digest (python/mhc_torch/digest.py).
//
// Every value ("cell") of a content table's row contributes a term: its table, the row's primary
// key, its column's position, its SQLite type and its value, mixed, in two independent 64-bit
// lanes; the digest is each lane's sum mod 2^64. A later change of one cell (Writer::
// set_free_time, a conflict's merge) subtracts the old cell's term and adds the new one.
#include <sqlite3.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace mhc::trace::digest {

// The content tables in digest order (v1's order; v2's table number is the index + 1), and the
// columns of each one's primary key (the rowid tables': id, their column 0).
struct ContentTable {
    const char* name;
    int keys;            // key columns: 1 or 2, the first ones of the table
    const char* order;   // v1: the primary key's order
};
inline constexpr ContentTable kContentTables[] = {
    {"strings", 1, "id"},         {"allocations", 1, "id"},
    {"kernels", 1, "id"},         {"accesses", 2, "kernel, allocation"},
    {"copies", 1, "id"},          {"markers", 1, "id"},
    {"segments", 1, "id"},        {"modules", 1, "id"},
    {"kernel_info", 1, "kernel"}, {"saved_tensors", 2, "allocation, kernel"}};
// Table numbers: indexes into kContentTables (ints, as the digest functions registered on the
// writing connection take them from SQL).
inline constexpr int kStrings = 0, kAllocations = 1, kKernels = 2, kAccesses = 3, kCopies = 4, kMarkers = 5,
                     kSegments = 6, kModules = 7, kKernelInfo = 8, kSavedTensors = 9;
inline constexpr int kTableCount = 10;

// MurmurHash3's 64-bit finalizer: a bijection whose every output bit depends on every input bit.
inline uint64_t fmix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

inline constexpr uint64_t kTableMul = 0x9E3779B97F4A7C15ull;
inline constexpr uint64_t kLaneB = 0xE7037ED1A0B428DBull;
inline constexpr uint64_t kColumnA = 0xD6E8FEB86659FD93ull;
inline constexpr uint64_t kColumnB = 0xA0761D6478BD642Full;
inline constexpr uint64_t kBytesSeed = 0x8EBC6AF09C88C6E3ull;

// What one value is in its term: an INTEGER its 64 bits, a REAL its IEEE bits, NULL 0, TEXT and
// BLOB a hash of their bytes (below).
inline uint64_t bytes_word(const unsigned char* p, size_t n) {
    uint64_t h = fmix(static_cast<uint64_t>(n) * kTableMul + kBytesSeed);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        const size_t take = n - i < 8 ? n - i : 8;
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(&w, p + i, take);
        } else {
            for (size_t j = 0; j < take; ++j) w |= static_cast<uint64_t>(p[i + j]) << (8 * j);
        }
        h = fmix(h ^ w);   // little-endian words, the last one padded with zero bytes
    }
    return h;
}

// A row's key in both lanes: its table and its primary key's one or two values (words as above).
struct RowKey {
    uint64_t a, b;
};
inline RowKey row_key(int table, uint64_t key1, uint64_t key2) {
    const uint64_t r = fmix(fmix(static_cast<uint64_t>(table + 1) * kTableMul + key1) + key2);
    return {r, fmix(r ^ kLaneB)};
}

// Each lane's sum of the terms: the digest.
struct Sum {
    uint64_t a = 0, b = 0;
    // The term of the value `word` of SQLite type `type` (SQLITE_INTEGER …) in column `column`
    // of the row `key`, added (sign +1) or taken away (-1).
    void cell(const RowKey& key, int column, int type, uint64_t word) {
        const RowKey lanes = term(key, column, type, word);
        a += lanes.a;
        b += lanes.b;
    }
    void uncell(const RowKey& key, int column, int type, uint64_t word) {
        const RowKey lanes = term(key, column, type, word);
        a -= lanes.a;
        b -= lanes.b;
    }
    // The term itself, in both lanes.
    static RowKey term(const RowKey& key, int column, int type, uint64_t word) {
        const uint64_t c = static_cast<uint64_t>(column) * 8 + static_cast<uint64_t>(type);
        return {fmix(word ^ (key.a + c * kColumnA)), fmix(word + (key.b ^ (c * kColumnB)))};
    }
    std::string hex() const;   // "v2:" and 32 hex digits
};

// The type and word of an SQLite value (a column of a statement, or a function's argument).
uint64_t value_word(sqlite3_value* v, int& type);
uint64_t column_word(sqlite3_stmt* st, int column, int& type);

// Registers on `db` the functions the Writer's statements keep `sum` right with where a row's
// value changes after it was counted (the functions are the connection's, never in the file):
//   mhc_digest_set(TABLE, COLUMN, KEY1, KEY2, OLD, NEW) -> NEW: the cell's term of OLD taken
//     away, NEW's added (an UPDATE: Writer::set_free_time);
//   mhc_digest_conflict(TABLE, COLUMN, OLD, NEW, excluded.c0, …) -> NEW: an upsert's conflict:
//     the excluded row's terms (counted when it was buffered) taken away, and the existing row's
//     column COLUMN changed from OLD to NEW.
void register_functions(sqlite3* db, const std::string& file, Sum* sum);

// Scans: "v1:" … of every content row in key order (traces written before v2: kept so that
// their digests still verify), "v2:" … of every content row in any order.
std::string scan_v1(sqlite3* db, const std::string& file, const std::string& schema = "main");
std::string scan_v2(sqlite3* db, const std::string& file, const std::string& schema = "main");

}   // namespace mhc::trace::digest
