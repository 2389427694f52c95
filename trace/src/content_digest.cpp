// The content digest (content_digest.hpp): v2's terms, the Writer's correcting functions, and the
// scans that recompute v1 and v2 from a file's rows.
#include "content_digest.hpp"

#include <cstdio>
#include <cstring>

#include "run_files.hpp"
#include "sqlite_util.hpp"
#include "trace_tables.hpp"

namespace mhc::trace::digest {

std::string Sum::hex() const {
    char out[40];
    std::snprintf(out, sizeof out, "v2:%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return out;
}

namespace {

uint64_t real_word(double v) {
    uint64_t w;
    std::memcpy(&w, &v, 8);
    return w;
}

}   // namespace

uint64_t value_word(sqlite3_value* v, int& type) {
    type = sqlite3_value_type(v);
    switch (type) {
        case SQLITE_INTEGER: return static_cast<uint64_t>(sqlite3_value_int64(v));
        case SQLITE_FLOAT: return real_word(sqlite3_value_double(v));
        case SQLITE_NULL: return 0;
        default: {
            const auto* p = static_cast<const unsigned char*>(type == SQLITE_TEXT ? sqlite3_value_text(v)
                                                                                  : sqlite3_value_blob(v));
            return bytes_word(p, static_cast<size_t>(sqlite3_value_bytes(v)));
        }
    }
}

uint64_t column_word(sqlite3_stmt* st, int column, int& type) {
    type = sqlite3_column_type(st, column);
    switch (type) {
        case SQLITE_INTEGER: return static_cast<uint64_t>(sqlite3_column_int64(st, column));
        case SQLITE_FLOAT: return real_word(sqlite3_column_double(st, column));
        case SQLITE_NULL: return 0;
        default: {
            const auto* p = static_cast<const unsigned char*>(type == SQLITE_TEXT ? sqlite3_column_text(st, column)
                                                                                  : sqlite3_column_blob(st, column));
            return bytes_word(p, static_cast<size_t>(sqlite3_column_bytes(st, column)));
        }
    }
}

namespace {

int table_arg(sqlite3_context* ctx, sqlite3_value* v) {
    const int64_t t = sqlite3_value_int64(v);
    if (t < 0 || t >= kTableCount) {
        sqlite3_result_error(ctx, "mhc_digest: no such content table", -1);
        return -1;
    }
    return static_cast<int>(t);
}

// mhc_digest_set(TABLE, COLUMN, KEY1, KEY2, OLD, NEW) -> NEW
void digest_set(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
    auto* sum = static_cast<Sum*>(sqlite3_user_data(ctx));
    const int table = table_arg(ctx, argv[0]);
    if (argc != 6 || table < 0) return;
    const int column = sqlite3_value_int(argv[1]);
    int type;
    const uint64_t k1 = value_word(argv[2], type);
    const uint64_t k2 = kContentTables[table].keys == 2 ? value_word(argv[3], type) : 0;
    const RowKey key = row_key(table, k1, k2);
    const uint64_t old_word = value_word(argv[4], type);
    sum->uncell(key, column, type, old_word);
    const uint64_t new_word = value_word(argv[5], type);
    sum->cell(key, column, type, new_word);
    sqlite3_result_value(ctx, argv[5]);
}

// mhc_digest_conflict(TABLE, COLUMN, OLD, NEW, excluded.c0, …) -> NEW
void digest_conflict(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
    auto* sum = static_cast<Sum*>(sqlite3_user_data(ctx));
    const int table = table_arg(ctx, argv[0]);
    if (argc < 5 || table < 0) return;
    const int column = sqlite3_value_int(argv[1]);
    sqlite3_value** row = argv + 4;
    const int columns = argc - 4;
    int type;
    const uint64_t k1 = value_word(row[0], type);
    const uint64_t k2 = kContentTables[table].keys == 2 && columns > 1 ? value_word(row[1], type) : 0;
    const RowKey key = row_key(table, k1, k2);
    for (int c = 0; c < columns; ++c) {
        const uint64_t w = value_word(row[c], type);
        sum->uncell(key, c, type, w);
    }
    uint64_t w = value_word(argv[2], type);
    sum->uncell(key, column, type, w);
    w = value_word(argv[3], type);
    sum->cell(key, column, type, w);
    sqlite3_result_value(ctx, argv[3]);
}

// v1 (2026-12-05, before v2): two 64-bit multiply-xorshift lanes over every value in key order.
struct Ordered {
    uint64_t a = 0x243F6A8885A308D3ull, b = 0x13198A2E03707344ull;
    void word(uint64_t w) {
        a = (a ^ w) * 0x9E3779B97F4A7C15ull;
        a ^= a >> 29;
        b = (b + w) * 0xC2B2AE3D27D4EB4Full;
        b ^= b >> 31;
    }
    void bytes(const unsigned char* p, size_t n) {
        word(n);
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            std::memcpy(&w, p + i, 8);
            word(w);
        }
        uint64_t w = 0;
        std::memcpy(&w, p + i, n - i);
        word(w);
    }
};

}   // namespace

void register_functions(sqlite3* db, const std::string& file, Sum* sum) {
    // DIRECTONLY: a trigger or view in a file can never call them.
    const int flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
    if (sqlite3_create_function_v2(db, "mhc_digest_set", 6, flags, sum, digest_set, nullptr, nullptr, nullptr) !=
            SQLITE_OK ||
        sqlite3_create_function_v2(db, "mhc_digest_conflict", -1, flags, sum, digest_conflict, nullptr, nullptr,
                                   nullptr) != SQLITE_OK)
        sql::fail(db, file, "cannot register the content digest's functions");
}

std::string scan_v1(sqlite3* db, const std::string& file, const std::string& schema) {
    Ordered d;
    for (const ContentTable& table : kContentTables) {
        if (!runfiles::has_table(db, file, table.name, schema)) continue;
        d.bytes(reinterpret_cast<const unsigned char*>(table.name), std::strlen(table.name));
        sql::Stmt q(db, file, ("SELECT * FROM " + schema + "." + table.name + " ORDER BY " + table.order).c_str());
        sqlite3_stmt* st = q.get();
        const int columns = sqlite3_column_count(st);
        while (q.step()) {
            for (int c = 0; c < columns; ++c) {
                const int type = sqlite3_column_type(st, c);
                d.word(static_cast<uint64_t>(type));
                if (type == SQLITE_INTEGER) {
                    d.word(static_cast<uint64_t>(sqlite3_column_int64(st, c)));
                } else if (type == SQLITE_FLOAT) {
                    d.word(real_word(sqlite3_column_double(st, c)));
                } else if (type != SQLITE_NULL) {
                    const auto* p = static_cast<const unsigned char*>(type == SQLITE_TEXT ? sqlite3_column_text(st, c)
                                                                                          : sqlite3_column_blob(st, c));
                    d.bytes(p, static_cast<size_t>(sqlite3_column_bytes(st, c)));
                }
            }
        }
    }
    char hex[40];
    std::snprintf(hex, sizeof hex, "v1:%016llx%016llx", static_cast<unsigned long long>(d.a),
                  static_cast<unsigned long long>(d.b));
    return hex;
}

std::string scan_v2(sqlite3* db, const std::string& file, const std::string& schema) {
    Sum sum;
    for (int t = 0; t < kTableCount; ++t) {
        const ContentTable& table = kContentTables[t];
        if (!runfiles::has_table(db, file, table.name, schema)) continue;
        // In the table's own order (no sort): the sum does not depend on it.
        sql::Stmt q(db, file, ("SELECT * FROM " + schema + "." + table.name).c_str());
        sqlite3_stmt* st = q.get();
        const int columns = sqlite3_column_count(st);
        int type;
        while (q.step()) {
            const uint64_t k1 = column_word(st, 0, type);
            const uint64_t k2 = table.keys == 2 && columns > 1 ? column_word(st, 1, type) : 0;
            const RowKey key = row_key(t, k1, k2);
            for (int c = 0; c < columns; ++c) {
                const uint64_t w = column_word(st, c, type);
                sum.cell(key, c, type, w);
            }
        }
    }
    return sum.hex();
}

}   // namespace mhc::trace::digest

namespace mhc::trace {

std::string content_digest_of(sqlite3* db, const std::string& file, const std::string& stored,
                              const std::string& schema) {
    return stored.rfind("v1:", 0) == 0 ? digest::scan_v1(db, file, schema) : digest::scan_v2(db, file, schema);
}

}   // namespace mhc::trace
