#pragma once
// What a user should know before reading a trace's views, from its meta rows (docs/trace-format.md):
// what the importer warned of (import.warnings, one per line: a table the export lacked, kernels
// moved, events left out, an end state without lifetimes), accesses partial or none, timing
// estimated or none, a recording that was interrupted or lost records. The window says them in
// one line by the header (hover: all of them); order-only timing has its own line by the toolbar.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mhc::viewer {

struct TraceNote {
    std::string brief;   // a few words for the one-line summary ("accesses none", "import")
    std::string text;    // the whole sentence, for the tooltip
};

// `allocations`: the trace's allocation count (accesses matter only where there is memory).
std::vector<TraceNote> trace_notes(const std::map<std::string, std::string>& meta, int64_t allocations);

// One line: the short notes first, then the first import warning whole and how many more
// ("accesses none; import: missing tables NVTX_EVENTS (imported without them) (+1 more)").
std::string notes_summary(const std::vector<TraceNote>& notes);

}   // namespace mhc::viewer
