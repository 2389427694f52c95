// mhc prune TRACE: deletes stored runs, by default the stale ones `mhc info` leaves out
// (docs/trace-format.md, "Deleting runs"), in one transaction.
#include <csignal>
#include <cstdio>
#include <optional>
#include <set>

#include "command.hpp"
#include "run_store.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/runs.hpp"

namespace {

// --run's ids: whole numbers, comma-separated, each once.
std::vector<int64_t> run_ids(const std::string& text) {
    std::vector<int64_t> ids;
    std::set<int64_t> seen;
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty()) throw mhc::Error(mhc::refused_value("--run", text, "an empty item; give run ids as 1,3"));
        if (std::string why = mhc::whole_number_refusal(item, false); !why.empty())
            throw mhc::Error(mhc::of_option("--run", why));   // why quotes the item: "'x': not a whole number"
        // Past int64 (2^64 - 1 is a whole number): std::stoll threw, "mhc: internal error: stoll", exit 1.
        const std::optional<int64_t> parsed = mhc::parse_integer<int64_t>(item);
        if (!parsed) throw mhc::Error(mhc::refused_value("--run", item, "not a run id (ids are 1 to 2^63 - 1)"));
        const int64_t id = *parsed;
        if (!seen.insert(id).second) throw mhc::Error(mhc::refused_value("--run", text, "run " + item + " is named twice"));
        ids.push_back(id);
        if (comma == std::string::npos) return ids;
        start = comma + 1;
    }
}

mhc::cli::Registration reg{mhc::cli::Command{
    "prune", "Delete stored runs: the stale ones info leaves out, or those named",
    [](CLI::App& app) -> std::function<int()> {
        auto path = std::make_shared<std::string>();
        auto runs_db = std::make_shared<std::string>();
        auto runs = std::make_shared<std::string>();
        auto dry_run = std::make_shared<bool>(false);
        app.add_option("trace", *path, "Trace file (.db)")->required();
        app.add_option("--runs-db", *runs_db, "Delete runs of the trace stored in this file (simulate --runs-db) "
                                              "instead of those in the trace")
            ->type_name("FILE");
        app.add_option("--run", *runs, "Delete these runs (ids as mhc info lists them: 1,3), stale or not, "
                                       "instead of the stale ones")
            ->type_name("LIST");
        app.add_flag("--dry-run", *dry_run, "Say what would be deleted; delete nothing");
        return [path, runs_db, runs, dry_run] {
            *runs_db = mhc::cli::runs_db_to_read(*runs_db, *path);   // the trace itself under another name
            const std::vector<int64_t> ids = runs->empty() ? std::vector<int64_t>{} : run_ids(*runs);
            const std::string file = runs_db->empty() ? *path : *runs_db;
            // A signal waits for the transaction's end: the runs are deleted whole or not at all,
            // with no hot journal left beside the file.
            mhc::SignalsDeferred hold("mhc: interrupted: finishing the deletion first, then stopping\n");
            const auto gone = mhc::trace::delete_runs(*path, ids, *runs_db, *dry_run);
            const int sig = hold.release();
            const char* verb = *dry_run ? "would delete" : "deleted";
            for (const auto& run : gone)
                std::printf("%s run %lld (%s)%s\n", verb, static_cast<long long>(run.id),
                            mhc::printable(run.name).c_str(), run.stale.empty() ? "" : ": stale");
            if (gone.empty())
                std::printf("%s: %s\n", mhc::printable(file).c_str(),
                            ids.empty() ? "no stale runs; nothing deleted" : "nothing deleted");
            else
                std::printf("%s: %zu run%s %s%s\n", mhc::printable(file).c_str(), gone.size(), gone.size() == 1 ? "" : "s",
                            *dry_run ? "would be deleted (--dry-run: none was)" : "deleted",
                            *dry_run ? "" : "; the file keeps its size until sqlite3 FILE VACUUM");
            if (sig != 0) {
                std::fflush(stdout);
                const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
                mhc::say("mhc: stopped by %s after the runs were %s\n", name,
                             *dry_run ? "listed" : ("deleted whole from " + mhc::printable(file)).c_str());
                return 128 + sig;
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
