#pragma once
// Exporters: Chrome/Perfetto trace JSON (opens in ui.perfetto.dev and chrome://tracing) and
// CSV tables. Writes are atomic: a temporary file beside the target, renamed when complete.
#include <cstdint>
#include <string>

#include "mhc/common/output_file.hpp"

namespace mhc::trace::exporter {

struct PerfettoOptions {
    int64_t run_id = 0;   // > 0: also the simulated/replayed run (events, kernel times, memory)
    IfExists if_exists = IfExists::Replace;   // the CLI refuses an existing output without --force
};

// Writes `out` (gzip when the name ends in .gz). Returns the number of trace events written.
int64_t export_perfetto(const std::string& trace_path, const std::string& out, const PerfettoOptions& opt = {});

// Writes DIR/allocations.csv and DIR/kernels.csv (DIR is created if needed). Returns rows written.
// Neither is written when either exists and `if_exists` is Refuse. The trace itself is never
// an output (refused even with Replace).
int64_t export_csv(const std::string& trace_path, const std::string& dir, IfExists if_exists = IfExists::Replace);

}  // namespace mhc::trace::exporter
