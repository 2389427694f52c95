// The meta keys behind `mhc import`'s and `mhc info`'s notes, each with the label a user reads
// and, where the stored value is a bare word or count, the sentence it stands for.
#include "trace_notes.hpp"

#include "mhc/common/error.hpp"

namespace mhc::cli {

namespace {

// A stored value as said: its words where the value is one of a few, else the value itself.
using Say = std::string (*)(const std::string& value);

std::string as_stored(const std::string& value) { return value; }

std::string timing(const std::string& value) {
    return value == "order-only" ? "order only (event order, no timestamps)" : value;
}

std::string dropped(const std::string& value) {
    return value == "0" ? "none: the recorder lost no record" : value + " records the recorder lost";
}

std::string complete(const std::string& value) {
    return value == "false" ? "no: the recording was interrupted" : value == "true" ? "yes" : value;
}

std::string rebuilt(const std::string& value) {
    if (value == "0") return "none: no allocation was alive before recording began";
    return value + (value == "1" ? " allocation" : " allocations") + " alive before recording began, rebuilt";
}

std::string frees(const std::string& value) {
    if (value == "address") return "paired by address";
    if (value == "size") return "paired by size (no addresses recorded)";
    return value;
}

std::string end_state(const std::string& value) { return "only the blocks alive at the snapshot: " + value; }

std::string kernel_device(const std::string& value) { return "kernels' device " + value; }

struct Note {
    const char* key;
    const char* label;
    Say say;
};

// The order of the lines: what the trace is, then what an importer or the recorder changed.
constexpr Note kNotes[] = {{"preset", "preset", as_stored},
                           {"accesses", "accesses", as_stored},
                           {"timing", "timing", timing},
                           {"allocations", "allocations", as_stored},
                           {"dropped_records", "dropped", dropped},
                           {"complete", "complete", complete},
                           {"record.lifetimes", "lifetimes", as_stored},
                           {"reconstructed_blocks", "rebuilt", rebuilt},
                           {"pairing", "frees", frees},
                           {"missing", "missing", as_stored},
                           {"snapshot.end_state_only", "end state", end_state},
                           {"snapshot.end_state_pending_free", "pending", as_stored},
                           {"kineto.kernel_device", "devices", kernel_device},
                           {"kineto.kernel_clamp", "overlaps", as_stored},
                           {"et.join", "join", as_stored}};

}  // namespace

std::vector<TraceNote> trace_notes(const std::map<std::string, std::string>& meta) {
    std::vector<TraceNote> notes;
    for (const Note& note : kNotes)
        if (auto it = meta.find(note.key); it != meta.end())
            notes.push_back({note.label, printable(note.say(it->second))});
    return notes;
}

}  // namespace mhc::cli
