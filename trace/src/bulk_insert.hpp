#pragma once
// Many rows into one table with one statement: the rows wait in memory and one
// `INSERT INTO table SELECT … FROM <batch>` moves them, where <batch> is an eponymous-only virtual
// table over the buffered rows, registered on the writing connection alone. It never enters a
// file's schema: a file written this way is the same plain SQLite file. Stepping one prepared
// INSERT per row costs SQLite about 0.85 µs a row (the statement's start and end on every row);
// one INSERT … SELECT over the batch costs 0.3 µs (docs/results.md, "Trace store"). Private to trace/.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sqlite_util.hpp"

namespace mhc::trace::digest {
struct Sum;
}

namespace mhc::trace::sql {

class BulkInsert {
public:
    // `into`: "INSERT [OR …] INTO schema.table", `columns`: the column count buffered per row;
    // `tail`: what follows the SELECT (an ON CONFLICT clause, or empty). A column listed in
    // `nullable` is written as NULL where its value equals `null_value` (the model's sentinel:
    // kNoTime, kNoBytes). `leading`: values of the table's first columns, the same in every row
    // (a run's id), written into the statement instead of buffered: a column fewer to hand over
    // on every row.
    BulkInsert(sqlite3* db, const std::string& file, const std::string& into, int columns, const std::string& tail = "",
               const std::vector<std::pair<int, int64_t>>& nullable = {}, const std::vector<int64_t>& leading = {});
    ~BulkInsert();
    BulkInsert(const BulkInsert&) = delete;
    BulkInsert& operator=(const BulkInsert&) = delete;

    // A new row's `columns` values, to fill in before the next call. A full buffer is inserted
    // first, so that a large table waits in memory a chunk at a time.
    int64_t* add() {
        if (values_.size() == kChunkRows * static_cast<size_t>(columns_)) flush();
        values_.resize(values_.size() + static_cast<size_t>(columns_));
        return values_.data() + values_.size() - columns_;
    }
    size_t rows() const { return values_.size() / static_cast<size_t>(columns_); }
    // Inserts the buffered rows (throws mhc::Error naming the file, as Stmt::run does) and empties the buffer.
    void flush();
    // Adds every row, as it is inserted, to the content digest `sum` as a row of content table
    // `table` (content_digest.hpp): its values as INTEGER, a nullable column's null value as NULL.
    void count_into(digest::Sum* sum, int table) {
        sum_ = sum;
        table_ = table;
    }

    // For the virtual table: the rows being inserted.
    int columns() const { return columns_; }
    const std::vector<int64_t>& values() const { return values_; }
    bool any_nullable() const { return any_nullable_; }
    bool is_null(int column, int64_t value) const {
        return nullable_[static_cast<size_t>(column)] && value == null_value_[static_cast<size_t>(column)];
    }

private:
    // Rows per INSERT … SELECT: the statement's fixed cost is then nothing a row, and the buffer
    // stays under a megabyte for the widest table.
    static constexpr size_t kChunkRows = 8192;
    sqlite3* db_;
    std::string file_, module_;
    int columns_;
    bool any_nullable_ = false;
    std::vector<char> nullable_;        // per column: written as NULL where it equals null_value_
    std::vector<int64_t> null_value_;
    std::vector<int64_t> values_;
    Stmt insert_;
    digest::Sum* sum_ = nullptr;
    int table_ = 0;
    void count_rows();
};

}  // namespace mhc::trace::sql
