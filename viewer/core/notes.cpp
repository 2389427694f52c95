#include "mhc/viewer/notes.hpp"

#include "mhc/common/error.hpp"

namespace mhc::viewer {

namespace {

// A meta value is text from the input file: control bytes (a newline inside one warning, an
// escape) would split or garble the line, so they read as '?', as `mhc info` prints them.
using mhc::printable;

std::string meta_of(const std::map<std::string, std::string>& meta, const std::string& key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
}

}   // namespace

std::vector<TraceNote> trace_notes(const std::map<std::string, std::string>& meta, int64_t allocations) {
    std::vector<TraceNote> notes;
    const std::string accesses = meta_of(meta, "accesses"), timing = meta_of(meta, "timing");
    if (allocations > 0 && accesses == "none")
        notes.push_back({"accesses none",
                         "accesses none: the source does not say which kernels used which allocation, so a simulated "
                         "run moves allocations by their lifetimes only (coarser results), and a click on an "
                         "allocation highlights no kernels"});
    if (accesses == "partial") {
        std::string why = printable(meta_of(meta, "et.join"));
        notes.push_back({"accesses partial", "accesses partial: some kernels' accesses are missing" +
                                                 (why.empty() ? std::string() : " (" + why + ")")});
    }
    if (timing == "estimated")
        notes.push_back({"timing estimated", "timing estimated: times are a roofline estimate, not measured"});
    if (timing == "none")
        notes.push_back({"timing none", "timing none: no row of this trace has a time; its time axis says nothing"});
    if (meta_of(meta, "complete") == "false")
        notes.push_back({"recording interrupted", "recording interrupted: the trace ends where the recording stopped"});
    if (std::string dropped = meta_of(meta, "dropped_records"); !dropped.empty() && dropped != "0")
        notes.push_back({dropped + " records dropped",
                         printable(dropped) + " records dropped: the recorder lost them, so some kernels, copies "
                                              "or allocations are missing"});
    const std::string warnings = meta_of(meta, "import.warnings");
    for (size_t at = 0; at < warnings.size();) {
        size_t end = warnings.find('\n', at);
        if (end == std::string::npos) end = warnings.size();
        if (end > at) notes.push_back({"import", "import: " + printable(warnings.substr(at, end - at))});
        at = end + 1;
    }
    return notes;
}

std::string notes_summary(const std::vector<TraceNote>& notes) {
    std::string out;
    size_t imports = 0;
    const TraceNote* first_import = nullptr;
    for (const TraceNote& note : notes) {
        if (note.brief == "import") {
            if (imports++ == 0) first_import = &note;
            continue;
        }
        out += (out.empty() ? "" : "; ") + note.brief;
    }
    if (first_import) {
        out += (out.empty() ? "" : "; ") + first_import->text;
        if (imports > 1) out += " (+" + std::to_string(imports - 1) + " more)";
    }
    return out;
}

}   // namespace mhc::viewer
