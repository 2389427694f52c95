// mhc export TRACE --format perfetto|csv -o OUT [--run ID]
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "mhc/trace/export/export.hpp"

namespace {

namespace ex = mhc::trace::exporter;

mhc::cli::Registration reg{mhc::cli::Command{
    "export", "Export a trace (and a run) to Perfetto/Chrome JSON or CSV tables",
    [](CLI::App& app) -> std::function<int()> {
        auto in = std::make_shared<std::string>();
        auto out = std::make_shared<std::string>();
        auto format = std::make_shared<std::string>("perfetto");
        auto run = std::make_shared<int64_t>(0);
        auto force = std::make_shared<bool>(false);
        app.add_option("trace", *in, "Trace file (.db)")->required()->check(CLI::ExistingFile);
        app.add_option("-o,--output", *out, "perfetto: file (.json or .json.gz); csv: directory")->required();
        app.add_option("--format", *format, "perfetto or csv")->check(CLI::IsMember({"perfetto", "csv"}));
        app.add_option("--run", *run, "Also export this simulated or replayed run (perfetto)")
            ->check(CLI::PositiveNumber);
        app.add_flag("--force", *force, "Replace existing output files (never the trace itself)");
        return [in, out, format, run, force] {
            auto if_exists = *force ? mhc::IfExists::Replace : mhc::IfExists::Refuse;
            if (*format == "csv") {
                int64_t rows = ex::export_csv(*in, *out, if_exists);
                std::printf("%s: allocations.csv, kernels.csv (%lld rows)\n", out->c_str(), static_cast<long long>(rows));
            } else {
                ex::PerfettoOptions opt;
                opt.run_id = *run;
                opt.if_exists = if_exists;
                int64_t n = ex::export_perfetto(*in, *out, opt);
                std::printf("%s: %lld trace events (open in ui.perfetto.dev)\n", out->c_str(), static_cast<long long>(n));
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
