// mhc check TRACE: lists every problem with its table and row; exit 0 clean, 2 not.
#include <cstdio>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"

namespace {

mhc::cli::Registration reg{mhc::cli::Command{
    "check", "Validate a trace file and list every problem with its table and row",
    [](CLI::App& app) -> std::function<int()> {
        auto path = std::make_shared<std::string>();
        auto max = std::make_shared<int>(1000);
        auto full = std::make_shared<bool>(false);
        app.add_option("trace", *path, "Trace file (.db)")->required();
        app.add_flag("--full", *full,
                     "SQLite's full integrity check (every index matched with its table; slower) instead of its "
                     "quick check of every page");
        app.add_option("--max", *max, "Print at most this many problems (all are counted)")
            ->check(CLI::NonNegativeNumber)
            ->default_str(std::to_string(*max));
        return [path, max, full] {
            auto report = mhc::trace::check_file(*path, *full);
            // Not a trace at all (missing, not SQLite, another version): one line, as every
            // command says it, without a count of problems.
            if (!report.ok() && report.problems.front().rule == "file") throw mhc::Error(report.problems.front().message);
            if (report.ok()) {
                std::printf("%s: ok\n", path->c_str());
                return mhc::cli::kExitOk;
            }
            int shown = 0;
            for (const auto& p : report.problems) {
                if (shown++ >= *max) break;
                if (p.table == "file")
                    std::printf("%s\n", p.message.c_str());
                else
                    std::printf("%s: %s row %lld: %s [%s]\n", path->c_str(), p.table.c_str(),
                                static_cast<long long>(p.row), p.message.c_str(), p.rule.c_str());
            }
            if (static_cast<int>(report.problems.size()) > *max)
                std::printf("... %zu more\n", report.problems.size() - static_cast<size_t>(*max));
            std::fprintf(stderr, "%s: %zu problem%s\n", path->c_str(), report.problems.size(),
                         report.problems.size() == 1 ? "" : "s");
            return mhc::cli::kExitBadInput;
        };
    }}};

}  // namespace
