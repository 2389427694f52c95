#pragma once
// What a trace is and lacks, and what an importer changed or could not tell, in the words `mhc
// import` and `mhc info` print (docs/import.md, "What each import records in meta"): the meta
// keys stay as stored (sqlite3, --json), the lines say them as a user reads them.
#include <map>
#include <string>
#include <vector>

namespace mhc::cli {

struct TraceNote {
    std::string label;   // at most 11 characters: info's label column
    std::string value;   // printable (control bytes shown as '?')
};

// The notes `meta` holds, in a fixed order (what the trace is, then what an importer did).
std::vector<TraceNote> trace_notes(const std::map<std::string, std::string>& meta);

}  // namespace mhc::cli
