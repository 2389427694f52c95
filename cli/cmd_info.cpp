// mhc info TRACE: source, device, duration, counts, peak and where time goes.
#include <cstdio>
#include <optional>
#include <string>

#include "command.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/summary.hpp"

namespace {

// A run's key figures in one column: peak, reduction and loss; what stopped it otherwise.
std::string run_figures(const mhc::trace::RunInfo& r) {
    auto get = [&](const char* key) {
        auto it = r.metrics.find(key);
        return it == r.metrics.end() ? std::optional<double>{} : std::optional<double>{it->second};
    };
    auto bytes = [](double v) { return mhc::format_bytes(static_cast<int64_t>(v)); };
    char b[160];
    if (r.status == "oom") {
        auto shortby = get("oom_bytes_short");
        std::snprintf(b, sizeof b, "out of memory%s%s", shortby ? ", short by " : "",
                      shortby ? bytes(*shortby).c_str() : "");
        return b;
    }
    if (r.kind == "replayed") {
        auto peak = get("measured_peak_bytes"), loss = get("measured_throughput_loss");
        if (!peak) return r.status == "complete" ? "-" : "no figures";
        if (loss)
            std::snprintf(b, sizeof b, "measured peak %s, loss %.2f%%", bytes(*peak).c_str(), *loss * 100);
        else
            std::snprintf(b, sizeof b, "measured peak %s", bytes(*peak).c_str());
        return b;
    }
    auto peak = get("simulated_peak_bytes"), red = get("peak_reduction"), loss = get("throughput_loss");
    if (!peak || !red || !loss) return r.status == "complete" ? "-" : "no figures";
    std::snprintf(b, sizeof b, "peak %s, -%.1f%%, loss %.2f%%", bytes(*peak).c_str(), *red * 100, *loss * 100);
    return b;
}

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
                std::printf("runs        id  kind      status     figures                                        name\n");
                for (const auto& r : runs)
                    std::printf("  %12lld  %-9s %-10s %-46s %s\n", static_cast<long long>(r.id), r.kind.c_str(),
                                r.status.c_str(), run_figures(r).c_str(), r.name.c_str());
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
