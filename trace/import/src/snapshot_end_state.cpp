// A PyTorch memory snapshot's end state ('segments'): the blocks and segments that began before
// recording, each segment's memory pool, and the allocations the trace leaves alive that the end
// state does not hold (snapshot_import.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "limits.hpp"
#include "snapshot_import.hpp"

namespace mhc::trace::import::snapshot {

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
        for (Id block : d_.items(*blocks)) {
            const std::string block_at = at + ".blocks[" + std::to_string(block_index++) + "]";
            if (d_.kind(block) != PickleDoc::Kind::Dict)
                throw Error(where(in_, block_at + ": is " + type_name(d_, block) + ", not a dict"));
            auto addr_v = d_.get(block, "address");
            auto size_v = d_.get(block, "size");
            if (addr_v && d_.kind(*addr_v) != PickleDoc::Kind::Int)
                throw Error(where(in_, block_at + ": 'address' is " + type_name(d_, *addr_v) + ", not an int"));
            int64_t addr = addr_v ? d_.as_int(*addr_v) : next;
            if (!addr_v && !has_address) {   // nowhere to place it
                end_unplaced_ = true;
                break;
            }
            end_block(dev, stream, block, addr, block_at, seg_pool);
            if (size_v && d_.is_int(*size_v) && d_.as_int(*size_v) > 0 && d_.as_int(*size_v) <= kMaxBytes)
                next = addr + d_.as_int(*size_v);
        }
    }
    reborn_times();
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

}  // namespace mhc::trace::import::snapshot
