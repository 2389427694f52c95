#include "snapshot_blocks.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "mhc/trace/event_order.hpp"

namespace mhc::trace::import {

namespace {

// One step of the replay: a segment made (phase 0), a block event (1), a segment freed (2).
struct Step {
    int64_t time;
    int phase;
    MemoryEvent block;
    size_t segment;
    bool operator<(const Step& other) const {
        if (time != other.time) return time < other.time;
        if (phase != other.phase) return phase < other.phase;
        return phase == 1 ? block < other.block : segment < other.segment;
    }
};

std::vector<Step> steps_of(const std::vector<Allocation>& allocs, const std::vector<Segment>& segments) {
    std::vector<Step> steps;
    steps.reserve(allocs.size() * 2 + segments.size() * 2);
    for (size_t i = 0; i < segments.size(); ++i) {
        steps.push_back({segments[i].t_alloc, 0, {}, i});
        if (segments[i].t_free != kNoTime) steps.push_back({segments[i].t_free, 2, {}, i});
    }
    for (size_t i = 0; i < allocs.size(); ++i) {
        const auto& alloc = allocs[i];
        steps.push_back({alloc.t_alloc, 1, MemoryEvent::allocation(static_cast<int64_t>(i), alloc.t_alloc), 0});
        if (alloc.t_free != kNoTime)
            steps.push_back(
                {alloc.t_free, 1, MemoryEvent::release(static_cast<int64_t>(i), alloc.t_alloc, alloc.t_free), 0});
    }
    std::sort(steps.begin(), steps.end());
    return steps;
}

}  // namespace

BlockReport infer_block_sizes(std::vector<Allocation>& allocs, const std::vector<bool>& infer,
                              const std::vector<Segment>& segments, const BlockRules& rules) {
    BlockReport rep;
    using Key = std::pair<int32_t, int64_t>;   // (device, address)
    std::map<Key, size_t> live_segments;       // by start
    std::set<Key> live_blocks;                 // block starts
    // Blocks alive before recording (t = 0: a wrapped ring's frees of blocks it never saw
    // allocated, the end state's blocks) are all alive at the start: each one's room is found among
    // all of them, not only those placed before it at that instant.
    for (const Allocation& before : allocs)
        if (before.t_alloc == 0) live_blocks.insert({before.device, before.address});
    for (const Step& st : steps_of(allocs, segments)) {
        if (st.phase != 1) {
            const Segment& segment = segments[st.segment];
            auto it = live_segments.find({segment.device, segment.address});
            if (st.phase == 0) live_segments[{segment.device, segment.address}] = st.segment;
            else if (it != live_segments.end() && it->second == st.segment) live_segments.erase(it);
            continue;
        }
        const auto row = static_cast<size_t>(st.block.row);
        Allocation& alloc = allocs[row];
        const Key at{alloc.device, alloc.address};
        if (st.block.free) {
            live_blocks.erase(at);
            continue;
        }
        if (infer[row]) {
            const int64_t size = rules.rounded(alloc.requested_bytes);
            alloc.bytes = size;
            if (size > torch::kSmallSize) {   // the small pool always splits (every size is a multiple of 512)
                auto after = live_segments.upper_bound(at);
                const Segment* segment = nullptr;
                if (after != live_segments.begin()) {
                    const Segment& candidate = segments[std::prev(after)->second];
                    if (candidate.device == alloc.device && candidate.address <= alloc.address &&
                        alloc.address < candidate.address + candidate.bytes)
                        segment = &candidate;
                }
                if (!segment) {
                    ++rep.without_segment;
                } else if (segment->expandable || rules.expandable) {
                    ++rep.split;   // should_split: the rest is at least 512 bytes
                } else {
                    auto next = live_blocks.upper_bound(at);
                    int64_t end = segment->address + segment->bytes;
                    if (next != live_blocks.end() && next->first == alloc.device) end = std::min(end, next->second);
                    const int64_t room = end - alloc.address;
                    if (room < size) ++rep.no_room;
                    else if (size < rules.max_split_size && room - size > torch::kSmallSize) ++rep.split;
                    else {
                        alloc.bytes = room;
                        ++rep.whole;
                    }
                }
            }
        }
        live_blocks.insert(at);
    }
    return rep;
}

}  // namespace mhc::trace::import
