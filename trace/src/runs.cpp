// Runs are added to an existing trace in one transaction each, so an interrupted
// simulation or replay leaves the file as it was (or a run explicitly marked incomplete).
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
    for (auto [column, col] : cols) {
        std::string problem = rules::value_problem(*column, s.get(), col);
        if (!problem.empty())
            throw Error(file + ": " + table + " row " + std::to_string(row) + " (run " + std::to_string(run) +
                        "): " + problem + " [" + column->rule + "]");
    }
}

// The integer in column `col` of `stmt` when it keeps `rule`; else check() throws its message.
// Each value is read once (type, then value): a run of millions of events is read at the speed
// of SQLite's rows, not of three calls a value.
int64_t value(const std::string& file, const char* table, int64_t run, int64_t row, const sql::Stmt& stmt,
              const Column& rule, int col) {
    if (sqlite3_column_type(stmt.get(), col) == SQLITE_INTEGER) {
        const int64_t got = stmt.i64(col);
        if (got >= rule.min && got <= rule.max) return got;
    }
    check(file, table, run, row, stmt, {{&rule, col}});
    return stmt.i64(col);   // a NULL the rule allows (none of the run tables' rules does)
}

// A metric is a number: text or a blob is refused rather than read as 0.
double metric(const std::string& file, int64_t run, const std::string& key, const sql::Stmt& s, int col) {
    int type = sqlite3_column_type(s.get(), col);
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
        throw Error(file + ": run_metrics of run " + std::to_string(run) + ": '" + key + "' is not a number [type]");
    const double number = s.f64(col);
    // Infinity is no figure (a peak of +Inf bytes printed as -8388608 TiB): never written, refused.
    if (!std::isfinite(number))
        throw Error(file + ": run_metrics of run " + std::to_string(run) + ": '" + key + "' is " + std::to_string(number) +
                    ", not a finite number [range]");
    const MetricDomain domain = metric_domain(key);
    const double lowest = domain == MetricDomain::Capacity ? -1 : 0;
    const bool whole = domain == MetricDomain::Count || domain == MetricDomain::Capacity;
    if (domain != MetricDomain::Signed && (number < lowest || (whole && number != std::floor(number)))) {
        std::ostringstream shown;
        shown << number;
        const char* what = domain == MetricDomain::Capacity ? "a capacity in bytes: 0 or more, or -1 for unlimited"
                           : domain == MetricDomain::Count  ? "a count: a whole number, 0 or more"
                                                            : "an amount of bytes or time: 0 or more";
        throw Error(file + ": run_metrics of run " + std::to_string(run) + ": '" + key + "' is " + shown.str() +
                    ", out of its domain (" + what + ") [range]");
    }
    return number;
}
}  // namespace run_rules

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

int64_t max_event_rowid(sqlite3* db, const std::string& path, const std::string& schema) {
    sql::Stmt query(db, path, ("SELECT coalesce(max(rowid), 0) FROM " + schema + ".run_events").c_str());
    query.step();
    return query.i64(0);
}

// The run's events, appended to run_events in start order (stable, so that load_run's
// ORDER BY t_start, rowid gives the simulator's order back), and their rowid range in
// run_event_rows, which load_run reads instead of an index on run (docs/results.md, "Writing a
// run"). `fresh`: the run had no events before (a new run, or one begun with none).
void write_events(sqlite3* db, const std::string& path, const std::string& schema, int64_t id, const Run& run,
                  bool fresh) {
    const int64_t before = max_event_rowid(db, path, schema);
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
    const int64_t after = max_event_rowid(db, path, schema);
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
    if (run.kind != RunKind::Simulated || run.metrics.count("kernels_reached")) return;
    if (run.status != RunStatus::Complete && run.status != RunStatus::Oom) return;
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
        if (run.status == RunStatus::Complete) last_unmoved = INT64_MAX;
        else if (run.metrics.count("oom_time_ns")) last_unmoved = static_cast<int64_t>(run.metrics.at("oom_time_ns")) - 1;
    }
    for (const RunKernelTime& k : recorded)
        if (k.t_start <= last_unmoved && !stored.count(k.kernel)) run.kernel_times.push_back(k);
    std::sort(run.kernel_times.begin(), run.kernel_times.end(),
              [](const RunKernelTime& a, const RunKernelTime& b) { return a.kernel < b.kernel; });
}

// One row of run_events as `row` holds it in columns from `col` (kind, t_start, t_end, allocation,
// kernel, bytes, rowid), checked against the rules.
RunEvent event_at(const std::string& file, int64_t run_id, const sql::Stmt& row, int col) {
    const int64_t rowid = row.i64(col + 6);
    auto at = [&](const run_rules::Column& rule, int offset) {
        return run_rules::value(file, "run_events", run_id, rowid, row, rule, col + offset);
    };
    RunEvent event;   // the columns in order, so that the first that breaks its rule is the one named
    event.kind = static_cast<EventKind>(at(run_rules::kKind, 0));
    event.t_start = at(run_rules::kTime, 1);
    event.t_end = at(run_rules::kEndTime, 2);
    event.allocation = at(run_rules::kId, 3);
    event.kernel = at(run_rules::kId, 4);
    event.bytes = at(run_rules::kBytes, 5);
    return event;
}

// A run's events in start order (of one instant: by rowid), found by run: through the index
// run_events_by_run in files made before run_event_rows, by reading the whole table in others.
void read_events_by_run(sqlite3* db, const std::string& file, int64_t run_id, std::vector<RunEvent>& out) {
    sql::Stmt rows(db, file,
                   "SELECT kind, t_start, t_end, allocation, kernel, bytes, rowid FROM run_events "
                   "WHERE run=? ORDER BY t_start, rowid");
    rows.bind(1, run_id);
    while (rows.step()) out.push_back(event_at(file, run_id, rows, 0));
}

// The same events read from their rowid range (run_event_rows), when the file has one for the run,
// the rows in it are all the run's, without a gap, and the rows just outside it are not the run's:
// a range that does not fit (rows renumbered by a VACUUM, changed by a writer without the
// triggers) gives false, `out` left empty, and the caller reads by run. The same order as
// read_events_by_run: a range is written in start order, and sorted stably here when a file says
// otherwise.
bool read_event_range(sqlite3* db, const std::string& file, int64_t run_id, std::vector<RunEvent>& out) {
    if (!runfiles::has_table(db, file, "run_event_rows")) return false;
    sql::Stmt range(db, file, "SELECT first_row, last_row FROM run_event_rows WHERE run=?");
    range.bind(1, run_id);
    if (!range.step()) return false;
    const int64_t first = range.i64(0), last = range.i64(1);
    sql::Stmt rows(db, file,
                   "SELECT run, kind, t_start, t_end, allocation, kernel, bytes, rowid FROM run_events "
                   "WHERE rowid BETWEEN ? AND ?");
    rows.bind(1, first); rows.bind(2, last);
    // A range past the table's last row does not fit; one that may is reserved, not grown by
    // doubling (4 M events are 190 MB), to at most what the file's rowids allow.
    if (last > max_event_rowid(db, file, "main")) return false;
    if (last >= first) out.reserve(static_cast<size_t>(std::min<int64_t>(last - first + 1, int64_t{1} << 24)));
    int64_t expected = first;
    while (rows.step()) {
        if (sqlite3_column_type(rows.get(), 0) != SQLITE_INTEGER || rows.i64(0) != run_id || rows.i64(7) != expected) {
            out.clear();
            return false;
        }
        out.push_back(event_at(file, run_id, rows, 1));
        ++expected;
    }
    sql::Stmt beside(db, file, "SELECT count(*) FROM run_events WHERE rowid IN (?, ?) AND run = ?");
    beside.bind(1, first - 1); beside.bind(2, last + 1); beside.bind(3, run_id);
    beside.step();
    if ((last >= first && expected != last + 1) || beside.i64(0) != 0) {
        out.clear();
        return false;
    }
    auto by_start_time = [](const RunEvent& lhs, const RunEvent& rhs) { return lhs.t_start < rhs.t_start; };
    if (!std::is_sorted(out.begin(), out.end(), by_start_time)) std::stable_sort(out.begin(), out.end(), by_start_time);
    return true;
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

namespace {

// The one line that refuses run `id` ("name") when it is stale (RunReader::stale_reason), or "".
std::string stale_line(const runfiles::RunReader& reader, int64_t id, const std::string& name, const std::string& stored) {
    std::string why = reader.stale_reason(stored);
    if (why.empty()) return why;
    return reader.file + ": run " + std::to_string(id) + (name.empty() ? "" : " (" + printable(name) + ")") + " " + why +
           "; compute it again from the trace as it is: mhc simulate " + reader.trace_path() +
           " (mhc validate for a replay)";
}

// What a reader says of the stale runs it leaves out, in one line.
std::string stale_note(const runfiles::RunReader& reader, const std::vector<RunInfo>& stale) {
    if (stale.empty()) return "";
    if (stale.size() == 1) {
        const RunInfo& run = stale.front();
        return reader.file + ": run " + std::to_string(run.id) + (run.name.empty() ? "" : " (" + printable(run.name) + ")") +
               " is not shown: it " + reader.stale_reason(run.trace_fingerprint) +
               "; compute it again from the trace as it is: mhc simulate " + reader.trace_path() +
               " (mhc validate for a replay)";
    }
    std::string ids;
    for (size_t i = 0; i < stale.size() && i < 8; ++i) ids += (i ? ", " : "") + std::to_string(stale[i].id);
    if (stale.size() > 8) ids += ", … (" + std::to_string(stale.size()) + " in all)";
    return reader.file + ": runs " + ids + " are not shown: they were computed from other data than " + reader.trace_path() +
           " holds now (its rows or meta were changed after they were stored); compute them again from the trace "
           "as it is: mhc simulate " + reader.trace_path() + " (mhc validate for a replay)";
}

}   // namespace

std::vector<RunInfo> list_runs(const std::string& trace_path, const std::string& runs_db) {
    return list_all_runs(trace_path, runs_db).runs;
}

RunList list_all_runs(const std::string& trace_path, const std::string& runs_db, bool figures) {
    runfiles::RunReader r(trace_path, runs_db);
    const std::string& trace_path_ = r.file;
    std::vector<RunInfo> out;
    sql::Stmt s(r.db(), trace_path_,
                ("SELECT id, kind, name, status, created, base_run, " + r.print_column + " FROM runs WHERE " +
                 r.runs_of_trace + " ORDER BY id")
                    .c_str());
    while (s.step()) {
        out.push_back({s.i64(0), run_kind_from(s.text(1), trace_path_, s.i64(0)), s.text(2),
                       run_status_from(s.text(3), trace_path_, s.i64(0)), s.text(4), s.i64(5), {}, {},
                       s.text(6), {}});
        out.back().stale = stale_line(r, out.back().id, out.back().name, out.back().trace_fingerprint);
    }
    if (figures) {
        std::map<int64_t, RunInfo*> by_id;
        for (auto& run : out) by_id[run.id] = &run;
        sql::Stmt m(r.db(), trace_path_, "SELECT run, key, value FROM run_metrics");
        while (m.step())
            if (auto it = by_id.find(m.i64(0)); it != by_id.end())
                it->second->metrics[m.text(1)] = run_rules::metric(trace_path_, m.i64(0), m.text(1), m, 2);
        sql::Stmt c(r.db(), trace_path_, "SELECT run, key, value FROM run_config");
        while (c.step())
            if (auto it = by_id.find(c.i64(0)); it != by_id.end()) it->second->config[c.text(1)] = c.text(2);
    }
    r.trace->require_unchanged();
    RunList list;
    for (RunInfo& run : out) (run.stale.empty() ? list.runs : list.stale).push_back(std::move(run));
    list.note = stale_note(r, list.stale);
    return list;
}

Run load_run(const std::string& trace_path_arg, int64_t run_id, const std::string& runs_db) {
    runfiles::RunReader r(trace_path_arg, runs_db);
    sqlite3* db = r.db();
    const std::string& trace_path = r.file;
    Run run;
    {
        sql::Stmt s(db, trace_path,
                    ("SELECT kind, name, status, base_run, " + r.print_column + " FROM runs WHERE id=? AND " +
                     r.runs_of_trace)
                        .c_str());
        s.bind(1, run_id);
        if (!s.step())
            throw Error(trace_path + ": run " + std::to_string(run_id) + " does not exist");
        if (std::string stale = stale_line(r, run_id, s.text(1), s.text(4)); !stale.empty()) throw Error(stale);
        run.kind = run_kind_from(s.text(0), trace_path, run_id); run.name = s.text(1);
        run.status = run_status_from(s.text(2), trace_path, run_id); run.base_run = s.i64(3);
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
    if (!read_event_range(db, trace_path, run_id, run.events)) read_events_by_run(db, trace_path, run_id, run.events);
    {
        sql::Stmt s(db, trace_path,
                    "SELECT kernel, t_start, t_end FROM run_kernels WHERE run=? ORDER BY kernel");
        s.bind(1, run_id);
        int64_t row = 0;
        while (s.step()) {
            ++row;
            const int64_t kernel = run_rules::value(trace_path, "run_kernels", run_id, row, s, run_rules::kId, 0);
            const int64_t start = run_rules::value(trace_path, "run_kernels", run_id, row, s, run_rules::kTime, 1);
            const int64_t end = run_rules::value(trace_path, "run_kernels", run_id, row, s, run_rules::kEndTime, 2);
            run.kernel_times.push_back({kernel, start, end});
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
    r.trace->require_unchanged();
    return run;
}

RunsDbReader::RunsDbReader(const std::string& trace_path, const std::string& runs_db)
    : reader_(std::make_unique<runfiles::RunReader>(trace_path, runs_db)) {}
RunsDbReader::~RunsDbReader() = default;
sqlite3* RunsDbReader::handle() const { return reader_->db(); }
const std::string& RunsDbReader::path() const { return reader_->file; }

}  // namespace mhc::trace
