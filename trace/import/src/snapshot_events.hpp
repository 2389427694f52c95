#pragma once
// A PyTorch memory snapshot's trace events (device_traces), decoded once, each checked: its action,
// address, size, stream, time, frames and memory pool; and the trace time each event gets.
// SnapshotImport (snapshot_import.hpp) replays them into rows (docs/import.md, "PyTorch CUDA memory
// snapshot").
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mhc/trace/import/pickle.hpp"
#include "snapshot_doc.hpp"
#include "snapshot_frames.hpp"

namespace mhc::trace::import::snapshot {

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

inline constexpr const char* kActionNames[kActionCount] = {"alloc",         "free_requested", "free_completed", "free",
                                                "segment_alloc", "segment_free",   "segment_map",    "segment_unmap",
                                                "oom",           "snapshot",       "annotate",       "user_defined",
                                                "other"};

static_assert(index(Action::Unknown) + 1 == kActionCount);
inline const char* name_of(Action action) { return kActionNames[index(action)]; }

// A memory pool's id (MempoolId_t): (0, 0) the default pool; any other a private pool (a CUDA
// graph's, a torch.cuda.MemPool's).
using PoolKey = std::pair<int64_t, int64_t>;
inline bool is_private(const PoolKey& pool) { return pool.first != 0 || pool.second != 0; }

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

// The trace time (ns) of each event of one device: 1000 x (time_us - the first time_us) + 1 + k
// for the k-th event (from 0, in the file's order) of its microsecond, or 1 + k * 1000 / n of
// n when more than 1000 share one. So the trace keeps the order in which the allocator made
// them (docs/trace-format.md "Events at one instant"), (t - 1) / 1000 is still the recorded
// microsecond, and t = 0 is before the first event: blocks allocated before recording begin
// there. Without time_us: event k (from 0) at k + 1 ns.
std::vector<int64_t> event_times(const std::vector<Event>& evs, bool all_timed, double t_min);

// Where an event is, for a message: "device_traces[device][index]".
std::string at_event(size_t device, size_t index);

// device_traces decoded, each event checked (refused naming the event where a field is not what
// PyTorch writes).
Decoded decode_events(const PickleDoc& doc, Id traces, NodeCodes& keys, const std::string& in);

}  // namespace mhc::trace::import::snapshot
