// Reader: opens a trace read-only and validates it before anything else reads it.
#include <sys/stat.h>

#include "mhc/trace/store.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

namespace {

// Returns an empty string when `db` holds a trace of this schema version.
std::string validate(sqlite3* db, const std::string& path) {
    // A read forces SQLite to parse the header and the schema: this is where a non-SQLite,
    // truncated or corrupt file shows itself.
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type='table'", -1, &s,
                                nullptr);
    if (rc != SQLITE_OK) {
        int code = sqlite3_errcode(db);
        std::string m = sqlite3_errmsg(db);
        sqlite3_finalize(s);
        if (code == SQLITE_NOTADB) return path + ": not an mhc trace (not an SQLite database)";
        if (code == SQLITE_CORRUPT)
            return path + ": the file is truncated or corrupt (" + m + ")";
        return path + ": cannot read: " + m;
    }
    std::vector<std::string> tables;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return path + ": the file is truncated or corrupt (" +
                                  std::string(sqlite3_errmsg(db)) + ")";
    if (tables.empty()) return path + ": not an mhc trace (an empty SQLite database)";
    bool has_meta = false;
    for (auto& t : tables) has_meta |= (t == "meta");
    if (!has_meta) return path + ": not an mhc trace (an SQLite database without a meta table)";

    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (version != kSchemaVersion)
        return path + ": schema version " + std::to_string(version) + " is not supported (this " +
               "mhc reads version " + std::to_string(kSchemaVersion) + ")";
    for (int i = 0; schema::kRequiredTables[i]; ++i) {
        bool found = false;
        for (auto& t : tables) found |= (t == schema::kRequiredTables[i]);
        if (!found)
            return path + ": missing table '" + std::string(schema::kRequiredTables[i]) +
                   "' (a damaged or foreign file)";
    }
    return {};
}

sqlite3* open_readonly(const std::string& path, std::string& problem) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        problem = path + ": no such file";
        return nullptr;
    }
    if (S_ISDIR(st.st_mode)) {
        problem = path + ": is a directory, not a trace";
        return nullptr;
    }
    if (st.st_size == 0) {
        problem = path + ": not an mhc trace (the file is empty)";
        return nullptr;
    }
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
        problem = path + ": cannot open: " + (db ? sqlite3_errmsg(db) : "error");
        sqlite3_close(db);
        return nullptr;
    }
    problem = validate(db, path);
    if (!problem.empty()) {
        sqlite3_close(db);
        return nullptr;
    }
    return db;
}

}  // namespace

std::string open_problem(const std::string& path) {
    std::string problem;
    sqlite3* db = open_readonly(path, problem);
    sqlite3_close(db);
    return problem;
}

Reader::Reader(std::string path) : path_(std::move(path)) {
    std::string problem;
    db_ = open_readonly(path_, problem);
    if (!db_) throw Error(problem);
    sql::exec(db_, path_, "PRAGMA cache_size=-65536; PRAGMA mmap_size=1073741824;");
}

Reader::~Reader() { sqlite3_close(db_); }

std::map<std::string, std::string> Reader::meta() const {
    std::map<std::string, std::string> out;
    sql::Stmt s(db_, path_, "SELECT key, value FROM meta");
    while (s.step()) out[s.text(0)] = s.text(1);
    return out;
}

TableCounts Reader::counts() const {
    auto count = [&](const char* q) {
        sql::Stmt s(db_, path_, q);
        return s.step() ? s.i64(0) : 0;
    };
    TableCounts c;
    c.allocations = count("SELECT count(*) FROM allocations");
    c.kernels = count("SELECT count(*) FROM kernels");
    c.accesses = count("SELECT count(*) FROM accesses");
    c.copies = count("SELECT count(*) FROM copies");
    c.markers = count("SELECT count(*) FROM markers");
    c.strings = count("SELECT count(*) FROM strings");
    return c;
}

std::vector<std::string> Reader::strings() const {
    std::vector<std::string> out(1);
    sql::Stmt s(db_, path_, "SELECT id, text FROM strings ORDER BY id");
    while (s.step()) {
        int64_t id = s.i64(0);
        if (id < 0 || id > (int64_t{1} << 31))
            throw Error(where_row(path_, "strings", id, "string id out of range"));
        if (static_cast<size_t>(id) >= out.size()) out.resize(static_cast<size_t>(id) + 1);
        out[static_cast<size_t>(id)] = s.text(1);
    }
    return out;
}

void Reader::for_each(const std::function<void(const Allocation&)>& fn) const {
    sql::Stmt s(db_, path_,
                "SELECT id, device, address, bytes, t_alloc, t_free, stream, category, label "
                "FROM allocations ORDER BY id");
    Allocation a;
    while (s.step()) {
        a.id = s.i64(0);
        a.device = static_cast<int32_t>(s.i64(1));
        a.address = s.i64(2);
        a.bytes = s.i64(3);
        a.t_alloc = s.i64(4);
        a.t_free = s.is_null(5) ? kNoTime : s.i64(5);
        a.stream = s.i64(6);
        int64_t c = s.i64(7);
        a.category = (c >= 0 && c < kCategoryCount) ? static_cast<Category>(c) : Category::Other;
        a.label = s.i64(8);
        fn(a);
    }
}

void Reader::for_each(const std::function<void(const Kernel&)>& fn) const {
    sql::Stmt s(db_, path_,
                "SELECT id, device, stream, name, t_start, t_end, step, grid_x, grid_y, grid_z, "
                "block_x, block_y, block_z, shared_mem, registers, correlation FROM kernels "
                "ORDER BY id");
    Kernel k;
    while (s.step()) {
        k.id = s.i64(0);
        k.device = static_cast<int32_t>(s.i64(1));
        k.stream = s.i64(2);
        k.name = s.i64(3);
        k.t_start = s.i64(4);
        k.t_end = s.i64(5);
        k.step = static_cast<int32_t>(s.i64(6));
        for (int i = 0; i < 3; ++i) k.grid[i] = static_cast<int32_t>(s.i64(7 + i));
        for (int i = 0; i < 3; ++i) k.block[i] = static_cast<int32_t>(s.i64(10 + i));
        k.shared_mem = static_cast<int32_t>(s.i64(13));
        k.registers = static_cast<int32_t>(s.i64(14));
        k.correlation = s.i64(15);
        fn(k);
    }
}

void Reader::for_each(const std::function<void(const Access&)>& fn) const {
    sql::Stmt s(db_, path_, "SELECT kernel, allocation, mode FROM accesses");
    Access a;
    while (s.step()) {
        a.kernel = s.i64(0);
        a.allocation = s.i64(1);
        int64_t m = s.i64(2);
        a.mode = (m >= 1 && m <= 3) ? static_cast<AccessMode>(m) : AccessMode::ReadWrite;
        fn(a);
    }
}

void Reader::for_each(const std::function<void(const Copy&)>& fn) const {
    sql::Stmt s(db_, path_,
                "SELECT id, device, stream, kind, bytes, t_start, t_end FROM copies ORDER BY id");
    Copy c;
    while (s.step()) {
        c.id = s.i64(0);
        c.device = static_cast<int32_t>(s.i64(1));
        c.stream = s.i64(2);
        int64_t k = s.i64(3);
        c.kind = (k >= 0 && k < kCopyKindCount) ? static_cast<CopyKind>(k) : CopyKind::D2D;
        c.bytes = s.i64(4);
        c.t_start = s.i64(5);
        c.t_end = s.i64(6);
        fn(c);
    }
}

void Reader::for_each(const std::function<void(const Marker&)>& fn) const {
    sql::Stmt s(db_, path_,
                "SELECT id, name, t_start, t_end, kind, idx FROM markers ORDER BY id");
    Marker m;
    while (s.step()) {
        m.id = s.i64(0);
        m.name = s.i64(1);
        m.t_start = s.i64(2);
        m.t_end = s.i64(3);
        int64_t k = s.i64(4);
        m.kind = (k >= 0 && k <= 2) ? static_cast<MarkerKind>(k) : MarkerKind::Range;
        m.index = static_cast<int32_t>(s.i64(5));
        fn(m);
    }
}

}  // namespace mhc::trace
