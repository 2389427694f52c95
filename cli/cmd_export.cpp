// mhc export TRACE --format perfetto|csv -o OUT [--run ID]: every table as CSV, or a Perfetto trace.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "run_store.hpp"
#include "mhc/trace/export/export.hpp"
#include "mhc/trace/runs.hpp"

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
        auto runs_db = std::make_shared<std::string>();
        app.add_option("trace", *in, "Trace file (.db)")->required()->check(CLI::ExistingFile);
        app.add_option("-o,--output", *out, "perfetto: a file (.json or .json.gz); csv: a folder, one file per table")
            ->required()
            ->type_name("PATH");
        app.add_option("--format", *format, "perfetto (ui.perfetto.dev) or csv")
            ->check(mhc::cli::one_of({"perfetto", "csv"}))
            ->type_name("FORMAT")
            ->default_str(*format);
        app.add_option("--run", *run, "perfetto: also this simulated or replayed run; csv: only this run in the "
                                      "run tables (all runs without it)")
            ->check(CLI::PositiveNumber)
            ->type_name("ID");
        app.add_option("--runs-db", *runs_db,
                       "Read the runs from this file (simulate --runs-db) instead of the trace; one made for "
                       "another trace is refused")
            ->type_name("FILE");
        app.add_flag("--force", *force, "Replace existing output files (never the trace itself)");
        return [in, out, format, run, force, runs_db] {
            *runs_db = mhc::cli::runs_db_to_read(*runs_db, *in);   // the trace itself under another name: its own runs
            // A Perfetto export holds one run, the one --run names: without it the runs database is
            // opened, checked and left unread (the CSV tables hold every run it has).
            if (*format == "perfetto" && !runs_db->empty() && *run == 0)
                throw mhc::Error("--runs-db " + *runs_db +
                                 " without --run: a perfetto export holds a run only with --run ID; give --run, or "
                                 "leave --runs-db out");
            auto if_exists = *force ? mhc::IfExists::Replace : mhc::IfExists::Refuse;
            if (*format == "csv") {
                auto tables = ex::export_csv(*in, *out, {*run, if_exists, *runs_db});
                int64_t rows = 0;
                for (const auto& t : tables) rows += t.rows;
                std::printf("%s: %zu tables, %lld rows\n", mhc::printable(*out).c_str(), tables.size(), static_cast<long long>(rows));
                for (const auto& table : tables)
                    std::printf("  %-20s %12lld\n", table.file.c_str(), static_cast<long long>(table.rows));
            } else {
                // A run the file does not hold, in the words of every command (a stale one is said by
                // the export itself: what it was computed from).
                if (*run > 0) {
                    const mhc::trace::RunList listed = mhc::trace::list_all_runs(*in, *runs_db, false);
                    const auto has = [&](const std::vector<mhc::trace::RunInfo>& runs) {
                        return std::any_of(runs.begin(), runs.end(),
                                           [&](const mhc::trace::RunInfo& info) { return info.id == *run; });
                    };
                    if (!has(listed.runs) && !has(listed.stale))
                        throw mhc::Error(mhc::trace::no_such_run(*in, *run, listed.runs.size(), *runs_db));
                }
                ex::PerfettoOptions opt;
                opt.run_id = *run;
                opt.if_exists = if_exists;
                opt.runs_db = *runs_db;
                int64_t events = ex::export_perfetto(*in, *out, opt);
                // What the file holds: the recorded trace, and the run only when --run named one.
                const std::string what = *run > 0 ? "the trace and run " + std::to_string(*run) : "the trace, no run";
                std::printf("%s: %lld trace events, %s (open in ui.perfetto.dev)\n", mhc::printable(*out).c_str(),
                            static_cast<long long>(events), what.c_str());
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
