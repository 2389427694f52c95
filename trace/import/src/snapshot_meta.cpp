// What a PyTorch memory snapshot's import says of itself: its alive bytes checked against the
// allocator's at each 'snapshot' entry, each device's reserved peak, and the meta and warnings
// (snapshot_import.hpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "mhc/common/error.hpp"
#include "snapshot_import.hpp"

namespace mhc::trace::import::snapshot {

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

void SnapshotImport::meta(Result& result, const Decoded& ev) const {
    std::string act_list;
    for (size_t i = 0; i < kActionCount; ++i)
        if (action_counts_[i]) {
            if (!act_list.empty()) act_list += ", ";
            act_list += kActionNames[i];
            act_list += '=';
            act_list += std::to_string(action_counts_[i]);
        }
    auto& entries = result.meta;
    entries["source"] = "pytorch-memory-snapshot";
    entries["import.format"] = "snapshot";
    entries["import.events"] = std::to_string(ev.events);
    entries["import.actions"] = act_list;
    entries["accesses"] = "none";   // snapshots hold no kernels
    entries["kernels"] = "none";
    entries["timing"] = ev.all_timed && ev.events > 0 ? "exact" : "order-only";   // an end state alone has no times
    if (ev.timed > 0 && !ev.all_timed) {
        // PyTorch writes time_us on every event or on none: some without it is a damaged or
        // edited file, and one such event takes the times of all (before 2026-12-03 in silence).
        const std::string untimed = std::to_string(ev.events - ev.timed) + " of " + std::to_string(ev.events);
        entries["snapshot.events_without_time_us"] = untimed;
        result.warnings.push_back(untimed +
                                  " trace events have no time_us: the whole trace is imported in event order only");
    }
    entries["categories"] = "unknown";
    entries["labels"] = "first frame of user or library Python code, else of PyTorch, else native (docs/import.md)";
    entries["bytes"] = "block (the allocator's accounting: max_memory_allocated); requested_bytes: the request";
    entries["snapshot.blocks_inferred"] = "split " + std::to_string(blocks_.split) + ", whole " +
                                          std::to_string(blocks_.whole) + ", no segment " +
                                          std::to_string(blocks_.without_segment) + ", no room " +
                                          std::to_string(blocks_.no_room);
    entries["snapshot.blocks_checked_at_end"] = std::to_string(end_size_checked_) + " (" +
                                                std::to_string(end_size_differs_) + " inferred another size)";
    entries["reconstructed_blocks"] = std::to_string(reconstructed_);
    entries["reconstructed_blocks.freed_during_trace"] = std::to_string(freed_unknown_);
    int64_t reconstructed_bytes = 0;
    for (size_t i = 0; i < allocs_.size(); ++i)
        if (size_from_[i] != SizeFrom::Layout) add_bytes(reconstructed_bytes, allocs_[i].bytes);
    entries["reconstructed_bytes"] = std::to_string(reconstructed_bytes);
    entries["snapshot.end_state_allocated_blocks"] = std::to_string(end_blocks_);
    if (end_pending_blocks_ > 0) {
        // Alive to the end here (the allocator cannot reuse them yet), as memory_viz draws them;
        // torch.cuda.memory_allocated() had already dropped them when the snapshot was taken.
        const std::string pending = std::to_string(end_pending_blocks_) +
                                    (end_pending_blocks_ == 1 ? " block, " : " blocks, ") +
                                    std::to_string(end_pending_bytes_) + " B";
        entries["snapshot.end_state_pending_free"] =
            pending +
            " (freed, waiting for the streams that used them: alive to the end, counted in the peak; "
            "torch.cuda.memory_allocated() at the snapshot excludes them)";
        result.warnings.push_back(
            "the end state holds " + pending +
            " freed but still pending on other streams (record_stream): kept alive to the end, so "
            "the peak is above torch.cuda.memory_allocated() at the snapshot by up to " +
            std::to_string(end_pending_bytes_) + " B");
    }
    say_private_pools(entries, result);
    entries["snapshot.segment_events"] = std::to_string(segment_events_);
    entries["snapshot.reserved_peak_from_segment_events"] = reserved_peaks();
    entries["snapshot.oom_events"] = std::to_string(ooms_);
    entries["segments.reconstructed"] = std::to_string(seglog_.reconstructed);
    if (seglog_.live_not_in_end_state)
        entries["segments.live_not_in_end_state"] = std::to_string(seglog_.live_not_in_end_state);
    entries["snapshot.devices"] = std::to_string(ev.devices.size());
    if (!ev.unknown_actions.empty()) {
        // Actions of a newer PyTorch than this reader knows: they could move memory, so the figures
        // may miss it; named and warned (before 2026-12-03 only their count, in meta alone).
        std::string names;
        for (const auto& [name, count] : ev.unknown_actions)
            names += (names.empty() ? "" : ", ") + name + "=" + std::to_string(count);
        entries["snapshot.unknown_actions"] = names;
        result.warnings.push_back("trace events of actions mhc does not know were not imported (" + names +
                                  "): if they allocate or free memory, the figures miss it");
    }
    if (!ev.unknown_keys.empty()) {
        // Fields of a newer PyTorch than this reader knows: named and warned, as unknown actions are
        // (before 2026-12-03 they were passed over in silence).
        std::string names;
        for (const auto& [name, count] : ev.unknown_keys)
            names += (names.empty() ? "" : ", ") + name + "=" + std::to_string(count);
        entries["snapshot.event_keys_not_read"] = names;
        result.warnings.push_back("trace event fields mhc does not know were not read (" + names +
                                  "): if they change what an event allocates or frees, the figures miss it");
    }
    live_not_in_end_state(result);
    if (!segments_dropped_.empty()) {
        entries["segments"] = "none: " + segments_dropped_;
        result.warnings.push_back("segments " + segments_dropped_ + "; imported without them");
    }
}

}  // namespace mhc::trace::import::snapshot
