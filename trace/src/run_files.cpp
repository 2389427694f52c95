// Where runs are written and read (run_files.hpp).
#include "run_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <exception>
#include <map>

#include "mhc/common/error.hpp"
#include "mhc/common/hash.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"
#include "trace_tables.hpp"

namespace mhc::trace {

std::string fingerprint(const std::map<std::string, std::string>& meta, const TableCounts& n) {
    Fnv1a hash;
    for (auto& [key, value] : meta) hash.add_field(key).add_field(value);
    for (int64_t rows : {n.allocations, n.kernels, n.accesses, n.copies, n.markers, n.strings})
        hash.add_field(std::to_string(rows));
    return hash.hex();
}

int64_t stored_size(const Run& run) {
    // Bytes per row, index entries included: measured with SQLite's dbstat on 2,000 stored
    // sweep runs (docs/trace-format.md, "How big runs are").
    constexpr int64_t kEvent = 28, kSample = 42, kKernel = 22, kConfig = 31, kMetric = 30, kRun = 115;
    return kRun + kEvent * int64_t(run.events.size()) + kSample * int64_t(run.memory.size()) +
           kKernel * int64_t(run.kernel_times.size()) + kConfig * int64_t(run.config.size()) +
           kMetric * int64_t(run.metrics.size());
}

}  // namespace mhc::trace

namespace mhc::trace::runfiles {

bool has_table(sqlite3* db, const std::string& file, const char* name, const std::string& schema) {
    sql::Stmt query(db, file, ("SELECT 1 FROM " + schema + ".sqlite_master WHERE type='table' AND name=?").c_str());
    query.bind(1, std::string(name));
    return query.step();
}

int64_t max_event_rowid(sqlite3* db, const std::string& path, const std::string& schema) {
    sql::Stmt query(db, path, ("SELECT coalesce(max(rowid), 0) FROM " + schema + ".run_events").c_str());
    query.step();
    return query.i64(0);
}

namespace {

// Each run table's columns as trace/schema.sql declares them (the schema made in memory, read back).
const std::map<std::string, std::vector<std::string>>& declared_run_columns() {
    static const std::map<std::string, std::vector<std::string>> columns = [] {
        std::map<std::string, std::vector<std::string>> out;
        sqlite3* db = nullptr;
        if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
            sqlite3_close(db);
            throw Error("cannot open an in-memory SQLite database", Error::Kind::Internal);
        }
        try {
            for (const char* part : {schema::kRunTables, schema::kRunEventRows, schema::kRunsDbTables})
                sql::exec(db, ":memory:", part);
            sql::Stmt cols(db, ":memory:",
                           "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c "
                           "WHERE m.type = 'table' ORDER BY m.name, c.cid");
            while (cols.step()) out[cols.text(0)].push_back(cols.text(1));
        } catch (...) {
            sqlite3_close(db);
            throw;
        }
        sqlite3_close(db);
        return out;
    }();
    return columns;
}

// Columns the store adds to a file made before them, in its storing transaction: their absence
// is no problem of the file.
bool added_by_store(const std::string& table, const std::string& column) {
    return table == "runs" && column == "trace_fingerprint";
}

}   // namespace

bool has_column(sqlite3* db, const std::string& file, const char* table, const char* column,
                const std::string& schema) {
    sql::Stmt query(db, file, "SELECT 1 FROM pragma_table_info(?, ?) WHERE name = ?");
    query.bind(1, std::string(table));
    query.bind(2, schema);
    query.bind(3, std::string(column));
    return query.step();
}

std::vector<std::string> run_table_problems(sqlite3* db, const std::string& file, const std::string& schema,
                                            bool runs_db) {
    std::vector<std::string> problems;
    for (const auto& [table, declared] : declared_run_columns()) {
        const bool runs_db_only = table == "traces" ||
                                  table == "run_trace";   // a trace's own table of that name is not written
        if ((runs_db_only && !runs_db) || !has_table(db, file, table.c_str(), schema)) continue;
        sql::Stmt info(db, file, "SELECT name, \"notnull\", dflt_value IS NOT NULL, pk FROM pragma_table_info(?, ?)");
        info.bind(1, table);
        info.bind(2, schema);
        std::vector<std::string> has;
        while (info.step()) {
            has.push_back(info.text(0));
            const bool needs_value = info.i64(1) != 0 && info.i64(2) == 0 && info.i64(3) == 0;
            if (needs_value && std::find(declared.begin(), declared.end(), has.back()) == declared.end())
                problems.push_back("table " + table + " has a column " + has.back() +
                                   " of its own that is NOT NULL with no default: a run stored gives it no value");
        }
        for (const std::string& column : declared)
            if (std::find(has.begin(), has.end(), column) == has.end() && !added_by_store(table, column))
                problems.push_back("table " + table + " has no column " + column +
                                   ", which runs are stored in (a damaged or foreign file)");
    }
    return problems;
}

namespace {

namespace fs = std::filesystem;

// The fingerprint of the trace whose tables `schema` names on `db`: what Reader-based code
// computes from meta() and counts(), here inside the storing transaction.
std::string fingerprint_in(sqlite3* db, const std::string& file, const std::string& schema) {
    return fingerprint_of(db, file, schema);
}

std::string meta_value(sqlite3* db, const std::string& file, const char* key) {
    sql::Stmt s(db, file, "SELECT value FROM meta WHERE key=?");
    s.bind(1, std::string(key));
    return s.step() ? s.text(0) : std::string();
}

std::string absolute(const std::string& path) {
    std::error_code ec;
    auto abs = fs::absolute(path, ec);
    return ec ? path : abs.lexically_normal().string();
}

// SQLite names the rollback journal FILE-journal, beside FILE: a name that leaves no room for
// the suffix can be read but never written.
void require_journal_name(const std::string& file) {
    fs::path p(file);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    long max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    if (max <= 0) max = 255;
    const std::string name = p.filename().string() + "-journal";
    if (static_cast<long>(name.size()) > max)
        throw Error(file + ": runs cannot be stored in it: its journal's name (" + std::to_string(name.size()) +
                    " bytes with '-journal') passes the " + std::to_string(max) +
                    "-byte limit of a file name here; rename it, or store the runs with --runs-db FILE");
}

// A runs database must be one (format mhc-runs); returns the fingerprints of the traces it
// belongs to, by their row in `traces` (a database made before that table: its meta's one).
std::map<std::string, int64_t> runs_db_traces(sqlite3* db, const std::string& file) {
    if (meta_value(db, file, "format") != kRunsFormatName)
        throw Error(file + ": not an mhc runs database (meta format is not '" + kRunsFormatName + "')");
    if (meta_value(db, file, "schema_version") != std::to_string(kSchemaVersion))
        throw Error(file + ": runs database schema version " + meta_value(db, file, "schema_version") +
                    " is not supported");
    // Its version is in meta; PRAGMA user_version is left 0 (a trace's holds its version there).
    // Another value is a file this mhc did not write, a newer one's or another program's: it was
    // read, and stored into, as this version's.
    sql::Stmt version(db, file, "PRAGMA user_version");
    if (version.step() && version.i64(0) != 0)
        throw Error(file + ": runs database with PRAGMA user_version " + std::to_string(version.i64(0)) +
                    ", where this mhc writes 0 (its version is meta schema_version " +
                    std::to_string(kSchemaVersion) + "): written by a newer mhc or another program");
    std::map<std::string, int64_t> out;
    if (!has_table(db, file, "traces")) {
        out[meta_value(db, file, "trace_fingerprint")] = 1;
        return out;
    }
    sql::Stmt s(db, file, "SELECT fingerprint, id FROM traces");
    while (s.step()) out[s.text(0)] = s.i64(1);
    return out;
}

[[noreturn]] void another_trace(sqlite3* db, const std::string& runs_db, const std::string& trace,
                                const std::string& print, size_t traces) {
    const std::string made_for = meta_value(db, runs_db, "trace");
    // The same path: the file was written again (import --force, generate --force) with other
    // rows, or edited (its content digest, docs/trace-format.md).
    const std::string same = made_for == absolute(trace) ? " as it was before it was rewritten or edited" : "";
    std::string whose = traces > 1 ? "a job of " + std::to_string(traces) + " traces (" + made_for + ", …)"
                                   : "another trace (" + made_for + same + ", fingerprint " +
                                         meta_value(db, runs_db, "trace_fingerprint") + ")";
    throw Error(runs_db + ": holds runs of " + whose + ", not of " + trace + " (" + print + ")");
}

// The tables and meta rows of a new runs database, inside the caller's transaction: it belongs
// to these traces (one, or every rank of a job).
void init_runs_db(sqlite3* db, const std::string& file, const std::vector<Target>& targets,
                  const std::vector<std::string>& prints) {
    sql::exec(db, file, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID");
    sql::exec(db, file, schema::kRunTables);
    sql::exec(db, file, schema::kRunIndexes);
    sql::exec(db, file, schema::kRunEventRows);
    sql::exec(db, file, schema::kRunsDbTables);
    sql::Stmt m(db, file, "INSERT INTO meta VALUES (?,?)");
    for (auto [k, v] : std::map<std::string, std::string>{
             {"format", kRunsFormatName},
             {"schema_version", std::to_string(kSchemaVersion)},
             {"trace", absolute(targets.at(0).trace)},
             {"trace_fingerprint", prints.at(0)}}) {
        m.bind(1, k); m.bind(2, v); m.run();
    }
    sql::Stmt t(db, file, "INSERT OR IGNORE INTO traces (path, fingerprint) VALUES (?,?)");
    for (size_t i = 0; i < targets.size(); ++i) {
        t.bind(1, absolute(targets[i].trace)); t.bind(2, prints[i]); t.run();
    }
}

// A runs database made before it listed its traces gets the list (its one trace): additive.
void add_traces_table(sqlite3* db, const std::string& file) {
    if (has_table(db, file, "traces")) return;
    sql::exec(db, file, schema::kRunsDbTables);
    sql::Stmt t(db, file, "INSERT INTO traces (id, path, fingerprint) VALUES (1,?,?)");
    t.bind(1, meta_value(db, file, "trace")); t.bind(2, meta_value(db, file, "trace_fingerprint")); t.run();
}

// A file made before run_event_rows gets it, with its triggers, in the storing transaction
// (additive: docs/trace-format.md). `schema` names where the file's tables are on `db`.
void add_event_rows_table(sqlite3* db, const std::string& file, const std::string& schema) {
    if (has_table(db, file, "run_event_rows", schema)) return;
    // Each statement creates "IF NOT EXISTS name": made "IF NOT EXISTS schema.name"; a trigger's
    // body names the tables of its own schema.
    std::string sql = schema::kRunEventRows;
    const std::string mark = "IF NOT EXISTS ";
    for (size_t at = sql.find(mark); at != std::string::npos; at = sql.find(mark, at + mark.size()))
        sql.insert(at + mark.size(), schema + ".");
    sql::exec(db, file, sql.c_str());
}

// A runs database that does not exist yet is made whole beside it and renamed into place
// (OutputFile), so a failure (a full disk, a signal) never leaves an empty or half-made one. When
// another process creates it meanwhile, theirs is kept and used.
void create_runs_db(const std::string& file, const std::vector<Target>& targets, const std::vector<std::string>& prints) {
    struct stat st {};
    if (::lstat(file.c_str(), &st) == 0 || errno != ENOENT) return;   // opened (and checked) as it is
    std::error_code ec;
    OutputFile out(file, IfExists::Refuse);
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(out.temp_path().c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    try {
        if (rc != SQLITE_OK) throw Error(sql::open_failure(db, file, out.temp_path(), "cannot create"));
        sqlite3_extended_result_codes(db, 1);
        // The traces' page size (writer.cpp): a run's millions of rows take fewer b-tree pages.
        sql::exec(db, file, "PRAGMA page_size=16384");
        sql::exec(db, file, "BEGIN IMMEDIATE");
        init_runs_db(db, file, targets, prints);
        sql::exec(db, file, "COMMIT");
    } catch (...) {
        sqlite3_close(db);
        throw;
    }
    sqlite3_close(db);
    try {
        out.not_an_output();   // a signal before the store says no run was stored, not that this was written
        out.commit();
    } catch (const Error&) {
        if (!fs::exists(file, ec)) throw;   // not "appeared": a real failure
    }
}

// A file made before runs recorded their trace's fingerprint gets the column, in the storing
// transaction (additive: older runs read NULL, docs/trace-format.md "Runs and their data").
void add_print_column(sqlite3* db, const std::string& file, const std::string& schema) {
    if (!has_table(db, file, "runs", schema) || has_column(db, file, "runs", "trace_fingerprint", schema)) return;
    sql::exec(db, file, ("ALTER TABLE " + schema + ".runs ADD COLUMN trace_fingerprint TEXT").c_str());
}

bool separate(const std::vector<Target>& targets, const std::string& runs_db) {
    if (runs_db.empty()) return false;
    for (const auto& t : targets)
        if (t.trace == runs_db) {
            if (targets.size() > 1)
                throw Error(runs_db + ": --runs-db names one of the job's traces; name a file of its own");
            return false;
        }
    return true;
}

}   // namespace

int max_files_per_transaction() {
    sqlite3* db = nullptr;
    int n = 10;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK)
        n = sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, -1);
    sqlite3_close(db);
    return 1 + n;
}

bool roll_back_hot_journal(const std::string& file) noexcept {
    std::error_code ec;
    if (!fs::exists(file + "-journal", ec)) return true;
    try {
        std::string problem;
        sqlite3* db = sql::open_existing(file, true, problem);
        if (!db) return false;
        // Any read by a connection that may write the file rolls a hot journal back first.
        int rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
        sqlite3_close(db);
        return rc == SQLITE_OK;
    } catch (...) {   // called while unwinding: says "not rolled back" rather than throw
        return false;
    }
}

RunWriter::RunWriter(const std::vector<Target>& targets, const std::string& runs_db) {
    if (targets.empty()) throw Error("no trace to store runs in", Error::Kind::Internal);
    // A test's pause at this very moment, the runs computed and nothing of them stored yet: the
    // process stops itself (SIGSTOP) until the test, having replaced the trace, continues it
    // (tests/cli/whole_store_test.sh): MHC_TEST_STOP_BEFORE_STORE=1.
    if (const char* hook = std::getenv("MHC_TEST_STOP_BEFORE_STORE"); hook && std::string(hook) == "1") ::raise(SIGSTOP);
    try {
        if (separate(targets, runs_db)) open_runs_db(targets, runs_db);
        else open_traces(targets);
    } catch (...) {
        abort();
        throw;
    }
}

RunWriter::~RunWriter() { abort(); }

const std::string& RunWriter::file(size_t i) const { return files_.at(i); }
const std::string& RunWriter::schema(size_t i) const { return schemas_.at(i); }
const std::string& RunWriter::print(size_t target) const { return prints_.at(target); }

void RunWriter::open_traces(const std::vector<Target>& targets) {
    const int most = max_files_per_transaction();
    if (static_cast<int>(targets.size()) > most)
        throw Error(std::to_string(targets.size()) + " traces: the runs of a job are stored together or not at all, and "
                    "one transaction spans at most " + std::to_string(most) +
                    " files; store them in one file with --runs-db FILE");
    // Every process locks the traces of a job in one order (by canonical path), so two jobs
    // storing over the same traces wait for each other instead of each holding half of them.
    std::vector<std::pair<std::string, size_t>> order;
    for (size_t i = 0; i < targets.size(); ++i) {
        Reader check(targets[i].trace);   // throws on anything that is not a trace of this version
        std::error_code ec;
        auto canon = fs::weakly_canonical(targets[i].trace, ec);
        order.push_back({ec ? absolute(targets[i].trace) : canon.string(), i});
        require_journal_name(targets[i].trace);
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 1; k < order.size(); ++k)
        if (order[k].first == order[k - 1].first)
            throw Error(targets[order[k].second].trace + ": given twice (also as " + targets[order[k - 1].second].trace + ")");
    files_.resize(targets.size());
    schemas_.resize(targets.size());
    for (size_t k = 0; k < order.size(); ++k) {
        const size_t i = order[k].second;
        files_[i] = targets[i].trace;
        schemas_[i] = k == 0 ? "main" : "r" + std::to_string(k);
        opened_.push_back(targets[i].trace);
        if (k == 0) {
            std::string problem;
            db_ = sql::open_existing(files_[i], true, problem);
            if (!db_) throw Error(problem);
            sql::no_triggers(db_);
        } else {
            sql::Stmt a(db_, files_[i], ("ATTACH ? AS " + schemas_[i]).c_str());
            a.bind(1, files_[i]);
            a.run();
        }
        if (sqlite3_db_readonly(db_, schemas_[i].c_str()) == 1)
            throw Error(files_[i] + ": cannot store runs: the file is read-only");
    }
    sql::exec(db_, files_.front(), "BEGIN IMMEDIATE");
    for (size_t i = 0; i < targets.size(); ++i) {
        add_event_rows_table(db_, files_[i], schemas_[i]);
        add_print_column(db_, files_[i], schemas_[i]);
    }
    // The run was computed on the trace as it was read: a trace replaced or rewritten since
    // (another `generate --force`, `import --force`) is another trace.
    for (size_t i = 0; i < targets.size(); ++i) {
        std::string now = fingerprint_in(db_, files_[i], schemas_[i]);
        prints_.push_back(now);
        if (!targets[i].fingerprint.empty() && now != targets[i].fingerprint)
            throw Error(files_[i] + ": the trace changed after it was read (fingerprint " + targets[i].fingerprint +
                        " then, " + now + " now: replaced by another process?), so the run computed from it "
                        "does not belong in it");
    }
}

void RunWriter::open_runs_db(const std::vector<Target>& targets, const std::string& runs_db) {
    runs_db_ = true;
    refuse_special_file(runs_db);
    std::vector<std::string> prints;
    for (const auto& t : targets) {
        Reader check(t.trace);   // throws on anything that is not a trace of this version
        prints.push_back(t.fingerprint.empty() ? check.fingerprint(check.counts()) : t.fingerprint);
    }
    create_runs_db(runs_db, targets, prints);
    files_.assign(targets.size(), runs_db);
    schemas_.assign(targets.size(), "main");
    opened_.push_back(runs_db);
    if (const std::string stray = sql::stray_log(runs_db); !stray.empty()) throw Error(stray);
    if (sqlite3_open_v2(runs_db.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
        throw Error(runs_db + ": cannot open or create: " + (db_ ? sqlite3_errmsg(db_) : "error"));
    sql::wait_when_busy(db_, runs_db);
    sqlite3_extended_result_codes(db_, 1);
    sql::no_triggers(db_);
    if (sqlite3_db_readonly(db_, "main") == 1) throw Error(runs_db + ": cannot store runs: the file is read-only");
    sql::exec(db_, runs_db, "BEGIN IMMEDIATE");
    if (!has_table(db_, runs_db, "meta")) {   // an empty file the user made: use it
        // Any table at all is another program's database (or a damaged one): mhc's tables
        // would be written into it beside that program's.
        sql::Stmt other(db_, runs_db, "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1");
        if (other.step())
            throw Error(runs_db + ": not an mhc runs database (it has a " + other.text(0) + " '" + other.text(1) +
                        "' but no meta table): name a new file or an mhc runs database");
        init_runs_db(db_, runs_db, targets, prints);
    }
    std::map<std::string, int64_t> own = runs_db_traces(db_, runs_db);
    for (size_t i = 0; i < targets.size(); ++i) {
        auto it = own.find(prints[i]);
        if (it == own.end()) another_trace(db_, runs_db, targets[i].trace, prints[i], own.size());
        trace_ids_.push_back(it->second);
    }
    add_traces_table(db_, runs_db);
    add_event_rows_table(db_, runs_db, "main");
    add_print_column(db_, runs_db, "main");
    prints_ = prints;
}

void RunWriter::claim(size_t i, int64_t run) {
    if (!runs_db_) return;
    sql::Stmt s(db_, files_.at(i), "INSERT OR REPLACE INTO run_trace (run, trace) VALUES (?,?)");
    s.bind(1, run); s.bind(2, trace_ids_.at(i)); s.run();
}

std::string RunWriter::moved() const {
    for (size_t i = 0; i < files_.size(); ++i) {
        int gone = 0;
        if (sqlite3_file_control(db_, schemas_[i].c_str(), SQLITE_FCNTL_HAS_MOVED, &gone) == SQLITE_OK && gone)
            return files_[i];
    }
    return "";
}

void RunWriter::commit() {
    // A name that another process took (mv, a copy renamed over it) or removed while the
    // transaction was open leads to another file, or none: the rows would go to a file no name
    // leads to, said "stored". Looked at before the commit (nothing written), and after it, for
    // a commit that waited for readers meanwhile (the write went with the file that had the name).
    if (const std::string file = moved(); !file.empty())
        throw Error(file + sql::kMovedDuringWrite + " (its name now leads to another file, or none)");
    sql::exec(db_, files_.front(), "COMMIT");
    if (const std::string file = moved(); !file.empty())
        throw Error(file + sql::kMovedDuringWrite + ", so the write went into the file that had the name before, not into " +
                    file);
}

std::string RunWriter::abort() {
    if (db_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
    // A write that failed half-way (a full disk spilling pages, an I/O error at commit) can leave
    // the connection unable to roll back itself: its journal stays hot beside the file, and a
    // copy of the file alone would hold half a run. Roll it back now, before the command ends.
    std::string left;
    for (const auto& f : opened_)
        if (!roll_back_hot_journal(f)) left += (left.empty() ? "" : ", ") + f + "-journal";
    opened_.clear();
    if (left.empty()) return left;
    return "the interrupted write left " + left + ", which the next mhc command that can write it rolls back";
}

RunReader::RunReader(const std::string& trace_path, const std::string& runs_db) {
    trace = std::make_unique<Reader>(trace_path);
    file = trace_path;
    trace_path_ = trace_path;
    if (runs_db.empty() || runs_db == trace_path) {
        if (has_table(trace->handle(), file, "runs") &&
            has_column(trace->handle(), file, "runs", "trace_fingerprint"))
            print_column = "trace_fingerprint";
        const auto meta = trace->meta();
        auto digest = meta.find(kContentDigestKey);
        if (digest == meta.end()) return;
        if (digest->second.rfind(kEditedDigestPrefix, 0) == 0) {
            edited_ = "meta content_digest '" + digest->second + "'";
        } else if (!digest_guarded(trace->handle(), file)) {
            unguarded_digest_ = digest->second;   // its identity is what the rows give: print() scans them
        }
        return;
    }
    file = runs_db;
    refuse_special_file(runs_db);   // a FIFO read as a database waits for a writer, or says "disk I/O error"
    std::string problem;
    own_ = sql::open_existing(runs_db, true, problem);
    if (!own_) throw Error(problem);
    // A refusal below leaves the constructor, so no destructor closes the connection: closed here
    // (LeakSanitizer found it open when the runs database was another kind of file).
    struct CloseOnThrow {
        sqlite3*& db;
        const int before = std::uncaught_exceptions();
        ~CloseOnThrow() {
            if (std::uncaught_exceptions() > before) {
                sqlite3_close(db);
                db = nullptr;
            }
        }
    } close_on_throw{own_};
    sqlite3_exec(own_, "PRAGMA query_only=1", nullptr, nullptr, nullptr);
    bool meta = false;
    try {
        meta = has_table(own_, file, "meta");
    } catch (const sql::Busy&) { throw; } catch (const Error&) {
        // Another kind of file (a link profile named twice, a CSV): it said "cannot prepare query:
        // not an SQLite database (wrong format or corrupt header)".
        const int code = sqlite3_extended_errcode(own_) & 0xff;
        if (code == SQLITE_CORRUPT)   // was "cannot prepare query: the file is corrupt or truncated (...)"
            throw Error(runs_db + ": the file is truncated or corrupt (" + sqlite3_errmsg(own_) + ")");
        if (code != SQLITE_NOTADB) throw;
        throw Error(runs_db + ": not an mhc runs database (not an SQLite database)");
    }
    if (!meta) throw Error(runs_db + ": not an mhc runs database (no meta table)");
    const std::string& print = this->print();
    std::map<std::string, int64_t> own = runs_db_traces(own_, file);
    auto it = own.find(print);
    if (it == own.end()) another_trace(own_, file, trace_path, print, own.size());
    for (int i = 0; schema::kRunTableNames[i]; ++i)
        if (!has_table(own_, file, schema::kRunTableNames[i]))
            throw Error(runs_db + ": missing table '" + schema::kRunTableNames[i] + "'");
    if (has_column(own_, file, "runs", "trace_fingerprint")) print_column = "trace_fingerprint";
    if (!has_table(own_, file, "run_trace")) return;
    // A run without a row in run_trace was stored by an mhc that did not write them: it is of
    // the trace the database was made for.
    const std::string mine = "id IN (SELECT run FROM run_trace WHERE trace = " + std::to_string(it->second) + ")";
    runs_of_trace = print == meta_value(own_, file, "trace_fingerprint")
                        ? "(" + mine + " OR id NOT IN (SELECT run FROM run_trace))"
                        : mine;
}

RunReader::~RunReader() { sqlite3_close(own_); }

const std::string& RunReader::print() const {
    if (!print_.empty()) return print_;
    auto identity = identity_meta(trace->handle(), trace_path_, "main");   // one scan when unguarded
    print_ = fingerprint(identity, trace->counts());
    if (!unguarded_digest_.empty() && identity[kContentDigestKey] != unguarded_digest_)
        edited_ = "meta content_digest " + unguarded_digest_ + ", the rows " + identity[kContentDigestKey] +
                  ": a row was changed with its digest triggers dropped";
    return print_;
}

std::string RunReader::stale_reason(const std::string& stored) const {
    if (!stored.empty()) {
        if (stored == print()) return "";
        return "was computed from other data than " + trace_path_ + " holds now (trace fingerprint " + stored +
               " then, " + print() + " now: its rows or meta were changed after the run was stored)";
    }
    // Not recorded (an mhc before 2026-12-06): the trace's when its rows are as written. In a runs
    // database, the database's own check of the fingerprint (RunReader above) holds them to it.
    if (!unguarded_digest_.empty()) print();   // whether the rows still give the digest
    if (edited_.empty()) return "";
    return "does not record which data it was computed from (stored by an mhc before 2026-12-06), and " +
           trace_path_ + "'s rows were changed after it was written (" + edited_ + ")";
}

sqlite3* RunReader::db() const { return own_ ? own_ : trace->handle(); }

}  // namespace mhc::trace::runfiles
