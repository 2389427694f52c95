#pragma once
// Exporters: Chrome/Perfetto trace JSON (opens in ui.perfetto.dev and chrome://tracing) and
// CSV tables. Writes are atomic: a temporary file beside the target, renamed when complete.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/common/output_file.hpp"

namespace mhc::trace::exporter {

struct PerfettoOptions {
    int64_t run_id = 0;   // > 0: also the simulated/replayed run (events, kernel times, memory)
    IfExists if_exists = IfExists::Replace;   // the CLI refuses an existing output without --force
    std::string runs_db;                      // where the run is stored (mhc simulate --runs-db); empty: the trace
};

// Writes `out` (gzip when the name ends in .gz). Returns the number of trace events written.
int64_t export_perfetto(const std::string& trace_path, const std::string& out, const PerfettoOptions& opt = {});

struct CsvOptions {
    int64_t run_id = 0;   // > 0: the run tables hold this run only (an unknown id is refused)
    IfExists if_exists = IfExists::Replace;
    // Not empty: the run tables are this runs database's runs of the trace (mhc simulate
    // --runs-db), not the trace's own; one made for another trace is refused (trace::list_runs).
    std::string runs_db;
};
struct CsvTable {
    std::string file;   // "allocations.csv"
    int64_t rows = 0;
};

// Writes DIR/<table>.csv for every table of the trace (DIR is created if needed), in schema
// order: the table's columns in its order, string ids and codes as their names, time columns
// named with "_ns", NULL as an empty field (docs/import.md, "Formats out"). None is written when
// one exists and `if_exists` is Refuse. The trace itself is never an output (refused even with
// Replace). Throws mhc::Error naming the row where a code or string id names nothing.
std::vector<CsvTable> export_csv(const std::string& trace_path, const std::string& dir, const CsvOptions& opt = {});

}  // namespace mhc::trace::exporter
