// The references between a trace's tables, and between a runs database's and its trace's
// (check_parts.hpp).
#include <cstdint>
#include <functional>
#include <string>

#include "check_parts.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace::checks {

namespace {

// Every reference between tables: a row that names another table's row (a string, a kernel, an
// allocation, a module, a run) names one that exists. Tables are judged where the file has them
// (older files lack some); 0 means "none" where the schema says so (a root module, a run event of
// no kernel, a run that is no replay). Each row that breaks one is a problem naming its table,
// row (the table's id; for a table keyed otherwise, its first key, the whole key in the message)
// and field. A value that is no integer is left to the value rules (check_values, load_run), and
// accesses are judged as the trace is loaded (dangling_accesses).
struct Reference {
    const char* table;
    const char* field;
    const char* target;   // the table whose `id` it names
    const char* noun;     // what a row of it is, in the message
    bool zero_is_none;
    const char* row;       // SQL: the row's number in the report
    const char* context;   // SQL: text after the message ('' for none)
};

constexpr int64_t kMaxListedPerReference = 10000;

bool is_trace_table(const std::string& name) { return name != "runs" && name.rfind("run_", 0) != 0 && name != "traces"; }

void check_reference(const Scope& where, const Reference& ref, CheckReport& report) {
    const std::string field = ref.field;
    const std::string target = (is_trace_table(ref.target) ? where.trace_schema : "") + ref.target;
    std::string filter;
    if (!where.runs_filter.empty() && !is_trace_table(ref.table))
        filter = " AND " + std::string(std::string(ref.table) == "runs" ? "id" : "run") + " IN " + where.runs_filter;
    const std::string sql = "SELECT " + std::string(ref.row) + ", " + field + ", " + ref.context + " FROM " +
                            ref.table + " WHERE typeof(" + field + ") = 'integer' AND " +
                            (ref.zero_is_none ? field + " IS NOT 0 AND " : "") + field + " NOT IN (SELECT id FROM " +
                            target + ")" + filter + " ORDER BY 1 LIMIT " + std::to_string(kMaxListedPerReference + 1);
    sql::Stmt rows(where.db, where.file, sql.c_str());
    int64_t listed = 0;
    while (rows.step()) {
        if (++listed > kMaxListedPerReference) {
            report.problems.push_back({"unknown-id", ref.table, 0,
                                  "more rows than the " + std::to_string(kMaxListedPerReference) + " above have a " +
                                      field + " that is no row of " + ref.target});
            break;
        }
        const std::string context = rows.text(2);
        report.problems.push_back({"unknown-id", ref.table, rows.i64(0),
                              field + " refers to " + ref.noun + " " + std::to_string(rows.i64(1)) +
                                  ", which does not exist" + (context.empty() ? "" : " (" + context + ")")});
    }
}

}  // namespace

void check_run_references(const Scope& where, const std::function<bool(const char*)>& has_table, CheckReport& report) {
    static const Reference kRefs[] = {
        {"runs", "base_run", "runs", "run", true, "id", "''"},
        {"run_events", "allocation", "allocations", "allocation", true, "rowid", "'run ' || run"},
        {"run_events", "kernel", "kernels", "kernel", true, "rowid", "'run ' || run"},
        {"run_kernels", "kernel", "kernels", "kernel", false, "run",
         "'the row of run ' || run || ' and kernel ' || kernel"},
    };
    if (!has_table("runs")) return;
    for (const Reference& ref : kRefs)
        if (has_table(ref.table)) check_reference(where, ref, report);
    sql::Stmt base(where.db, where.file,
                   ("SELECT r.id, r.kind, b.id, b.kind FROM runs r JOIN runs b ON b.id = r.base_run "
                    "WHERE r.base_run IS NOT 0 AND (r.kind IS NOT 'replayed' OR b.kind IS NOT 'simulated' OR b.id = r.id)" +
                    (where.runs_filter.empty() ? "" : " AND r.id IN " + where.runs_filter) + " ORDER BY r.id")
                       .c_str());
    while (base.step())
        report.problems.push_back({"base-run", "runs", base.i64(0),
                              base.i64(0) == base.i64(2)
                                  ? "base_run refers to the run itself"
                                  : "base_run refers to run " + std::to_string(base.i64(2)) + " (" + base.text(3) +
                                        ") from a " + base.text(1) +
                                        " run; only a replayed run has a base run, the simulated run it executed"});
}

void check_references(const Reader& reader, CheckReport& report) {
    static const Reference kRefs[] = {
        {"markers", "name", "strings", "string", true, "id", "''"},
        {"modules", "name", "strings", "string", true, "id", "''"},
        {"modules", "type", "strings", "string", true, "id", "''"},
        {"modules", "parent", "modules", "module", true, "id", "''"},
        {"kernel_info", "kernel", "kernels", "kernel", false, "kernel", "''"},
        {"kernel_info", "module", "modules", "module", true, "kernel", "''"},
        {"saved_tensors", "allocation", "allocations", "allocation", false, "kernel",
         "'the row of allocation ' || allocation || ' and kernel ' || kernel"},
        {"saved_tensors", "kernel", "kernels", "kernel", false, "kernel",
         "'the row of allocation ' || allocation || ' and kernel ' || kernel"},
    };
    const Scope here{reader.handle(), reader.path(), "", ""};
    for (const Reference& ref : kRefs)
        if (reader.has_table(ref.table) && reader.has_table(ref.target)) check_reference(here, ref, report);
    check_run_references(here, [&](const char* name) { return reader.has_table(name); }, report);
}

}  // namespace mhc::trace::checks
