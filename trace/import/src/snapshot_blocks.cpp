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
    bool operator<(const Step& o) const {
        if (time != o.time) return time < o.time;
        if (phase != o.phase) return phase < o.phase;
        return phase == 1 ? block < o.block : segment < o.segment;
    }
};

std::vector<Step> steps_of(const std::vector<Allocation>& allocs, const std::vector<Segment>& segments) {
    std::vector<Step> s;
    s.reserve(allocs.size() * 2 + segments.size() * 2);
    for (size_t i = 0; i < segments.size(); ++i) {
        s.push_back({segments[i].t_alloc, 0, {}, i});
        if (segments[i].t_free != kNoTime) s.push_back({segments[i].t_free, 2, {}, i});
    }
    for (size_t i = 0; i < allocs.size(); ++i) {
        const auto& a = allocs[i];
        s.push_back({a.t_alloc, 1, MemoryEvent::allocation(static_cast<int64_t>(i), a.t_alloc), 0});
        if (a.t_free != kNoTime)
            s.push_back({a.t_free, 1, MemoryEvent::release(static_cast<int64_t>(i), a.t_alloc, a.t_free), 0});
    }
    std::sort(s.begin(), s.end());
    return s;
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
            const Segment& g = segments[st.segment];
            auto it = live_segments.find({g.device, g.address});
            if (st.phase == 0) live_segments[{g.device, g.address}] = st.segment;
            else if (it != live_segments.end() && it->second == st.segment) live_segments.erase(it);
            continue;
        }
        const auto i = static_cast<size_t>(st.block.row);
        Allocation& a = allocs[i];
        const Key at{a.device, a.address};
        if (st.block.free) {
            live_blocks.erase(at);
            continue;
        }
        if (infer[i]) {
            const int64_t size = rules.rounded(a.requested_bytes);
            a.bytes = size;
            if (size > torch::kSmallSize) {   // the small pool always splits (every size is a multiple of 512)
                auto s = live_segments.upper_bound(at);
                const Segment* g = nullptr;
                if (s != live_segments.begin()) {
                    const Segment& c = segments[std::prev(s)->second];
                    if (c.device == a.device && c.address <= a.address && a.address < c.address + c.bytes) g = &c;
                }
                if (!g) {
                    ++rep.without_segment;
                } else if (g->expandable || rules.expandable) {
                    ++rep.split;   // should_split: the rest is at least 512 bytes
                } else {
                    auto next = live_blocks.upper_bound(at);
                    int64_t end = g->address + g->bytes;
                    if (next != live_blocks.end() && next->first == a.device) end = std::min(end, next->second);
                    const int64_t room = end - a.address;
                    if (room < size) ++rep.no_room;
                    else if (size < rules.max_split_size && room - size > torch::kSmallSize) ++rep.split;
                    else {
                        a.bytes = room;
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
