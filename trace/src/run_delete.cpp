// Deleting runs (runs.hpp, delete_runs; docs/trace-format.md, "Deleting runs").
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/trace/runs.hpp"
#include "run_files.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

namespace {

// Every table that holds rows of a run, by the column naming it (run_trace: a runs database's).
constexpr const char* kRunRows[][2] = {{"run_events", "run"},     {"run_kernels", "run"}, {"run_memory", "run"},
                                       {"run_config", "run"},     {"run_metrics", "run"}, {"run_event_rows", "run"},
                                       {"run_trace", "run"},      {"runs", "id"}};

// The runs of `ids`, or the stale ones when `ids` is empty, checked against `list`: an unknown id
// is refused, and so is a set that leaves a replay whose simulated run it takes away.
std::vector<RunInfo> chosen_runs(const RunList& list, const std::vector<int64_t>& ids, const std::string& trace_path,
                                 const std::string& runs_db) {
    const std::string& file = runs_db.empty() ? trace_path : runs_db;
    std::vector<RunInfo> all = list.runs;
    all.insert(all.end(), list.stale.begin(), list.stale.end());
    std::vector<RunInfo> chosen;
    if (ids.empty()) chosen = list.stale;
    for (int64_t id : ids) {
        auto it = std::find_if(all.begin(), all.end(), [&](const RunInfo& run) { return run.id == id; });
        if (it == all.end())
            throw Error(no_such_run(trace_path, id, list.runs.size(), runs_db));
        chosen.push_back(*it);
    }
    std::set<int64_t> gone;
    for (const RunInfo& run : chosen) gone.insert(run.id);
    for (const RunInfo& run : all)
        if (run.base_run != 0 && gone.count(run.base_run) != 0 && gone.count(run.id) == 0)
            throw Error(file + ": run " + std::to_string(run.id) + " is a replay of run " + std::to_string(run.base_run) +
                        ", which would be deleted without it (its base_run would refer to nothing): delete both (--run " +
                        std::to_string(run.base_run) + "," + std::to_string(run.id) + ") or neither");
    return chosen;
}

}   // namespace

std::string no_such_run(const std::string& trace_path, int64_t run_id, size_t runs, const std::string& runs_db) {
    return (runs_db.empty() ? trace_path : runs_db) + ": run " + std::to_string(run_id) + " does not exist (" +
           std::to_string(runs) + (runs == 1 ? " run" : " runs") + " in the file: mhc info " + trace_path +
           (runs_db.empty() ? "" : " --runs-db " + runs_db) + " lists them)";
}

std::vector<RunInfo> delete_runs(const std::string& trace_path, const std::vector<int64_t>& ids,
                                 const std::string& runs_db, bool dry_run) {
    if (dry_run) {
        const RunList list = list_all_runs(trace_path, runs_db, false);
        return chosen_runs(list, ids, trace_path, runs_db);
    }
    // A first look refuses a runs database that is not there or another trace's, and nothing to
    // delete writes nothing. Then the write lock, and what to delete again: a run stored meanwhile
    // (under an id a concurrent delete just freed) is judged as it is when the rows go.
    if (chosen_runs(list_all_runs(trace_path, runs_db, false), ids, trace_path, runs_db).empty())
        return {};
    std::unique_ptr<runfiles::RunWriter> opened;
    try {
        opened = std::make_unique<runfiles::RunWriter>(std::vector<runfiles::Target>{{trace_path, ""}}, runs_db);
    } catch (const Error& e) {   // the writer's words are a store's: "T.db: cannot store runs: ..."
        std::string said = e.what();
        const std::string store = ": cannot store runs:";
        if (const size_t at = said.find(store); at != std::string::npos) said.replace(at, store.size(), ": cannot delete runs:");
        throw Error(said, e.kind());
    }
    runfiles::RunWriter& writer = *opened;
    const RunList list = list_all_runs(trace_path, runs_db, false);
    std::vector<RunInfo> chosen = chosen_runs(list, ids, trace_path, runs_db);
    if (chosen.empty()) return chosen;
    std::string in;
    for (const RunInfo& run : chosen) in += (in.empty() ? "" : ",") + std::to_string(run.id);
    try {
        for (const auto& [table, column] : kRunRows)
            if (runfiles::has_table(writer.db(), writer.file(0), table, writer.schema(0)))
                sql::exec(writer.db(), writer.file(0),
                          ("DELETE FROM " + writer.schema(0) + "." + table + " WHERE " + column + " IN (" + in + ")").c_str());
        writer.commit();
    } catch (const Error& e) {   // a full disk for the journal, an I/O error: rolled back, said so
        const std::string left = writer.abort();
        throw Error(std::string(e.what()) + "; no run was deleted" + (left.empty() ? "" : " (" + left + ")"), e.kind());
    }
    return chosen;
}

}  // namespace mhc::trace
