// `mhc check` on a file: its pages, value rules, runs and content digest, then the rules of the
// other parts (check_parts.hpp).
#include "mhc/trace/check.hpp"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "check_parts.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/limits.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "rules.hpp"
#include "run_files.hpp"
#include "sqlite_util.hpp"
#include "trace_tables.hpp"

namespace mhc::trace {

namespace {

using checks::check_job_meta;
using checks::check_references;
using checks::check_run_references;
using checks::quoted;

// Rows of run tables whose run has no `runs` row, one problem per run; `why` ends the message.
void report_orphan_rows(sqlite3* db, const std::string& path, std::initializer_list<const char*> tables,
                        const std::function<bool(const char*)>& has_table, const std::string& why, CheckReport& report) {
    for (const char* table : tables) {
        if (!has_table(table)) continue;
        sql::Stmt orphans(db, path,
                          ("SELECT run, count(*) FROM " + std::string(table) +
                           " WHERE run NOT IN (SELECT id FROM runs) GROUP BY run ORDER BY run")
                              .c_str());
        while (orphans.step())
            report.problems.push_back({"unknown-run", table, orphans.i64(0),
                                       std::to_string(orphans.i64(1)) + " row(s) of run " +
                                           std::to_string(orphans.i64(0)) + ", which has no runs row" + why});
    }
}

// The value rules (rules.hpp) on the file itself: every row that breaks one is listed, where
// the Reader stops at the first.
void check_values(const Reader& reader, CheckReport& r) {
    std::vector<const rules::Table*> tables = rules::all();
    if (reader.has_requested_bytes()) tables.front() = &rules::allocations_with_requested();
    if (reader.has_segments()) tables.push_back(&rules::segments());   // absent from older traces
    for (const rules::Table* c : {&rules::modules(), &rules::kernel_info()})
        if (reader.has_table(c->name)) tables.push_back(c);
    if (reader.has_table("saved_tensors")) {
        sql::Stmt c(reader.handle(), reader.path(), "SELECT count(*) FROM pragma_table_info('saved_tensors') WHERE name='packs'");
        tables.push_back(c.step() && c.i64(0) > 0 ? &rules::saved_tensors_packs() : &rules::saved_tensors());
    }
    for (const rules::Table* t : tables) {
        sql::Stmt s(reader.handle(), reader.path(), rules::violations_sql(*t).c_str());
        while (s.step()) {
            int64_t row = s.i64(0);
            for (size_t i = 0; i < t->columns.size(); ++i) {
                std::string p = rules::value_problem(t->columns[i], s.get(), static_cast<int>(i));
                if (p.empty()) continue;
                bool range = p.find("outside") != std::string::npos;
                r.problems.push_back({range ? t->columns[i].rule : "type", t->name, row, p});
            }
        }
        if (!t->unique_first) continue;
        std::string dup = std::string("SELECT ") + t->columns[0].name + ", count(*) FROM " + t->name +
                          " GROUP BY 1 HAVING count(*) > 1";
        sql::Stmt d(reader.handle(), reader.path(), dup.c_str());
        while (d.step())
            r.problems.push_back({"duplicate-id", t->name, d.i64(0),
                                  "id appears " + std::to_string(d.i64(1)) + " times"});
    }
    // String ids index an array: they must run densely from 1 to the row count.
    sql::Stmt s(reader.handle(), reader.path(),
                "SELECT id, typeof(id), typeof(text), (SELECT count(*) FROM strings) FROM strings "
                "WHERE typeof(id) != 'integer' OR typeof(text) != 'text' OR id < 0 OR "
                "id > (SELECT count(*) FROM strings)");
    while (s.step()) {
        std::string msg = s.text(1) != "integer" ? "id holds " + s.text(1) + ", not an integer"
                          : s.text(2) != "text"  ? "text is " + s.text(2) + ", not text"
                                                 : "id is outside [0, " + std::to_string(s.i64(3)) +
                                                       "]: string ids run densely from 1 to the row count";
        r.problems.push_back({s.text(1) != "integer" || s.text(2) != "text" ? "type" : "range", "strings",
                              s.i64(0), msg});
    }
    sql::Stmt d(reader.handle(), reader.path(),
                "SELECT id, count(*) FROM strings GROUP BY id HAVING count(*) > 1");
    while (d.step())
        r.problems.push_back({"duplicate-id", "strings", d.i64(0), "id appears " + std::to_string(d.i64(1)) + " times"});
    // All allocations together (total() is a real: it cannot overflow): the row where the sum
    // passes 2^62 is named, as loading would.
    sql::Stmt tot(reader.handle(), reader.path(), "SELECT total(bytes) FROM allocations");
    if (r.ok() && tot.step() && tot.f64(0) > static_cast<double>(limits::kMaxTotalBytes) * 0.999) {
        sql::Stmt rows(reader.handle(), reader.path(), "SELECT id, bytes FROM allocations ORDER BY id");
        int64_t total = 0;
        while (rows.step()) {
            if (total > limits::kMaxTotalBytes - rows.i64(1)) {
                r.problems.push_back({"total-size", "allocations", rows.i64(0),
                                      "the allocations up to this one hold more than 2^62 bytes together"});
                break;
            }
            total += rows.i64(1);
        }
    }
}

// The runs stored in the trace, read as `mhc info`, `mhc export` and the viewer read them (kinds,
// statuses, finite metrics, event, kernel and memory rows in range): a run they would refuse is a
// problem of the trace. So are rows of a run table whose run has no `runs` row, which a store
// cut short or a run deleted by hand leaves, and a run's events outside its range.
// Run ids below 1, which no command names (--run takes 1 or more; base_run 0 is "none"): an older
// mhc stored a run past the largest id as -9223372036854775808.
void report_run_ids(sqlite3* db, const std::string& file, CheckReport& report) {
    sql::Stmt low(db, file, "SELECT id FROM runs WHERE id < 1 ORDER BY id");
    while (low.step())
        report.problems.push_back(
            {"range", "runs", low.i64(0),
             "id is " + std::to_string(low.i64(0)) + ": run ids are 1 or more, which --run names"});
}

// The ids of the trace's runs (in a runs database: of this trace's), read as they are: list_runs
// refuses them all at the first run it cannot read.
std::vector<int64_t> run_ids(const std::string& trace, const std::string& runs_db) {
    runfiles::RunReader runs(trace, runs_db);
    std::vector<int64_t> ids;
    sql::Stmt rows(runs.db(), runs.file,
                   ("SELECT id FROM runs WHERE typeof(id) = 'integer' AND " + runs.runs_of_trace + " ORDER BY id").c_str());
    while (rows.step()) ids.push_back(rows.i64(0));
    return ids;
}

void check_runs(const std::string& path, Reader& reader, CheckReport& report) {
    if (!reader.has_table("runs")) return;
    report_run_ids(reader.handle(), path, report);
    // Every run is read as its readers read it, each refusal listed. The ids come from the rows,
    // not from list_runs, which stops at the first run it refuses: one bad metric hid every other
    // run's problem before 2026-12-06.
    for (const int64_t id : run_ids(path, "")) {
        try {
            load_run(path, id);
        } catch (const Error& e) { report.problems.push_back({"run", "file", 0, e.what()}); }
    }
    report_orphan_rows(reader.handle(), path,
                       {"run_config", "run_metrics", "run_events", "run_kernels", "run_memory", "run_event_rows"},
                       [&](const char* table) { return reader.has_table(table); },
                       " (a store cut short, or a run deleted in part)", report);
    // A run's events are one range of rowids (run_event_rows): events of the run outside it are
    // another run's, left under an id the store gave again.
    if (!reader.has_table("run_event_rows")) return;
    sql::Stmt outside(reader.handle(), path,
                      "SELECT e.run, count(*) FROM run_events e JOIN run_event_rows x ON e.run = x.run "
                      "WHERE e.rowid NOT BETWEEN x.first_row AND x.last_row GROUP BY e.run ORDER BY e.run");
    while (outside.step())
        report.problems.push_back({"unknown-run", "run_events", outside.i64(0),
                                   std::to_string(outside.i64(1)) + " event(s) of run " +
                                       std::to_string(outside.i64(0)) +
                                       " outside its rows in run_event_rows (left by another run of that id)"});
}

}  // namespace

// The content digest in meta is the rows' (trace_tables.hpp): a row changed with the digest
// triggers dropped, or a digest written by hand, would let runs stored for the old rows pass as
// this trace's. A digest the triggers marked edited says so itself (the identity changed).
void check_content_digest(const Reader& reader, CheckReport& r) {
    const auto meta = reader.meta();
    auto it = meta.find(kContentDigestKey);
    if (it == meta.end() || it->second.rfind(kEditedDigestPrefix, 0) == 0) return;
    const std::string now = content_digest_of(reader.handle(), reader.path(), it->second);
    if (now != it->second)
        r.problems.push_back({"content-digest", "meta", 0,
                              std::string(kContentDigestKey) + ": " + quoted(it->second) +
                                  " but the rows give " + now +
                                  ": a row was changed without the trace's triggers, so runs stored for it "
                                  "elsewhere (--runs-db) may be of other rows"});
}

CheckReport check_file(const std::string& path, bool full) {
    CheckReport r;
    std::string problem = open_problem(path);   // throws sql::Busy: a locked file is not a damaged one
    if (!problem.empty()) {
        r.problems.push_back({"file", "file", 0, problem});
        return r;
    }
    try {
        Reader reader(path);
        {
            // quick_check reads every page: a truncated or corrupt file shows up here. The full
            // integrity_check also matches every index entry with its row (an index damaged by
            // a half-written transaction: "row 99825 missing from index").
            for (const std::string& damage : sql::quick_check(reader.handle(), path, "", full)) {
                const bool index = damage.find("index") != std::string::npos;
                r.problems.push_back(
                    {"corrupt", "file", 0,
                     path + (index ? ": an index is damaged: " : ": the file is truncated or corrupt: ") + damage});
            }
        }
        if (!r.ok()) return r;
        // Run tables a store cannot write (simulate refuses them before its work): said alone, as
        // the reads of the runs would stop at a missing column ("no such column: base_run").
        for (const std::string& why : runfiles::run_table_problems(reader.handle(), path, "main", false))
            r.problems.push_back({"run-tables", "file", 0, path + ": " + why});
        if (!r.ok()) return r;
        check_values(reader, r);
        if (!r.ok()) return r;   // loading would stop at the first of them
        check_content_digest(reader, r);
        TraceData t = load_trace(path, "", LoadFrom::Rows);   // the rows themselves, never a cached copy
        CheckReport rows = check_trace(t);
        r.problems.insert(r.problems.end(), rows.problems.begin(), rows.problems.end());
        check_references(reader, r);
        check_job_meta(t, r);
        CheckReport capture = check_capture(t);
        r.problems.insert(r.problems.end(), capture.problems.begin(), capture.problems.end());
        check_runs(path, reader, r);
    } catch (const sql::Busy&) {
        throw;
    } catch (const Error& e) {
        r.problems.push_back({"corrupt", "file", 0, e.what()});
    }
    return r;
}

CheckReport check_runs_db(const std::string& trace, const std::string& runs_db) {
    CheckReport report;
    std::vector<int64_t> runs;
    try {
        {
            // Every page first, as check_file does for the trace: a damaged one is listed by its
            // number (reading the runs would stop at it, saying only "malformed").
            RunsDbReader pages(trace, runs_db);   // refuses another trace's runs (fingerprint), a non-runs database
            for (const std::string& damage : sql::quick_check(pages.handle(), runs_db))
                report.problems.push_back(
                    {"corrupt", "file", 0, runs_db + ": the file is truncated or corrupt: " + damage});
            // Then run tables a store cannot write (as check_file says them for a trace's).
            if (report.ok())
                for (const std::string& why : runfiles::run_table_problems(pages.handle(), runs_db, "main", true))
                    report.problems.push_back({"run-tables", "file", 0, runs_db + ": " + why});
        }
        if (!report.ok()) return report;
        runs = run_ids(trace, runs_db);
        for (const int64_t id : runs) {
            try {
                load_run(trace, id, runs_db);
            } catch (const Error& e) { report.problems.push_back({"run", "file", 0, e.what()}); }
        }
    } catch (const sql::Busy&) {
        throw;
    } catch (const Error& e) {
        report.problems.push_back({"file", "file", 0, e.what()});
        return report;
    }
    std::string problem;
    sqlite3* db = sql::open_existing(runs_db, false, problem);
    if (!db) {
        report.problems.push_back({"file", "file", 0, problem});
        return report;
    }
    struct Close {
        sqlite3* db;
        ~Close() { sqlite3_close(db); }
    } close{db};
    try {
        sql::Stmt attach(db, runs_db, "ATTACH ? AS tr");
        attach.bind(1, trace);
        attach.run();
        // This trace's runs (a job's database also holds the other ranks'), by id.
        sql::exec(db, runs_db, "CREATE TEMP TABLE mine (id INTEGER PRIMARY KEY)");
        sql::Stmt ins(db, runs_db, "INSERT INTO temp.mine VALUES (?)");
        for (const int64_t id : runs) {
            ins.bind(1, id);
            ins.run();
        }
        auto has = [&](const char* name) { return runfiles::has_table(db, runs_db, name, "main"); };
        if (has("runs")) report_run_ids(db, runs_db, report);
        check_run_references({db, runs_db, "tr.", "temp.mine"}, has, report);
        report_orphan_rows(db, runs_db,
                           {"run_config", "run_metrics", "run_events", "run_kernels", "run_memory", "run_event_rows",
                            "run_trace"},
                           has, "", report);
        if (has("run_trace") && has("traces")) {
            sql::Stmt lost(db, runs_db,
                           "SELECT run, trace FROM run_trace WHERE trace NOT IN (SELECT id FROM traces) ORDER BY run");
            while (lost.step())
                report.problems.push_back({"unknown-id", "run_trace", lost.i64(0),
                                      "trace refers to trace " + std::to_string(lost.i64(1)) +
                                          ", which does not exist: run " + std::to_string(lost.i64(0)) +
                                          " belongs to no trace of this database"});
        }
    } catch (const sql::Busy&) {
        throw;
    } catch (const Error& e) {
        report.problems.push_back({"corrupt", "file", 0, e.what()});
    }
    return report;
}

void require_ok(const CheckReport& report, const std::string& path) {
    if (report.ok()) return;
    const Problem& p = report.problems.front();
    std::string msg = p.table == "file"   ? p.message
                      : p.table == "meta" ? path + ": meta " + p.message + " [" + p.rule + "]"
                                          : where_row(path, p.table, p.row, p.message + " [" + p.rule + "]");
    if (report.problems.size() > 1)
        msg += " (and " + std::to_string(report.problems.size() - 1) +
               (report.problems.size() == 2 ? " more problem" : " more problems") + "; run `mhc check` for the list)";
    throw Error(msg);
}

TraceData load_checked_trace(const std::string& path) {
    TraceData t = load_trace(path);
    require_ok(check_trace(t), path);
    return t;
}

}  // namespace mhc::trace
