// Runs are added to an existing trace in one transaction each, so an interrupted
// simulation or replay leaves the file as it was (or a run explicitly marked incomplete).
// Reading them back is run_reading.cpp's.
#include "mhc/trace/runs.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <sstream>
#include <unordered_set>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/trace/limits.hpp"
#include "bulk_insert.hpp"
#include "rules.hpp"
#include "run_files.hpp"
#include "schema.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

std::string_view to_string(EventKind k) {
    static constexpr std::string_view names[kEventKindCount] = {
        "swap_out", "swap_in", "evict_clean", "drop", "recompute", "stall", "oom", "prefetch"};
    const int code = static_cast<int>(k);
    return (code >= 0 && code < kEventKindCount) ? names[code] : "?";
}

// The domain each metric's values keep (runs.hpp).
MetricDomain metric_domain(std::string_view key) {
    // The counts sim::fields(Result) (sim/include/mhc/sim/result_fields.hpp), the coupled runs
    // (cli/cmd_simulate.cpp) and validate (replay/src/validate.cpp) write.
    static const std::unordered_set<std::string_view> counts = {
        "oom", "stalls", "swap_ins", "swap_outs", "clean_evictions", "prefetches", "drops", "recomputations",
        "recompute_depth_max", "recompute_inputs_assumed", "forecast_horizon_steps", "forecast_evictions",
        "early_evictions", "assumed_accesses", "kernels_reached", "last_kernel_reached", "coupled_wait_count",
        "checksums", "checksum_mismatches", "oom_fragmentation"};
    if (key == "capacity_bytes" || key == "host_capacity_bytes") return MetricDomain::Capacity;
    if (counts.contains(key)) return MetricDomain::Count;
    // A time on the trace's clock, not an amount: a trace's times may lie below 0 (down to -2^62 ns).
    if (key == "oom_time_ns") return MetricDomain::Signed;
    auto ends = [key](std::string_view end) { return key.size() >= end.size() && key.substr(key.size() - end.size()) == end; };
    if (ends("_bytes") || key.starts_with("oom_bytes_") || ends("_ns") || ends("_seconds") || key == "coupled_wait_time") return MetricDomain::Amount;
    return MetricDomain::Signed;
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


// The positions of `events` by (t_start, position): events of one instant keep the run's order.
// The simulator records them almost in start order (a transfer's event placed a little early now
// and then), so those that keep the running maximum are in order already; only the others are
// sorted, then merged in (sorting all 3.9 M events of a 10 M-row trace's run cost about 0.1 s).
std::vector<size_t> by_start(const std::vector<RunEvent>& events) {
    std::vector<size_t> in_order, early;
    in_order.reserve(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
        if (in_order.empty() || events[i].t_start >= events[in_order.back()].t_start) in_order.push_back(i);
        else early.push_back(i);
    }
    if (early.empty()) return in_order;
    auto before = [&events](size_t lhs, size_t rhs) {
        return events[lhs].t_start < events[rhs].t_start || (events[lhs].t_start == events[rhs].t_start && lhs < rhs);
    };
    std::sort(early.begin(), early.end(), before);
    std::vector<size_t> merged(events.size());
    std::merge(in_order.begin(), in_order.end(), early.begin(), early.end(), merged.begin(), before);
    return merged;
}

// The run's events, appended to run_events in start order (stable, so that load_run's
// ORDER BY t_start, rowid gives the simulator's order back), and their rowid range in
// run_event_rows, which load_run reads instead of an index on run (docs/results.md, "Writing a
// run"). `fresh`: the run had no events before (a new run, or one begun with none).
void write_events(sqlite3* db, const std::string& path, const std::string& schema, int64_t id, const Run& run,
                  bool fresh) {
    const int64_t before = runfiles::max_event_rowid(db, path, schema);
    {
        // No trigger runs on the store's connection (sql::no_triggers): its inserts do not drop the
        // range it is writing (schema.sql, run_event_rows).
        sql::BulkInsert ev(
            db, path, "INSERT INTO " + schema + ".run_events (run, kind, t_start, t_end, allocation, kernel, bytes)", 6,
            "", {}, {id});
        for (size_t position : by_start(run.events)) {
            const RunEvent& event = run.events[position];
            int64_t* row = ev.add();
            row[0] = static_cast<int64_t>(event.kind); row[1] = event.t_start; row[2] = event.t_end;
            row[3] = event.allocation; row[4] = event.kernel; row[5] = event.bytes;
        }
        ev.flush();
    }
    // SQLite gives a new row the largest rowid + 1 (a random free one only past 2^63 - 1): then the
    // rows are before + 1 .. after. When they are not, the run is read by run, as in older files.
    const int64_t after = runfiles::max_event_rowid(db, path, schema);
    if (fresh && before < INT64_MAX && after - before == static_cast<int64_t>(run.events.size())) {
        sql::Stmt range(
            db, path,
            ("INSERT OR REPLACE INTO " + schema + ".run_event_rows (run, first_row, last_row) VALUES (?,?,?)").c_str());
        range.bind(1, id); range.bind(2, before + 1); range.bind(3, after);
        range.run();
    } else {
        sql::Stmt drop(db, path, ("DELETE FROM " + schema + ".run_event_rows WHERE run = ?").c_str());
        drop.bind(1, id);
        drop.run();
    }
}

// Whether run `id` is stored with an empty range of events (a run begun, not finished yet).
bool has_no_events(sqlite3* db, const std::string& path, const std::string& schema, int64_t id) {
    sql::Stmt range(db, path, ("SELECT last_row < first_row FROM " + schema + ".run_event_rows WHERE run = ?").c_str());
    range.bind(1, id);
    return range.step() && range.i64(0) != 0;
}

// The run's rows, into the run tables of `schema` (the trace's, or a runs database's).
void write_body(sqlite3* db, const std::string& path, const std::string& schema, int64_t id, const Run& run,
                bool fresh) {
    auto into = [&](const char* verb, const char* table_and_values) {
        return std::string(verb) + " INTO " + schema + "." + table_and_values;
    };
    sql::Stmt cfg(db, path, into("INSERT OR REPLACE", "run_config (run, key, value) VALUES (?,?,?)").c_str());
    for (auto& [k, v] : run.config) {
        cfg.bind(1, id); cfg.bind(2, k); cfg.bind(3, v); cfg.run();
    }
    sql::Stmt met(db, path, into("INSERT OR REPLACE", "run_metrics (run, key, value) VALUES (?,?,?)").c_str());
    for (auto& [k, v] : run.metrics) {
        if (!std::isfinite(v))
            throw Error(path + ": run metric '" + k + "' is " + std::to_string(v) + ", not a finite number",
                        Error::Kind::Internal);
        met.bind(1, id); met.bind(2, k); met.bind(3, v); met.run();
    }
    // The bulk of a run, through one INSERT … SELECT per chunk (bulk_insert.hpp), in the order of
    // the tables' keys, so that every row and index entry is appended: events by start, kernel
    // times by kernel, samples by time.
    write_events(db, path, schema, id, run, fresh);
    {
        auto by_kernel = [](const RunKernelTime& lhs, const RunKernelTime& rhs) { return lhs.kernel < rhs.kernel; };
        std::vector<RunKernelTime> sorted;   // only when the run's are not in order already
        if (!std::is_sorted(run.kernel_times.begin(), run.kernel_times.end(), by_kernel)) {
            sorted = run.kernel_times;
            // Stable: of two times given for one kernel, the later one stays (INSERT OR REPLACE).
            std::stable_sort(sorted.begin(), sorted.end(), by_kernel);
        }
        sql::BulkInsert kt(db, path, into("INSERT OR REPLACE", "run_kernels (run, kernel, t_start, t_end)"), 3, "", {},
                           {id});
        for (const RunKernelTime& time : sorted.empty() ? run.kernel_times : sorted) {
            int64_t* row = kt.add();
            row[0] = time.kernel; row[1] = time.t_start; row[2] = time.t_end;
        }
        kt.flush();
    }
    sql::BulkInsert mem(db, path, into("INSERT", "run_memory (run, t, device_bytes, host_bytes)"), 3, "", {}, {id});
    for (const RunMemorySample& sample : run.memory) {
        int64_t* row = mem.add();
        row[0] = sample.t; row[1] = sample.device_bytes; row[2] = sample.host_bytes;
    }
    mem.flush();
}

}  // namespace

namespace {

// The id a new run takes in `schema`: past every run id any run table holds, not only `runs`'
// largest, so that a run whose `runs` row was deleted by hand (its other rows left behind) never
// lends its id, and so its rows, to the next run. Each maximum is one index lookup; run_events,
// which has no index on run, is asked for its last row's run (runs are appended in id order).
int64_t next_run_id(sqlite3* db, const std::string& file, const std::string& schema) {
    static const char* const kRunColumns[][2] = {
        {"runs", "id"},        {"run_config", "run"}, {"run_metrics", "run"},   {"run_kernels", "run"},
        {"run_memory", "run"}, {"run_trace", "run"},  {"run_event_rows", "run"}};
    std::unordered_set<std::string> tables;
    sql::Stmt list(db, file, ("SELECT name FROM " + schema + ".sqlite_master WHERE type = 'table'").c_str());
    while (list.step()) tables.insert(list.text(0));
    std::string query = "SELECT max(m) AS m FROM (SELECT 0 AS m";
    for (const auto& [table, column] : kRunColumns)
        if (tables.count(table))
            query += std::string(" UNION ALL SELECT max(") + column + ") FROM " + schema + "." + table;
    if (tables.count("run_events"))
        query += " UNION ALL SELECT run FROM (SELECT run FROM " + schema + ".run_events ORDER BY rowid DESC LIMIT 1)";
    sql::Stmt max(db, file, ("SELECT m, typeof(m) FROM (" + query + "))").c_str());
    max.step();
    // A run id of another type sorts above every number (max(run) was 'zzz', read as 0: the new run
    // took id 1, another run's); the largest id there is left none (INT64_MAX + 1 was signed
    // overflow: the run was stored as -9223372036854775808, which no --run can name).
    if (max.text(1) != "integer")
        throw Error(file + ": a run table holds the run id '" + printable(max.text(0)) +
                    "', not a whole number, so no id " + "for a new run is known (mhc check " + file +
                    " lists it; --runs-db FILE stores elsewhere)");
    if (max.i64(0) == INT64_MAX)
        throw Error(file + ": holds run " + std::to_string(INT64_MAX) + ", the largest id there is: no id is left " +
                    "for a new run (--runs-db FILE stores elsewhere)");
    return max.i64(0) + 1;
}

// Stores each run in its target's place, in one transaction over all of them. A failure rolls
// every file back (no journal left behind) and says why in one line.
std::vector<int64_t> store(const std::vector<runfiles::Target>& targets, const std::vector<std::pair<size_t, const Run*>>& runs,
                           const std::string& runs_db) {
    runfiles::RunWriter w(targets, runs_db);
    try {
        std::vector<int64_t> ids;
        for (auto [i, run] : runs) {
            const int64_t id = next_run_id(w.db(), w.file(i), w.schema(i));
            sql::Stmt ins(w.db(), w.file(i),
                          ("INSERT INTO " + w.schema(i) +
                           ".runs (id, kind, name, status, created, base_run, trace_fingerprint) VALUES (?,?,?,?,?,?,?)")
                              .c_str());
            ins.bind(1, id);
            ins.bind(2, std::string(to_string(run->kind)));
            ins.bind(3, run->name);
            ins.bind(4, std::string(to_string(run->status)));
            ins.bind(5, now_utc());
            ins.bind(6, run->base_run);
            ins.bind(7, w.print(i));
            ins.run();
            w.claim(i, id);
            write_body(w.db(), w.file(i), w.schema(i), id, *run, true);
            ids.push_back(id);
        }
        w.commit();
        return ids;
    } catch (const Error& e) {
        std::string left = w.abort();
        throw Error(left.empty() ? e.what() : std::string(e.what()) + "; " + left, e.kind());
    }
}

}  // namespace

std::vector<int64_t> add_runs(const std::string& trace_path, const std::vector<Run>& runs,
                              const std::string& runs_db, const std::string& trace_fingerprint) {
    std::vector<std::pair<size_t, const Run*>> items;
    for (const Run& r : runs) items.push_back({0, &r});
    return store({{trace_path, trace_fingerprint}}, items, runs_db);
}

std::vector<int64_t> add_job_runs(const std::vector<JobRun>& ranks, const std::string& runs_db) {
    std::vector<runfiles::Target> targets;
    std::vector<std::pair<size_t, const Run*>> items;
    for (size_t i = 0; i < ranks.size(); ++i) {
        targets.push_back({ranks[i].trace, ranks[i].fingerprint});
        items.push_back({i, &ranks[i].run});
    }
    return store(targets, items, runs_db);
}

int max_job_files() { return runfiles::max_files_per_transaction(); }

int64_t add_run(const std::string& trace_path, const Run& run, const std::string& runs_db,
                const std::string& trace_fingerprint) {
    return store({{trace_path, trace_fingerprint}}, {{0, &run}}, runs_db).at(0);   // the run itself, not a copy
}

int64_t begin_run(const std::string& trace_path, RunKind kind, const std::string& name,
                  const std::string& runs_db, const std::string& trace_fingerprint) {
    Run r;
    r.kind = kind;
    r.name = name;
    r.status = RunStatus::Incomplete;
    return add_run(trace_path, r, runs_db, trace_fingerprint);
}

void finish_run(const std::string& trace_path, int64_t run_id, const Run& run,
                const std::string& runs_db, const std::string& trace_fingerprint) {
    runfiles::RunWriter w({{trace_path, trace_fingerprint}}, runs_db);
    try {
        // Finished on the trace the run began on: RunWriter refused another (its fingerprint).
        sql::Stmt up(w.db(), w.file(0),
                     "UPDATE runs SET name=?, status=?, base_run=?, trace_fingerprint=? WHERE id=?");
        up.bind(1, run.name); up.bind(2, std::string(to_string(run.status))); up.bind(3, run.base_run);
        up.bind(4, w.print(0)); up.bind(5, run_id);
        up.run();
        if (sqlite3_changes(w.db()) != 1)
            throw Error(w.file(0) + ": run " + std::to_string(run_id) + " does not exist");
        write_body(w.db(), w.file(0), w.schema(0), run_id, run, has_no_events(w.db(), w.file(0), w.schema(0), run_id));
        w.commit();
    } catch (const Error& e) {
        std::string left = w.abort();
        throw Error(left.empty() ? e.what() : std::string(e.what()) + "; " + left, e.kind());
    }
}

namespace {

// How many entries of each tree the check reads from its end: the last leaf and the leaves
// before it that a page split of it takes in (SQLite balances a page with up to two neighbours).
constexpr int kEndEntries = 4096;

// The damage a store would meet, found by reading what it reads (a sound file costs the check a
// few pages per table, whatever the file's size): the schema, the last pages of every tree it
// appends to (each table the store writes, with its indexes; in a runs database every table,
// meta and traces included) and the free-page list it takes new pages from. SQLite's
// quick_check then names the damaged page (only of a damaged file, and only the damaged table).
// A damaged page no store reads (an older run's rows) is left to the command that reads it and to
// `mhc check`, which reads every page: it costs no work.
std::vector<std::string> damage_the_store_meets(sqlite3* db, const std::string& file, bool whole_file) {
    std::vector<std::string> tables;
    {
        // Run tables: runs and run_*, not the trace's own, which the command reads whole.
        sql::Stmt names(
            db, file,
            whole_file
                ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                : "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                  "(name = 'runs' OR name LIKE 'run\\_%' ESCAPE '\\')");
        while (names.step()) tables.push_back(names.text(0));
    }
    for (const std::string& table : tables)
        if (const std::string why = sql::read_table_end(db, file, table, kEndEntries); !why.empty()) {
            std::vector<std::string> named = sql::quick_check(db, file, table);
            return named.empty() ? std::vector<std::string>{why} : named;
        }
    if (const std::string why = sql::read_freelist(db, file); !why.empty()) {
        std::vector<std::string> named = sql::quick_check(db, file);
        return named.empty() ? std::vector<std::string>{why} : named;
    }
    return {};
}

}   // namespace

void check_run_pages(const std::string& trace_path, const std::string& runs_db) {
    runfiles::RunReader reader(trace_path, runs_db);
    // One read transaction: the pages read belong to one state of the file.
    const bool begun = sqlite3_get_autocommit(reader.db()) != 0;
    if (begun) sql::exec(reader.db(), reader.file, "BEGIN");
    const bool whole_file = !runs_db.empty() && reader.file == runs_db;
    std::vector<std::string> problems, shape;
    try {
        problems = damage_the_store_meets(reader.db(), reader.file, whole_file);
        // Columns the store's inserts name that a table lacks (or one of the file's own that needs a
        // value): the store failed after the work ("table main.runs has no column named base_run", exit 4).
        if (problems.empty()) shape = runfiles::run_table_problems(reader.db(), reader.file, "main", whole_file);
    } catch (...) {
        if (begun) sqlite3_exec(reader.db(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
    if (begun) sqlite3_exec(reader.db(), "ROLLBACK", nullptr, nullptr, nullptr);
    if (!shape.empty())
        throw Error(reader.file + ": " + shape.front() +
                    (shape.size() > 1 ? " (and " + std::to_string(shape.size() - 1) + " more)" : "") +
                    "; runs cannot be stored in it (--no-store or --runs-db FILE leaves it alone)");
    if (problems.empty()) {
        next_run_id(reader.db(), reader.file, "main");   // an id for the run is there, or it is refused now
        return;
    }
    const std::string more = problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "";
    throw Error(reader.file + ": the file is truncated or corrupt: " + problems.front() + more +
                "; runs cannot be stored in it " + "(mhc check " +
                (reader.file == trace_path ? trace_path : trace_path + " --runs-db " + reader.file) +
                " lists the damage; --no-store or --runs-db FILE leaves it alone)");
}

}  // namespace mhc::trace
