// A PyTorch memory snapshot's trace events replayed as allocation rows, segment events and oom
// markers, device by device (snapshot_import.hpp).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/common/error.hpp"
#include "snapshot_import.hpp"

namespace mhc::trace::import::snapshot {

namespace {

std::string hex_address(int64_t addr) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(addr));
    return text;
}

}  // namespace

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
        for (const Event& event : evs)
            upper += event.action == Action::Alloc || event.action == Action::Free ||
                     event.action == Action::FreeCompleted || event.action == Action::FreeRequested;
    allocs_.reserve(upper + 64);
    size_from_.reserve(upper + 64);
    live_.resize(ev.devices.size());
    frees_.resize(ev.devices.size());
    freed_.resize(ev.devices.size());
    end_size_.resize(ev.devices.size());
    for (size_t dev = 0; dev < ev.devices.size(); ++dev)
        replay_device(dev, ev.devices[dev], event_times(ev.devices[dev], ev.all_timed, ev.t_min));
}

void SnapshotImport::free_block(size_t dev, size_t event_index, const Event& event, int64_t time) {
    auto& live = live_[dev];
    auto it = live.find(event.addr);
    if (it != live.end()) {
        allocs_[it->second].t_free = time;
        live.erase(it);
    } else {
        // Allocated before recording began: alive from the start until now. The event has
        // the requested size; the block is that size rounded (its place is not known). Unless the
        // trace freed this address already and allocated nothing there since: two blocks alive
        // from the start at one address cannot be (before 2026-12-03 the import failed later, on
        // overlapping rows, without saying why).
        if (auto again = freed_[dev].find(event.addr); again != freed_[dev].end())
            throw Error(where(in_, at_event(dev, event_index) + " (" + name_of(event.action) +
                                       "): frees the block at " + hex_address(event.addr) +
                                       " again, with no alloc there since " + at_event(dev, again->second) +
                                       " freed it: the trace lacks alloc events (recorded with "
                                       "_record_memory_history(skip_actions=[\"alloc\"])?)"));
        if (event.size <= 0)
            throw Error(where(in_, at_event(dev, event_index) + " (" + name_of(event.action) +
                                       "): frees an unknown block of unknown size"));
        const size_t row = add(static_cast<int32_t>(dev), event.addr, event.size, event.size, 0, time, event.stream,
                               pre_label_);
        size_from_[row] = SizeFrom::Rounding;
        if (event.has_pool && is_private(event.pool))
            row_pool_[row] = event.pool;   // free_completed names the block's pool
        ++reconstructed_;
        ++freed_unknown_;
    }
    frees_[dev].emplace_back(event.addr, time);
    freed_[dev][event.addr] = event_index;
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
        const Event& event = evs[k];
        ++action_counts_[index(event.action)];
        const int64_t time = times[k];
        switch (event.action) {
            case Action::Alloc: {
                if (event.size <= 0)
                    throw Error(where(in_, at_event(dev, k) + " (alloc): size is missing or not positive"));
                auto it = live.find(event.addr);
                if (it != live.end()) {   // a free we never saw: end the old block here
                    allocs_[it->second].t_free = time;
                    live.erase(it);
                }
                freed_[dev].erase(event.addr);
                size_t row = add(static_cast<int32_t>(dev), event.addr, event.size, event.size, time, kNoTime,
                                 event.stream, labels_.of(event.frames));
                size_from_[row] = SizeFrom::Layout;
                if (event.has_pool && is_private(event.pool)) row_pool_[row] = event.pool;
                live.emplace(event.addr, row);
                break;
            }
            case Action::FreeRequested:
                if (has_completed) break;   // the block returns at free_completed
                [[fallthrough]];
            case Action::FreeCompleted:
            case Action::Free: free_block(dev, k, event, time); break;
            case Action::SegAlloc:
            case Action::SegMap:
                ++segment_events_;
                seglog_.alloc(static_cast<int32_t>(dev), k, name_of(event.action), time, event.addr, event.size,
                              event.stream, event.action == Action::SegMap);
                if (event.has_pool && is_private(event.pool))
                    seg_made_pool_[{static_cast<int32_t>(dev), event.addr, time}] = event.pool;
                add_bytes(reserved.at_end, event.size);
                reserved.highest = std::max(reserved.highest, reserved.at_end);
                reserved.seen = true;
                break;
            case Action::SegFree:
            case Action::SegUnmap:
                ++segment_events_;
                seglog_.free(static_cast<int32_t>(dev), k, name_of(event.action), time, event.addr, event.size,
                             event.stream, event.action == Action::SegUnmap);
                if (event.has_pool && is_private(event.pool))
                    seg_freed_pool_[{static_cast<int32_t>(dev), event.addr, time}] = event.pool;
                reserved.at_end -= event.size;
                reserved.lowest = std::min(reserved.lowest, reserved.at_end);
                reserved.seen = true;
                break;
            case Action::Snapshot:
                // The allocator's active bytes when _snapshot() was called during recording (its
                // snapshot() records total_active, every active block's size, as this entry's size);
                // one taken of a private pool alone (MemPool.snapshot(), pool_id named) is that
                // pool's: not a check of the device.
                if (event.has_size && !(event.has_pool && is_private(event.pool)))
                    checkpoints_.push_back({static_cast<int32_t>(dev), k, time, event.size});
                break;
            case Action::Oom: {
                Marker marker;
                marker.id = ++ooms_;
                marker.name = w_.intern("oom: " + std::to_string(event.size) + " bytes requested");
                marker.t_start = marker.t_end = time;
                marker.kind = MarkerKind::Range;
                w_.add(marker);
                break;
            }
            default: break;
        }
    }
}

}  // namespace mhc::trace::import::snapshot
