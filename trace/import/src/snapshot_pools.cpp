// A PyTorch memory snapshot's private memory pools (a CUDA graph's, a torch.cuda.MemPool's): the
// pool of each row, and what meta and the warnings say of them (snapshot_import.hpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "snapshot_import.hpp"

namespace mhc::trace::import::snapshot {

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

namespace {

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

}  // namespace

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

}  // namespace mhc::trace::import::snapshot
