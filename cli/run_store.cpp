#include "run_store.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"

namespace mhc::cli {

void add_store_options(CLI::App& app, StoreOptions& o) {
    app.add_flag("--no-store", o.no_store, "Do not store the runs");
    app.add_option("--runs-db", o.runs_db,
                   "Store the runs in this file instead of the trace (created on first use; mhc info TRACE "
                   "--runs-db FILE lists them)")
        ->type_name("FILE");
}

std::string store_target(const std::string& trace, const StoreOptions& o) {
    return printable(o.runs_db.empty() ? trace : o.runs_db);   // said on one line
}

namespace {

// Runs past this size together are stored with a word first (a 100,000-run sweep adds about
// 1.5 GB to its trace): the user may prefer --no-store or a runs database. MHC_STORE_WARN_SIZE
// sets another size.
int64_t warn_size() {
    const char* e = std::getenv("MHC_STORE_WARN_SIZE");
    if (!e) return int64_t{256} << 20;
    try {
        return parse_bytes(e);
    } catch (const Error&) { throw Error(env_refusal("MHC_STORE_WARN_SIZE", e, "not a size (256MiB)")); }
}

void warn_if_large(const std::vector<const trace::Run*>& runs, const std::string& where) {
    int64_t bytes = 0;
    for (const trace::Run* r : runs) bytes += trace::stored_size(*r);
    const int64_t kWarnStoredBytes = warn_size();
    if (bytes <= kWarnStoredBytes) return;
    mhc::say("mhc: warning: storing %zu run%s adds about %s to %s (more than %s); --no-store keeps only the "
                         "printed result, --runs-db FILE keeps the runs out of the trace\n",
                 runs.size(), runs.size() == 1 ? "" : "s", format_bytes(bytes).c_str(), printable(where).c_str(),
                 format_bytes(kWarnStoredBytes).c_str());
}

template <class Store>
std::optional<std::vector<int64_t>> store_or_say(size_t count, Store store) {
    try {
        return store();
    } catch (const std::exception& e) {
        mhc::say("mhc: %s not stored (%s); the result above is complete: rerun with "
                             "--no-store, or --runs-db FILE to store %s in another file\n",
                     count == 1 ? "the run was" : "the runs were", e.what(), count == 1 ? "it" : "them");
        return std::nullopt;
    }
}

}  // namespace

void check_store_environment(const StoreOptions& options) {
    if (options.no_store && !options.runs_db.empty())
        throw Error("--no-store and --runs-db " + options.runs_db +
                    ": give one (--no-store keeps only the printed result, --runs-db stores the runs there)");
    if (options.no_store) return;
    warn_size();
    if (options.runs_db.empty()) return;
    // What cannot be a runs database is said before the work, not after it (exit 4): a folder,
    // a device, a descriptor, a file in a folder that does not exist, a name stat cannot follow
    // (a loop of links, a folder that cannot be searched) and a link to nothing (SQLite said
    // "cannot open or create: unable to open database file" for both, after the work).
    refuse_unreachable_name(options.runs_db);
    struct stat st {}, lst {};
    if (::stat(options.runs_db.c_str(), &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) throw Error(no_such_file(options.runs_db));
        std::error_code ec;
        if (errno == ENOENT && ::lstat(options.runs_db.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
            throw Error(options.runs_db + ": is a symbolic link to " +
                        std::filesystem::read_symlink(options.runs_db, ec).string() +
                        ", which does not exist; --runs-db names the file itself (created on first use)");
    }
    std::error_code ec;
    if (std::filesystem::is_directory(options.runs_db, ec))
        throw Error(options.runs_db + ": is a directory; --runs-db names a file (created on first use)");
    refuse_special_file(options.runs_db);
    // A new runs database is made whole and renamed into place (OutputFile), which refuses an
    // earlier file's log beside it: said here, not after the work.
    if (const std::string log = sqlite_log_beside(options.runs_db);
        !log.empty() && !std::filesystem::exists(options.runs_db, ec))
        throw Error(options.runs_db + ": " + log + " is there, an SQLite log of an earlier " + options.runs_db +
                    " that SQLite would apply to a new runs database there: remove it, or name another file");
    const std::filesystem::path parent = std::filesystem::path(options.runs_db).parent_path();
    if (!std::filesystem::exists(options.runs_db, ec) && !parent.empty() && !std::filesystem::is_directory(parent, ec))
        throw Error(options.runs_db + ": cannot be created: " + parent.string() + " is not a directory");
}

std::string runs_db_to_read(const std::string& runs_db, const std::string& trace) {
    std::error_code ec;
    return !runs_db.empty() && !trace.empty() && std::filesystem::equivalent(runs_db, trace, ec) ? "" : runs_db;
}

void check_runs_db_of(const std::string& trace, StoreOptions& options) {
    if (options.no_store || trace.empty()) return;
    options.runs_db = runs_db_to_read(options.runs_db, trace);
    if (options.runs_db.empty()) {
        trace::check_run_pages(trace);   // the trace's run tables, where the runs go
        return;
    }
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(options.runs_db, ec);
    if (ec || bytes == 0) return;               // not there yet, or empty: a runs database to be, made by the store
    // Refuses what is not this trace's runs database: its meta, its traces' fingerprints and its
    // tables, never its rows (listing every run took 12.5 s and 500 MiB on 100,000 runs:
    // bench/trace/runs_db_precheck.sh); then a damaged page where the store will read (the last
    // pages of its tables, the free-page list: trace::check_run_pages), which the store would
    // otherwise meet after the work.
    trace::check_run_pages(trace, options.runs_db);
}

void check_runs_db_of_job(const std::vector<std::string>& ranks, const StoreOptions& options) {
    if (options.no_store || ranks.empty()) return;
    if (options.runs_db.empty()) {
        for (const auto& rank : ranks) trace::check_run_pages(rank);   // each rank's runs go into its trace
        return;
    }
    for (const auto& rank : ranks)
        if (runs_db_to_read(options.runs_db, rank).empty())
            throw Error(options.runs_db + ": --runs-db names one of the job's traces (" + rank +
                        "); name a file of its own");
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(options.runs_db, ec);
    if (ec || bytes == 0) return;
    std::string first;
    for (const auto& rank : ranks) {
        try {
            trace::RunsDbReader check(rank, options.runs_db);
        } catch (const Error& e) {
            if (first.empty()) first = e.what();
            continue;
        }
        // A runs database of the job (or of one of its ranks): the store decides, once its pages
        // are known sound.
        trace::check_run_pages(rank, options.runs_db);
        return;
    }
    throw Error(first);
}

std::optional<std::vector<int64_t>> store_runs(const std::string& trace, const std::string& fingerprint,
                                               const std::vector<trace::Run>& runs, const StoreOptions& o) {
    std::vector<const trace::Run*> all;
    for (const auto& r : runs) all.push_back(&r);
    warn_if_large(all, store_target(trace, o));
    return store_or_say(runs.size(), [&] { return trace::add_runs(trace, runs, o.runs_db, fingerprint); });
}

std::optional<std::vector<int64_t>> store_job_runs(const std::vector<trace::JobRun>& ranks, const StoreOptions& o) {
    std::vector<const trace::Run*> all;
    for (const auto& r : ranks) all.push_back(&r.run);
    warn_if_large(all, o.runs_db.empty() ? "the rank traces" : o.runs_db);
    return store_or_say(ranks.size(), [&] { return trace::add_job_runs(ranks, o.runs_db); });
}

int StorePhase::stopped(bool stored, const std::string& target) {
    const int sig = hold_.release();
    if (sig == 0) return 0;
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
    std::fflush(stdout);
    if (stored)
        mhc::say("mhc: stopped by %s after the runs were stored whole in %s\n", name, target.c_str());
    else mhc::say("mhc: stopped by %s; no run was stored\n", name);
    return 128 + sig;
}

}  // namespace mhc::cli
