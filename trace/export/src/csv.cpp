// CSV tables: one file per table of the trace (docs/trace-format.md), the schema's columns in
// its order, names and codes written as text, times in ns. Tables are read generically, so a
// table or column added to the schema is exported without a change here.
#include <sqlite3.h>

#include <charconv>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "mhc/common/error.hpp"
#include "mhc/common/made_directory.hpp"
#include "mhc/trace/export/export.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "output.hpp"

namespace mhc::trace::exporter {
namespace {

// Columns that hold a string id or a code, and the table that names them.
struct Named {
    const char* table;
    const char* column;
    const char* lookup;   // "strings" or a code table (id, name)
};
constexpr Named kNamed[] = {
    {"allocations", "label", "strings"},   {"allocations", "category", "categories"},
    {"kernels", "name", "strings"},        {"accesses", "mode", "access_modes"},
    {"copies", "kind", "copy_kinds"},      {"markers", "name", "strings"},
    {"markers", "kind", "marker_kinds"},   {"modules", "name", "strings"},
    {"modules", "type", "strings"},        {"kernel_info", "phase", "phases"},
    {"run_events", "kind", "event_kinds"},
};
// Tables that only name codes: their names appear in the tables that use them.
const std::set<std::string> kLookupTables = {"strings",      "categories",  "access_modes", "copy_kinds",
                                             "marker_kinds", "event_kinds", "phases"};

struct Statement {
    sqlite3_stmt* s = nullptr;
    Statement(sqlite3* db, const std::string& sql, const std::string& file) {
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
            throw Error(where(file, std::string("cannot read: ") + sqlite3_errmsg(db)));
    }
    ~Statement() { sqlite3_finalize(s); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
};

std::string text_at(sqlite3_stmt* s, int i) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, i))) : std::string();
}

// id -> name of a lookup table; empty when the file lacks it.
std::map<int64_t, std::string> lookup(sqlite3* db, const std::string& table, const std::string& file) {
    std::map<int64_t, std::string> out;
    Statement st(db, "SELECT id, " + std::string(table == "strings" ? "text" : "name") + " FROM " + table, file);
    while (sqlite3_step(st.s) == SQLITE_ROW) out[sqlite3_column_int64(st.s, 0)] = text_at(st.s, 1);
    if (table == "strings") out[0] = "";   // id 0 is the empty name
    return out;
}

struct Column {
    std::string name;
    int pk = 0;                                        // position in the primary key, 0: none
    const std::map<int64_t, std::string>* names = nullptr;   // resolved through this lookup
};

std::vector<Column> columns_of(sqlite3* db, const std::string& table, const std::string& file) {
    std::vector<Column> cols;
    Statement st(db, "PRAGMA table_info(\"" + table + "\")", file);
    while (sqlite3_step(st.s) == SQLITE_ROW) cols.push_back({text_at(st.s, 1), sqlite3_column_int(st.s, 5)});
    return cols;
}

// The header name of a column: time columns say their unit.
std::string header_name(const std::string& column) {
    return column == "t" || column.rfind("t_", 0) == 0 ? column + "_ns" : column;
}

std::string value_text(sqlite3_stmt* s, int i) {
    switch (sqlite3_column_type(s, i)) {
    case SQLITE_NULL: return {};
    case SQLITE_INTEGER: return std::to_string(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT: {
        char b[32];   // the shortest text that reads back as the same double
        auto r = std::to_chars(b, b + sizeof b, sqlite3_column_double(s, i));
        return std::string(b, r.ptr);
    }
    default: return csv_field(text_at(s, i));
    }
}

// The trace's tables in schema order, without the lookups.
std::vector<std::string> exported_tables(sqlite3* db, const std::string& file) {
    std::vector<std::string> out;
    Statement st(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
                 file);
    while (sqlite3_step(st.s) == SQLITE_ROW)
        // trace_cache holds binary copies of the other tables, run_event_rows rowids of this file
        // (docs/trace-format.md): no CSV.
        if (std::string table = text_at(st.s, 0);
            !kLookupTables.count(table) && table != "trace_cache" && table != "run_event_rows")
            out.push_back(table);
    return out;
}

bool is_run_table(const std::string& t) { return t == "runs" || t.rfind("run_", 0) == 0; }

// Where the run tables are read: the trace itself, or its runs database (--runs-db, checked by
// list_runs to hold runs of this trace) on a connection of its own, which waits for a lock under
// the runs database's name; and which of their runs are exported.
struct RunSource {
    sqlite3* db = nullptr;   // the trace's connection, or the runs database's
    std::unique_ptr<RunsDbReader> runs_db;
    std::string file;
    std::string ids;   // an SQL list of run ids, "(3, 4)"; empty: every run in `file`
};

RunSource run_source(const std::string& trace_path, sqlite3* db, const CsvOptions& opt) {
    RunSource out;
    out.db = db;
    out.file = trace_path;
    // Only the runs of this trace as it is now: a runs database may hold a job's, and a run
    // computed from other data (the trace edited after it was stored) is not exported as its.
    const bool own = opt.runs_db.empty() || opt.runs_db == trace_path;
    const RunList listed = list_all_runs(trace_path, own ? "" : opt.runs_db, false);   // refuses another trace's
    if (!own) out.file = opt.runs_db;
    // The trace's own run tables as they are (rows of no run among them) when every run is its.
    if (own && opt.run_id <= 0 && listed.stale.empty()) return out;
    out.ids = "(";
    bool found = opt.run_id <= 0;
    for (const RunInfo& info : listed.runs) {
        if (opt.run_id > 0 && info.id != opt.run_id) continue;
        found = true;
        out.ids += (out.ids.size() > 1 ? ", " : "") + std::to_string(info.id);
    }
    out.ids += ")";
    for (const RunInfo& info : listed.stale)
        if (info.id == opt.run_id) throw Error(info.stale);
    if (!found)
        throw Error(no_such_run(trace_path, opt.run_id, listed.runs.size(), own ? "" : opt.runs_db));
    if (own) return out;
    out.runs_db = std::make_unique<RunsDbReader>(trace_path, opt.runs_db);
    out.db = out.runs_db->handle();
    return out;
}

// Writes one table; returns its rows. A code or string id without a name is bad input.
// `runs`: the run ids the run tables are restricted to, as an SQL list ("(3, 4)"); empty: all.
int64_t write_table(sqlite3* db, const std::string& file, const std::string& table, std::vector<Column> cols,
                    const std::string& runs, Output& out) {
    std::string select, order, header;
    std::vector<std::pair<int, int>> pk;   // (position in the key, column)
    for (size_t i = 0; i < cols.size(); ++i) {
        select += (i ? ", \"" : "\"") + cols[i].name + "\"";
        header += (i ? "," : "") + csv_field(header_name(cols[i].name));
        if (cols[i].pk) pk.emplace_back(cols[i].pk, static_cast<int>(i));
    }
    std::sort(pk.begin(), pk.end());
    for (auto [_, i] : pk) order += (order.empty() ? "\"" : ", \"") + cols[static_cast<size_t>(i)].name + "\"";
    if (order.empty()) {   // tables without a key (run_events, run_memory): by run and time, as read
        for (const auto& c : cols)
            if (c.name == "run" || c.name == "t" || c.name == "t_start") order += "\"" + c.name + "\", ";
        order += "rowid";
    }
    std::string filter;
    if (!runs.empty() && is_run_table(table)) filter = (table == "runs" ? " WHERE id IN " : " WHERE run IN ") + runs;
    Statement st(db, "SELECT " + select + " FROM \"" + table + "\"" + filter + " ORDER BY " + order, file);
    out << header << "\n";
    int64_t rows = 0;
    std::string line;
    int rc;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        line.clear();
        for (size_t i = 0; i < cols.size(); ++i) {
            if (i) line += ',';
            const int c = static_cast<int>(i);
            if (!cols[i].names || sqlite3_column_type(st.s, c) != SQLITE_INTEGER) {
                line += value_text(st.s, c);
                continue;
            }
            auto it = cols[i].names->find(sqlite3_column_int64(st.s, c));
            if (it == cols[i].names->end())
                throw Error(where_row(file, table, pk.size() == 1 ? sqlite3_column_int64(st.s, pk[0].second) : rows + 1,
                                      cols[i].name + " " + std::to_string(sqlite3_column_int64(st.s, c)) +
                                          " names nothing (mhc check " + file + ")"));
            line += csv_field(it->second);
        }
        line += '\n';
        out << line;
        ++rows;
    }
    if (rc != SQLITE_DONE) throw Error(where(file, std::string("cannot read table ") + table + ": " + sqlite3_errmsg(db)));
    return rows;
}

}  // namespace

std::vector<CsvTable> export_csv(const std::string& trace_path, const std::string& dir, const CsvOptions& opt) {
    Reader reader(trace_path);
    sqlite3* db = reader.handle();
    const auto tables = exported_tables(db, trace_path);
    const RunSource runs = run_source(trace_path, db, opt);
    for (const auto& table : tables) {
        refuse_input_as_output(trace_path, dir + "/" + table + ".csv");
        if (!opt.runs_db.empty()) refuse_input_as_output(opt.runs_db, dir + "/" + table + ".csv");
    }
    std::map<std::string, std::map<int64_t, std::string>> lookups;
    for (const auto& n : kNamed) lookups.try_emplace(n.lookup);
    for (auto& [name, ids] : lookups) ids = lookup(db, name, trace_path);
    // A folder this export creates is removed again when the export fails or is interrupted by a
    // signal (declared before the files, so that it is removed after their temporary files are).
    MadeDirectory folder(dir);
    // Every file is complete before any is renamed into place, and they appear together.
    std::vector<std::unique_ptr<Output>> outs;
    std::vector<CsvTable> written;
    for (const auto& t : tables) {
        // The run tables from where the runs are (the trace, or its runs database).
        sqlite3* from = is_run_table(t) ? runs.db : db;
        const std::string& file = is_run_table(t) ? runs.file : trace_path;
        auto cols = columns_of(from, t, file);
        for (auto& c : cols)
            for (const auto& n : kNamed)
                if (t == n.table && c.name == n.column) c.names = &lookups[n.lookup];
        outs.push_back(std::make_unique<Output>(dir + "/" + t + ".csv", false, opt.if_exists));
        written.push_back({t + ".csv", write_table(from, file, t, std::move(cols), runs.ids, *outs.back())});
    }
    reader.require_unchanged();   // no tables of two versions of a trace read without a lock
    std::vector<OutputFile*> files;
    for (auto& o : outs) {
        o->close();
        files.push_back(&o->file());
    }
    commit_together(files);
    folder.keep();
    return written;
}

}  // namespace mhc::trace::exporter
