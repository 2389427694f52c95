// mhc info TRACE: source, device, duration, counts, peak and where time goes.
#include <cstdio>

#include "command.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/summary.hpp"

namespace {

mhc::cli::Registration reg{mhc::cli::Command{
    "info", "Summarise a trace: counts, memory peak, top allocations and kernels, steps, runs",
    [](CLI::App& app) -> std::function<int()> {
        auto path = std::make_shared<std::string>();
        auto json = std::make_shared<bool>(false);
        auto top = std::make_shared<int>(10);
        auto runs_db = std::make_shared<std::string>();
        app.add_option("trace", *path, "Trace file (.db)")->required();
        app.add_flag("--json", *json, "Machine-readable output");
        app.add_option("--top", *top, "How many allocations and kernels to list")
            ->check(CLI::PositiveNumber);
        app.add_option("--runs-db", *runs_db, "List the runs stored in this runs database (simulate --runs-db) "
                                              "instead of those in the trace");
        return [path, json, top, runs_db] {
            // The full check: info computes peaks and sums, so it refuses what `mhc check` refuses.
            auto data = mhc::trace::load_checked_trace(*path);
            auto summary = mhc::trace::summarize(data, *top);
            auto runs = mhc::trace::list_runs(*path, *runs_db);
            if (*json) {
                std::printf("%s\n", mhc::trace::to_json(summary).c_str());
                return mhc::cli::kExitOk;
            }
            std::printf("%s", mhc::trace::to_text(summary).c_str());
            static const char* shown_meta[] = {"preset", "accesses", "timing", "dropped_records",
                                               "complete", "reconstructed_blocks", "missing"};
            for (const char* key : shown_meta) {
                auto it = data.meta.find(key);
                if (it != data.meta.end()) std::printf("%-11s %s\n", key, it->second.c_str());
            }
            if (!runs.empty()) {
                std::printf("runs\n");
                for (const auto& r : runs)
                    std::printf("  %4lld  %-9s %-10s %s\n", static_cast<long long>(r.id),
                                r.kind.c_str(), r.status.c_str(), r.name.c_str());
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
