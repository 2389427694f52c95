// Reader: opens a trace read-only and validates it before anything else reads it.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mhc/common/output_file.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/runs.hpp"
#include "rules.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"
#include "trace_tables.hpp"

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
        int code = sqlite3_extended_errcode(db);
        std::string m = sqlite3_errmsg(db);
        sqlite3_finalize(s);
        if (std::string side = sql::side_file_in_the_way(path); !side.empty()) return path + ": cannot read: " + side;
        if ((code & 0xff) == SQLITE_NOTADB) {
            const std::string gz = sql::gzip_note(path);
            return path + ": not an mhc trace" + (gz.empty() ? " (not an SQLite database)" : ": the file is " + gz);
        }
        if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) sql::fail(db, path, "cannot read");   // Busy
        if ((code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_IOERR) {
            try { sql::fail(db, path, "cannot read"); } catch (const Error& e) { return e.what(); }
        }
        if ((code & 0xff) == SQLITE_CORRUPT)
            return path + ": the file is truncated or corrupt (" + m + ")";
        return path + ": cannot read: " + m;
    }
    std::vector<std::string> tables;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        // A lock held past the busy timeout is not damage: say which it is.
        if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) sql::fail(db, path, "cannot read");   // Busy
        if ((rc & 0xff) == SQLITE_READONLY || (rc & 0xff) == SQLITE_IOERR) {
            try { sql::fail(db, path, "cannot read"); } catch (const Error& e) { return e.what(); }
        }
        return path + ": the file is truncated or corrupt (" + std::string(sqlite3_errmsg(db)) + ")";
    }
    if (tables.empty()) return path + ": not an mhc trace (an empty SQLite database)";
    bool has_meta = false;
    for (auto& t : tables) has_meta |= (t == "meta");
    if (!has_meta) return path + ": not an mhc trace (an SQLite database without a meta table)";
    // A runs database (simulate --runs-db) given as a trace was "schema version 0 is not
    // supported", as if a newer or older mhc had written it: say what it is and how to read it.
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM meta WHERE key IN ('format', 'trace')", -1, &s, nullptr) ==
        SQLITE_OK) {
        std::map<std::string, std::string> kind;
        while (sqlite3_step(s) == SQLITE_ROW) {
            const unsigned char* key = sqlite3_column_text(s, 0);
            const unsigned char* value = sqlite3_column_text(s, 1);
            if (key && value) kind[reinterpret_cast<const char*>(key)] = reinterpret_cast<const char*>(value);
        }
        sqlite3_finalize(s);
        if (kind["format"] == kRunsFormatName)
            return path + ": is a runs database (simulate --runs-db), not a trace: give its trace and --runs-db " +
                   path + (kind["trace"].empty() ? "" : " (it was made for " + kind["trace"] + ")");
    } else {
        sqlite3_finalize(s);
    }

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
    // meta must say what the file is: a foreign file with the same tables is not a trace.
    std::map<std::string, std::string> meta;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM meta WHERE key IN ('format','schema_version')",
                           -1, &s, nullptr) == SQLITE_OK) {
        while (sqlite3_step(s) == SQLITE_ROW) {
            const unsigned char* k = sqlite3_column_text(s, 0);
            const unsigned char* v = sqlite3_column_text(s, 1);
            if (k && v) meta[reinterpret_cast<const char*>(k)] = reinterpret_cast<const char*>(v);
        }
    }
    sqlite3_finalize(s);
    if (meta["format"] != kFormatName)
        return path + ": not an mhc trace (meta format is '" + meta["format"] + "', not '" + kFormatName + "')";
    if (meta["schema_version"] != std::to_string(kSchemaVersion))
        return path + ": meta schema_version is '" + meta["schema_version"] + "', not " +
               std::to_string(kSchemaVersion) + " as PRAGMA user_version says (a damaged or foreign file)";
    return {};
}

sqlite3* open_readonly(const std::string& path, std::string& problem, const std::string& name) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        problem = no_such_file(path);
        return nullptr;
    }
    if (S_ISDIR(st.st_mode)) {
        problem = path + ": is a directory, not a trace";
        return nullptr;
    }
    try {   // a pipe or a device: SQLite reads files (said as for outputs)
        refuse_special_file(path);
    } catch (const Error& e) {
        problem = e.what();
        return nullptr;
    }
    if (st.st_size == 0) {
        problem = path + ": not an mhc trace (the file is empty)";
        return nullptr;
    }
    if (::access(path.c_str(), R_OK) != 0) {   // SQLite says only "unable to open database file"
        problem = path + ": cannot read: " + std::strerror(errno);
        return nullptr;
    }
    sqlite3* db = sql::open_existing(path, true, problem);
    if (!db) return nullptr;
    try {
        problem = validate(db, name);
    } catch (...) {   // a lock held past the timeout: not a problem of the file
        sqlite3_close(db);
        throw;
    }
    if (!problem.empty()) {
        sqlite3_close(db);
        return nullptr;
    }
    // A reader never writes: its read-write handle only lets SQLite roll back a killed writer's journal.
    sqlite3_exec(db, "PRAGMA query_only=1", nullptr, nullptr, nullptr);
    return db;
}

// Steps through the rows of one trace table, applying rules.hpp to every value so that no
// command computes on a row `mhc check` would reject. Throws mhc::Error naming file, table, row.
class CheckedRows {
public:
    CheckedRows(const Reader& r, const rules::Table& t)
        : s_(r.handle(), r.path(), rules::select_sql(t).c_str()), t_(t), path_(r.path()) {}
    bool next() {
        if (!s_.step()) return false;
        ++row_;
        sqlite3_stmt* st = s_.get();
        for (size_t i = 0; i < t_.columns.size(); ++i) {
            std::string p = rules::value_problem(t_.columns[i], st, static_cast<int>(i));
            if (!p.empty()) fail(p + " [" + (p.find("outside") != std::string::npos ? t_.columns[i].rule : "type") + "]");
        }
        if (t_.unique_first) {
            int64_t id = s_.i64(0);
            if (row_ > 1 && id <= last_id_) fail("id " + std::to_string(id) + " appears twice [duplicate-id]");
            last_id_ = id;
        }
        return true;
    }
    int64_t operator[](int col) const { return s_.i64(col); }
    bool is_null(int col) const { return s_.is_null(col); }

private:
    [[noreturn]] void fail(const std::string& what) const {
        sqlite3_stmt* st = s_.get();
        long long row = sqlite3_column_type(st, 0) == SQLITE_INTEGER ? sqlite3_column_int64(st, 0) : row_;
        throw Error(where_row(path_, t_.name, row, what));
    }
    sql::Stmt s_;
    const rules::Table& t_;
    std::string path_;
    int64_t row_ = 0, last_id_ = 0;
};

}  // namespace

void set_lock_wait_note(bool on) { sql::set_lock_note(on); }

void check_environment() {
    sql::busy_timeout_ms();
    cache_enabled();
}

std::string open_problem(const std::string& path) {
    std::string problem;
    sqlite3* db = open_readonly(path, problem, path);
    sqlite3_close(db);
    return problem;
}

Reader::Reader(std::string path, std::string name) : path_(name.empty() ? path : std::move(name)) {
    std::string problem;
    db_ = open_readonly(path, problem, path_);
    if (!db_) throw Error(problem);
    sql::exec(db_, path_, "PRAGMA cache_size=-65536; PRAGMA mmap_size=1073741824;");
}

Reader::~Reader() { sqlite3_close(db_); }

void Reader::require_unchanged() const {
    if (std::string why = sql::changed_while_read(db_, path_); !why.empty()) throw Error(why);
}

std::map<std::string, std::string> meta_rows(sqlite3* db, const std::string& file, const std::string& schema) {
    std::map<std::string, std::string> out;
    sql::Stmt stmt(db, file, ("SELECT key, value FROM " + schema + ".meta").c_str());
    while (stmt.step()) out[stmt.text(0)] = stmt.text(1);
    return out;
}

TableCounts table_counts(sqlite3* db, const std::string& file, const std::string& schema) {
    auto count = [&](const char* table) {
        sql::Stmt stmt(db, file, ("SELECT count(*) FROM " + schema + "." + table).c_str());
        return stmt.step() ? stmt.i64(0) : 0;
    };
    TableCounts counts;
    counts.allocations = count("allocations");
    counts.kernels = count("kernels");
    counts.accesses = count("accesses");
    counts.copies = count("copies");
    counts.markers = count("markers");
    counts.strings = count("strings");
    return counts;
}

namespace {

// `sql` with every run of blanks one space: SQLite keeps a trigger's text as it was written.
std::string squeezed(const std::string& sql) {
    std::string out;
    for (char ch : sql) {
        const bool blank = ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
        if (!blank) out += ch;
        else if (!out.empty() && out.back() != ' ') out += ' ';
    }
    return out;
}

// Each digest trigger's name and text as trace/schema.sql makes them (made in memory, read back).
const std::map<std::string, std::string>& digest_triggers() {
    static const std::map<std::string, std::string> triggers = [] {
        std::map<std::string, std::string> out;
        sqlite3* db = nullptr;
        if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
            sqlite3_close(db);
            throw Error("cannot open an in-memory SQLite database", Error::Kind::Internal);
        }
        try {
            sql::exec(db, ":memory:", schema::kTraceTables);
            sql::exec(db, ":memory:", schema::kContentDigestTriggers);
            sql::Stmt made(db, ":memory:", "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'");
            while (made.step()) out[made.text(0)] = squeezed(made.text(1));
        } catch (...) {
            sqlite3_close(db);
            throw;
        }
        sqlite3_close(db);
        return out;
    }();
    return triggers;
}

}   // namespace

bool digest_guarded(sqlite3* db, const std::string& file, const std::string& schema) {
    const auto& want = digest_triggers();
    size_t intact = 0;
    sql::Stmt has(db, file, ("SELECT name, sql FROM " + schema + ".sqlite_master WHERE type = 'trigger'").c_str());
    while (has.step()) {
        auto it = want.find(has.text(0));
        if (it != want.end() && it->second == squeezed(has.text(1))) ++intact;
    }
    return intact == want.size();
}

std::map<std::string, std::string> identity_meta(sqlite3* db, const std::string& file, const std::string& schema) {
    auto meta = meta_rows(db, file, schema);
    auto digest = meta.find(kContentDigestKey);
    if (digest == meta.end() || digest->second.rfind(kEditedDigestPrefix, 0) == 0) return meta;
    if (!digest_guarded(db, file, schema)) digest->second = content_digest_of(db, file, digest->second, schema);
    return meta;
}

std::string fingerprint_of(sqlite3* db, const std::string& file, const std::string& schema) {
    return fingerprint(identity_meta(db, file, schema), table_counts(db, file, schema));
}

std::map<std::string, std::string> Reader::meta() const { return meta_rows(db_, path_, "main"); }

TableCounts Reader::counts() const { return table_counts(db_, path_, "main"); }

std::string Reader::fingerprint(const TableCounts& counts) const {
    return trace::fingerprint(identity_meta(db_, path_, "main"), counts);
}

std::vector<std::string> Reader::strings() const {
    // Ids index the vector, so they must be dense: an id past the row count is refused rather
    // than allowed to size an array (2^31 would be 64 GB of empty strings).
    int64_t rows = 0;
    {
        sql::Stmt n(db_, path_, "SELECT count(*) FROM strings");
        if (n.step()) rows = n.i64(0);
    }
    std::vector<std::string> out(1);
    out.reserve(static_cast<size_t>(rows) + 1);
    sql::Stmt s(db_, path_, "SELECT id, text FROM strings ORDER BY id");
    int64_t last = -1;
    while (s.step()) {
        if (sqlite3_column_type(s.get(), 0) != SQLITE_INTEGER)
            throw Error(where(path_, "strings: an id holds " + s.text(0) + ", not an integer [type]"));
        int64_t id = s.i64(0);
        if (id < 0 || id > rows)
            throw Error(where_row(path_, "strings", id, "id is outside [0, " + std::to_string(rows) +
                                                          "]: string ids run densely from 1 to the row count [range]"));
        if (id == last) throw Error(where_row(path_, "strings", id, "id appears twice [duplicate-id]"));
        if (sqlite3_column_type(s.get(), 1) != SQLITE_TEXT)
            throw Error(where_row(path_, "strings", id, "text is " +
                                  std::string(s.is_null(1) ? "NULL" : "not text") + " [type]"));
        last = id;
        if (static_cast<size_t>(id) >= out.size()) out.resize(static_cast<size_t>(id) + 1);
        out[static_cast<size_t>(id)] = s.text(1);
    }
    return out;
}

void Reader::for_each(const std::function<void(const Allocation&)>& fn) const {
    const bool requested = has_requested_bytes();
    CheckedRows s(*this, requested ? rules::allocations_with_requested() : rules::allocations());
    Allocation a;
    while (s.next()) {
        a.id = s[0];
        a.device = static_cast<int32_t>(s[1]);
        a.address = s[2];
        a.bytes = s[3];
        a.t_alloc = s[4];
        a.t_free = s.is_null(5) ? kNoTime : s[5];
        a.stream = s[6];
        a.category = static_cast<Category>(s[7]);
        a.label = s[8];
        a.requested_bytes = requested && !s.is_null(9) ? s[9] : kNoBytes;
        fn(a);
    }
}

void Reader::for_each(const std::function<void(const Kernel&)>& fn) const {
    CheckedRows s(*this, rules::kernels());
    Kernel k;
    while (s.next()) {
        k.id = s[0];
        k.device = static_cast<int32_t>(s[1]);
        k.stream = s[2];
        k.name = s[3];
        k.t_start = s[4];
        k.t_end = s[5];
        k.step = static_cast<int32_t>(s[6]);
        for (int i = 0; i < 3; ++i) k.grid[i] = static_cast<int32_t>(s[7 + i]);
        for (int i = 0; i < 3; ++i) k.block[i] = static_cast<int32_t>(s[10 + i]);
        k.shared_mem = static_cast<int32_t>(s[13]);
        k.registers = static_cast<int32_t>(s[14]);
        k.correlation = s[15];
        fn(k);
    }
}

void Reader::for_each(const std::function<void(const Access&)>& fn) const {
    CheckedRows s(*this, rules::accesses());
    Access a;
    while (s.next()) {
        a.kernel = s[0];
        a.allocation = s[1];
        a.mode = static_cast<AccessMode>(s[2]);
        fn(a);
    }
}

void Reader::for_each(const std::function<void(const Copy&)>& fn) const {
    CheckedRows s(*this, rules::copies());
    Copy c;
    while (s.next()) {
        c.id = s[0];
        c.device = static_cast<int32_t>(s[1]);
        c.stream = s[2];
        c.kind = static_cast<CopyKind>(s[3]);
        c.bytes = s[4];
        c.t_start = s[5];
        c.t_end = s[6];
        fn(c);
    }
}

void Reader::for_each(const std::function<void(const Marker&)>& fn) const {
    CheckedRows s(*this, rules::markers());
    Marker m;
    while (s.next()) {
        m.id = s[0];
        m.name = s[1];
        m.t_start = s[2];
        m.t_end = s[3];
        m.kind = static_cast<MarkerKind>(s[4]);
        m.index = static_cast<int32_t>(s[5]);
        fn(m);
    }
}

struct Scan::Impl {
    sql::Stmt s;
};

Scan::Scan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scan::~Scan() = default;
Scan::Scan(Scan&&) noexcept = default;
Scan& Scan::operator=(Scan&&) noexcept = default;
bool Scan::next() { return impl_->s.step(); }
int64_t Scan::operator[](int i) const { return impl_->s.i64(i); }
bool Scan::is_null(int i) const { return impl_->s.is_null(i); }

Scan Reader::scan(TraceTable table, std::initializer_list<std::string_view> columns) const {
    const rules::Table& t = table == TraceTable::Allocations ? rules::allocations()
                            : table == TraceTable::Kernels   ? rules::kernels()
                            : table == TraceTable::Accesses  ? rules::accesses()
                            : table == TraceTable::Copies    ? rules::copies()
                                                             : rules::markers();
    // Only names of the table's own columns reach the statement.
    std::string q = "SELECT ";
    for (std::string_view c : columns) {
        bool known = false;
        for (const rules::Column& col : t.columns) known |= c == col.name;
        if (!known) throw Error(path_ + ": table " + t.name + " has no column '" + std::string(c) + "'");
        if (q.size() > 7) q += ", ";
        q += c;
    }
    if (columns.size() == 0) throw Error(path_ + ": a scan of " + std::string(t.name) + " names no column");
    q += std::string(" FROM ") + t.name + " ORDER BY " + t.order_by;
    return Scan(std::make_unique<Scan::Impl>(Scan::Impl{sql::Stmt(db_, path_, q.c_str())}));
}

std::vector<TimedAccess> Reader::accesses_to(int64_t allocation_id) const {
    sql::Stmt s(db_, path_,
                "SELECT a.kernel, a.mode, k.device, k.stream, k.t_start, k.t_end FROM accesses a "
                "JOIN kernels k ON k.id = a.kernel WHERE a.allocation=? ORDER BY k.t_start, a.kernel");
    s.bind(1, allocation_id);
    std::vector<TimedAccess> out;
    while (s.step()) {
        int64_t m = s.i64(1);
        out.push_back({s.i64(0), s.i64(3), s.i64(4), s.i64(5), static_cast<int32_t>(s.i64(2)),
                       (m >= 1 && m <= 3) ? static_cast<AccessMode>(m) : AccessMode::ReadWrite});
    }
    return out;
}

bool Reader::accesses_indexed_by_allocation() const {
    // Any index whose first column is `allocation` (ours, accesses_by_allocation, or one a user made).
    sql::Stmt query(db_, path_,
                "SELECT count(*) FROM sqlite_master m, pragma_index_info(m.name) i "
                "WHERE m.type='index' AND m.tbl_name='accesses' AND i.seqno=0 AND i.name='allocation'");
    return query.step() && query.i64(0) > 0;
}

int64_t Reader::access_count(int64_t allocation_id) const {
    sql::Stmt s(db_, path_, "SELECT count(*) FROM accesses WHERE allocation=?");
    s.bind(1, allocation_id);
    return s.step() ? s.i64(0) : 0;
}

bool Reader::kernel(int64_t id, Kernel& k) const {
    sql::Stmt s(db_, path_,
                "SELECT device, stream, name, t_start, t_end, step, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
                "shared_mem, registers, correlation FROM kernels WHERE id=?");
    s.bind(1, id);
    if (!s.step()) return false;
    k.id = id;
    k.device = static_cast<int32_t>(s.i64(0));
    k.stream = s.i64(1);
    k.name = s.i64(2);
    k.t_start = s.i64(3);
    k.t_end = s.i64(4);
    k.step = static_cast<int32_t>(s.i64(5));
    for (int i = 0; i < 3; ++i) {
        k.grid[i] = static_cast<int32_t>(s.i64(6 + i));
        k.block[i] = static_cast<int32_t>(s.i64(9 + i));
    }
    k.shared_mem = static_cast<int32_t>(s.i64(12));
    k.registers = static_cast<int32_t>(s.i64(13));
    k.correlation = s.i64(14);
    return true;
}

bool Reader::allocation(int64_t id, Allocation& a) const {
    sql::Stmt s(db_, path_,
                "SELECT device, address, bytes, t_alloc, t_free, stream, category, label FROM allocations WHERE id=?");
    s.bind(1, id);
    if (!s.step()) return false;
    a.id = id;
    a.device = static_cast<int32_t>(s.i64(0));
    a.address = s.i64(1);
    a.bytes = s.i64(2);
    a.t_alloc = s.i64(3);
    a.t_free = s.is_null(4) ? kNoTime : s.i64(4);
    a.stream = s.i64(5);
    int64_t c = s.i64(6);
    a.category = (c >= 0 && c < kCategoryCount) ? static_cast<Category>(c) : Category::Other;
    a.label = s.i64(7);
    return true;
}

std::vector<Access> Reader::accesses_of_kernel(int64_t kernel_id) const {
    sql::Stmt s(db_, path_, "SELECT allocation, mode FROM accesses WHERE kernel=? ORDER BY allocation");
    s.bind(1, kernel_id);
    std::vector<Access> out;
    while (s.step()) {
        int64_t m = s.i64(1);
        out.push_back({kernel_id, s.i64(0), (m >= 1 && m <= 3) ? static_cast<AccessMode>(m) : AccessMode::ReadWrite});
    }
    return out;
}

void Reader::map_up_to(int64_t bytes) const {
    sql::exec(db_, path_, ("PRAGMA mmap_size=" + std::to_string(bytes)).c_str());
}

}  // namespace mhc::trace

namespace mhc::trace {

bool Reader::has_segments() const {
    sql::Stmt s(db_, path_, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='segments'");
    return s.step() && s.i64(0) > 0;
}

bool Reader::has_requested_bytes() const {
    sql::Stmt s(db_, path_, "SELECT count(*) FROM pragma_table_info('allocations') WHERE name='requested_bytes'");
    return s.step() && s.i64(0) > 0;
}

void Reader::for_each(const std::function<void(const Segment&)>& fn) const {
    if (!has_segments()) return;
    CheckedRows s(*this, rules::segments());
    Segment g;
    while (s.next()) {
        g.id = s[0];
        g.device = static_cast<int32_t>(s[1]);
        g.stream = s[2];
        g.address = s[3];
        g.bytes = s[4];
        g.t_alloc = s[5];
        g.t_free = s.is_null(6) ? kNoTime : s[6];
        g.expandable = s[7] != 0;
        g.reconstructed = s[8] != 0;
        fn(g);
    }
}

bool Reader::has_table(const std::string& name) const {
    sql::Stmt s(db_, path_, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?");
    s.bind(1, name);
    return s.step() && s.i64(0) > 0;
}

void Reader::for_each(const std::function<void(const Module&)>& fn) const {
    if (!has_table("modules")) return;
    CheckedRows s(*this, rules::modules());
    Module m;
    while (s.next()) {
        m.id = s[0];
        m.name = s[1];
        m.parent = s[2];
        m.type = s[3];
        fn(m);
    }
}

void Reader::for_each(const std::function<void(const KernelInfo&)>& fn) const {
    if (!has_table("kernel_info")) return;
    CheckedRows s(*this, rules::kernel_info());
    KernelInfo k;
    while (s.next()) {
        k.kernel = s[0];
        k.module = s[1];
        k.phase = static_cast<Phase>(s[2]);
        k.flops = s[3];
        k.bytes = s[4];
        fn(k);
    }
}

void Reader::for_each(const std::function<void(const SavedTensor&)>& fn) const {
    if (!has_table("saved_tensors")) return;
    // `packs` came after the table: files without it read one pack per row
    sql::Stmt c(db_, path_, "SELECT count(*) FROM pragma_table_info('saved_tensors') WHERE name='packs'");
    const bool packs = c.step() && c.i64(0) > 0;
    CheckedRows s(*this, packs ? rules::saved_tensors_packs() : rules::saved_tensors());
    SavedTensor t;
    while (s.next()) {
        t.allocation = s[0];
        t.kernel = s[1];
        t.packs = packs && !s.is_null(2) ? static_cast<int32_t>(s[2]) : 1;
        fn(t);
    }
}

}  // namespace mhc::trace
