#pragma once
// The value rules of the trace tables, stated once (docs/trace-format.md, "Value ranges"): the
// Reader applies them to every row it decodes (so every command that reads a trace refuses what
// `mhc check` refuses), and check_file lists every row that breaks them.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mhc::trace::rules {

struct Column {
    const char* name;
    int64_t min, max;
    bool nullable = false;    // NULL allowed (t_free: alive at the end)
    const char* rule = "range";   // rule name for values out of [min, max]: range | invalid-code
    const char* what = "value";   // what the value is, for messages: "a time in ns", ...
};

struct Table {
    const char* name;
    std::vector<Column> columns;   // in the order the Reader selects them; the first names the row
    const char* order_by;          // the Reader's ORDER BY
    bool unique_first;             // the first column is a unique id (the row names it)
};

const Table& allocations();
// allocations with requested_bytes (nullable, 1 ... 2^56): a trace written before the column
// existed lacks it (Reader::has_requested_bytes).
const Table& allocations_with_requested();
const Table& kernels();
const Table& accesses();
const Table& copies();
const Table& markers();
// Not in all(): traces written before the segments table existed lack it (Reader::has_segments).
const Table& segments();
// A model capture's tables (docs/trace-format.md "modules, kernel_info, saved_tensors"): not in
// all() either, absent from traces written before them (Reader::has_table).
const Table& modules();
const Table& kernel_info();
const Table& saved_tensors();
const Table& saved_tensors_packs();   // with the packs column (NULL: 1), when the file has it
const std::vector<const Table*>& all();

// "SELECT c1, c2, ... FROM t ORDER BY ..." for the Reader.
std::string select_sql(const Table& t);
// Rows breaking any column rule: "SELECT c1, ... FROM t WHERE NOT (...)".
std::string violations_sql(const Table& t);

// Empty when column `col` of the current row of `s` satisfies `c`; else a sentence such as
// "t_alloc is NULL" or "bytes is 9223372036854775807, outside [1, 2^56] (a size in bytes)".
std::string value_problem(const Column& c, sqlite3_stmt* s, int col);

}  // namespace mhc::trace::rules
