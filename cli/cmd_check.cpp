// mhc check TRACE: lists every problem with its table and row; exit 0 clean, 2 not.
#include <cstdio>

#include "command.hpp"
#include "run_store.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/store.hpp"

namespace {

mhc::cli::Registration reg{mhc::cli::Command{
    "check", "Validate a trace file and list every problem with its table and row",
    [](CLI::App& app) -> std::function<int()> {
        auto path = std::make_shared<std::string>();
        auto max = std::make_shared<int>(1000);
        auto full = std::make_shared<bool>(false);
        auto runs_db = std::make_shared<std::string>();
        app.add_option("trace", *path, "Trace file (.db)")->required();
        app.add_option("--runs-db", *runs_db,
                       "Also check this runs database: it holds runs of this trace, and their rows refer to its "
                       "kernels, allocations and runs")
            ->type_name("FILE");
        app.add_flag("--full", *full,
                     "SQLite's full integrity check (every index matched with its table; slower) instead of its "
                     "quick check of every page");
        app.add_option("--max", *max, "Print at most this many problems (all are counted)")
            ->check(CLI::NonNegativeNumber)
            ->default_str(std::to_string(*max));
        return [path, max, full, runs_db] {
            *runs_db = mhc::cli::runs_db_to_read(*runs_db,
                                                 *path);   // the trace itself under another name: its own runs
            auto report = mhc::trace::check_file(*path, *full);
            // Not a trace at all (missing, not SQLite, another version): one line, as every
            // command says it, without a count of problems.
            if (!report.ok() && report.problems.front().rule == "file")
                throw mhc::Error(report.problems.front().message);
            // The allocator settings the trace recorded, as the caching model reads them (simulate
            // and advise refused what check passed: mhc-torch wrote "max_split_size_mb:٣٣").
            if (const auto meta = mhc::trace::Reader(*path).meta(); meta.count("allocator.conf")) try {
                    mhc::sim::parse_allocator_conf(meta.at("allocator.conf"), "allocator.conf");
                } catch (const mhc::Error& e) { report.problems.push_back({"meta", "meta", 0, e.what()}); }
            // The runs database: not one, or another trace's, is said in one line the same way.
            mhc::trace::CheckReport runs;
            if (!runs_db->empty()) {
                runs = mhc::trace::check_runs_db(*path, *runs_db);
                if (!runs.ok() && runs.problems.front().rule == "file") throw mhc::Error(runs.problems.front().message);
            }
            if (report.ok() && runs.ok()) {
                // What "ok" vouches for (a bare "ok" left a user asking whether the rows were read).
                std::printf("%s: ok: the rules of docs/trace-format.md \"Checks\" and SQLite's %s check pass\n",
                            mhc::printable(*path).c_str(), *full ? "full integrity" : "quick");
                if (!runs_db->empty())
                    std::printf("%s: ok: its runs of %s follow the same rules\n", mhc::printable(*runs_db).c_str(), mhc::printable(*path).c_str());
                return mhc::cli::kExitOk;
            }
            int shown = 0;
            const size_t total = report.problems.size() + runs.problems.size();
            for (const auto& [file, list] : {std::pair{path.get(), &report}, std::pair{runs_db.get(), &runs}})
                for (const auto& problem : list->problems) {
                    if (shown++ >= *max) break;
                    if (problem.table == "file")
                        std::printf("%s\n", mhc::printable(problem.message).c_str());
                    else if (problem.table == "meta")   // the key leads the message
                        std::printf("%s: meta %s [%s]\n", mhc::printable(*file).c_str(), mhc::printable(problem.message).c_str(), problem.rule.c_str());
                    else
                        std::printf("%s: %s row %lld: %s [%s]\n", mhc::printable(*file).c_str(), problem.table.c_str(),
                                    static_cast<long long>(problem.row), mhc::printable(problem.message).c_str(), problem.rule.c_str());
                }
            if (static_cast<int>(total) > *max) std::printf("... %zu more\n", total - static_cast<size_t>(*max));
            mhc::say("%s: %zu problem%s\n", mhc::printable(*path).c_str(), total, total == 1 ? "" : "s");
            return mhc::cli::kExitBadInput;
        };
    }}};

}  // namespace
