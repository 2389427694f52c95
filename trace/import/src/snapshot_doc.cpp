// A PyTorch memory snapshot's document level (snapshot_doc.hpp): a snapshot saved as JSON read as
// its pickle, the end state's segments, the host allocator's memory and the keys not read, and the
// markers and steps of its external_annotations. Beside snapshot_events.cpp (the trace events).
#include "snapshot_doc.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "mhc/common/error.hpp"
#include "source.hpp"
#include "steps.hpp"

namespace mhc::trace::import::snapshot {

namespace {

// A snapshot saved as JSON (json.dump(torch.cuda.memory._snapshot()), or of memory_snapshot()'s
// list) turned into the pickle of the same value, which the reader below takes: dicts, lists,
// strings, ints, floats, booleans and null map one to one (the tuples of a pickle, such as
// segment_pool_id, came out as lists: nothing read here is a tuple). Python's json writes NaN and
// Infinity; rapidjson reads them. Before 2026-12-03 such a file was "not a known trace format".
class JsonAsPickle : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, JsonAsPickle> {
public:
    std::string out = std::string("\x80\x04", 2);   // PROTO 4
    bool Null() { return op('N'); }
    bool Bool(bool value) { return op(value ? '\x88' : '\x89'); }   // NEWTRUE, NEWFALSE
    bool Int(int value) { return Int64(value); }
    bool Uint(unsigned value) { return Int64(value); }
    bool Int64(int64_t value) {
        if (value >= INT32_MIN && value <= INT32_MAX) return op('J') && little(static_cast<uint32_t>(value), 4);   // BININT
        return op('\x8a') && op('\x08') && little(static_cast<uint64_t>(value), 8);   // LONG1, 8 bytes signed
    }
    bool Uint64(uint64_t value) {
        if (value <= static_cast<uint64_t>(INT64_MAX)) return Int64(static_cast<int64_t>(value));
        return op('\x8a') && op('\x09') && little(value, 8) && op('\0');   // LONG1, 9 bytes: stays positive
    }
    bool Double(double value) {
        uint64_t bits = 0;
        std::memcpy(&bits, &value, sizeof bits);
        op('G');   // BINFLOAT, big-endian
        for (int k = 7; k >= 0; --k) out += static_cast<char>((bits >> (8 * k)) & 0xff);
        return true;
    }
    bool String(const char* str, rapidjson::SizeType n, bool) {
        return op('X') && little(n, 4) && (out.append(str, n), true);   // BINUNICODE
    }
    bool Key(const char* str, rapidjson::SizeType n, bool copy) { return String(str, n, copy); }
    bool StartObject() { return op('}') && op('('); }   // EMPTY_DICT, MARK
    bool EndObject(rapidjson::SizeType) { return op('u'); }   // SETITEMS
    bool StartArray() { return op(']') && op('('); }   // EMPTY_LIST, MARK
    bool EndArray(rapidjson::SizeType) { return op('e'); }   // APPENDS

private:
    bool op(char code) {
        out += code;
        return true;
    }
    bool little(uint64_t value, int bytes) {
        for (int k = 0; k < bytes; ++k) out += static_cast<char>((value >> (8 * k)) & 0xff);
        return true;
    }
};

// Step markers from the annotations (steps.hpp): a ProfilerStep#N region (a snapshot recorded under
// torch.profiler's schedule) is step N (the caller marks it so); without one, the optimizer's step regions delimit the
// steps. Meta steps_from says which; before 2026-12-05 a snapshot had no steps ("steps none
// marked" of the H200 GPT-2 snapshot's 20 Optimizer.step#AdamW.step regions).
//
// A snapshot records no ops or calls, but its alloc events: an optimizer-step range's work is the
// bytes the allocations inside it requested (Adam's foreach temporaries, the same every step of one
// optimizer; two optimizers step different parameters). Where every class of a period of the
// durations allocates the same, the ranges are one optimizer stepping unevenly, a step each (as the
// Kineto, Nsight Systems and execution-trace readers tell by the ops they run); where they allocate
// nothing (fused or capturable optimizers), durations decide as before. Before 2026-12-05 (fifth)
// durations alone decided: one optimizer slow every other step was read as two, half the steps.
void add_step_markers(const std::set<std::tuple<std::string, int64_t, int64_t>>& ranges, int64_t id,
                      const AnnotationClock& clock, Rows& rows, Result& result) {
    std::vector<NamedSpan> spans;
    for (const auto& [name, t_start, t_end] : ranges) {
        if (profiler_step_number(name)) {   // written as step markers by the caller
            result.meta["steps_from"] = kStepsFromProfiler;
            return;
        }
        NamedSpan span{name, t_start, t_end};
        if (is_optimizer_step(name)) {
            span.work = 0;
            auto at = std::lower_bound(clock.allocs.begin(), clock.allocs.end(), std::make_pair(t_start, INT64_MIN));
            for (; at != clock.allocs.end() && at->first < t_end; ++at) span.work += at->second;
        }
        spans.push_back(span);
    }
    const OptimizerSteps found = optimizer_steps(spans, 0, "bytes allocated");
    if (found.steps.empty()) return;
    result.meta["steps_from"] = found.said();
    result.meta["steps_optimizers"] = found.optimizers_said();
    if (const std::string warning = found.warning(); !warning.empty()) result.warnings.push_back(warning);
    for (const StepSpan& step : found.steps) {
        Marker marker;
        marker.id = ++id;
        marker.name = rows.intern("step#" + std::to_string(step.step));
        marker.t_start = step.t_start;
        marker.t_end = step.t_end;
        marker.kind = MarkerKind::Step;
        marker.index = step.step;
        rows.add(marker);
    }
}

}   // namespace

// What a pickled value is, in Python's words, for a refusal that names it.
const char* type_name(const PickleDoc& doc, Id value) {
    switch (doc.kind(value)) {
        case PickleDoc::Kind::None: return "None";
        case PickleDoc::Kind::Bool: return "a bool";
        case PickleDoc::Kind::Int: return "an int";
        case PickleDoc::Kind::BigInt: return "an int past 64 bits";
        case PickleDoc::Kind::Float: return "a float";
        case PickleDoc::Kind::Str: return "a str";
        case PickleDoc::Kind::Bytes: return "bytes";
        case PickleDoc::Kind::List: return "a list";
        case PickleDoc::Kind::Tuple: return "a tuple";
        case PickleDoc::Kind::Dict: return "a dict";
    }
    return "of an unknown kind";
}

// The end state's segments: a snapshot's 'segments', or the pickle's root when it is the list
// torch.cuda.memory_snapshot() returns (PyTorch's _memory_viz.py reads such a pickle as
// {"segments": it}). Empty when there are none or they are not segments (dicts with total_size).
std::optional<Id> end_segments(const PickleDoc& doc, Id root) {
    std::optional<Id> segments = doc.kind(root) == PickleDoc::Kind::List   ? std::optional<Id>(root)
                                 : doc.kind(root) == PickleDoc::Kind::Dict ? doc.get(root, "segments")
                                                                            : std::nullopt;
    if (!segments || doc.kind(*segments) != PickleDoc::Kind::List || doc.items(*segments).empty()) return std::nullopt;
    Id first = doc.items(*segments).front();
    if (doc.kind(first) != PickleDoc::Kind::Dict || !doc.get(first, "total_size")) return std::nullopt;
    return segments;
}

// A snapshot recorded without _record_memory_history() (device_traces empty or absent) or a
// pickled memory_snapshot() list: only what was alive when it was taken, said in a warning.
void end_state_only(const PickleDoc& doc, Id segments, Result& result) {
    int64_t blocks = 0;
    for (Id seg : doc.items(segments))
        if (auto list = doc.get(seg, "blocks"); list && doc.kind(*list) == PickleDoc::Kind::List)
            blocks += static_cast<int64_t>(doc.items(*list).size());
    result.meta["snapshot.end_state_only"] =
        std::to_string(doc.items(segments).size()) + " segments, " + std::to_string(blocks) + " blocks (no trace events)";
    result.warnings.emplace_back("the snapshot has no trace events (recorded without "
                                 "torch.cuda.memory._record_memory_history()): imported the end state only, the "
                                 "blocks alive when it was taken, from t = 0 to the end; no lifetimes, no order");
}

// Newer PyTorch (2.15 does) records the pinned host memory allocator too when asked
// (_record_memory_history(record_pinned_host_memory=True)): 'host_traces', one list of trace
// entries, and 'host_segments'. Not imported (its blocks follow the host allocator's rules, not
// the CUDA one's): counted, said in a warning, and named where it is all the file holds. Before
// 2026-12-03 they were dropped without a word, and a file of host memory alone was called one
// recorded without _record_memory_history().
std::string host_memory(const PickleDoc& doc, std::optional<Id> traces, std::optional<Id> segments) {
    auto count = [&](std::optional<Id> list) {
        return list && doc.kind(*list) == PickleDoc::Kind::List ? doc.items(*list).size() : size_t{0};
    };
    const size_t events = count(traces), segs = count(segments);
    if (events == 0 && segs == 0) return {};
    return std::to_string(events) + " trace events and " + std::to_string(segs) +
           " segments of the pinned host memory allocator (host_traces, host_segments)";
}

std::string json_as_pickle(std::string_view json, const std::string& in) {
    JsonAsPickle pickle;
    pickle.out.reserve(json.size() + 16);
    rapidjson::MemoryStream stream(json.data(), json.size());
    rapidjson::Reader reader;
    // Iterative: no recursion however deep (the pickle reader then refuses past its depth limit).
    if (!reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNanAndInfFlag>(stream, pickle))
        throw Error(where(in, std::string("invalid JSON: ") + rapidjson::GetParseError_En(reader.GetParseErrorCode()) +
                                  " (byte " + std::to_string(reader.GetErrorOffset()) + ")"));
    pickle.out += '.';   // STOP
    return std::move(pickle.out);
}

// _memory_viz.py's _format_viz (torch 2.1 to 2.15) writes `const local_files = [{"name":
// "snapshot.pickle", "base64": "..."}]` into the page: pickle.dumps(snapshot) followed by 1 to 3
// NUL bytes (to a multiple of 3), base64-encoded. One snapshot a page; the NULs are not the pickle's.
std::string memory_viz_html_pickle(std::string_view html, const std::string& in) {
    const size_t files = html.find("local_files");
    if (files == std::string_view::npos)
        throw Error(where(in, "an HTML page without a memory snapshot in it (no local_files of torch.cuda._memory_viz)"));
    auto value_at = [&](size_t key) {   // the string after `"base64"` and a colon
        size_t at = html.find_first_not_of(" \t\r\n", key + 8);
        if (at == std::string_view::npos || html[at] != ':') return std::string_view::npos;
        at = html.find_first_not_of(" \t\r\n", at + 1);
        return at != std::string_view::npos && html[at] == '"' ? at + 1 : std::string_view::npos;
    };
    const size_t key = html.find("\"base64\"", files);
    const size_t begin = key == std::string_view::npos ? key : value_at(key);
    const size_t end = begin == std::string_view::npos ? begin : html.find('"', begin);
    if (end == std::string_view::npos)
        throw Error(where(in, "a torch.cuda._memory_viz page whose local_files has no \"base64\" string: no snapshot to read"));
    if (const size_t more = html.find("\"base64\"", end); more != std::string_view::npos)
        throw Error(where(in, "a torch.cuda._memory_viz page holding more than one file (a second \"base64\" at byte " +
                                  std::to_string(more) + "): import each snapshot on its own"));
    static constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((end - begin) / 4 * 3);
    uint32_t bits = 0;
    int held = 0;
    size_t pad = 0;
    for (size_t i = begin; i < end; ++i) {
        const char symbol = html[i];
        if (symbol == '=' && pad < 2) { ++pad; continue; }
        const size_t value = alphabet.find(symbol);
        if (value == std::string_view::npos || pad > 0)
            throw Error(where(in, "torch.cuda._memory_viz page: byte " + std::to_string(i) +
                                      " of its snapshot's base64 is not base64"));
        bits = (bits << 6) | static_cast<uint32_t>(value);
        if ((held += 6) >= 8) {
            held -= 8;
            out += static_cast<char>((bits >> held) & 0xff);
        }
    }
    for (int n = 0; n < 3 && !out.empty() && out.back() == '\0'; ++n) out.pop_back();
    return out;
}

// snapshot['external_annotations'] (PyTorch 2.5 on): the record_function ranges of user scope
// (torch.profiler.record_function, Optimizer.step's own) that the allocator noted while it
// recorded history, one entry per START or END, with 'name', 'stage', 'device' and 'time_us'.
std::vector<Annotation> external_annotations(const PickleDoc& doc, std::optional<Id> list, const std::string& in) {
    std::vector<Annotation> out;
    if (!list || doc.kind(*list) != PickleDoc::Kind::List) return out;
    const auto entries = doc.items(*list);
    out.reserve(entries.size());
    for (size_t k = 0; k < entries.size(); ++k) {
        const std::string at = "external_annotations[" + std::to_string(k) + "]";
        auto bad = [&](const std::string& what) { return Error(where(in, at + ": " + what)); };
        const Id entry = entries[k];
        if (doc.kind(entry) != PickleDoc::Kind::Dict)
            throw bad(std::string("is ") + type_name(doc, entry) + ", not a dict");
        auto text = [&](const char* key) {
            auto value = doc.get(entry, key);
            if (!value || doc.kind(*value) != PickleDoc::Kind::Str)
                throw bad(std::string("'") + key + "' is " + (value ? type_name(doc, *value) : "missing") +
                          ", not a str");
            return std::string(doc.as_str(*value));
        };
        Annotation note;
        note.name = text("name");
        const std::string stage = text("stage");
        if (stage != "START" && stage != "END") throw bad("'stage' is '" + stage + "', not START or END");
        note.start = stage == "START";
        auto time = doc.get(entry, "time_us");
        if (!time || !doc.is_number(*time) || doc.kind(*time) == PickleDoc::Kind::Bool)
            throw bad(std::string("'time_us' is ") + (time ? type_name(doc, *time) : "missing") + ", not a number");
        note.time_us = doc.as_float(*time);
        // As the trace events' time_us (snapshot_events.cpp): |t| <= 4e15 us keeps differences * 1000
        // inside int64 nanoseconds. Unbounded, 1e300 or nan was cast to int64 (undefined: UBSan's
        // float-cast-overflow) and became a marker at time 0.
        if (!(std::fabs(note.time_us) <= 4e15)) throw bad("'time_us' is out of range");
        auto device = doc.get(entry, "device");
        note.device = device ? int_field(doc, *device, "device", bad) : 0;
        out.push_back(std::move(note));
    }
    return out;
}

// The annotations as markers, at the trace's times. Each START and the next END of the same name
// and device are one range marker: a START at microsecond u begins before that microsecond's
// events (1000 (u - t_min) ns), an END ends after them (1000 (u - t_min + 1) ns); an END whose
// START is not in the file began before recording (t = 0), a START never ended was open when the
// snapshot was taken (it ends after the last event). A range noted on several devices at the same
// times is one marker. Without time_us they cannot be placed: counted, not imported. Before
// 2026-12-03 external_annotations were dropped without a word; before 2026-12-05 user_defined
// trace entries were (warned as actions mhc does not know: their steps were lost).
std::string add_annotation_markers(const std::vector<Annotation>& annotations, const std::string& from,
                                   const AnnotationClock& clock, Rows& rows, Result& result) {
    if (annotations.empty()) return {};
    if (!clock.timed)
        return std::to_string(annotations.size()) +
               " entries not imported: the trace events have no time_us to place them";
    std::map<std::pair<int64_t, std::string>, std::vector<int64_t>> starts;   // (device, name) -> START times
    std::set<std::tuple<std::string, int64_t, int64_t>> ranges;               // (name, t_start, t_end)
    const int64_t t_last = (static_cast<int64_t>(std::floor(clock.last_us - clock.t_min)) + 1) * 1000;
    for (const Annotation& note : annotations) {
        const auto us = static_cast<int64_t>(std::floor(note.time_us - clock.t_min));
        auto& open = starts[{note.device, note.name}];
        if (note.start) {
            open.push_back(std::max<int64_t>(0, us * 1000));
        } else {
            const int64_t t_end = std::max<int64_t>(0, (us + 1) * 1000);
            const int64_t t_start = open.empty() ? 0 : open.back();
            if (!open.empty()) open.pop_back();
            ranges.insert({note.name, t_start, std::max(t_start, t_end)});
        }
    }
    for (const auto& [key, open] : starts)
        for (int64_t start : open) ranges.insert({key.second, start, std::max(start, t_last)});
    int64_t id = clock.first_id;
    for (const auto& [name, t_start, t_end] : ranges) {
        Marker marker;
        marker.id = ++id;
        marker.name = rows.intern(name);
        marker.t_start = t_start;
        marker.t_end = t_end;
        const std::optional<int32_t> step = profiler_step_number(name);
        marker.kind = step ? MarkerKind::Step : MarkerKind::Range;
        marker.index = step.value_or(-1);
        rows.add(marker);
    }
    add_step_markers(ranges, id, clock, rows, result);
    return std::to_string(ranges.size()) + " range markers from " + std::to_string(annotations.size()) + " " + from;
}

// The snapshot's top-level keys this reader does not know (a newer PyTorch's), named in meta
// snapshot.keys_not_read and warned: before 2026-12-03 they were passed over in silence.
void say_keys_not_read(const PickleDoc& doc, Id root, Result& result) {
    std::string names;
    const auto kv = doc.items(root);
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
        const std::string_view key = doc.as_str(kv[i]);
        bool known = false;
        for (std::string_view written : {"segments", "device_traces", "allocator_settings", "external_annotations",
                                         "host_segments", "host_traces"})
            known |= key == written;
        if (!known)
            names += (names.empty() ? "" : ", ") + (key.empty() ? std::string("(not a str)") : std::string(key));
    }
    if (names.empty()) return;
    result.meta["snapshot.keys_not_read"] = names;
    result.warnings.push_back("snapshot keys mhc does not know were not read (" + names +
                              "): if they hold memory the trace events do not, the figures miss it");
}

}   // namespace mhc::trace::import::snapshot
