#pragma once
// How the commands that compute runs (simulate, sweep) store them: after the result is printed,
// in one transaction, into the trace or a --runs-db file. A run that cannot be stored costs one
// line on stderr and exit status kExitNotStored, never the printed result.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mhc/common/output_file.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::cli {

struct StoreOptions {
    bool no_store = false;
    std::string runs_db;   // empty: the trace itself
};

// --no-store and --runs-db FILE.
void add_store_options(CLI::App& app, StoreOptions& o);

// Refuses (mhc::Error, bad input) a malformed $MHC_STORE_WARN_SIZE when runs will be stored,
// --no-store with --runs-db, and a --runs-db that cannot be a file (a folder, a device, a file in
// a folder that does not exist): called before the computation, so that the refusal does not
// come after it.
void check_store_environment(const StoreOptions& options);

// Before the work, once the trace is known: a --runs-db that is the trace itself under any name
// (T.db, ./T.db, a link to it) is left out, so the runs are the trace's own as without it (T.db
// stored into the trace, ./T.db computed, then refused the result as "not an mhc runs
// database", exit 4); an existing, non-empty --runs-db that is no runs database of this trace
// (another trace's, a trace, another program's database) is refused now, exit 2, not after the
// work (exit 4); so is a damaged page where the runs go, the runs database's or the trace's run
// tables' (trace::check_run_pages).
void check_runs_db_of(const std::string& trace, StoreOptions& options);
// The same for a coupled job (simulate --ranks): a --runs-db that is one of its traces is refused
// (it was found after the work, exit 4), and an existing one that none of its ranks' runs can be
// read from (another trace's, a trace, another program's database), and damaged pages where the
// runs go.
void check_runs_db_of_job(const std::vector<std::string>& ranks, const StoreOptions& options);
// A --runs-db to read (info, check, export): "" when it names the trace itself, under any name.
std::string runs_db_to_read(const std::string& runs_db, const std::string& trace);

// The file the runs go to.
std::string store_target(const std::string& trace, const StoreOptions& o);

// Stores `runs` (all or none), computed from `trace` as it was read (its fingerprint: a trace
// replaced since is refused). On failure prints "mhc: ... not stored: <why>; ..." on stderr and
// returns nothing.
std::optional<std::vector<int64_t>> store_runs(const std::string& trace, const std::string& fingerprint,
                                               const std::vector<trace::Run>& runs, const StoreOptions& o);
// Write transactions a successful store_runs made on the trace file itself: 1, or 0 with
// --no-store or --runs-db (sim::keep_prepared's count).
inline int writes_into_trace(const StoreOptions& o) { return o.no_store || !o.runs_db.empty() ? 0 : 1; }
// A coupled job's runs, one per rank: all of them or none (trace::add_job_runs).
std::optional<std::vector<int64_t>> store_job_runs(const std::vector<trace::JobRun>& ranks, const StoreOptions& o);

// From the end of a command's computation to the end of its store (runs, then the trace's cache):
// SIGINT, SIGTERM and SIGHUP wait, so that the store is finished whole rather than cut (a hot
// journal) and the printed result stays true; then stopped() says so and gives the exit status.
class StorePhase {
public:
    StorePhase() : hold_("mhc: interrupted: storing the runs whole first, then stopping\n") {}
    // 0 when no signal came; else says on stderr what was stored and returns 128 + the signal.
    int stopped(bool stored, const std::string& target);

private:
    SignalsDeferred hold_;
};

}  // namespace mhc::cli
