// PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) -> trace (docs/import.md).
// device_traces[d] is the event history of device d; `segments` is the allocator's end state.
// Allocations that existed before recording began show up only as a free without an alloc
// or as an allocated block in the end state: both are reconstructed as alive from t = 0.
// Events carry requested sizes; each allocation's block is found by snapshot_blocks.cpp.
// This file runs the import's steps in order; snapshot_import.hpp says where each step is.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/import/rows.hpp"
#include "snapshot_blocks.hpp"
#include "snapshot_doc.hpp"
#include "snapshot_events.hpp"
#include "snapshot_frames.hpp"
#include "snapshot_import.hpp"
#include "snapshot_settings.hpp"
#include "source.hpp"
#include "torch_save.hpp"

namespace mhc::trace::import {

namespace snapshot {

std::vector<Segment> SnapshotImport::segment_rows() {
    std::vector<Segment> rows = seglog_.take();
    if (rows.empty()) return rows;
    // The allocations must lie in the segments (mhc check, rule outside-segment); a snapshot
    // whose segments cannot hold its own blocks (a synthetic one) keeps its blocks, not them.
    TraceData t;
    t.allocations.reserve(allocs_.size());
    for (const auto& a : allocs_) t.allocations.push(a);
    t.segments = rows;
    const size_t outside = allocations_outside_segments(t).size();
    if (outside == 0) return rows;
    segments_dropped_ = std::to_string(rows.size()) + " rows dropped: " + std::to_string(outside) + " of " +
                        std::to_string(allocs_.size()) +
                        " allocations lie in no segment alive when they were made (a synthetic or damaged snapshot)";
    return {};
}

void SnapshotImport::block_sizes(const std::vector<Segment>& segments, const BlockRules& rules) {
    std::vector<bool> infer(allocs_.size());
    for (size_t i = 0; i < allocs_.size(); ++i) {
        // A block allocated before recording and freed in it (Rounding) takes its place's room at
        // the start, as an alloc event's block takes the room it landed in.
        infer[i] = size_from_[i] == SizeFrom::Layout || size_from_[i] == SizeFrom::Rounding;
    }
    blocks_ = infer_block_sizes(allocs_, infer, segments, rules);
    // Blocks still allocated at the end are in the end state with their size: the recorded
    // size wins, and how often the inferred one differed is said in meta.
    for (size_t i = 0; i < allocs_.size(); ++i) {
        Allocation& a = allocs_[i];
        if (!infer[i] || a.t_free != kNoTime || a.device < 0 || static_cast<size_t>(a.device) >= end_size_.size())
            continue;
        auto it = end_size_[a.device].find(a.address);
        if (it == end_size_[a.device].end()) continue;
        ++end_size_checked_;
        if (it->second != a.bytes) ++end_size_differs_;
        if (it->second >= a.requested_bytes) a.bytes = it->second;
    }
}

void SnapshotImport::write(const std::vector<Segment>& segments) {
    w_.reserve(allocs_.size());
    for (const auto& a : allocs_) w_.add(a);
    for (const auto& g : segments) w_.add(g);
}

}  // namespace snapshot

namespace {

using snapshot::Action;
using snapshot::Annotation;
using snapshot::AnnotationClock;
using snapshot::Decoded;
using snapshot::Event;
using snapshot::Id;
using snapshot::NodeCodes;
using snapshot::SnapshotImport;
using snapshot::add_allocator_settings;
using snapshot::add_annotation_markers;
using snapshot::decode_events;
using snapshot::end_segments;
using snapshot::end_state_only;
using snapshot::external_annotations;
using snapshot::host_memory;
using snapshot::json_as_pickle;
using snapshot::memory_viz_html_pickle;
using snapshot::say_keys_not_read;

// What placing the external_annotations needs of the decoded events (snapshot_doc.hpp).
AnnotationClock annotation_clock(const Decoded& ev) {
    AnnotationClock clock;
    clock.timed = ev.all_timed && ev.events > 0;
    clock.t_min = clock.last_us = ev.t_min;
    for (const auto& evs : ev.devices)
        for (const Event& event : evs) {
            clock.last_us = std::max(clock.last_us, event.time_us);
            clock.first_id += event.action == Action::Oom ? 1 : 0;
            if (event.action == Action::Alloc && event.timed)
                clock.allocs.emplace_back(static_cast<int64_t>(std::floor(event.time_us - ev.t_min)) * 1000, event.size);
        }
    std::sort(clock.allocs.begin(), clock.allocs.end());
    return clock;
}

// Why a pickled dict is no memory snapshot, naming its first keys (a user's pickle of something else
// named memory.pickle).
std::string not_a_snapshot_dict(const PickleDoc& doc, Id root) {
    std::string keys;
    const auto kv = doc.items(root);
    const size_t shown = std::min<size_t>(kv.size() / 2, 5);
    for (size_t i = 0; i < shown; ++i) {
        const std::string_view key = doc.as_str(kv[2 * i]);
        keys += (i ? ", " : "") + (key.empty() ? std::string("(not a str)") : "'" + std::string(key.substr(0, 40)) + "'");
    }
    if (kv.size() / 2 > shown) keys += ", ... (" + std::to_string(kv.size() / 2) + " keys)";
    return "not a PyTorch memory snapshot: a pickled dict without 'segments' or 'device_traces'" +
           (keys.empty() ? std::string(" (it is empty)") : " (its keys: " + keys + ")");
}

// A page of trace_plot(filter_freed=True) (`python -m torch.cuda._memory_viz trace_plot
// --filter_freed`) holds the trace less every block both allocated and freed in it
// (filter_alloc_free_pairs), which the page does not say: its peaks are those of the blocks left
// (cs336-silmont2000's page: 31,719,936 B where the snapshot peaks at 3,249,144,832 B, in silence
// before 2026-12-08). A trace that allocates and frees no block it allocated is what such a page
// holds; said, as a recording that never freed what it allocated cannot be told from one.
void say_filtered_page(const Decoded& ev, Result& r) {
    int64_t allocs = 0, frees = 0;
    for (const auto& evs : ev.devices) {
        std::set<int64_t> allocated;
        for (const Event& event : evs) {
            const bool free = event.action == Action::FreeRequested || event.action == Action::FreeCompleted ||
                              event.action == Action::Free;
            if (free && allocated.count(event.addr)) return;   // a block allocated and freed: not filtered
            if (event.action == Action::Alloc) allocated.insert(event.addr);
            allocs += event.action == Action::Alloc ? 1 : 0;
            frees += free ? 1 : 0;
        }
    }
    if (allocs == 0) return;
    const std::string said = "the page's trace frees none of the " + std::to_string(allocs) + " blocks it allocates" +
                             (frees > 0 ? " (its " + std::to_string(frees) + " frees are of blocks allocated before it)"
                                        : std::string()) +
                             ", as a page written by trace_plot with "
                             "filter_freed=True holds it: the blocks allocated and freed while recording are "
                             "not in it, and its peaks are those of the blocks left; import the snapshot pickle "
                             "the page was made from";
    r.meta["snapshot.page_without_freed_blocks"] = said;
    r.warnings.push_back(said);
}

// The snapshot's pickle in the file's bytes and whether a _memory_viz page held it.
struct SnapshotPickle {
    std::string_view bytes;
    bool page = false;
};

// The snapshot's pickle in the file's bytes: the file itself, or the pickle of a snapshot saved as
// JSON, in a _memory_viz page or with torch.save (held in `held`), said in meta snapshot.file.
SnapshotPickle snapshot_pickle(std::string_view bytes, const std::string& in, uint64_t max_input_size,
                                 std::string& held, Result& result) {
    const size_t first = bytes.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && bytes[first] == '<') {
        held = memory_viz_html_pickle(bytes, in);
        result.meta["snapshot.file"] =
            "HTML of torch.cuda._memory_viz (trace_plot or segment_plot): the snapshot pickle it embeds";
        return {held, true};
    }
    if (first != std::string_view::npos && (bytes[first] == '{' || bytes[first] == '[')) {
        held = json_as_pickle(bytes, in);
        result.meta["snapshot.file"] = "JSON (torch.cuda.memory._snapshot() saved with json.dump), read as its pickle";
        return {held};
    }
    if (is_zip(bytes)) {
        std::string entry;
        held = torch_save_pickle(in, max_input_size, entry);
        result.meta["snapshot.file"] = "a torch.save archive: its entry '" + entry + "', the snapshot's pickle";
        return {held};
    }
    if (const std::optional<std::string_view> object = legacy_torch_save_object(bytes, in)) {
        result.meta["snapshot.file"] =
            "torch.save's legacy format (_use_new_zipfile_serialization=False): the snapshot's pickle in it";
        return {*object};
    }
    return {bytes};
}

}  // namespace

void import_snapshot(const std::string& in, Rows& rows, Result& result, uint64_t max_input_size) {
    FileBytes data(in, max_input_size);
    // The pickle of a snapshot saved as JSON, in HTML or in a zip; the document's strings point into it.
    std::string held;
    const SnapshotPickle pickle = snapshot_pickle(data.view(), in, max_input_size, held, result);
    PickleDoc doc(pickle.bytes, in);
    Id root = doc.root();
    const std::optional<Id> segments_end = end_segments(doc, root);
    const bool dict_root = doc.kind(root) == PickleDoc::Kind::Dict;
    auto field = [&](const char* name) { return dict_root ? doc.get(root, name) : std::nullopt; };
    if (!dict_root && !segments_end)
        throw Error(where(in, "not a PyTorch memory snapshot: the pickle holds no dict with "
                              "'segments' and 'device_traces'"));
    const std::optional<Id> traces = field("device_traces");
    const bool has_traces = traces && doc.kind(*traces) == PickleDoc::Kind::List;
    // torch.cuda.memory._snapshot() always writes 'segments' (1.13 on): a dict without it and
    // without 'device_traces' is another program's pickle (before 2026-12-06 told to record history).
    if (dict_root && !traces && !field("segments")) throw Error(where(in, not_a_snapshot_dict(doc, root)));
    if (!has_traces && !segments_end)
        throw Error(where(in, "snapshot has no 'device_traces': record it with "
                              "torch.cuda.memory._record_memory_history() before _dump_snapshot()"));
    NodeCodes keys(doc.node_count());
    const Decoded ev = has_traces ? decode_events(doc, *traces, keys, in) : Decoded{};
    // torch.cuda._memory_viz.profile_plot (its _profile_to_snapshot) makes a snapshot of the profiler's
    // memory events: every alloc carries the profiler's 'category', which the allocator never writes;
    // the last device_traces entry is the host's, the segments are the blocks' address range. Before
    // 2026-12-06 a CPU run's page imported as device 0 with a 132.91 MiB "segment".
    if (ev.unknown_keys.count("category") > 0)
        throw Error(where(in, "a snapshot made by torch.cuda._memory_viz.profile_plot from the profiler's memory "
                              "events (its alloc events carry 'category'), not by the CUDA allocator: its last "
                              "device_traces entry is the host's memory and its segments span its blocks' "
                              "addresses, so it would read as a GPU with made-up segments. Import the profiler's "
                              "trace of the same run (export_chrome_trace, with profile_memory=True)"));
    const std::string host = host_memory(doc, field("host_traces"), field("host_segments"));
    if (ev.events == 0 && !segments_end && !host.empty())
        throw Error(where(in, "the snapshot holds only " + host +
                                  ", which mhc does not import: no CUDA memory was recorded (record_cuda=False?)"));
    if (!host.empty()) {
        result.meta["snapshot.host_memory_not_imported"] = host;
        result.warnings.push_back("not imported: " + host + "; the trace holds the CUDA devices' memory only");
    }
    if (ev.events == 0 && !segments_end) {
        // An empty 'segments' list: the allocator held no memory when the snapshot was taken (a
        // real four-GPU file of such: before 2026-12-03 only told to record history).
        const std::optional<Id> segments = field("segments");
        const bool empty_end_state = segments && doc.kind(*segments) == PickleDoc::Kind::List;
        throw Error(where(in, std::string("snapshot has no trace events (device_traces is empty)") +
                                  (empty_end_state ? " and no segments (the allocator held no memory when it was taken)"
                                                   : "") +
                                  ": record it with torch.cuda.memory._record_memory_history() before _dump_snapshot()"));
    }
    if (ev.events == 0) end_state_only(doc, *segments_end, result);
    if (dict_root) say_keys_not_read(doc, root, result);
    if (pickle.page) say_filtered_page(ev, result);
    result.events = ev.events;
    const BlockRules rules = add_allocator_settings(doc, field("allocator_settings"), result.meta);
    SnapshotImport imp(doc, in, rows, keys);
    imp.replay(ev);
    imp.end_state(dict_root ? field("segments") : segments_end);
    std::vector<Segment> segments = imp.segment_rows();
    BlockRules block_rules = rules;
    if (!rules.expandable_said &&
        std::any_of(segments.begin(), segments.end(), [](const Segment& segment) { return segment.expandable; })) {
        // expandable_segments is one setting for the whole allocator (should_split reads it for
        // every segment, also the cudaMalloc'd ones of a CUDA graph's private pool): a snapshot
        // without allocator_settings (PyTorch 2.1-2.3) that holds expandable segments had it on.
        block_rules.expandable = true;
        result.meta["allocator.expandable_segments"] = "True (inferred: the snapshot holds expandable segments)";
        std::string& conf = result.meta["allocator.conf"];   // what the caching model follows
        conf = "expandable_segments:True" + (conf.empty() ? "" : "," + conf);
    }
    imp.block_sizes(segments, block_rules);
    imp.check_active(result);
    imp.pool_rows(segments, ev.pooled, ev.events);
    imp.write(segments);
    // Annotations from one source or the other (PyTorch wrote user_defined entries for a few weeks
    // before external_annotations replaced them); both, should a file hold both.
    std::vector<Annotation> notes = external_annotations(doc, field("external_annotations"), in);
    const std::string from =
        ev.user_defined.empty() ? "START/END entries (record_function ranges of user scope)"
        : notes.empty() ? "user_defined trace entries (record_function ranges, PyTorch nightlies of June-July 2024)"
                        : "START/END entries (external_annotations and user_defined trace entries)";
    notes.insert(notes.end(), ev.user_defined.begin(), ev.user_defined.end());
    if (const std::string said = add_annotation_markers(notes, from, annotation_clock(ev), rows, result); !said.empty())
        result.meta["snapshot.annotations"] = said;
    result.meta["segments"] = std::to_string(segments.size()) + " rows (segment events and end state)";
    // A PyTorch allocator's blocks lie in its segments: mhc check holds the trace to it (outside-segment).
    if (!segments.empty()) result.meta["segments.hold_allocations"] = "true";
    imp.meta(result, ev);
}

}  // namespace mhc::trace::import
