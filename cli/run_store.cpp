#include "run_store.hpp"

#include <cstdio>

#include "mhc/common/error.hpp"

namespace mhc::cli {

void add_store_options(CLI::App& app, StoreOptions& o) {
    app.add_flag("--no-store", o.no_store, "Do not store the runs");
    app.add_option("--runs-db", o.runs_db,
                   "Store the runs in this file instead of the trace (created on first use; mhc info TRACE "
                   "--runs-db FILE lists them)")
        ->type_name("FILE");
}

std::string store_target(const std::string& trace, const StoreOptions& o) {
    return o.runs_db.empty() ? trace : o.runs_db;
}

std::optional<std::vector<int64_t>> store_runs(const std::string& trace, const std::vector<trace::Run>& runs,
                                               const StoreOptions& o) {
    try {
        return trace::add_runs(trace, runs, o.runs_db);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mhc: %s not stored (%s); the result above is complete: rerun with "
                             "--no-store, or --runs-db FILE to store %s in another file\n",
                     runs.size() == 1 ? "the run was" : "the runs were", e.what(),
                     runs.size() == 1 ? "it" : "them");
        return std::nullopt;
    }
}

}  // namespace mhc::cli
