#pragma once
// The import of a PyTorch memory snapshot's decoded trace events and end state as rows. Its steps,
// by concern: snapshot_replay.cpp (the trace events), snapshot_end_state.cpp (the allocator's end
// state), snapshot_pools.cpp (private memory pools), snapshot_meta.cpp (the import's checks and
// meta); snapshot.cpp runs them in order and finishes the rows.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/import/rows.hpp"
#include "segments.hpp"
#include "snapshot_blocks.hpp"
#include "snapshot_events.hpp"
#include "snapshot_frames.hpp"

namespace mhc::trace::import::snapshot {

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
    void meta(Result& result, const Decoded& ev) const;
    // The import's alive bytes at each 'snapshot' entry against the allocator's active bytes it
    // records (meta snapshot.active_checked, a warning where they differ); after block_sizes.
    void check_active(Result& result) const;

private:
    void replay_device(size_t dev, const std::vector<Event>& evs, const std::vector<int64_t>& times);
    void free_block(size_t dev, size_t event_index, const Event& event, int64_t time);
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

}  // namespace mhc::trace::import::snapshot
