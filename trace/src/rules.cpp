#include "rules.hpp"

#include "mhc/trace/limits.hpp"

namespace mhc::trace::rules {

namespace {

constexpr int64_t kAny = INT64_MAX;
constexpr int64_t kI32 = INT32_MAX;
using limits::kMaxAbsTime;
using limits::kMaxBytes;

Column id(const char* name) { return {name, INT64_MIN, kAny, false, "range", "an id"}; }
Column time(const char* name, bool nullable = false) {
    return {name, -kMaxAbsTime, kMaxAbsTime, nullable, "range", "a time in ns"};
}
Column device() { return {"device", limits::kMinDevice, limits::kMaxDevice, false, "range", "a device ordinal"}; }
Column any(const char* name) { return {name, INT64_MIN, kAny, false, "range", "an integer"}; }
Column stream() { return {"stream", -limits::kMaxAbsStream, limits::kMaxAbsStream, false, "range", "a stream"}; }
Column string_id(const char* name) { return {name, 0, kAny, false, "range", "a string id"}; }
Column code(const char* name, int64_t lo, int64_t hi, const char* what) {
    return {name, lo, hi, false, "invalid-code", what};
}
Column int32(const char* name, int64_t lo) { return {name, lo, kI32, false, "range", "a 32-bit count"}; }

std::string bound(int64_t v) {
    if (v == kMaxAbsTime) return "2^62";
    if (v == -kMaxAbsTime) return "-2^62";
    if (v == kMaxBytes) return "2^56";
    if (v == limits::kMaxAbsStream) return "2^60";
    if (v == -limits::kMaxAbsStream) return "-2^60";
    if (v == kAny) return "2^63-1";
    if (v == INT64_MIN) return "-2^63";
    return std::to_string(v);
}

}  // namespace

const Table& allocations() {
    static const Table t{"allocations",
                         {id("id"),
                          device(),
                          any("address"),
                          {"bytes", 1, kMaxBytes, false, "size", "a size in bytes"},
                          time("t_alloc"),
                          time("t_free", true),
                          stream(),
                          code("category", 0, 6, "a category code"),
                          string_id("label")},
                         "id",
                         true};
    return t;
}

const Table& allocations_with_requested() {
    static const Table t = [] {
        Table w = allocations();
        w.columns.push_back({"requested_bytes", 1, kMaxBytes, true, "size", "a size in bytes"});
        return w;
    }();
    return t;
}

const Table& kernels() {
    static const Table t{
        "kernels",
        {id("id"), device(), stream(), string_id("name"), time("t_start"), time("t_end"), int32("step", -1),
         int32("grid_x", 0), int32("grid_y", 0), int32("grid_z", 0), int32("block_x", 0), int32("block_y", 0),
         int32("block_z", 0), int32("shared_mem", 0), int32("registers", 0), any("correlation")},
        "id",
        true};
    return t;
}

const Table& accesses() {
    static const Table t{"accesses",
                         {id("kernel"), id("allocation"), code("mode", 1, 3, "an access mode code")},
                         "kernel, allocation", false};
    return t;
}

const Table& copies() {
    static const Table t{"copies",
                         {id("id"),
                          device(),
                          stream(),
                          code("kind", 0, 5, "a copy kind code"),
                          {"bytes", 0, kMaxBytes, false, "size", "a size in bytes"},
                          time("t_start"),
                          time("t_end")},
                         "id",
                         true};
    return t;
}

const Table& markers() {
    static const Table t{"markers",
                         {id("id"), string_id("name"), time("t_start"), time("t_end"),
                          code("kind", 0, 2, "a marker kind code"), int32("idx", -1)},
                         "id", true};
    return t;
}

const Table& segments() {
    static const Table t{"segments",
                         {id("id"),
                          device(),
                          stream(),
                          any("address"),
                          {"bytes", 1, kMaxBytes, false, "size", "a size in bytes"},
                          time("t_alloc"),
                          time("t_free", true),
                          code("expandable", 0, 1, "0 or 1"),
                          code("reconstructed", 0, 1, "0 or 1")},
                         "id",
                         true};
    return t;
}

const Table& modules() {
    static const Table t{"modules",
                         {{"id", 1, kAny, false, "range", "a module id"}, string_id("name"),
                          {"parent", 0, kAny, false, "range", "a module id or 0"}, string_id("type")},
                         "id", true};
    return t;
}

const Table& kernel_info() {
    static const Table t{"kernel_info",
                         {id("kernel"), {"module", 0, kAny, false, "range", "a module id or 0"},
                          code("phase", 0, 4, "a phase code"), {"flops", 0, kAny, false, "range", "a count"},
                          {"bytes", 0, kAny, false, "range", "a size in bytes"}},
                         "kernel", true};
    return t;
}

const Table& saved_tensors() {
    static const Table t{"saved_tensors", {id("allocation"), id("kernel")}, "allocation, kernel", false};
    return t;
}

const Table& saved_tensors_packs() {
    static const Table t{"saved_tensors",
                         {id("allocation"), id("kernel"), {"packs", 1, kI32, true, "range", "a count of packs"}},
                         "allocation, kernel", false};
    return t;
}

const std::vector<const Table*>& all() {
    static const std::vector<const Table*> v{&allocations(), &kernels(), &accesses(), &copies(), &markers()};
    return v;
}

std::string select_sql(const Table& t) {
    std::string s = "SELECT ";
    for (size_t i = 0; i < t.columns.size(); ++i) s += (i ? ", " : "") + std::string(t.columns[i].name);
    return s + " FROM " + t.name + " ORDER BY " + t.order_by;
}

std::string violations_sql(const Table& t) {
    std::string s = "SELECT ", ok;
    for (size_t i = 0; i < t.columns.size(); ++i) {
        const Column& c = t.columns[i];
        s += (i ? ", " : "") + std::string(c.name);
        std::string cond = "(typeof(" + std::string(c.name) + ")='integer' AND " + c.name + " BETWEEN " +
                           std::to_string(c.min) + " AND " + std::to_string(c.max) + ")";
        if (c.nullable) cond = "(" + std::string(c.name) + " IS NULL OR " + cond + ")";
        ok += (i ? " AND " : "") + cond;
    }
    return s + " FROM " + t.name + " WHERE NOT (" + ok + ")";
}

std::string value_problem(const Column& c, sqlite3_stmt* s, int col) {
    int type = sqlite3_column_type(s, col);
    if (type == SQLITE_INTEGER) {
        int64_t v = sqlite3_column_int64(s, col);
        if (v >= c.min && v <= c.max) return {};
        return std::string(c.name) + " is " + std::to_string(v) + ", outside [" + bound(c.min) + ", " +
               bound(c.max) + "] (" + c.what + ")";
    }
    if (type == SQLITE_NULL) return c.nullable ? std::string() : std::string(c.name) + " is NULL";
    std::string kind = type == SQLITE_TEXT ? "text" : type == SQLITE_FLOAT ? "a real number" : "a blob";
    std::string shown;
    if (type != SQLITE_BLOB) {
        const unsigned char* t = sqlite3_column_text(s, col);
        shown = t ? std::string(reinterpret_cast<const char*>(t)) : "";
        if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
        shown = " '" + shown + "'";
    }
    return std::string(c.name) + " holds " + kind + shown + ", not an integer";
}

}  // namespace mhc::trace::rules
