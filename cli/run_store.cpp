#include "run_store.hpp"

#include <cstdio>

#include "mhc/common/error.hpp"

namespace mhc::cli {

void add_store_options(CLI::App& app, StoreOptions& o) {
    app.add_flag("--no-store", o.no_store, "Do not store the run(s)");
    app.add_option("--runs-db", o.runs_db,
                   "Store the run(s) in this SQLite file instead of the trace (created on first use; "
                   "read back with `mhc info TRACE --runs-db FILE`)");
}

std::string store_target(const std::string& trace, const StoreOptions& o) {
    return o.runs_db.empty() ? trace : o.runs_db;
}

namespace {

template <class Store>
std::optional<std::vector<int64_t>> store_or_say(size_t count, Store store) {
    try {
        return store();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mhc: %s not stored (%s); the result above is complete: rerun with "
                             "--no-store, or --runs-db FILE to store %s in another file\n",
                     count == 1 ? "the run was" : "the runs were", e.what(), count == 1 ? "it" : "them");
        return std::nullopt;
    }
}

}  // namespace

std::optional<std::vector<int64_t>> store_runs(const std::string& trace, const std::string& fingerprint,
                                               const std::vector<trace::Run>& runs, const StoreOptions& o) {
    return store_or_say(runs.size(), [&] { return trace::add_runs(trace, runs, o.runs_db, fingerprint); });
}

std::optional<std::vector<int64_t>> store_job_runs(const std::vector<trace::JobRun>& ranks, const StoreOptions& o) {
    return store_or_say(ranks.size(), [&] { return trace::add_job_runs(ranks, o.runs_db); });
}

}  // namespace mhc::cli
