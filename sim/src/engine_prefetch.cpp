// What prefetchers may ask of the engine (PrefetchTarget): swap-ins and early swap-outs
// (docs/simulator.md rules 9 and 10).
#include "engine.hpp"

namespace mhc::sim {

// A swap-in requested by the prefetcher (`alloc` is on the host): never waits, and never evicts
// what the current window protects.
template <class Policy>
void Engine<Policy>::start_prefetch(int32_t alloc, int64_t time) {
    if (!make_room(alloc, time, true)) return;
    state[alloc] = Residency::InH2D;
    resident_bytes += prepared.t->allocations.bytes[alloc];
    ++result.prefetch_count;
    event(EK::Prefetch, time, time, alloc, -1, prepared.t->allocations.bytes[alloc]);
    ready_at[alloc] = start_transfer(alloc, true, time);
}

// Early (proactive) swap-out, docs/simulator.md rule 10. While the eviction queue is free
// before the next kernel starts, and the demand the prefetcher foresees while the victim
// would be away does not fit beside what is already off the GPU, evict the policy's next
// victim now, so that its transfer overlaps compute instead of stalling the allocation that
// needs room.
template <class Policy>
int64_t Engine<Policy>::early_swap_out(int32_t seq, int64_t time, const Prefetcher& by) {
    constexpr int kEarlySkips = 4;
    if (!early_swap_out_open(seq)) return 0;
    int64_t next_start = prepared.kstart[seq + 1] + shift;
    ctx.now = time;
    int skipped = 0;
    int64_t evicted = 0;
    int32_t passed = -1;   // the last victim passed over or evicted
    const auto pass_over = [&](int32_t victim) {
        passed = victim;
        if constexpr (!kWalksVictims) {
            pol.erase(victim);
            aside.push_back(victim);
        }
    };
    while (link.swap_out_free_at() <= next_start && !done) {
        const int32_t victim = early_victim(passed);
        if (victim < 0) break;
        if (ctx.host_valid[victim] || pol.may_drop(victim)) {
            // a clean eviction or a drop is instant: nothing to gain by doing it early
            if (++skipped > kEarlySkips) break;
            pass_over(victim);
            continue;
        }
        const int64_t demand = by.early_demand(victim, seq);
        if (demand == INT64_MIN || demand - (allocated_bytes - resident_bytes) <= cap) {
            // look past a victim that is freed (or back) before any pressure
            if (++skipped > kEarlySkips) break;
            pass_over(victim);
            continue;
        }
        evict(victim, time);
        passed = victim;
        ++result.early_evictions;
        ++evicted;
    }
    restore_aside();
    return evicted;
}

// Early swap-out's next victim: pick_victim(true) after the victims passed over so far were
// erased from the policy (set aside until restore_aside()). A policy that can walk its order
// (LRU) passes over them instead of erasing and reinserting each: nothing lands and nothing is
// unpinned while early swap-out searches, so the walk meets the victims in the same order.
template <class Policy>
int32_t Engine<Policy>::early_victim(int32_t passed) {
    if constexpr (kWalksVictims) {
        for (int32_t victim = passed < 0 ? pol.pick() : pol.pick_after(passed); victim >= 0; victim = pol.pick_after(victim)) {
            if (is_protected(victim)) return -1;   // needed in the window: stop
            if (ctx.host_valid[victim] || pol.may_drop(victim) || host_room(prepared.t->allocations.bytes[victim])) return victim;
        }
        return -1;
    } else {
        return pick_victim(true);
    }
}

// Early swap-outs are open while the queue is free by the next kernel's start (checked once here
// for both early_swap_out's loop and the forecast's own victims).
template <class Policy>
bool Engine<Policy>::early_swap_out_open(int32_t seq) const {
    const int32_t kernels = static_cast<int32_t>(prepared.korder.size());
    if (!config.early_swap_out || seq + 1 >= kernels || cap >= kUnlimited || done) return false;
    return link.swap_out_free_at() <= prepared.kstart[seq + 1] + shift;
}

// Early swap-out of one victim chosen by the prefetcher (forecast): an evictable dirty victim
// outside the window that the host buffer can take.
template <class Policy>
typename PrefetchTarget::Early Engine<Policy>::early_swap_out_of(int32_t victim, int32_t seq, int64_t time) {
    if (!early_swap_out_open(seq)) return Early::LinkBusy;
    if (state[victim] != Residency::Gpu || pins[victim] != 0 || !pol.contains(victim) || is_protected(victim) || ctx.host_valid[victim] ||
        pol.may_drop(victim) || !host_room(prepared.t->allocations.bytes[victim]))
        return Early::Refused;
    ctx.now = time;
    evict(victim, time);
    ++result.early_evictions;
    return Early::Evicted;
}

#define MHC_SIM_INSTANTIATE(Policy)                                                                      \
    template void Engine<Policy>::start_prefetch(int32_t, int64_t);                                      \
    template int64_t Engine<Policy>::early_swap_out(int32_t, int64_t, const Prefetcher&);                \
    template PrefetchTarget::Early Engine<Policy>::early_swap_out_of(int32_t, int32_t, int64_t);          \
    template bool Engine<Policy>::early_swap_out_open(int32_t) const;
MHC_SIM_EVICTION_POLICIES(MHC_SIM_INSTANTIATE)
#undef MHC_SIM_INSTANTIATE

}  // namespace mhc::sim
