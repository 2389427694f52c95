// PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) -> trace (docs/import.md).
// device_traces[d] is the event history of device d; `segments` is the allocator's end state.
// Allocations that existed before recording began show up only as a free without an alloc
// or as an allocated block in the end state: both are reconstructed as alive from t = 0.
// Events carry requested sizes; each allocation's block is found by snapshot_blocks.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <tuple>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/import/rows.hpp"
#include "limits.hpp"
#include "segments.hpp"
#include "snapshot_blocks.hpp"
#include "snapshot_doc.hpp"
#include "snapshot_frames.hpp"
#include "source.hpp"
#include "steps.hpp"

namespace mhc::trace::import {

namespace {

using namespace snapshot;

// A trace entry's action; Unknown: any other (counted, otherwise ignored). Annotate (newer
// PyTorch: _annotate_tensor attached metadata to a live allocation) holds no memory: counted.
// UserDefined (nightlies of June-July 2024, pytorch#129072 to #130964: a record_function range's
// START or END as a trace entry with addr 0 and size 0) holds none either: its range is a marker.
enum class Action : uint8_t {
    Alloc,
    FreeRequested,
    FreeCompleted,
    Free,
    SegAlloc,
    SegFree,
    SegMap,
    SegUnmap,
    Oom,
    Snapshot,
    Annotate,
    UserDefined,
    Unknown
};
constexpr size_t kActionCount = 13;
// The action's slot in kActionNames and in the per-action counts (declaration order).
constexpr size_t index(Action action) { return static_cast<size_t>(action); }
const char* const kActionNames[kActionCount] = {"alloc",         "free_requested", "free_completed", "free",
                                                "segment_alloc", "segment_free",   "segment_map",    "segment_unmap",
                                                "oom",           "snapshot",       "annotate",       "user_defined",
                                                "other"};

static_assert(index(Action::Unknown) + 1 == kActionCount);
const char* name_of(Action action) { return kActionNames[index(action)]; }

Action action_of(std::string_view a) {
    for (size_t i = 0; i < index(Action::Unknown); ++i)
        if (a == kActionNames[i]) return static_cast<Action>(i);
    return Action::Unknown;
}

// The actions whose events allocate or free memory: their 'addr' must be there.
bool moves_memory(Action action) {
    return action != Action::Oom && action != Action::Snapshot && action != Action::Annotate &&
           action != Action::UserDefined && action != Action::Unknown;
}

// A memory pool's id (MempoolId_t): (0, 0) the default pool; any other a private pool (a CUDA
// graph's, a torch.cuda.MemPool's).
using PoolKey = std::pair<int64_t, int64_t>;
bool is_private(const PoolKey& pool) { return pool.first != 0 || pool.second != 0; }

// One trace entry, decoded with a single pass over its dict. pool: the entry's 'pool_id' (torch
// 2.15: every entry, the pool of the block or segment it acts on; has_pool false without it).
struct Event {
    Action action = Action::Unknown;
    bool has_action = false, timed = false, has_addr = false, has_size = false, has_pool = false;
    int64_t addr = 0, size = 0, stream = 0;
    PoolKey pool{0, 0};
    double time_us = 0;
    std::optional<Id> frames;
};

// snapshot['allocator_settings'] (PyTorch >= 2.4) as PYTORCH_CUDA_ALLOC_CONF text, the keys the
// caching model follows: expandable_segments, max_split_size_mb, roundup_power2_divisions,
// garbage_collection_threshold, and as the rules of a block's size. max_split_size is in bytes
// there (-1 or SIZE_MAX: unlimited); roundup_power2_divisions maps each power-of-two interval
// start in MiB to its divisions.
BlockRules add_allocator_settings(const PickleDoc& d, std::optional<Id> settings, std::map<std::string, std::string>& meta) {
    BlockRules rules;
    if (!settings || d.kind(*settings) != PickleDoc::Kind::Dict) return rules;
    std::string conf;
    auto put = [&](const std::string& kv) { conf += (conf.empty() ? "" : ",") + kv; };
    if (auto v = d.get(*settings, "PYTORCH_CUDA_ALLOC_CONF"); v && d.kind(*v) == PickleDoc::Kind::Str)
        meta["allocator.PYTORCH_CUDA_ALLOC_CONF"] = std::string(d.as_str(*v));
    if (auto v = d.get(*settings, "expandable_segments"); v && d.is_int(*v)) {
        rules.expandable = d.as_int(*v) != 0;
        rules.expandable_said = true;
        put(std::string("expandable_segments:") + (rules.expandable ? "True" : "False"));
    }
    if (auto v = d.get(*settings, "max_split_size"); v && d.is_int(*v)) {
        int64_t b = d.as_int(*v);
        if (b > 0 && b < (int64_t{1} << 56)) {
            put("max_split_size_mb:" + std::to_string(b >> 20));
            rules.max_split_size = b;
        }
    }
    if (auto v = d.get(*settings, "roundup_power2_divisions"); v && d.kind(*v) == PickleDoc::Kind::Dict) {
        auto kv = d.items(*v);
        std::string list;
        bool any = false;
        for (size_t i = 0; i + 1 < kv.size(); i += 2) {
            if (!d.is_int(kv[i + 1])) continue;
            int64_t n = d.as_int(kv[i + 1]);
            any |= n != 0;
            std::string key = d.kind(kv[i]) == PickleDoc::Kind::Str ? std::string(d.as_str(kv[i]))
                                                                   : std::to_string(d.as_int(kv[i]));
            list += (list.empty() ? "" : ",") + key + ":" + std::to_string(n);
            int64_t mib = std::atoll(key.c_str());   // the interval [mib, 2 mib) MiB
            if (mib > 0 && n > 0 && n <= (1 << 20))
                rules.divisions[static_cast<size_t>(torch::roundup_interval(mib << 20))] = n;
        }
        if (any) put("roundup_power2_divisions:[" + list + "]");
    } else if (v && d.is_int(*v) && d.as_int(*v) > 0) {
        put("roundup_power2_divisions:" + std::to_string(d.as_int(*v)));
        if (d.as_int(*v) <= (1 << 20)) rules.divisions.fill(d.as_int(*v));
    }
    if (auto v = d.get(*settings, "garbage_collection_threshold"); v && d.is_number(*v) && d.as_float(*v) > 0) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", d.as_float(*v));
        put(std::string("garbage_collection_threshold:") + b);
    }
    meta["allocator.conf"] = conf;
    return rules;
}

// The trace time (ns) of each event of one device: 1000 x (time_us - the first time_us) + 1 + k
// for the k-th event (from 0, in the file's order) of its microsecond, or 1 + k * 1000 / n of
// n when more than 1000 share one. So the trace keeps the order in which the allocator made
// them (docs/trace-format.md "Events at one instant"), (t - 1) / 1000 is still the recorded
// microsecond, and t = 0 is before the first event: blocks allocated before recording begin
// there. Without time_us: event k (from 0) at k + 1 ns.
std::vector<int64_t> event_times(const std::vector<Event>& evs, bool all_timed, double t_min) {
    std::vector<int64_t> t(evs.size());
    if (!all_timed) {
        for (size_t k = 0; k < evs.size(); ++k) t[k] = static_cast<int64_t>(k) + 1;
        return t;
    }
    for (size_t k = 0; k < evs.size(); ++k) t[k] = static_cast<int64_t>(std::floor(evs[k].time_us - t_min));
    if (std::is_sorted(t.begin(), t.end())) {
        // The allocator's order is time order (as recorded): the events of one microsecond are
        // one run, numbered within it without a table.
        for (size_t first = 0, end = 0; first < t.size(); first = end) {
            while (end < t.size() && t[end] == t[first]) ++end;
            const auto count = static_cast<int64_t>(end - first);
            for (size_t k = first; k < end; ++k) {
                const auto seen = static_cast<int64_t>(k - first);
                t[k] = t[k] * 1000 + 1 + (count <= 1000 ? seen : seen * 1000 / count);
            }
        }
        return t;
    }
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> per_us;   // us -> (events, seen so far)
    per_us.reserve(evs.size());
    for (size_t k = 0; k < evs.size(); ++k) ++per_us[t[k]].first;
    for (size_t k = 0; k < evs.size(); ++k) {
        auto& [n, seen] = per_us[t[k]];
        const int64_t offset = n <= 1000 ? seen : seen * 1000 / n;
        ++seen;
        t[k] = t[k] * 1000 + 1 + offset;
    }
    return t;
}

std::string hex_address(int64_t addr) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(addr));
    return text;
}

std::string at_event(size_t dev, size_t k) {
    return "device_traces[" + std::to_string(dev) + "][" + std::to_string(k) + "]";
}

// device_traces, decoded once. Keys and action strings are memo-shared objects: their codes
// are looked up per node, not per event.
struct Decoded {
    std::vector<std::vector<Event>> devices;
    int64_t events = 0;
    bool all_timed = true;
    double t_min = 0;
    std::map<std::string, int64_t> unknown_actions;   // action names mhc does not know, and their events
    std::map<std::string, int64_t> unknown_keys;      // event keys mhc does not know, and their events
    int64_t timed = 0;                                 // events with time_us
    int64_t pooled = 0;                                // events with pool_id
    std::vector<Annotation> user_defined;              // the record_function ranges of user_defined entries
};

// A user_defined entry's range (PyTorch wrote its context as one frame: the stage as 'name', the
// range's name as 'filename'; pytorch#124179 shows one). Refused naming the entry where it is not so.
template <class Bad> Annotation user_defined_range(const PickleDoc& doc, const Event& ev, size_t dev, const Bad& bad) {
    std::optional<Id> frame;
    if (ev.frames && doc.kind(*ev.frames) == PickleDoc::Kind::List && doc.size(*ev.frames) > 0)
        frame = doc.items(*ev.frames).front();
    if (!frame || doc.kind(*frame) != PickleDoc::Kind::Dict)
        throw bad(
            "user_defined entry without its range (frames[0] with the stage as 'name' and the range as "
            "'filename')");
    auto text = [&](const char* key) {
        auto value = doc.get(*frame, key);
        if (!value || doc.kind(*value) != PickleDoc::Kind::Str)
            throw bad(std::string("user_defined entry: frames[0]['") + key + "'] is " +
                      (value ? type_name(doc, *value) : "missing") + ", not a str");
        return std::string(doc.as_str(*value));
    };
    const std::string stage = text("name");
    if (stage != "START" && stage != "END")
        throw bad("user_defined entry: frames[0]['name'] is '" + stage + "', not START or END");
    Annotation note;
    note.name = text("filename");
    note.start = stage == "START";
    note.device = static_cast<int64_t>(dev);
    note.time_us = ev.time_us;
    return note;
}

// A trace entry's 'pool_id': a pair of ints (a tuple in the pickle, a list in JSON), else refused.
template <class Bad> PoolKey pool_field(const PickleDoc& doc, Id value, const Bad& bad) {
    const auto kind = doc.kind(value);
    if (kind == PickleDoc::Kind::Tuple || kind == PickleDoc::Kind::List) {
        const auto items = doc.items(value);
        if (items.size() == 2 && doc.kind(items[0]) == PickleDoc::Kind::Int &&
            doc.kind(items[1]) == PickleDoc::Kind::Int)
            return {doc.as_int(items[0]), doc.as_int(items[1])};
    }
    throw bad(std::string("'pool_id' is ") + type_name(doc, value) + ", not a pair of ints");
}

Decoded decode_events(const PickleDoc& d, Id traces, NodeCodes& keys, const std::string& in) {
    NodeCodes actions(d.node_count());
    Decoded out;
    bool have_t = false;
    for (Id dev : d.items(traces)) {
        if (d.kind(dev) != PickleDoc::Kind::List)
            throw Error(where(in, "device_traces[" + std::to_string(out.devices.size()) + "] is " + type_name(d, dev) +
                                      ", not a list of trace events"));
        auto& evs = out.devices.emplace_back();
        evs.reserve(d.size(dev));
        for (Id e : d.items(dev)) {
            Event ev;
            auto bad = [&](const std::string& what) {
                return Error(where(in, at_event(out.devices.size() - 1, evs.size()) + ": " + what));
            };
            if (d.kind(e) != PickleDoc::Kind::Dict) throw bad(std::string("is ") + type_name(d, e) + ", not a dict");
            auto kv = d.items(e);
            for (size_t i = 0; i + 1 < kv.size(); i += 2) {
                Id k = kv[i], v = kv[i + 1];
                switch (keys.get(k, [&] { return key_code(d.as_str(k)); })) {
                    case KeyCode::Action:
                        if (d.kind(v) != PickleDoc::Kind::Str)
                            throw bad(std::string("'action' is ") + type_name(d, v) + ", not a str");
                        ev.action = actions.get(v, [&] { return action_of(d.as_str(v)); });
                        ev.has_action = true;
                        if (ev.action == Action::Unknown) ++out.unknown_actions[std::string(d.as_str(v))];
                        break;
                    case KeyCode::Addr:
                        ev.addr = int_field(d, v, "addr", bad);
                        ev.has_addr = true;
                        break;
                    case KeyCode::Size:
                        ev.size = int_field(d, v, "size", bad);
                        ev.has_size = true;
                        if (ev.size < 0 || ev.size > kMaxBytes)
                            throw bad("size " + std::to_string(ev.size) + " is out of range");
                        break;
                    case KeyCode::Stream: ev.stream = int_field(d, v, "stream", bad); break;
                    case KeyCode::TimeUs:
                        if (!d.is_number(v) || d.kind(v) == PickleDoc::Kind::Bool)
                            throw bad(std::string("'time_us' is ") + type_name(d, v) + ", not a number");
                        ev.time_us = d.as_float(v);
                        // |t| <= 4e15 us keeps differences * 1000 inside int64 nanoseconds.
                        if (!(std::fabs(ev.time_us) <= 4e15)) throw bad("time_us is out of range");
                        ev.timed = true;
                        break;
                    case KeyCode::Frames: ev.frames = v; break;
                    case KeyCode::PoolId:
                        ev.pool = pool_field(d, v, bad);
                        ev.has_pool = true;
                        break;
                    case KeyCode::Other: ++out.unknown_keys[std::string(d.as_str(k))]; break;
                    default: break;
                }
            }
            if (!ev.has_action) throw bad("event has no 'action'");
            if (moves_memory(ev.action) && !ev.has_addr)
                throw bad(std::string(name_of(ev.action)) + " event has no 'addr'");
            if (moves_memory(ev.action) && !ev.has_size && ev.action != Action::FreeRequested &&
                ev.action != Action::FreeCompleted && ev.action != Action::Free)
                throw bad(std::string(name_of(ev.action)) + " event has no 'size'");
            out.pooled += ev.has_pool;
            if (ev.action == Action::UserDefined)
                out.user_defined.push_back(user_defined_range(d, ev, out.devices.size() - 1, bad));
            if (ev.timed) {
                out.t_min = have_t ? std::min(out.t_min, ev.time_us) : ev.time_us;
                have_t = true;
                ++out.timed;
            } else {
                out.all_timed = false;
            }
            evs.push_back(ev);
            ++out.events;
        }
    }
    return out;
}

// The rows an import builds, and what it counted on the way.
class SnapshotImport {
public:
    SnapshotImport(const PickleDoc& d, const std::string& in, Rows& w, NodeCodes& keys)
        : d_(d), in_(in), w_(w), labels_(d, w, keys), seglog_(in), pre_label_(w.intern("(allocated before recording)")) {}

    void replay(const Decoded& ev);
    void end_state(std::optional<Id> segments);
    PoolKey note_pool(Id seg, int32_t dev, int64_t address, int64_t bytes);
    void say_private_pools(std::map<std::string, std::string>& meta, Result& result) const;
    // The rows of private pools the trace events name (pool_id), for meta snapshot.allocation_pools
    // and snapshot.segment_row_pools; nothing when no event has a pool_id.
    void pool_rows(const std::vector<Segment>& segments, int64_t pooled_events, int64_t events);
    // Segment rows, or none when the allocations do not fit in them (said in meta).
    std::vector<Segment> segment_rows();
    void block_sizes(const std::vector<Segment>& segments, const BlockRules& rules);
    void write(const std::vector<Segment>& segments);
    void meta(Result& r, const Decoded& ev) const;
    // The import's alive bytes at each 'snapshot' entry against the allocator's active bytes it
    // records (meta snapshot.active_checked, a warning where they differ); after block_sizes.
    void check_active(Result& result) const;

private:
    void replay_device(size_t dev, const std::vector<Event>& evs, const std::vector<int64_t>& times);
    void free_block(size_t dev, size_t k, const Event& e, int64_t t);
    void end_block(int32_t dev, int64_t stream, Id block, int64_t addr, const std::string& at, const PoolKey& pool);
    void reborn_times();
    size_t add(int32_t dev, int64_t addr, int64_t bytes, int64_t requested, int64_t t_alloc, int64_t t_free,
               int64_t stream, int64_t label);
    void add_bytes(int64_t& sum, int64_t v) const {   // sizes are at most 2^50 each; many may pass int64
        if (__builtin_add_overflow(sum, v, &sum)) throw Error(where(in_, "sizes add up to more than 2^63 bytes"));
    }

    const PickleDoc& d_;
    const std::string& in_;
    Rows& w_;
    Labels labels_;
    SegmentLog seglog_;
    const int64_t pre_label_;
    // Where a row's block size comes from: an alloc event (inferred from the layout), a free
    // without one (the request rounded), or the end state (recorded).
    enum class SizeFrom : uint8_t { EndState, Layout, Rounding };
    std::vector<Allocation> allocs_;
    std::vector<SizeFrom> size_from_;
    std::vector<std::unordered_map<int64_t, size_t>> live_;       // per device: address -> allocation
    // Per device, every free as (address, time) in the trace's order; read once at the end for
    // the few end-state blocks that began at a free (a table of every address cost more).
    std::vector<std::vector<std::pair<int64_t, int64_t>>> frees_;
    // Per device, the addresses freed and not allocated since, with the freeing event's index: a
    // second free there means the trace lacks alloc events (skip_actions=["alloc"]).
    std::vector<std::unordered_map<int64_t, size_t>> freed_;
    struct Reborn {   // an end-state block alive from the last free at its address, if any
        int32_t dev;
        int64_t addr;
        size_t row;
    };
    std::vector<Reborn> reborn_;
    struct Checkpoint {   // a 'snapshot' entry: device, index, time, the allocator's active bytes
        int32_t dev;
        size_t k;
        int64_t t, active;
    };
    std::vector<Checkpoint> checkpoints_;
    std::vector<std::unordered_map<int64_t, int64_t>> end_size_;  // per device: end-state block size at a live address
    // The snapshot has an end state ('segments'), every active block of it placed at an address:
    // then each allocation the trace leaves alive must be one of them.
    bool has_end_state_ = false, end_unplaced_ = false;
    void live_not_in_end_state(Result& result) const;
    int64_t reconstructed_ = 0, freed_unknown_ = 0, ooms_ = 0;
    int64_t segment_events_ = 0, end_blocks_ = 0, end_segments_ = 0;
    // Per device, the reserved bytes the segment events add up to: at the end and at their
    // highest (from 0 before the first event), and the end state's total_size. The reserved
    // peak is the end state's total less what the events added, plus their highest.
    struct Reserved {
        int64_t at_end = 0, highest = 0, lowest = 0, end_state = 0;
        bool seen = false;
    };
    std::map<int32_t, Reserved> reserved_;
    std::string reserved_peaks() const;
    int64_t action_counts_[kActionCount] = {};
    int64_t end_size_checked_ = 0, end_size_differs_ = 0;
    // End-state blocks in state active_pending_free: freed by the program, still waiting on
    // the events of the streams that used them (record_stream); the allocator cannot reuse them.
    int64_t end_pending_blocks_ = 0, end_pending_bytes_ = 0;
    // End-state segments per (device, segment_pool_id): (0, 0) is the default pool, any other a
    // private pool (a CUDA graph's, a torch.cuda.MemPool's). Value: segments, bytes.
    std::map<std::tuple<int32_t, int64_t, int64_t>, std::pair<int64_t, int64_t>> pools_;
    // Meta snapshot.segment_pools: each end-state segment of a private pool, as
    // "DEVICE:FIRST,SECOND:ADDRESS:BYTES" (space-separated), for the caching model's pools.
    std::string segment_pools_;
    // Private pools by the trace events' pool_id (torch 2.15): per allocation row index; per
    // (device, address, time) of a segment_alloc or segment_map (the row's t_alloc) and of a
    // segment_free or segment_unmap (its t_free); the end state's private segments per (device,
    // address): (end, pool), for the rows of blocks and segments that began before recording.
    std::unordered_map<size_t, PoolKey> row_pool_;
    std::map<std::tuple<int32_t, int64_t, int64_t>, PoolKey> seg_made_pool_, seg_freed_pool_;
    std::map<std::pair<int32_t, int64_t>, std::pair<int64_t, PoolKey>> end_pool_;
    int64_t pooled_events_ = 0, events_ = 0, freed_segments_ = 0;
    std::string allocation_pools_, segment_row_pools_, pools_gone_;
    BlockReport blocks_;
    std::string segments_dropped_;
};

size_t SnapshotImport::add(int32_t dev, int64_t addr, int64_t bytes, int64_t requested, int64_t t_alloc,
                           int64_t t_free, int64_t stream, int64_t label) {
    Allocation al;
    al.id = static_cast<int64_t>(allocs_.size()) + 1;
    al.device = dev;
    al.address = addr;
    al.bytes = bytes;
    al.requested_bytes = requested;
    al.t_alloc = t_alloc;
    al.t_free = t_free;
    al.stream = stream;
    al.label = label;
    allocs_.push_back(al);
    size_from_.push_back(SizeFrom::EndState);
    return allocs_.size() - 1;
}

void SnapshotImport::replay(const Decoded& ev) {
    // At most one row per alloc or free event (plus the end-state blocks): reserved once
    // instead of regrown (each regrowth copies and touches fresh pages).
    size_t upper = 0;
    for (const auto& evs : ev.devices)
        for (const Event& e : evs)
            upper += e.action == Action::Alloc || e.action == Action::Free || e.action == Action::FreeCompleted ||
                     e.action == Action::FreeRequested;
    allocs_.reserve(upper + 64);
    size_from_.reserve(upper + 64);
    live_.resize(ev.devices.size());
    frees_.resize(ev.devices.size());
    freed_.resize(ev.devices.size());
    end_size_.resize(ev.devices.size());
    for (size_t dev = 0; dev < ev.devices.size(); ++dev)
        replay_device(dev, ev.devices[dev], event_times(ev.devices[dev], ev.all_timed, ev.t_min));
}

void SnapshotImport::free_block(size_t dev, size_t k, const Event& e, int64_t t) {
    auto& live = live_[dev];
    auto it = live.find(e.addr);
    if (it != live.end()) {
        allocs_[it->second].t_free = t;
        live.erase(it);
    } else {
        // Allocated before recording began: alive from the start until now. The event has
        // the requested size; the block is that size rounded (its place is not known). Unless the
        // trace freed this address already and allocated nothing there since: two blocks alive
        // from the start at one address cannot be (before 2026-12-03 the import failed later, on
        // overlapping rows, without saying why).
        if (auto again = freed_[dev].find(e.addr); again != freed_[dev].end())
            throw Error(where(in_, at_event(dev, k) + " (" + name_of(e.action) + "): frees the block at " +
                                       hex_address(e.addr) + " again, with no alloc there since " +
                                       at_event(dev, again->second) +
                                       " freed it: the trace lacks alloc events (recorded with "
                                       "_record_memory_history(skip_actions=[\"alloc\"])?)"));
        if (e.size <= 0)
            throw Error(where(in_, at_event(dev, k) + " (" + name_of(e.action) +
                                       "): frees an unknown block of unknown size"));
        const size_t row = add(static_cast<int32_t>(dev), e.addr, e.size, e.size, 0, t, e.stream, pre_label_);
        size_from_[row] = SizeFrom::Rounding;
        if (e.has_pool && is_private(e.pool)) row_pool_[row] = e.pool;   // free_completed names the block's pool
        ++reconstructed_;
        ++freed_unknown_;
    }
    frees_[dev].emplace_back(e.addr, t);
    freed_[dev][e.addr] = k;
}

void SnapshotImport::replay_device(size_t dev, const std::vector<Event>& evs, const std::vector<int64_t>& times) {
    auto& live = live_[dev];
    live.reserve(1024);
    frees_[dev].reserve(static_cast<size_t>(std::count_if(evs.begin(), evs.end(), [](const Event& event) {
        return event.action == Action::Free || event.action == Action::FreeCompleted ||
               event.action == Action::FreeRequested;
    })));
    // Snapshots record free_completed when the block really returns to the allocator; very
    // old ones have only 'free'. free_requested marks the end only where nothing else does.
    const bool has_completed =
        std::any_of(evs.begin(), evs.end(), [](const Event& event) { return event.action == Action::FreeCompleted; });
    Reserved& reserved = reserved_[static_cast<int32_t>(dev)];
    for (size_t k = 0; k < evs.size(); ++k) {
        const Event& e = evs[k];
        ++action_counts_[index(e.action)];
        const int64_t t = times[k];
        switch (e.action) {
            case Action::Alloc: {
                if (e.size <= 0)
                    throw Error(where(in_, at_event(dev, k) + " (alloc): size is missing or not positive"));
                auto it = live.find(e.addr);
                if (it != live.end()) {   // a free we never saw: end the old block here
                    allocs_[it->second].t_free = t;
                    live.erase(it);
                }
                freed_[dev].erase(e.addr);
                size_t i = add(static_cast<int32_t>(dev), e.addr, e.size, e.size, t, kNoTime, e.stream, labels_.of(e.frames));
                size_from_[i] = SizeFrom::Layout;
                if (e.has_pool && is_private(e.pool)) row_pool_[i] = e.pool;
                live.emplace(e.addr, i);
                break;
            }
            case Action::FreeRequested:
                if (has_completed) break;   // the block returns at free_completed
                [[fallthrough]];
            case Action::FreeCompleted:
            case Action::Free: free_block(dev, k, e, t); break;
            case Action::SegAlloc:
            case Action::SegMap:
                ++segment_events_;
                seglog_.alloc(static_cast<int32_t>(dev), k, name_of(e.action), t, e.addr, e.size, e.stream,
                              e.action == Action::SegMap);
                if (e.has_pool && is_private(e.pool)) seg_made_pool_[{static_cast<int32_t>(dev), e.addr, t}] = e.pool;
                add_bytes(reserved.at_end, e.size);
                reserved.highest = std::max(reserved.highest, reserved.at_end);
                reserved.seen = true;
                break;
            case Action::SegFree:
            case Action::SegUnmap:
                ++segment_events_;
                seglog_.free(static_cast<int32_t>(dev), k, name_of(e.action), t, e.addr, e.size, e.stream,
                             e.action == Action::SegUnmap);
                if (e.has_pool && is_private(e.pool)) seg_freed_pool_[{static_cast<int32_t>(dev), e.addr, t}] = e.pool;
                reserved.at_end -= e.size;
                reserved.lowest = std::min(reserved.lowest, reserved.at_end);
                reserved.seen = true;
                break;
            case Action::Snapshot:
                // The allocator's active bytes when _snapshot() was called during recording (its
                // snapshot() records total_active, every active block's size, as this entry's size);
                // one taken of a private pool alone (MemPool.snapshot(), pool_id named) is that
                // pool's: not a check of the device.
                if (e.has_size && !(e.has_pool && is_private(e.pool)))
                    checkpoints_.push_back({static_cast<int32_t>(dev), k, t, e.size});
                break;
            case Action::Oom: {
                Marker m;
                m.id = ++ooms_;
                m.name = w_.intern("oom: " + std::to_string(e.size) + " bytes requested");
                m.t_start = m.t_end = t;
                m.kind = MarkerKind::Range;
                w_.add(m);
                break;
            }
            default: break;
        }
    }
}

// One end-state block at `addr` (old snapshots give no address: the caller counts it from the
// segment's start). An allocated block no trace event accounts for existed before recording.
void SnapshotImport::end_block(int32_t dev, int64_t stream, Id block, int64_t addr, const std::string& at,
                               const PoolKey& pool) {
    auto bad = [&](const std::string& what) { return Error(where(in_, at + ": " + what)); };
    auto state = d_.get(block, "state");
    auto size_v = d_.get(block, "size");
    if (!state) throw bad("block has no 'state'");
    if (d_.kind(*state) != PickleDoc::Kind::Str) throw bad(std::string("'state' is ") + type_name(d_, *state) + ", not a str");
    // The states PyTorch writes (c10/cuda/CUDACachingAllocator.h, BlockInfo; memory_snapshot.cpp):
    // another one could hold memory or not, so no figure could be trusted.
    std::string_view st = d_.as_str(*state);
    if (st != "active_allocated" && st != "active_pending_free" && st != "inactive")
        throw bad("state '" + std::string(st) +
                  "' is not one PyTorch writes (active_allocated, active_pending_free, inactive)");
    if (!size_v) throw bad("block has no 'size'");
    const int64_t size = int_field(d_, *size_v, "size", bad);
    if (size < 0 || size > kMaxBytes) throw bad("a block of " + std::to_string(size) + " bytes is out of range");
    if (st == "inactive") return;
    ++end_blocks_;
    if (size == 0) return;
    if (st == "active_pending_free") {
        ++end_pending_blocks_;
        add_bytes(end_pending_bytes_, size);
    }
    // Requested size: 'requested_size', or in old snapshots the first history entry's real_size.
    auto history = d_.get(block, "history");
    std::optional<Id> first;
    if (history && d_.kind(*history) == PickleDoc::Kind::List && !d_.items(*history).empty())
        first = d_.items(*history).front();
    int64_t requested = kNoBytes;
    if (auto rq = d_.get(block, "requested_size"); rq && int_field(d_, *rq, "requested_size", bad) > 0) requested = d_.as_int(*rq);
    else if (auto rs = first ? d_.get(*first, "real_size") : std::nullopt; rs && d_.is_int(*rs) && d_.as_int(*rs) > 0)
        requested = d_.as_int(*rs);
    if (requested > size) requested = kNoBytes;
    const bool known_dev = dev >= 0 && static_cast<size_t>(dev) < live_.size();
    if (known_dev && live_[dev].count(addr)) {   // the trace's own allocation: its block, recorded
        end_size_[dev][addr] = size;
        return;
    }
    // Alive from the start, or from the last free at its address if the trace saw one (set by
    // reborn_times once every end-state block is known).
    auto frames = d_.get(block, "frames");
    if (!frames && first) frames = d_.get(*first, "frames");
    int64_t label = labels_.of(frames);
    const size_t row = add(dev, addr, size, requested, 0, kNoTime, stream, label == kNoString ? pre_label_ : label);
    if (known_dev) reborn_.push_back({dev, addr, row});
    if (is_private(pool) && pool.first >= 0) row_pool_[row] = pool;   // a block never leaves its segment
    ++reconstructed_;
}

void SnapshotImport::reborn_times() {
    std::unordered_map<int64_t, int64_t> last;   // address -> time of its last free, for one device
    for (size_t dev = 0; dev < frees_.size(); ++dev) {
        last.clear();
        for (const Reborn& block : reborn_)
            if (static_cast<size_t>(block.dev) == dev) last.emplace(block.addr, 0);
        if (last.empty()) continue;
        for (const auto& [addr, t] : frees_[dev])
            if (auto it = last.find(addr); it != last.end()) it->second = t;
        for (const Reborn& block : reborn_)
            if (static_cast<size_t>(block.dev) == dev) allocs_[block.row].t_alloc = last[block.addr];
    }
}

// A segment's pool (segment_pool_id, PyTorch 2.1 on: a pair of ints, a tuple in the pickle, a list
// in JSON), counted for meta snapshot.private_pools. A value of another shape is not a pool id
// mhc knows: the segment is counted as of an unknown pool.
PoolKey SnapshotImport::note_pool(Id seg, int32_t dev, int64_t address, int64_t bytes) {
    auto id = d_.get(seg, "segment_pool_id");
    if (!id) return {0, 0};
    int64_t first = -1, second = -1;
    const auto kind = d_.kind(*id);
    if (kind == PickleDoc::Kind::Tuple || kind == PickleDoc::Kind::List) {
        const auto items = d_.items(*id);
        if (items.size() == 2 && d_.is_int(items[0]) && d_.is_int(items[1])) {
            first = d_.as_int(items[0]);
            second = d_.as_int(items[1]);
        }
    }
    auto& pool = pools_[{dev, first, second}];
    if (first >= 0 && !(first == 0 && second == 0)) {
        segment_pools_ += (segment_pools_.empty() ? "" : " ") + std::to_string(dev) + ":" + std::to_string(first) + "," +
                          std::to_string(second) + ":" + std::to_string(address) + ":" + std::to_string(bytes);
        end_pool_[{dev, address}] = {address + bytes, {first, second}};
    }
    ++pool.first;
    add_bytes(pool.second, bytes);
    return {first, second};
}

// snapshot['segments']: the allocator's end state. What the trace's live segments and blocks
// do not cover began before recording.
void SnapshotImport::end_state(std::optional<Id> segments) {
    if (!segments || d_.kind(*segments) != PickleDoc::Kind::List) return;
    has_end_state_ = true;
    for (Id seg : d_.items(*segments)) {
        const std::string at = "segments[" + std::to_string(end_segments_) + "]";
        auto bad = [&](const std::string& what) { return Error(where(in_, at + ": " + what)); };
        if (d_.kind(seg) != PickleDoc::Kind::Dict) throw bad(std::string("is ") + type_name(d_, seg) + ", not a dict");
        auto dv = d_.get(seg, "device");
        const int64_t device = dv ? int_field(d_, *dv, "device", bad) : 0;
        if (device < -1 || device >= (int64_t{1} << 31)) throw bad("device " + std::to_string(device) + " is out of range");
        const auto dev = static_cast<int32_t>(device);
        auto st = d_.get(seg, "stream");
        const int64_t stream = st ? int_field(d_, *st, "stream", bad) : 0;
        auto sa = d_.get(seg, "address");
        auto sz = d_.get(seg, "total_size");
        auto ex = d_.get(seg, "is_expandable");
        const bool has_address = sa.has_value();
        PoolKey seg_pool{0, 0};
        if (sa) int_field(d_, *sa, "address", bad);
        if (!sz) throw bad("segment has no 'total_size'");
        int_field(d_, *sz, "total_size", bad);
        if (has_address) {
            if (d_.as_int(*sz) < 0 || d_.as_int(*sz) > kMaxBytes)
                throw bad("total_size " + std::to_string(d_.as_int(*sz)) + " is out of range");
            Reserved& reserved = reserved_[dev];
            add_bytes(reserved.end_state, d_.as_int(*sz));
            reserved.seen = true;
            seglog_.end_state(static_cast<size_t>(end_segments_), dev, d_.as_int(*sa), d_.as_int(*sz), stream,
                              ex && d_.is_int(*ex) && d_.as_int(*ex) != 0);
            seg_pool = note_pool(seg, dev, d_.as_int(*sa), d_.as_int(*sz));
        }
        ++end_segments_;
        auto blocks = d_.get(seg, "blocks");
        if (!blocks || d_.kind(*blocks) != PickleDoc::Kind::List) continue;
        // Blocks tile their segment in order (memory_viz's annotate_snapshot): a block without
        // 'address' (PyTorch 2.0) starts where the one before it ended.
        int64_t next = has_address ? d_.as_int(*sa) : 0;
        size_t block_index = 0;
        for (Id b : d_.items(*blocks)) {
            const std::string block_at = at + ".blocks[" + std::to_string(block_index++) + "]";
            if (d_.kind(b) != PickleDoc::Kind::Dict)
                throw Error(where(in_, block_at + ": is " + type_name(d_, b) + ", not a dict"));
            auto addr_v = d_.get(b, "address");
            auto size_v = d_.get(b, "size");
            if (addr_v && d_.kind(*addr_v) != PickleDoc::Kind::Int)
                throw Error(where(in_, block_at + ": 'address' is " + type_name(d_, *addr_v) + ", not an int"));
            int64_t addr = addr_v ? d_.as_int(*addr_v) : next;
            if (!addr_v && !has_address) {   // nowhere to place it
                end_unplaced_ = true;
                break;
            }
            end_block(dev, stream, b, addr, block_at, seg_pool);
            if (size_v && d_.is_int(*size_v) && d_.as_int(*size_v) > 0 && d_.as_int(*size_v) <= kMaxBytes)
                next = addr + d_.as_int(*size_v);
        }
    }
    reborn_times();
}

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

// Each 'snapshot' trace entry holds the device's active bytes at that moment (the size of every
// block allocated or pending free: c10/cuda/CUDACachingAllocator.cpp, snapshot()'s total_active),
// recorded when torch.cuda.memory._snapshot() was called while history was on (a ring of one entry
// keeps nothing else; a program that dumps every few steps leaves one per dump). The rows alive
// then (t_alloc < t < t_free) must add up to it: a reconstruction, a block size or a free the import
// got wrong shows here, where before 2026-12-05 nothing compared them. Said in meta
// snapshot.active_checked; where some differ, also a warning with the largest difference.
void SnapshotImport::check_active(Result& result) const {
    if (checkpoints_.empty()) return;
    std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> deltas;   // device -> (time, +/- bytes)
    std::set<int32_t> devices;
    for (const Checkpoint& point : checkpoints_) devices.insert(point.dev);
    for (const Allocation& row : allocs_) {
        if (!devices.count(row.device)) continue;
        auto& changes = deltas[row.device];
        changes.emplace_back(row.t_alloc, row.bytes);
        if (row.t_free != kNoTime) changes.emplace_back(row.t_free, -row.bytes);
    }
    int64_t differ = 0, worst = -1;
    std::string worst_said;
    for (auto& [dev, changes] : deltas) std::sort(changes.begin(), changes.end());
    std::vector<Checkpoint> sorted = checkpoints_;
    std::sort(sorted.begin(), sorted.end(), [](const Checkpoint& left, const Checkpoint& right) {
        return std::tie(left.dev, left.t) < std::tie(right.dev, right.t);
    });
    int32_t at_dev = -2;
    size_t next = 0;
    int64_t alive = 0;
    for (const Checkpoint& point : sorted) {
        const auto& changes = deltas[point.dev];
        if (point.dev != at_dev) {
            at_dev = point.dev;
            next = 0;
            alive = 0;
        }
        // Rows that began before the entry and those that ended before it (event times are unique:
        // no row begins or ends at the entry's own time).
        for (; next < changes.size() && changes[next].first < point.t; ++next) alive += changes[next].second;
        const int64_t diff = alive > point.active ? alive - point.active : point.active - alive;
        if (diff == 0) continue;
        ++differ;
        if (diff > worst) {
            worst = diff;
            worst_said = at_event(static_cast<size_t>(point.dev), point.k) + ": the allocator held " +
                         std::to_string(point.active) + " B in active blocks, the import " + std::to_string(alive) +
                         " B";
        }
    }
    const std::string entries = std::to_string(checkpoints_.size()) +
                                (checkpoints_.size() == 1 ? " snapshot entry" : " snapshot entries");
    if (differ == 0) {
        result.meta["snapshot.active_checked"] =
            entries +
            " (the allocator's active bytes when _snapshot() was called while recording): the import's alive "
            "bytes equal at every one";
        return;
    }
    const std::string said = entries + ": the import's alive bytes differ from the allocator's active bytes at " +
                             std::to_string(differ) + " (largest: " + worst_said + ")";
    result.meta["snapshot.active_checked"] = said;
    result.warnings.push_back(said +
                              ": a reconstruction, block size or free the import could not know is off there, "
                              "so the figures can be off by up to " +
                              std::to_string(worst) +
                              " B (or the snapshot entry was of one memory pool: MemPool.snapshot())");
}

// Each device's reserved peak by the snapshot's own accounting: its end state's total_size less
// what the segment events added, plus the most they had added at any point (segments reserved
// before recording began count from the start). Without an end state, the least reserve the
// events allow (a free of a segment the trace never saw needs it). One device: the figure;
// several: "device D: figure" each. Before 2026-12-03 this was the events' own highest sum from
// zero: 0 for a snapshot whose segments were all reserved before recording (most real ones).
std::string SnapshotImport::reserved_peaks() const {
    std::string out;
    bool has_end_state = false;
    for (const auto& [dev, res] : reserved_) has_end_state |= res.end_state > 0;
    size_t shown = 0;
    for (const auto& [dev, res] : reserved_) shown += res.seen;
    for (const auto& [dev, res] : reserved_) {
        if (!res.seen) continue;
        const int64_t before = has_end_state ? std::max<int64_t>(0, res.end_state - res.at_end) : -res.lowest;
        int64_t peak = 0;
        if (__builtin_add_overflow(before, res.highest, &peak)) throw Error(where(in_, "reserved bytes pass 2^63"));
        if (shown == 1) return std::to_string(peak);
        out += (out.empty() ? "device " : ", device ") + std::to_string(dev) + ": " + std::to_string(peak);
    }
    return out.empty() ? "0" : out;
}

// Allocations the trace leaves alive that the end state does not hold: their frees are not in the
// trace (a recording with skip_actions dropping free_requested and free_completed, or a damaged
// file). Kept alive to the end, as the trace says, and said: the peak can be too high by them.
// Before 2026-12-03 nothing was said (a real snapshot without its frees: peak 0.2% too high).
void SnapshotImport::live_not_in_end_state(Result& result) const {
    if (!has_end_state_ || end_unplaced_) return;
    int64_t count = 0, bytes = 0;
    for (size_t dev = 0; dev < live_.size(); ++dev)
        for (const auto& [addr, row] : live_[dev])
            if (!end_size_[dev].count(addr)) {
                ++count;
                add_bytes(bytes, allocs_[row].bytes);
            }
    if (count == 0) return;
    const std::string what = std::to_string(count) + (count == 1 ? " allocation, " : " allocations, ") +
                             std::to_string(bytes) + " B";
    result.meta["snapshot.live_not_in_end_state"] = what;
    result.warnings.push_back(what + " that the trace leaves alive are not active blocks of the snapshot's end state: their "
                                "frees are missing from the trace (recorded with skip_actions dropping free_requested "
                                "and free_completed, or a damaged file); kept alive to the end, so the peak can be too "
                                "high by up to " + std::to_string(bytes) + " B");
}

// Segments of private pools in the end state (segment_pool_id other than (0, 0): a CUDA graph's or
// a torch.cuda.MemPool's, as verl's vLLM and slime's offloaded weights use) keep their own segments:
// a block of one pool never goes into another's. Said in meta snapshot.private_pools and a warning
// (before 2026-12-05 in silence); meta snapshot.segment_pools names each such segment, from which
// mhc allocator's caching model puts each allocation in its pool (sim/src/allocator_compare.cpp:
// slime's Megatron snapshot, 297 of its 298 segments in pool (0, 1), was modelled 5.05% under its
// recorded reserved peak with one pool per stream, and to the byte with its pool).
void SnapshotImport::say_private_pools(std::map<std::string, std::string>& meta, Result& result) const {
    std::string said;
    int64_t segments = 0, bytes = 0;
    for (const auto& [key, counts] : pools_) {
        const auto& [dev, first, second] = key;
        if (first == 0 && second == 0) continue;
        const std::string pool = first < 0 ? "of an unknown id"
                                           : "(" + std::to_string(first) + ", " + std::to_string(second) + ")";
        said += (said.empty() ? "" : ", ") + std::string("device ") + std::to_string(dev) + " pool " + pool + ": " +
                std::to_string(counts.first) + " segments, " + std::to_string(counts.second) + " B";
        segments += counts.first;
        bytes += counts.second;
    }
    if (pooled_events_ > 0 && pooled_events_ < events_) {
        // Some events name their pool and some do not (a file put together from two PyTorch
        // versions' entries, or damaged): those without are the default pool's. Said, not exact.
        const std::string partial = "trace events (pool_id) on " + std::to_string(pooled_events_) + " of " +
                                    std::to_string(events_) +
                                    " events: the blocks and segments of the others are taken as the default "
                                    "pool's (not exact where they were a private pool's)";
        meta["snapshot.pools_from"] = partial;
        result.warnings.push_back("pool_id " + partial.substr(partial.find(" on ") + 1));
    } else if (pooled_events_ > 0) {
        meta["snapshot.pools_from"] = "trace events (pool_id): exact";
    } else if (freed_segments_ > 0) {
        // Before torch 2.15 events name no pool: a private pool that gave all its segments back
        // during the trace (a CUDA graph or MemPool let go of) leaves no end-state segment to tell.
        const std::string unknown = std::to_string(freed_segments_) +
                                    " segment rows freed during the trace: their pool is unknown (the events name "
                                    "none, before torch 2.15; the end state shows only the pools still held), "
                                    "taken as the default pool's";
        meta["snapshot.pools_unknown"] = unknown;
        if (!said.empty())   // the program uses private pools: one given back may be among them
            result.warnings.push_back(unknown +
                                      ": where one was a private pool given back, its blocks are "
                                      "modelled sharing the default pool's segments");
    }
    if (pooled_events_ > 0) {
        if (!allocation_pools_.empty()) meta["snapshot.allocation_pools"] = allocation_pools_;
        if (!segment_row_pools_.empty()) meta["snapshot.segment_row_pools"] = segment_row_pools_;
        if (!pools_gone_.empty()) {
            meta["snapshot.private_pools_given_back"] = pools_gone_;
            result.warnings.push_back("private memory pools gave all their segments back during the trace (" +
                                      pools_gone_ +
                                      "): a CUDA graph or torch.cuda.MemPool let go of; the caching model gives "
                                      "their memory back too (meta snapshot.private_pools_given_back)");
        }
    } else if (!said.empty()) {
        meta["snapshot.pools_from"] = "end-state segments (segment_pool_id): the events name no pool";
    }
    if (said.empty()) return;
    meta["snapshot.private_pools"] = said;
    if (!segment_pools_.empty()) meta["snapshot.segment_pools"] = segment_pools_;
    result.warnings.push_back(
        "the end state holds " + std::to_string(segments) + " segments (" + std::to_string(bytes) +
        " B) of private memory pools (" + said +
        "): a CUDA graph's or a torch.cuda.MemPool's, whose blocks never share the default pool's "
        "segments; the caching model (mhc allocator, simulate, sweep, advise) puts each allocation in " +
        (pooled_events_ > 0
             ? std::string("the pool its event names (pool_id; meta snapshot.allocation_pools)")
             : std::string("the pool of the end-state segment it lies in (meta snapshot.segment_pools)")));
}

// "FIRST,SECOND:ID-ID,ID ..." (space-separated per pool; ids ascending, runs as LO-HI): the rows
// of each private pool, by row id.
std::string rows_by_pool(const std::map<PoolKey, std::vector<int64_t>>& rows) {
    std::string out;
    for (const auto& [pool, ids] : rows) {
        out += (out.empty() ? "" : " ") + std::to_string(pool.first) + "," + std::to_string(pool.second) + ":";
        for (size_t k = 0; k < ids.size();) {
            size_t end = k + 1;
            while (end < ids.size() && ids[end] == ids[end - 1] + 1) ++end;
            out += (k > 0 ? "," : "") + std::to_string(ids[k]) +
                   (end - k > 1 ? "-" + std::to_string(ids[end - 1]) : "");
            k = end;
        }
    }
    return out;
}

// Each allocation row's pool is the one its alloc event names (free_completed for a block
// allocated before recording; the end-state segment for a block no event names). A segment
// row's: its segment_alloc or segment_map event's, else its segment_free or segment_unmap
// event's (a segment made before recording), else the end-state segment it lies in.
void SnapshotImport::pool_rows(const std::vector<Segment>& segments, int64_t pooled_events, int64_t events) {
    pooled_events_ = pooled_events;
    events_ = events;
    if (pooled_events == 0) {   // no event names its pool: a segment freed during the trace has none known
        for (const Segment& seg : segments) freed_segments_ += seg.t_free != kNoTime;
        return;
    }
    std::map<PoolKey, std::vector<int64_t>> allocs, segs;
    for (const auto& [row, pool] : row_pool_) allocs[pool].push_back(allocs_[row].id);
    std::set<PoolKey> held;
    auto end_pool = [&](int32_t dev, int64_t address) -> const PoolKey* {
        auto it = end_pool_.upper_bound({dev, address});
        if (it == end_pool_.begin()) return nullptr;
        --it;
        return it->first.first == dev && address < it->second.first ? &it->second.second : nullptr;
    };
    for (const Segment& seg : segments) {
        const PoolKey* pool = nullptr;
        if (auto it = seg_made_pool_.find({seg.device, seg.address, seg.t_alloc}); it != seg_made_pool_.end())
            pool = &it->second;
        else if (auto freed = seg_freed_pool_.find({seg.device, seg.address, seg.t_free});
                 seg.t_free != kNoTime && freed != seg_freed_pool_.end())
            pool = &freed->second;
        else if (seg.t_free == kNoTime) pool = end_pool(seg.device, seg.address);
        if (!pool) continue;
        segs[*pool].push_back(seg.id);
        if (seg.t_free == kNoTime) held.insert(*pool);
    }
    for (auto& [pool, ids] : allocs) std::sort(ids.begin(), ids.end());
    for (auto& [pool, ids] : segs) std::sort(ids.begin(), ids.end());
    allocation_pools_ = rows_by_pool(allocs);
    segment_row_pools_ = rows_by_pool(segs);
    for (const auto& [pool, ids] : segs)
        if (!held.count(pool))
            pools_gone_ += (pools_gone_.empty() ? "(" : ", (") + std::to_string(pool.first) + ", " +
                           std::to_string(pool.second) + "): " + std::to_string(ids.size()) + " segment rows";
}

void SnapshotImport::meta(Result& r, const Decoded& ev) const {
    std::string act_list;
    for (size_t i = 0; i < kActionCount; ++i)
        if (action_counts_[i]) {
            if (!act_list.empty()) act_list += ", ";
            act_list += kActionNames[i];
            act_list += '=';
            act_list += std::to_string(action_counts_[i]);
        }
    auto& m = r.meta;
    m["source"] = "pytorch-memory-snapshot";
    m["import.format"] = "snapshot";
    m["import.events"] = std::to_string(ev.events);
    m["import.actions"] = act_list;
    m["accesses"] = "none";   // snapshots hold no kernels
    m["kernels"] = "none";
    m["timing"] = ev.all_timed && ev.events > 0 ? "exact" : "order-only";   // an end state alone has no times
    if (ev.timed > 0 && !ev.all_timed) {
        // PyTorch writes time_us on every event or on none: some without it is a damaged or
        // edited file, and one such event takes the times of all (before 2026-12-03 in silence).
        const std::string untimed = std::to_string(ev.events - ev.timed) + " of " + std::to_string(ev.events);
        m["snapshot.events_without_time_us"] = untimed;
        r.warnings.push_back(untimed + " trace events have no time_us: the whole trace is imported in event order only");
    }
    m["categories"] = "unknown";
    m["labels"] = "first frame of user or library Python code, else of PyTorch, else native (docs/import.md)";
    m["bytes"] = "block (the allocator's accounting: max_memory_allocated); requested_bytes: the request";
    m["snapshot.blocks_inferred"] =
        "split " + std::to_string(blocks_.split) + ", whole " + std::to_string(blocks_.whole) + ", no segment " +
        std::to_string(blocks_.without_segment) + ", no room " + std::to_string(blocks_.no_room);
    m["snapshot.blocks_checked_at_end"] =
        std::to_string(end_size_checked_) + " (" + std::to_string(end_size_differs_) + " inferred another size)";
    m["reconstructed_blocks"] = std::to_string(reconstructed_);
    m["reconstructed_blocks.freed_during_trace"] = std::to_string(freed_unknown_);
    int64_t reconstructed_bytes = 0;
    for (size_t i = 0; i < allocs_.size(); ++i)
        if (size_from_[i] != SizeFrom::Layout) add_bytes(reconstructed_bytes, allocs_[i].bytes);
    m["reconstructed_bytes"] = std::to_string(reconstructed_bytes);
    m["snapshot.end_state_allocated_blocks"] = std::to_string(end_blocks_);
    if (end_pending_blocks_ > 0) {
        // Alive to the end here (the allocator cannot reuse them yet), as memory_viz draws them;
        // torch.cuda.memory_allocated() had already dropped them when the snapshot was taken.
        const std::string pending = std::to_string(end_pending_blocks_) +
                                    (end_pending_blocks_ == 1 ? " block, " : " blocks, ") +
                                    std::to_string(end_pending_bytes_) + " B";
        m["snapshot.end_state_pending_free"] =
            pending +
            " (freed, waiting for the streams that used them: alive to the end, counted in the peak; "
            "torch.cuda.memory_allocated() at the snapshot excludes them)";
        r.warnings.push_back("the end state holds " + pending +
                             " freed but still pending on other streams (record_stream): kept alive to the end, so "
                             "the peak is above torch.cuda.memory_allocated() at the snapshot by up to " +
                             std::to_string(end_pending_bytes_) + " B");
    }
    say_private_pools(m, r);
    m["snapshot.segment_events"] = std::to_string(segment_events_);
    m["snapshot.reserved_peak_from_segment_events"] = reserved_peaks();
    m["snapshot.oom_events"] = std::to_string(ooms_);
    m["segments.reconstructed"] = std::to_string(seglog_.reconstructed);
    if (seglog_.live_not_in_end_state) m["segments.live_not_in_end_state"] = std::to_string(seglog_.live_not_in_end_state);
    m["snapshot.devices"] = std::to_string(ev.devices.size());
    if (!ev.unknown_actions.empty()) {
        // Actions of a newer PyTorch than this reader knows: they could move memory, so the figures
        // may miss it; named and warned (before 2026-12-03 only their count, in meta alone).
        std::string names;
        for (const auto& [name, count] : ev.unknown_actions)
            names += (names.empty() ? "" : ", ") + name + "=" + std::to_string(count);
        m["snapshot.unknown_actions"] = names;
        r.warnings.push_back("trace events of actions mhc does not know were not imported (" + names +
                             "): if they allocate or free memory, the figures miss it");
    }
    if (!ev.unknown_keys.empty()) {
        // Fields of a newer PyTorch than this reader knows: named and warned, as unknown actions are
        // (before 2026-12-03 they were passed over in silence).
        std::string names;
        for (const auto& [name, count] : ev.unknown_keys)
            names += (names.empty() ? "" : ", ") + name + "=" + std::to_string(count);
        m["snapshot.event_keys_not_read"] = names;
        r.warnings.push_back("trace event fields mhc does not know were not read (" + names +
                             "): if they change what an event allocates or frees, the figures miss it");
    }
    live_not_in_end_state(r);
    if (!segments_dropped_.empty()) {
        m["segments"] = "none: " + segments_dropped_;
        r.warnings.push_back("segments " + segments_dropped_ + "; imported without them");
    }
}

}  // namespace

namespace {

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

}  // namespace

void import_snapshot(const std::string& in, Rows& w, Result& r, uint64_t max_input_size) {
    FileBytes data(in, max_input_size);
    std::string_view bytes = data.view();
    std::string from_json;   // the pickle of a snapshot saved as JSON or in HTML; the document's strings point into it
    const size_t first = bytes.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && bytes[first] == '<') {
        from_json = memory_viz_html_pickle(bytes, in);
        bytes = from_json;
        r.meta["snapshot.file"] = "HTML of torch.cuda._memory_viz (trace_plot or segment_plot): the snapshot pickle it embeds";
    } else if (first != std::string_view::npos && (bytes[first] == '{' || bytes[first] == '[')) {
        from_json = json_as_pickle(bytes, in);
        bytes = from_json;
        r.meta["snapshot.file"] = "JSON (torch.cuda.memory._snapshot() saved with json.dump), read as its pickle";
    }
    PickleDoc doc(bytes, in);
    Id root = doc.root();
    const std::optional<Id> segments_end = end_segments(doc, root);
    const bool dict_root = doc.kind(root) == PickleDoc::Kind::Dict;
    auto field = [&](const char* name) { return dict_root ? doc.get(root, name) : std::nullopt; };
    if (!dict_root && !segments_end)
        throw Error(where(in, "not a PyTorch memory snapshot: the pickle holds no dict with "
                              "'segments' and 'device_traces'"));
    const std::optional<Id> traces = field("device_traces");
    const bool has_traces = traces && doc.kind(*traces) == PickleDoc::Kind::List;
    if (!has_traces && !segments_end)
        throw Error(where(in, "snapshot has no 'device_traces': record it with "
                              "torch.cuda.memory._record_memory_history() before _dump_snapshot()"));
    NodeCodes keys(doc.node_count());
    const Decoded ev = has_traces ? decode_events(doc, *traces, keys, in) : Decoded{};
    const std::string host = host_memory(doc, field("host_traces"), field("host_segments"));
    if (ev.events == 0 && !segments_end && !host.empty())
        throw Error(where(in, "the snapshot holds only " + host +
                                  ", which mhc does not import: no CUDA memory was recorded (record_cuda=False?)"));
    if (!host.empty()) {
        r.meta["snapshot.host_memory_not_imported"] = host;
        r.warnings.push_back("not imported: " + host + "; the trace holds the CUDA devices' memory only");
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
    if (ev.events == 0) end_state_only(doc, *segments_end, r);
    if (dict_root) say_keys_not_read(doc, root, r);
    r.events = ev.events;
    const BlockRules rules = add_allocator_settings(doc, field("allocator_settings"), r.meta);
    SnapshotImport imp(doc, in, w, keys);
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
        r.meta["allocator.expandable_segments"] = "True (inferred: the snapshot holds expandable segments)";
        std::string& conf = r.meta["allocator.conf"];   // what the caching model follows
        conf = "expandable_segments:True" + (conf.empty() ? "" : "," + conf);
    }
    imp.block_sizes(segments, block_rules);
    imp.check_active(r);
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
    if (const std::string said = add_annotation_markers(notes, from, annotation_clock(ev), w, r); !said.empty())
        r.meta["snapshot.annotations"] = said;
    r.meta["segments"] = std::to_string(segments.size()) + " rows (segment events and end state)";
    // A PyTorch allocator's blocks lie in its segments: mhc check holds the trace to it (outside-segment).
    if (!segments.empty()) r.meta["segments.hold_allocations"] = "true";
    imp.meta(r, ev);
}

}  // namespace mhc::trace::import
