// BulkInsert (bulk_insert.hpp): the buffered rows as a virtual table that one INSERT … SELECT reads.
#include "bulk_insert.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>

#include "content_digest.hpp"
#include "mhc/common/error.hpp"

namespace mhc::trace::sql {

namespace {

// SQLite's virtual table interface (https://www.sqlite.org/vtab.html): a table, a cursor over
// the rows of the BulkInsert given as the module's client data.
struct Table {
    sqlite3_vtab base;
    const BulkInsert* rows;
};
struct Cursor {
    sqlite3_vtab_cursor base;
    const int64_t* at;    // the current row's values
    const int64_t* end;
    size_t columns;
    bool any_nullable;
};

int connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
    const auto* rows = static_cast<const BulkInsert*>(aux);
    std::string decl = "CREATE TABLE x(";
    for (int c = 0; c < rows->columns(); ++c) decl += (c ? ",c" : "c") + std::to_string(c);
    decl += ")";
    if (int rc = sqlite3_declare_vtab(db, decl.c_str()); rc != SQLITE_OK) return rc;
    auto* table = static_cast<Table*>(sqlite3_malloc(sizeof(Table)));
    if (!table) return SQLITE_NOMEM;
    std::memset(table, 0, sizeof *table);
    table->rows = rows;
    *out = &table->base;
    return SQLITE_OK;
}
int disconnect(sqlite3_vtab* table) {
    sqlite3_free(table);
    return SQLITE_OK;
}
int best_index(sqlite3_vtab*, sqlite3_index_info* info) {
    info->estimatedCost = 1e6;   // one full scan: there is nothing else to do
    return SQLITE_OK;
}
int open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
    auto* cursor = static_cast<Cursor*>(sqlite3_malloc(sizeof(Cursor)));
    if (!cursor) return SQLITE_NOMEM;
    std::memset(cursor, 0, sizeof *cursor);
    *out = &cursor->base;
    return SQLITE_OK;
}
int close(sqlite3_vtab_cursor* cursor) {
    sqlite3_free(cursor);
    return SQLITE_OK;
}
const BulkInsert& rows_of(sqlite3_vtab_cursor* cursor) { return *reinterpret_cast<Table*>(cursor->pVtab)->rows; }
int filter(sqlite3_vtab_cursor* cursor, int, const char*, int, sqlite3_value**) {
    auto* cur = reinterpret_cast<Cursor*>(cursor);
    const BulkInsert& rows = rows_of(cursor);
    cur->at = rows.values().data();
    cur->end = cur->at + rows.values().size();
    cur->columns = static_cast<size_t>(rows.columns());
    cur->any_nullable = rows.any_nullable();
    return SQLITE_OK;
}
int next(sqlite3_vtab_cursor* cursor) {
    auto* cur = reinterpret_cast<Cursor*>(cursor);
    cur->at += cur->columns;
    return SQLITE_OK;
}
int eof(sqlite3_vtab_cursor* cursor) {
    auto* cur = reinterpret_cast<Cursor*>(cursor);
    return cur->at >= cur->end;
}
// Called for every value of every row: the row's pointer is kept in the cursor, and the NULL
// test is made only for tables that have a nullable column.
int column(sqlite3_vtab_cursor* cursor, sqlite3_context* ctx, int col) {
    const auto* cur = reinterpret_cast<const Cursor*>(cursor);
    const int64_t value = cur->at[col];
    if (cur->any_nullable && rows_of(cursor).is_null(col, value)) sqlite3_result_null(ctx);
    else sqlite3_result_int64(ctx, value);
    return SQLITE_OK;
}
int rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* out) {
    const auto* cur = reinterpret_cast<const Cursor*>(cursor);
    *out = static_cast<sqlite3_int64>((cur->at - rows_of(cursor).values().data()) / static_cast<std::ptrdiff_t>(cur->columns));
    return SQLITE_OK;
}

// xCreate null: eponymous-only (usable by name, never created in a schema).
const sqlite3_module kModule = {
    0, nullptr, connect, best_index, disconnect, nullptr, open, close, filter, next, eof, column, rowid,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

std::string unique_module_name() {
    static std::atomic<uint64_t> counter{0};
    return "mhc_bulk_rows_" + std::to_string(counter.fetch_add(1));
}

}  // namespace

BulkInsert::BulkInsert(sqlite3* db, const std::string& file, const std::string& into, int columns,
                       const std::string& tail, const std::vector<std::pair<int, int64_t>>& nullable,
                       const std::vector<int64_t>& leading)
    : db_(db), file_(file), module_(unique_module_name()), columns_(columns), any_nullable_(!nullable.empty()),
      nullable_(static_cast<size_t>(columns), 0), null_value_(static_cast<size_t>(columns), 0) {
    for (auto [column, null_value] : nullable) {
        nullable_.at(static_cast<size_t>(column)) = 1;
        null_value_.at(static_cast<size_t>(column)) = null_value;
    }
    if (sqlite3_create_module_v2(db, module_.c_str(), &kModule, this, nullptr) != SQLITE_OK)
        fail(db, file, "cannot register the bulk insert module");
    std::string select = " SELECT ";
    for (int64_t value : leading) select += std::to_string(value) + ",";
    for (int c = 0; c < columns; ++c) select += (c ? ",c" : "c") + std::to_string(c);
    // "WHERE true": with an ON CONFLICT clause SQLite needs it to tell the upsert from a join.
    insert_ = Stmt(db, file, (into + select + " FROM " + module_ + " WHERE true " + tail).c_str());
}

BulkInsert::~BulkInsert() {
    insert_ = Stmt();
    sqlite3_create_module_v2(db_, module_.c_str(), nullptr, nullptr, nullptr);   // unregisters it
}

void BulkInsert::count_rows() {
    const size_t n = static_cast<size_t>(columns_);
    const bool two_keys = digest::kContentTables[table_].keys == 2;
    digest::Sum& sum = *sum_;
    for (const int64_t *row = values_.data(), *end = row + values_.size(); row < end; row += n) {
        const digest::RowKey key = digest::row_key(table_, static_cast<uint64_t>(row[0]),
                                                   two_keys ? static_cast<uint64_t>(row[1]) : 0);
        for (int c = 0; c < columns_; ++c) {
            if (any_nullable_ && is_null(c, row[c])) sum.cell(key, c, SQLITE_NULL, 0);
            else sum.cell(key, c, SQLITE_INTEGER, static_cast<uint64_t>(row[c]));
        }
    }
}

void BulkInsert::flush() {
    if (values_.empty()) return;
    if (sum_) count_rows();   // a conflict's merge corrects the sum inside the insert (mhc_digest_conflict)
    try {
        insert_.run();
    } catch (...) {
        values_.clear();
        throw;
    }
    values_.clear();
}

}  // namespace mhc::trace::sql
