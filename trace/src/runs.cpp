// Runs are added to an existing trace in one transaction each, so an interrupted
// simulation or replay leaves the file as it was (or a run explicitly marked incomplete).
#include "mhc/trace/runs.hpp"

#include <ctime>

#include "mhc/trace/store.hpp"
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

// Opens a trace for writing runs after validating it as a trace.
struct RwDb {
    sqlite3* db = nullptr;
    std::string path;
    explicit RwDb(const std::string& p) : path(p) {
        { Reader check(p); }   // throws on anything that is not a trace of this version
        if (sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
            std::string m = db ? sqlite3_errmsg(db) : "cannot open";
            sqlite3_close(db);
            throw Error(p + ": cannot open for writing: " + m);
        }
        sqlite3_busy_timeout(db, 10000);
    }
    ~RwDb() { sqlite3_close(db); }
};

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

}  // namespace

int64_t add_run(const std::string& trace_path, const Run& run) {
    RwDb w(trace_path);
    sql::exec(w.db, trace_path, "BEGIN IMMEDIATE");
    try {
        sql::Stmt ins(w.db, trace_path,
                      "INSERT INTO runs (kind, name, status, created, base_run) VALUES (?,?,?,?,?)");
        ins.bind(1, run.kind); ins.bind(2, run.name); ins.bind(3, run.status);
        ins.bind(4, now_utc()); ins.bind(5, run.base_run);
        ins.run();
        int64_t id = sqlite3_last_insert_rowid(w.db);
        write_body(w.db, trace_path, id, run);
        sql::exec(w.db, trace_path, "COMMIT");
        return id;
    } catch (...) {
        sqlite3_exec(w.db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

int64_t begin_run(const std::string& trace_path, const std::string& kind,
                  const std::string& name) {
    Run r;
    r.kind = kind;
    r.name = name;
    r.status = "incomplete";
    return add_run(trace_path, r);
}

void finish_run(const std::string& trace_path, int64_t run_id, const Run& run) {
    RwDb w(trace_path);
    sql::exec(w.db, trace_path, "BEGIN IMMEDIATE");
    try {
        sql::Stmt up(w.db, trace_path,
                     "UPDATE runs SET name=?, status=?, base_run=? WHERE id=?");
        up.bind(1, run.name); up.bind(2, run.status); up.bind(3, run.base_run); up.bind(4, run_id);
        up.run();
        if (sqlite3_changes(w.db) != 1)
            throw Error(trace_path + ": run " + std::to_string(run_id) + " does not exist");
        write_body(w.db, trace_path, run_id, run);
        sql::exec(w.db, trace_path, "COMMIT");
    } catch (...) {
        sqlite3_exec(w.db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

std::vector<RunInfo> list_runs(const std::string& trace_path) {
    Reader r(trace_path);
    std::vector<RunInfo> out;
    sql::Stmt s(r.handle(), trace_path,
                "SELECT id, kind, name, status, created, base_run FROM runs ORDER BY id");
    while (s.step())
        out.push_back({s.i64(0), s.text(1), s.text(2), s.text(3), s.text(4), s.i64(5), {}});
    std::map<int64_t, RunInfo*> by_id;
    for (auto& run : out) by_id[run.id] = &run;
    sql::Stmt m(r.handle(), trace_path, "SELECT run, key, value FROM run_metrics");
    while (m.step())
        if (auto it = by_id.find(m.i64(0)); it != by_id.end()) it->second->metrics[m.text(1)] = m.f64(2);
    return out;
}

Run load_run(const std::string& trace_path, int64_t run_id) {
    Reader r(trace_path);
    sqlite3* db = r.handle();
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
        while (s.step()) run.metrics[s.text(0)] = s.f64(1);
    }
    {
        sql::Stmt s(db, trace_path,
                    "SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events "
                    "WHERE run=? ORDER BY t_start, rowid");
        s.bind(1, run_id);
        while (s.step()) {
            int64_t k = s.i64(0);
            RunEvent e;
            e.kind = (k >= 0 && k < kEventKindCount) ? static_cast<EventKind>(k) : EventKind::Stall;
            e.t_start = s.i64(1); e.t_end = s.i64(2); e.allocation = s.i64(3);
            e.kernel = s.i64(4); e.bytes = s.i64(5);
            run.events.push_back(e);
        }
    }
    {
        sql::Stmt s(db, trace_path,
                    "SELECT kernel, t_start, t_end FROM run_kernels WHERE run=? ORDER BY kernel");
        s.bind(1, run_id);
        while (s.step()) run.kernel_times.push_back({s.i64(0), s.i64(1), s.i64(2)});
    }
    {
        sql::Stmt s(db, trace_path,
                    "SELECT t, device_bytes, host_bytes FROM run_memory WHERE run=? ORDER BY t");
        s.bind(1, run_id);
        while (s.step()) run.memory.push_back({s.i64(0), s.i64(1), s.i64(2)});
    }
    return run;
}

}  // namespace mhc::trace
