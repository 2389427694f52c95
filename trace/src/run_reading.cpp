// Reading stored runs back (list_runs, load_run): every row checked against the run tables' rules
// as it is decoded, and a run computed from other data than the trace holds now refused. Writing
// them is runs.cpp's.
#include "mhc/trace/runs.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_set>

#include "mhc/common/error.hpp"
#include "mhc/trace/limits.hpp"
#include "mhc/trace/store.hpp"
#include "rules.hpp"
#include "run_files.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

namespace {

// The rows of a stored run obey rules like the trace's (a damaged or hostile file must not give
// a run silently wrong events: an unknown kind read as a stall, text read as 0, a time that
// overflows a difference). Checked as load_run decodes them; `where` names the row.
namespace run_rules {
using limits::kMaxAbsTime;
using limits::kMaxTotalBytes;
using rules::Column;
const Column kTime{"t_start", -kMaxAbsTime, kMaxAbsTime, false, "range", "a time in ns"};
const Column kEndTime{"t_end", -kMaxAbsTime, kMaxAbsTime, false, "range", "a time in ns"};
const Column kSampleTime{"t", -kMaxAbsTime, kMaxAbsTime, false, "range", "a time in ns"};
const Column kKind{"kind", 0, kEventKindCount - 1, false, "invalid-code", "an event kind code"};
const Column kId{"id", INT64_MIN, INT64_MAX, false, "range", "an id"};
const Column kBytes{"bytes", 0, kMaxTotalBytes, false, "range", "a size in bytes"};
const Column kDeviceBytes{"device_bytes", 0, kMaxTotalBytes, false, "range", "a size in bytes"};
const Column kHostBytes{"host_bytes", 0, kMaxTotalBytes, false, "range", "a size in bytes"};

// Throws naming FILE, the table, the run and the row when a column of `s` breaks its rule.
void check(const std::string& file, const char* table, int64_t run, int64_t row, const sql::Stmt& stmt,
           std::initializer_list<std::pair<const Column*, int>> cols) {
    for (auto [column, col] : cols) {
        std::string problem = rules::value_problem(*column, stmt.get(), col);
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
double metric(const std::string& file, int64_t run, const std::string& key, const sql::Stmt& stmt, int col) {
    int type = sqlite3_column_type(stmt.get(), col);
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
        throw Error(file + ": run_metrics of run " + std::to_string(run) + ": '" + key + "' is not a number [type]");
    const double number = stmt.f64(col);
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
        Scan kernels = trace.scan(TraceTable::Kernels, {"id", "t_start", "t_end"});
        while (kernels.next()) recorded.push_back({kernels[0], kernels[1], kernels[2]});
    }
    std::unordered_set<int64_t> stored;
    for (const RunKernelTime& kt : run.kernel_times) stored.insert(kt.kernel);
    int64_t last_unmoved = INT64_MIN;   // the latest recorded start an unmoved kernel can have
    if (!stored.empty()) {
        for (const RunKernelTime& kt : recorded)
            if (stored.count(kt.kernel))
                last_unmoved = last_unmoved == INT64_MIN ? kt.t_start : std::min(last_unmoved, kt.t_start);
    } else if (metric_or(run, "stall_ns", 1) == 0 && metric_or(run, "coupled_wait_time", 0) == 0) {
        if (run.status == RunStatus::Complete) last_unmoved = INT64_MAX;
        else if (run.metrics.count("oom_time_ns")) last_unmoved = static_cast<int64_t>(run.metrics.at("oom_time_ns")) - 1;
    }
    for (const RunKernelTime& kt : recorded)
        if (kt.t_start <= last_unmoved && !stored.count(kt.kernel)) run.kernel_times.push_back(kt);
    std::sort(run.kernel_times.begin(), run.kernel_times.end(),
              [](const RunKernelTime& lhs, const RunKernelTime& rhs) { return lhs.kernel < rhs.kernel; });
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
    if (last > runfiles::max_event_rowid(db, file, "main")) return false;
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
    runfiles::RunReader reader(trace_path, runs_db);
    const std::string& trace_path_ = reader.file;
    std::vector<RunInfo> out;
    sql::Stmt runs(reader.db(), trace_path_,
                   ("SELECT id, kind, name, status, created, base_run, " + reader.print_column + " FROM runs WHERE " +
                    reader.runs_of_trace + " ORDER BY id")
                       .c_str());
    while (runs.step()) {
        out.push_back({runs.i64(0),
                       run_kind_from(runs.text(1), trace_path_, runs.i64(0)),
                       runs.text(2),
                       run_status_from(runs.text(3), trace_path_, runs.i64(0)),
                       runs.text(4),
                       runs.i64(5),
                       {},
                       {},
                       runs.text(6),
                       {}});
        out.back().stale = stale_line(reader, out.back().id, out.back().name, out.back().trace_fingerprint);
    }
    if (figures) {
        std::map<int64_t, RunInfo*> by_id;
        for (auto& run : out) by_id[run.id] = &run;
        sql::Stmt metrics(reader.db(), trace_path_, "SELECT run, key, value FROM run_metrics");
        while (metrics.step())
            if (auto it = by_id.find(metrics.i64(0)); it != by_id.end())
                it->second->metrics[metrics.text(1)] = run_rules::metric(trace_path_, metrics.i64(0), metrics.text(1),
                                                                         metrics, 2);
        sql::Stmt config(reader.db(), trace_path_, "SELECT run, key, value FROM run_config");
        while (config.step())
            if (auto it = by_id.find(config.i64(0)); it != by_id.end())
                it->second->config[config.text(1)] = config.text(2);
    }
    reader.trace->require_unchanged();
    RunList list;
    for (RunInfo& run : out) (run.stale.empty() ? list.runs : list.stale).push_back(std::move(run));
    list.note = stale_note(reader, list.stale);
    return list;
}

Run load_run(const std::string& trace_path_arg, int64_t run_id, const std::string& runs_db) {
    runfiles::RunReader reader(trace_path_arg, runs_db);
    sqlite3* db = reader.db();
    const std::string& trace_path = reader.file;
    Run run;
    {
        sql::Stmt stmt(db, trace_path,
                       ("SELECT kind, name, status, base_run, " + reader.print_column + " FROM runs WHERE id=? AND " +
                        reader.runs_of_trace)
                           .c_str());
        stmt.bind(1, run_id);
        if (!stmt.step()) {
            // Said as every reader says it: the file, how many runs it holds and where they are listed.
            sql::Stmt count(db, trace_path, ("SELECT count(*) FROM runs WHERE " + reader.runs_of_trace).c_str());
            const auto runs = static_cast<size_t>(count.step() ? count.i64(0) : 0);
            throw Error(
                no_such_run(reader.trace_path(), run_id, runs, trace_path == reader.trace_path() ? "" : runs_db));
        }
        if (std::string stale = stale_line(reader, run_id, stmt.text(1), stmt.text(4)); !stale.empty())
            throw Error(stale);
        run.kind = run_kind_from(stmt.text(0), trace_path, run_id);
        run.name = stmt.text(1);
        run.status = run_status_from(stmt.text(2), trace_path, run_id);
        run.base_run = stmt.i64(3);
    }
    {
        sql::Stmt stmt(db, trace_path, "SELECT key, value FROM run_config WHERE run=?");
        stmt.bind(1, run_id);
        while (stmt.step()) run.config[stmt.text(0)] = stmt.text(1);
    }
    {
        sql::Stmt stmt(db, trace_path, "SELECT key, value FROM run_metrics WHERE run=?");
        stmt.bind(1, run_id);
        while (stmt.step()) run.metrics[stmt.text(0)] = run_rules::metric(trace_path, run_id, stmt.text(0), stmt, 1);
    }
    if (!read_event_range(db, trace_path, run_id, run.events)) read_events_by_run(db, trace_path, run_id, run.events);
    {
        sql::Stmt stmt(db, trace_path, "SELECT kernel, t_start, t_end FROM run_kernels WHERE run=? ORDER BY kernel");
        stmt.bind(1, run_id);
        int64_t row = 0;
        while (stmt.step()) {
            ++row;
            const int64_t kernel = run_rules::value(trace_path, "run_kernels", run_id, row, stmt, run_rules::kId, 0);
            const int64_t start = run_rules::value(trace_path, "run_kernels", run_id, row, stmt, run_rules::kTime, 1);
            const int64_t end = run_rules::value(trace_path, "run_kernels", run_id, row, stmt, run_rules::kEndTime, 2);
            run.kernel_times.push_back({kernel, start, end});
        }
    }
    {
        sql::Stmt stmt(db, trace_path,
                       "SELECT t, device_bytes, host_bytes, rowid FROM run_memory WHERE run=? ORDER BY t");
        stmt.bind(1, run_id);
        while (stmt.step()) {
            run_rules::check(
                trace_path, "run_memory", run_id, stmt.i64(3), stmt,
                {{&run_rules::kSampleTime, 0}, {&run_rules::kDeviceBytes, 1}, {&run_rules::kHostBytes, 2}});
            run.memory.push_back({stmt.i64(0), stmt.i64(1), stmt.i64(2)});
        }
    }
    fill_unmoved_kernels(*reader.trace, run);
    reader.trace->require_unchanged();
    return run;
}

RunsDbReader::RunsDbReader(const std::string& trace_path, const std::string& runs_db)
    : reader_(std::make_unique<runfiles::RunReader>(trace_path, runs_db)) {}
RunsDbReader::~RunsDbReader() = default;
sqlite3* RunsDbReader::handle() const { return reader_->db(); }
const std::string& RunsDbReader::path() const { return reader_->file; }

}  // namespace mhc::trace
