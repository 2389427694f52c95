// Runs are added to an existing trace in one transaction each, so an interrupted
// simulation or replay leaves the file as it was (or a run explicitly marked incomplete).
#include "mhc/trace/runs.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <unordered_set>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/trace/limits.hpp"
#include "rules.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

std::string_view to_string(EventKind k) {
    static constexpr std::string_view names[kEventKindCount] = {
        "swap_out", "swap_in", "evict_clean", "drop", "recompute", "stall", "oom", "prefetch"};
    int i = static_cast<int>(k);
    return (i >= 0 && i < kEventKindCount) ? names[i] : "?";
}

namespace {

std::string now_utc() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

// What ties a runs database to its trace: a hash of the trace's meta and row counts, which
// change whenever the trace is regenerated or reimported (its runs then no longer apply).
std::string fingerprint(const Reader& r) {
    uint64_t h = 1469598103934665603ull;   // FNV-1a
    auto mix = [&h](const std::string& s) {
        for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
    };
    for (auto& [k, v] : r.meta()) { mix(k); mix(v); }
    TableCounts n = r.counts();
    for (int64_t c : {n.allocations, n.kernels, n.accesses, n.copies, n.markers, n.strings})
        mix(std::to_string(c));
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

bool separate(const std::string& trace_path, const std::string& runs_db) {
    return !runs_db.empty() && runs_db != trace_path;
}

std::string meta_value(sqlite3* db, const std::string& file, const char* key) {
    sql::Stmt s(db, file, "SELECT value FROM meta WHERE key=?");
    s.bind(1, std::string(key));
    return s.step() ? s.text(0) : std::string();
}

// A runs database must be one (format mhc-runs) and belong to this trace.
void verify_runs_db(sqlite3* db, const std::string& runs_db, const std::string& trace_path,
                    const std::string& print) {
    if (meta_value(db, runs_db, "format") != kRunsFormatName)
        throw Error(runs_db + ": not an mhc runs database (meta format is not '" + kRunsFormatName + "')");
    if (meta_value(db, runs_db, "schema_version") != std::to_string(kSchemaVersion))
        throw Error(runs_db + ": runs database schema version " + meta_value(db, runs_db, "schema_version") +
                    " is not supported");
    std::string theirs = meta_value(db, runs_db, "trace_fingerprint");
    if (theirs != print)
        throw Error(runs_db + ": holds runs of another trace (" + meta_value(db, runs_db, "trace") +
                    ", fingerprint " + theirs + "), not of " + trace_path + " (" + print + ")");
}

bool has_table(sqlite3* db, const std::string& file, const char* name) {
    sql::Stmt s(db, file, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
    s.bind(1, std::string(name));
    return s.step();
}

// The tables and meta rows of a new runs database, inside the caller's transaction.
void init_runs_db(sqlite3* db, const std::string& file, const std::string& trace_path, const std::string& print) {
    sql::exec(db, file, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID");
    sql::exec(db, file, schema::kRunTables);
    sql::exec(db, file, schema::kRunIndexes);
    sql::Stmt m(db, file, "INSERT INTO meta VALUES (?,?)");
    std::error_code ec;
    auto abs = std::filesystem::absolute(trace_path, ec);
    for (auto [k, v] : std::map<std::string, std::string>{
             {"format", kRunsFormatName},
             {"schema_version", std::to_string(kSchemaVersion)},
             {"trace", ec ? trace_path : abs.lexically_normal().string()},
             {"trace_fingerprint", print}}) {
        m.bind(1, k); m.bind(2, v); m.run();
    }
}

// A runs database that does not exist yet is made whole beside it and renamed into place
// (OutputFile), so a failure (a full disk, a signal) never leaves an empty or half-made one. When
// another process creates it meanwhile, theirs is kept and used.
void create_runs_db(const std::string& file, const std::string& trace_path, const std::string& print) {
    std::error_code ec;
    if (std::filesystem::exists(file, ec) || ec) return;   // opened (and checked) as it is
    OutputFile out(file, IfExists::Refuse);
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(out.temp_path().c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    try {
        if (rc != SQLITE_OK) throw Error(file + ": cannot create: " + (db ? sqlite3_errmsg(db) : "error"));
        sqlite3_extended_result_codes(db, 1);
        sql::exec(db, file, "BEGIN IMMEDIATE");
        init_runs_db(db, file, trace_path, print);
        sql::exec(db, file, "COMMIT");
    } catch (...) {
        sqlite3_close(db);
        throw;
    }
    sqlite3_close(db);
    try {
        out.commit();
    } catch (const Error&) {
        if (!std::filesystem::exists(file, ec)) throw;   // not "appeared": a real failure
    }
}

// A connection that writes runs: into the trace itself, or into a runs database beside it
// (created on first use). Every write is one BEGIN IMMEDIATE transaction: writers queue on
// the lock (busy timeout) instead of failing, and ids are assigned under it, so they never collide.
struct RunWriter {
    sqlite3* db = nullptr;
    std::string file;
    RunWriter(const std::string& trace_path, const std::string& runs_db) {
        std::string print;
        {
            Reader check(trace_path);   // throws on anything that is not a trace of this version
            if (separate(trace_path, runs_db)) print = fingerprint(check);
        }
        file = separate(trace_path, runs_db) ? runs_db : trace_path;
        std::string problem;
        if (separate(trace_path, runs_db)) {
            create_runs_db(file, trace_path, print);
            if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
                problem = file + ": cannot open or create: " + (db ? sqlite3_errmsg(db) : "error");
                sqlite3_close(db);
                throw Error(problem);
            }
            sqlite3_busy_timeout(db, sql::busy_timeout_ms());
            sqlite3_extended_result_codes(db, 1);
        } else {
            db = sql::open_existing(file, true, problem);
            if (!db) throw Error(problem);
        }
        if (sqlite3_db_readonly(db, "main") == 1) {
            sqlite3_close(db);
            db = nullptr;
            throw Error(file + ": cannot store runs: the file is read-only");
        }
        try {
            sql::exec(db, file, "BEGIN IMMEDIATE");
            if (separate(trace_path, runs_db)) {
                if (!has_table(db, file, "meta")) {   // an empty file the user made: use it
                    if (has_table(db, file, "runs") || has_table(db, file, "allocations"))
                        throw Error(file + ": not an mhc runs database (it has tables but no meta)");
                    init_runs_db(db, file, trace_path, print);
                } else {
                    verify_runs_db(db, file, trace_path, print);
                }
            }
        } catch (...) {
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
            sqlite3_close(db);
            db = nullptr;
            throw;
        }
    }
    void commit() { sql::exec(db, file, "COMMIT"); }
    ~RunWriter() {
        if (db && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        sqlite3_close(db);
    }
};

// A read connection on where the runs are: the trace (through its Reader), or a runs
// database checked to belong to the trace.
struct RunReader {
    std::unique_ptr<Reader> trace;
    sqlite3* own = nullptr;
    std::string file;
    RunReader(const std::string& trace_path, const std::string& runs_db) {
        trace = std::make_unique<Reader>(trace_path);
        file = trace_path;
        if (!separate(trace_path, runs_db)) return;
        file = runs_db;
        std::string problem;
        own = sql::open_existing(runs_db, true, problem);
        if (!own) throw Error(problem);
        sqlite3_exec(own, "PRAGMA query_only=1", nullptr, nullptr, nullptr);
        if (!has_table(own, file, "meta"))
            throw Error(runs_db + ": not an mhc runs database (no meta table)");
        verify_runs_db(own, runs_db, trace_path, fingerprint(*trace));
        for (int i = 0; schema::kRunTableNames[i]; ++i)
            if (!has_table(own, file, schema::kRunTableNames[i]))
                throw Error(runs_db + ": missing table '" + schema::kRunTableNames[i] + "'");
    }
    ~RunReader() { sqlite3_close(own); }
    sqlite3* db() const { return own ? own : trace->handle(); }
};

// The rows of a stored run obey rules like the trace's (a damaged or hostile file must not give
// a run silently wrong events: an unknown kind read as a stall, text read as 0, a time that
// overflows a difference). Checked as load_run decodes them; `where` names the row.
namespace run_rules {
using rules::Column;
using namespace limits;
const Column kTime{"t_start", -kMaxAbsTime, kMaxAbsTime, false, "range", "a time in ns"};
const Column kEndTime{"t_end", -kMaxAbsTime, kMaxAbsTime, false, "range", "a time in ns"};
const Column kSampleTime{"t", -kMaxAbsTime, kMaxAbsTime, false, "range", "a time in ns"};
const Column kKind{"kind", 0, kEventKindCount - 1, false, "invalid-code", "an event kind code"};
const Column kId{"id", INT64_MIN, INT64_MAX, false, "range", "an id"};
const Column kBytes{"bytes", 0, kMaxTotalBytes, false, "range", "a size in bytes"};
const Column kDeviceBytes{"device_bytes", 0, kMaxTotalBytes, false, "range", "a size in bytes"};
const Column kHostBytes{"host_bytes", 0, kMaxTotalBytes, false, "range", "a size in bytes"};

// Throws naming FILE, the table, the run and the row when a column of `s` breaks its rule.
void check(const std::string& file, const char* table, int64_t run, int64_t row, const sql::Stmt& s,
           std::initializer_list<std::pair<const Column*, int>> cols) {
    for (auto [c, col] : cols) {
        std::string p = rules::value_problem(*c, s.get(), col);
        if (!p.empty())
            throw Error(file + ": " + table + " row " + std::to_string(row) + " (run " + std::to_string(run) +
                        "): " + p + " [" + c->rule + "]");
    }
}

// A metric is a number: text or a blob is refused rather than read as 0.
double metric(const std::string& file, int64_t run, const std::string& key, const sql::Stmt& s, int col) {
    int type = sqlite3_column_type(s.get(), col);
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
        throw Error(file + ": run_metrics of run " + std::to_string(run) + ": '" + key + "' is not a number [type]");
    return s.f64(col);
}
}  // namespace run_rules

void write_body(sqlite3* db, const std::string& path, int64_t id, const Run& run) {
    sql::Stmt cfg(db, path, "INSERT OR REPLACE INTO run_config VALUES (?,?,?)");
    for (auto& [k, v] : run.config) {
        cfg.bind(1, id); cfg.bind(2, k); cfg.bind(3, v); cfg.run();
    }
    sql::Stmt met(db, path, "INSERT OR REPLACE INTO run_metrics VALUES (?,?,?)");
    for (auto& [k, v] : run.metrics) {
        met.bind(1, id); met.bind(2, k); met.bind(3, v); met.run();
    }
    sql::Stmt ev(db, path, "INSERT INTO run_events VALUES (?,?,?,?,?,?,?)");
    for (auto& e : run.events) {
        ev.bind(1, id);
        ev.bind(2, static_cast<int64_t>(e.kind));
        ev.bind(3, e.t_start);
        ev.bind(4, e.t_end);
        ev.bind(5, e.allocation);
        ev.bind(6, e.kernel);
        ev.bind(7, e.bytes);
        ev.run();
    }
    sql::Stmt kt(db, path, "INSERT OR REPLACE INTO run_kernels VALUES (?,?,?,?)");
    for (auto& k : run.kernel_times) {
        kt.bind(1, id); kt.bind(2, k.kernel); kt.bind(3, k.t_start); kt.bind(4, k.t_end); kt.run();
    }
    sql::Stmt mem(db, path, "INSERT INTO run_memory VALUES (?,?,?,?)");
    for (auto& m : run.memory) {
        mem.bind(1, id); mem.bind(2, m.t); mem.bind(3, m.device_bytes); mem.bind(4, m.host_bytes);
        mem.run();
    }
}

double metric_or(const Run& run, const char* key, double otherwise) {
    auto it = run.metrics.find(key);
    return it == run.metrics.end() ? otherwise : it->second;
}

// A simulated run stored before every reached kernel was kept (it has no `kernels_reached`
// metric) holds only the kernels whose time moved. The simulator's shift never decreases, so
// the unmoved kernels are those up to the first moved one (by recorded start): they get their
// recorded times back. With none moved, a complete run without stalls ran every kernel at its
// recorded time and an OOM run every kernel that started before its OOM (time unshifted). A run
// with stalls and no kernel times was stored without its timeline: nothing to fill.
void fill_unmoved_kernels(const Reader& trace, Run& run) {
    if (run.kind != "simulated" || run.metrics.count("kernels_reached")) return;
    if (run.status != "complete" && run.status != "oom") return;
    std::vector<RunKernelTime> recorded;
    {
        Scan k = trace.scan(TraceTable::Kernels, {"id", "t_start", "t_end"});
        while (k.next()) recorded.push_back({k[0], k[1], k[2]});
    }
    std::unordered_set<int64_t> stored;
    for (const RunKernelTime& k : run.kernel_times) stored.insert(k.kernel);
    int64_t last_unmoved = INT64_MIN;   // the latest recorded start an unmoved kernel can have
    if (!stored.empty()) {
        for (const RunKernelTime& k : recorded)
            if (stored.count(k.kernel)) last_unmoved = last_unmoved == INT64_MIN ? k.t_start : std::min(last_unmoved, k.t_start);
    } else if (metric_or(run, "stall_ns", 1) == 0 && metric_or(run, "coupled_wait_time", 0) == 0) {
        if (run.status == "complete") last_unmoved = INT64_MAX;
        else if (run.metrics.count("oom_time_ns")) last_unmoved = static_cast<int64_t>(run.metrics.at("oom_time_ns")) - 1;
    }
    for (const RunKernelTime& k : recorded)
        if (k.t_start <= last_unmoved && !stored.count(k.kernel)) run.kernel_times.push_back(k);
    std::sort(run.kernel_times.begin(), run.kernel_times.end(),
              [](const RunKernelTime& a, const RunKernelTime& b) { return a.kernel < b.kernel; });
}

}  // namespace

std::vector<int64_t> add_runs(const std::string& trace_path, const std::vector<Run>& runs,
                              const std::string& runs_db) {
    RunWriter w(trace_path, runs_db);
    std::vector<int64_t> ids;
    sql::Stmt ins(w.db, w.file,
                  "INSERT INTO runs (kind, name, status, created, base_run) VALUES (?,?,?,?,?)");
    for (const Run& run : runs) {
        ins.bind(1, run.kind); ins.bind(2, run.name); ins.bind(3, run.status);
        ins.bind(4, now_utc()); ins.bind(5, run.base_run);
        ins.run();
        int64_t id = sqlite3_last_insert_rowid(w.db);
        write_body(w.db, w.file, id, run);
        ids.push_back(id);
    }
    w.commit();
    return ids;
}

int64_t add_run(const std::string& trace_path, const Run& run, const std::string& runs_db) {
    return add_runs(trace_path, {run}, runs_db).at(0);
}

int64_t begin_run(const std::string& trace_path, const std::string& kind,
                  const std::string& name, const std::string& runs_db) {
    Run r;
    r.kind = kind;
    r.name = name;
    r.status = "incomplete";
    return add_run(trace_path, r, runs_db);
}

void finish_run(const std::string& trace_path, int64_t run_id, const Run& run,
                const std::string& runs_db) {
    RunWriter w(trace_path, runs_db);
    sql::Stmt up(w.db, w.file, "UPDATE runs SET name=?, status=?, base_run=? WHERE id=?");
    up.bind(1, run.name); up.bind(2, run.status); up.bind(3, run.base_run); up.bind(4, run_id);
    up.run();
    if (sqlite3_changes(w.db) != 1)
        throw Error(w.file + ": run " + std::to_string(run_id) + " does not exist");
    write_body(w.db, w.file, run_id, run);
    w.commit();
}

std::vector<RunInfo> list_runs(const std::string& trace_path, const std::string& runs_db) {
    RunReader r(trace_path, runs_db);
    const std::string& trace_path_ = r.file;
    std::vector<RunInfo> out;
    sql::Stmt s(r.db(), trace_path_,
                "SELECT id, kind, name, status, created, base_run FROM runs ORDER BY id");
    while (s.step())
        out.push_back({s.i64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.i64(5), {}});
    std::map<int64_t, RunInfo*> by_id;
    for (auto& run : out) by_id[run.id] = &run;
    sql::Stmt m(r.db(), trace_path_, "SELECT run, key, value FROM run_metrics");
    while (m.step())
        if (auto it = by_id.find(m.i64(0)); it != by_id.end())
            it->second->metrics[m.text(1)] = run_rules::metric(trace_path_, m.i64(0), m.text(1), m, 2);
    return out;
}

Run load_run(const std::string& trace_path_arg, int64_t run_id, const std::string& runs_db) {
    RunReader r(trace_path_arg, runs_db);
    sqlite3* db = r.db();
    const std::string& trace_path = r.file;
    Run run;
    {
        sql::Stmt s(db, trace_path, "SELECT kind, name, status, base_run FROM runs WHERE id=?");
        s.bind(1, run_id);
        if (!s.step())
            throw Error(trace_path + ": run " + std::to_string(run_id) + " does not exist");
        run.kind = s.text(0); run.name = s.text(1); run.status = s.text(2); run.base_run = s.i64(3);
    }
    {
        sql::Stmt s(db, trace_path, "SELECT key, value FROM run_config WHERE run=?");
        s.bind(1, run_id);
        while (s.step()) run.config[s.text(0)] = s.text(1);
    }
    {
        sql::Stmt s(db, trace_path, "SELECT key, value FROM run_metrics WHERE run=?");
        s.bind(1, run_id);
        while (s.step()) run.metrics[s.text(0)] = run_rules::metric(trace_path, run_id, s.text(0), s, 1);
    }
    {
        sql::Stmt s(db, trace_path,
                    "SELECT kind, t_start, t_end, allocation, kernel, bytes, rowid FROM run_events "
                    "WHERE run=? ORDER BY t_start, rowid");
        s.bind(1, run_id);
        using namespace run_rules;
        while (s.step()) {
            check(trace_path, "run_events", run_id, s.i64(6), s,
                  {{&kKind, 0}, {&kTime, 1}, {&kEndTime, 2}, {&kId, 3}, {&kId, 4}, {&kBytes, 5}});
            RunEvent e;
            e.kind = static_cast<EventKind>(s.i64(0));
            e.t_start = s.i64(1); e.t_end = s.i64(2); e.allocation = s.i64(3);
            e.kernel = s.i64(4); e.bytes = s.i64(5);
            run.events.push_back(e);
        }
    }
    {
        sql::Stmt s(db, trace_path,
                    "SELECT kernel, t_start, t_end FROM run_kernels WHERE run=? ORDER BY kernel");
        s.bind(1, run_id);
        int64_t row = 0;
        while (s.step()) {
            run_rules::check(trace_path, "run_kernels", run_id, ++row, s,
                             {{&run_rules::kId, 0}, {&run_rules::kTime, 1}, {&run_rules::kEndTime, 2}});
            run.kernel_times.push_back({s.i64(0), s.i64(1), s.i64(2)});
        }
    }
    {
        sql::Stmt s(db, trace_path,
                    "SELECT t, device_bytes, host_bytes, rowid FROM run_memory WHERE run=? ORDER BY t");
        s.bind(1, run_id);
        while (s.step()) {
            run_rules::check(trace_path, "run_memory", run_id, s.i64(3), s,
                             {{&run_rules::kSampleTime, 0}, {&run_rules::kDeviceBytes, 1}, {&run_rules::kHostBytes, 2}});
            run.memory.push_back({s.i64(0), s.i64(1), s.i64(2)});
        }
    }
    fill_unmoved_kernels(*r.trace, run);
    return run;
}

}  // namespace mhc::trace
