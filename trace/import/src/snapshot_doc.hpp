// A PyTorch memory snapshot's document level, around the trace events that snapshot_replay.cpp replays:
// a snapshot saved as JSON read as the pickle of the same value, the end state's segments, the
// pinned host allocator's memory (not imported, said), top-level keys this reader does not know,
// and the record_function ranges of 'external_annotations' as markers, with the steps they mark
// (steps.hpp). docs/import.md, "PyTorch CUDA memory snapshot".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/import/rows.hpp"

namespace mhc::trace::import::snapshot {

using Id = PickleDoc::Id;

// What a pickled value is, in Python's words, for a refusal that names it.
const char* type_name(const PickleDoc& doc, Id value);

// The bad-field rule (docs/import.md, "Hostile input") for a snapshot: a field PyTorch writes as
// an int and the import uses must be one (not a str, float, bool or None), else the import is
// refused naming the field; before 2026-12-03 such a value was read as 0 without a word.
template <class Bad>
int64_t int_field(const PickleDoc& doc, Id value, const char* key, const Bad& bad) {
    if (doc.kind(value) != PickleDoc::Kind::Int) throw bad(std::string("'") + key + "' is " + type_name(doc, value) + ", not an int");
    return doc.as_int(value);
}

// A snapshot saved as JSON turned into the pickle of the same value (refused naming the byte where
// the JSON is not valid).
std::string json_as_pickle(std::string_view json, const std::string& in);

// The snapshot inside a page of torch.cuda._memory_viz (trace_plot, segment_plot, and
// torch.cuda.memory._save_memory_usage/_save_segment_usage, which call them): its pickle, taken
// from the page's base64 (refused naming the byte where it is not base64).
std::string memory_viz_html_pickle(std::string_view html, const std::string& in);

// The end state's segments: a snapshot's 'segments', or the root when it is memory_snapshot()'s list.
std::optional<Id> end_segments(const PickleDoc& doc, Id root);

// A snapshot without trace events: the end state only, said in meta and a warning.
void end_state_only(const PickleDoc& doc, Id segments, Result& result);

// What the pinned host allocator recorded ('host_traces', 'host_segments'), in words; empty if nothing.
std::string host_memory(const PickleDoc& doc, std::optional<Id> traces, std::optional<Id> segments);

// The top-level keys this reader does not know, named in meta and a warning.
void say_keys_not_read(const PickleDoc& doc, Id root, Result& result);

// What placing the annotations needs of the trace events: whether they have times (and some),
// the earliest and latest time_us, and the marker ids already given (one per oom event).
struct AnnotationClock {
    bool timed = false;
    double t_min = 0, last_us = 0;
    int64_t first_id = 0;
    // Each alloc event's time (its microsecond's start, in the markers' ns) and size, in time
    // order: what an optimizer-step range runs (NamedSpan::work: the bytes allocated inside it).
    std::vector<std::pair<int64_t, int64_t>> allocs;
};

// One START or END of a record_function range, as the allocator noted it: an entry of
// snapshot['external_annotations'] (PyTorch 2.5 on), or a 'user_defined' trace entry (nightlies of
// June-July 2024: frames[0] holds the stage as 'name' and the range's name as 'filename').
struct Annotation {
    std::string name;
    bool start = false;
    int64_t device = 0;
    double time_us = 0;
};

// snapshot['external_annotations'], each entry checked (refused naming it where it is not a dict
// with str 'name', 'stage' START or END, number 'time_us' and int 'device').
std::vector<Annotation> external_annotations(const PickleDoc& doc, std::optional<Id> list, const std::string& in);

// The annotations as range markers (ProfilerStep#N ones as steps) and the steps the optimizer's
// ranges mark; returns what meta snapshot.annotations says (empty: none). `from` names where
// they came from in that text ("START/END entries (record_function ranges of user scope)").
std::string add_annotation_markers(const std::vector<Annotation>& annotations, const std::string& from,
                                   const AnnotationClock& clock, Rows& rows, Result& result);

}   // namespace mhc::trace::import::snapshot
