// The engine's state and the steps every event is made of: memory (ideal or caching), transfers,
// eviction, and what a run records (events, stalls, OOM). The pass over the events is in
// engine_events.cpp; recomputation and what prefetchers may ask, in engine_recompute.cpp and
// engine_prefetch.cpp.
#include "engine.hpp"

#include <string>

#include "oom_report.hpp"

namespace mhc::sim {

template <class Policy>
Engine<Policy>::Engine(const Prepared& p, const Config& c, Result& r, int64_t capacity, int64_t host_capacity)
    : prepared(p), config(c), result(r), allocator_kind(parse_allocator(c.allocator)),
      ca(capacity, allocator_kind == AllocatorKind::Caching ? allocator_settings_for(*p.t, c.allocator_conf)
                                                            : AllocatorSettings{}),
      cap(capacity), host_cap(host_capacity), link(p, c), samples(p, c.memory_samples) {
    size_t na = prepared.t->allocations.size();
    ctx.P = &prepared;
    ctx.bytes = prepared.t->allocations.bytes.data();
    ctx.category = prepared.t->allocations.category.data();
    ctx.last_touch.assign(na, 0);
    ctx.last_time.assign(na, 0);
    ctx.next_of.assign(na, kNever);
    ctx.writer.assign(na, -1);
    ctx.host_valid.assign(na, 0);
    ctx.h2d_ns_per_byte = 1e9 / config.link.h2d.bandwidth_Bps;
    ctx.d2h_ns_per_byte = 1e9 / config.link.d2h.bandwidth_Bps;
    ctx.h2d_lat_ns = config.link.h2d.latency_s * 1e9;
    ctx.d2h_lat_ns = config.link.d2h.latency_s * 1e9;
    pol.init(&ctx, na);
    state.assign(na, Residency::NotYet);
    pins.assign(na, 0);
    epoch.assign(na, 0);
    ready_at.assign(na, 0);
    if (allocator_kind == AllocatorKind::Caching) {
        block.assign(na, -1);
        prepared.give_pools_back(ca);
        if (!prepared.alloc_pool.empty()) pending_pool.assign(prepared.pool_given_back_at.size(), 0);
    }
    protect_stamp.assign(na, 0);
    rc_active.assign(na, 0);
    cached_host.init(na);
    if (config.record_events) reserve_events(na, prepared.t->kernels.size());
    pre = make_prefetcher(parse_prefetch(config.prefetch), prepared, *this);
    pre_watches = pre->watches_accesses;
    pre_waits = pre->learns_from_waits;
    pre_acts = pre->acts_after_launch;
}

// ---- memory -------------------------------------------------------------------------------

template <class Policy>
bool Engine<Policy>::try_reserve(int32_t a) {
    int64_t b = prepared.t->allocations.bytes[a];
    if (allocator_kind == AllocatorKind::Ideal) {
        if (used + b > cap) return false;
        used += b;
    } else {
        if (!warmed && (warmed = warm_start(prepared, ca, prepared.t->allocations.t_alloc[a]))) {
            // The held bytes are reserved from here (docs/simulator.md, "Start from a profiler's
            // figure"): they count in the peak even when the call below fails at once and gives
            // them back (the peak missed them then: 88 MiB, not the 89.92 MiB held, on TraceLens'
            // BERT at 77.52%).
            used = ca.reserved();
            note_peak();
        }
        const int64_t reserved_before = ca.reserved();
        // In its private pool where the trace says one (a swap-in too: the block comes back to
        // the pool it was evicted from).
        int32_t blk = ca.allocate(b, prepared.t->allocations.stream[a], prepared.pool_of(a));
        if (blk < 0) {
            // The failed call still gave the cached free segments back (PyTorch's retry after
            // a failed cudaMalloc); replay repeats it here to keep its model in step.
            if (config.record_events && ca.reserved() < reserved_before)
                result.plan_log.releases.push_back({a, static_cast<int32_t>(result.events.size()), origin, true});
            used = ca.reserved();
            return false;
        }
        block[a] = blk;
        used = ca.reserved();
    }
    note_peak();
    return true;
}

template <class Policy>
void Engine<Policy>::release_bytes(int32_t a) {
    if (allocator_kind == AllocatorKind::Ideal) {
        used -= prepared.t->allocations.bytes[a];
    } else {
        ca.free(block[a]);
        block[a] = -1;
        used = ca.reserved();
    }
}

template <class Policy>
bool Engine<Policy>::fits_after_pending(int32_t a) const {
    int64_t b = prepared.t->allocations.bytes[a];
    if (allocator_kind == AllocatorKind::Ideal) return used - pending_release + b <= cap;
    // Only swap-outs of the pool the request goes to free blocks it can use (a private pool's
    // blocks never serve another pool's requests).
    const int64_t pending = pending_pool.empty() ? pending_release
                                                 : pending_pool[static_cast<size_t>(prepared.pool_of(a))];
    return pending >= ca.rounded(b);
}

template <class Policy>
void Engine<Policy>::note_peak() {
    if (used > result.simulated_peak) result.simulated_peak = used;
    const int64_t segments = allocator_kind == AllocatorKind::Ideal ? used : used - ca.held();
    if (segments > result.segment_peak) result.segment_peak = segments;
    if (config.check_invariants && used > cap)
        fail_invariant("device bytes " + std::to_string(used) + " exceed the capacity " + std::to_string(cap));
}

// ---- transfers ----------------------------------------------------------------------------

// A swap-in (h2d) or swap-out of allocation a, asked for at t: booked on the link, in flight
// until it lands (complete_landed). Returns when it lands.
template <class Policy>
int64_t Engine<Policy>::start_transfer(int32_t a, bool h2d, int64_t t) {
    const int64_t bytes = prepared.t->allocations.bytes[a];
    const LinkQueues::Slot slot = link.book(bytes, h2d, t, shift);
    (h2d ? ctx.h2d_busy_until : ctx.d2h_busy_until) = slot.end;
    ctx.d2h_queue_busy_until = link.swap_out_free_at();
    inflight.push({slot.end, a, epoch[a], h2d}, slot.queue);
    if (h2d) {
        ++result.swap_in_count;
        result.swap_in_bytes += bytes;
        event(EK::SwapIn, slot.start, slot.end, a, -1, bytes);
    } else {
        ++result.swap_out_count;
        result.swap_out_bytes += bytes;
        event(EK::SwapOut, slot.start, slot.end, a, -1, bytes);
    }
    return slot.end;
}

template <class Policy>
void Engine<Policy>::complete_landed(int64_t until) {
    while (inflight.next_end() <= until) {
        Transfer x = inflight.top();
        inflight.pop();
        int32_t a = x.alloc;
        if (!live(x)) continue;   // freed or rescued meanwhile
        if (x.h2d) {
            state[a] = Residency::Gpu;
            if (ctx.host_valid[a]) cached_host.insert(a);
            if (pins[a] == 0) pol.insert(a);
        } else {
            state[a] = Residency::Host;
            ctx.host_valid[a] = 1;
            add_pending(a, -prepared.t->allocations.bytes[a]);
            release_bytes(a);
            if (config.record_events) result.plan_log.releases.push_back({a, static_cast<int32_t>(result.events.size()), origin});
        }
    }
}

// Room on the host for `bytes`, discarding host copies of resident allocations if needed.
template <class Policy>
bool Engine<Policy>::host_room(int64_t bytes) {
    if (host_used + bytes <= host_cap) return true;
    while (host_used + bytes > host_cap && !cached_host.empty())
        drop_host_copy(cached_host.back());
    return host_used + bytes <= host_cap;
}

template <class Policy>
void Engine<Policy>::drop_host_copy(int32_t a) {
    if (!ctx.host_valid[a]) return;
    ctx.host_valid[a] = 0;
    host_used -= prepared.t->allocations.bytes[a];
    cached_host.erase(a);
}

// ---- eviction -----------------------------------------------------------------------------

template <class Policy>
int32_t Engine<Policy>::pick_victim(bool for_prefetch) {
    for (;;) {
        int32_t v = pol.pick();
        if (v < 0) return -1;
        if (for_prefetch && is_protected(v)) return -1;   // needed in the window: stop
        int64_t b = prepared.t->allocations.bytes[v];
        if (ctx.host_valid[v] || pol.may_drop(v) || host_room(b)) return v;
        pol.erase(v);            // dirty and the host buffer is full: cannot evict it now
        aside.push_back(v);
    }
}

template <class Policy>
void Engine<Policy>::restore_aside() {
    for (int32_t v : aside)
        if (state[v] == Residency::Gpu && pins[v] == 0 && !pol.contains(v)) pol.insert(v);
    aside.clear();
}

template <class Policy>
void Engine<Policy>::evict(int32_t v, int64_t t) {
    pol.erase(v);
    int64_t b = prepared.t->allocations.bytes[v];
    resident_bytes -= b;
    if (ctx.host_valid[v]) {
        cached_host.erase(v);
        state[v] = Residency::Host;
        note_off_gpu(v, ctx.next_of[v]);
        release_bytes(v);
        ++result.evict_clean_count;
        event(EK::EvictClean, t, t, v, -1, b);
    } else if (pol.may_drop(v)) {
        state[v] = Residency::Dropped;
        release_bytes(v);
        ++result.drop_count;
        event(EK::Drop, t, t, v, -1, b);
    } else {
        state[v] = Residency::InD2H;
        note_off_gpu(v, ctx.next_of[v]);
        host_used += b;
        result.host_peak = std::max(result.host_peak, host_used + program_host);
        if (config.check_invariants && host_used > host_cap) fail_invariant("host bytes exceed the host buffer");
        add_pending(v, b);
        ++epoch[v];
        ready_at[v] = start_transfer(v, false, t);   // when the copy lands (recompute inputs)
    }
}

// Makes room for allocation a at time t (advanced while waiting for swap-outs); reserves
// its bytes on success. A prefetch never waits and never evicts what its window needs.
template <class Policy>
bool Engine<Policy>::make_room(int32_t a, int64_t& t, bool for_prefetch) {
    bool ok = false;
    for (;;) {
        complete_until(t);
        ctx.now = t;
        if (try_reserve(a)) { ok = true; break; }
        if (!fits_after_pending(a)) {
            int32_t v = pick_victim(for_prefetch);
            if (v >= 0) { evict(v, t); continue; }
        }
        // Wait only for a transfer whose completion changes something: a cancelled swap-out
        // (or a transfer of a freed allocation) keeps its queue busy (its link time is spent,
        // rule 2) but frees nothing when it lands.
        while (!inflight.empty() && !live(inflight.top())) inflight.pop();
        if (for_prefetch || inflight.empty()) break;
        t = std::max(t, inflight.top().end);
    }
    restore_aside();
    return ok;
}

// ---- events -------------------------------------------------------------------------------

// Room for every allocation's alloc and free and two transfers per kernel (and a release per
// allocation and kernel), reserved up front: the pages are touched only as entries are written,
// so an unused reserve costs address space alone, whereas growing by doubling copied the events
// and touched up to twice their memory (a third of a large run's page faults). A run with more
// still grows the vectors.
template <class Policy>
void Engine<Policy>::reserve_events(size_t allocations, size_t kernels) {
    const size_t events = result.events.size() + 2 * allocations + 2 * kernels;
    result.events.reserve(events);
    result.plan_log.origins.reserve(events);
    result.plan_log.releases.reserve(result.plan_log.releases.size() + allocations + kernels);
    result.kernel_times.reserve(result.kernel_times.size() + kernels);
}

template <class Policy>
void Engine<Policy>::event(EK k, int64_t t0, int64_t t1, int32_t a, int32_t s, int64_t bytes) {
    if (!config.record_events) return;
    result.events.push_back({k, t0, t1, alloc_id(a), kernel_id(s), bytes});
    result.plan_log.origins.push_back(origin);
}

// A wait from `now` to `until` for allocation a or kernel s: later work moves by it.
template <class Policy>
void Engine<Policy>::stall(int64_t now, int64_t until, int32_t a, int32_t s) {
    shift += until - now;
    result.stall_time += until - now;
    ++result.stall_count;
    event(EK::Stall, now, until, a, s, 0);
}

template <class Policy>
void Engine<Policy>::fail_invariant(const std::string& what) {
    if (result.invariant_violation.empty())
        result.invariant_violation = what + " (at simulated " + std::to_string(ctx.now) + " ns)";
    done = true;
}

// The run ends out of memory at t: allocation a could not be placed (by itself, s < 0, or for
// kernel s), `need` bytes.
template <class Policy>
void Engine<Policy>::oom(int64_t t, int32_t a, int32_t s, int64_t need) {
    Oom& o = result.oom;
    o.happened = true;
    o.time = t;
    o.recorded = s >= 0 ? prepared.kstart[s] : prepared.t->allocations.t_alloc[a];
    o.allocation = alloc_id(a);
    o.kernel = kernel_id(s);
    const auto& al = prepared.t->allocations;
    const bool caching = allocator_kind == AllocatorKind::Caching;
    int64_t pinned = 0, live = 0;
    for (size_t i = 0; i < state.size(); ++i) {   // once, at the end of a failed run
        bool on_gpu = state[i] == Residency::Gpu || state[i] == Residency::InH2D || state[i] == Residency::InD2H;
        if (on_gpu) live += caching && block[i] >= 0 ? ca.block_size(block[i]) : al.bytes[i];
        if (on_gpu && pins[i] > 0) pinned += al.bytes[i];
    }
    explain_oom(o, prepared, a, s, {need, live, pinned, used, cap}, caching ? &ca : nullptr);
    event(EK::Oom, t, t, a, s, o.bytes_short);
    done = true;
}

#define MHC_SIM_INSTANTIATE(Policy) template class Engine<Policy>;
MHC_SIM_EVICTION_POLICIES(MHC_SIM_INSTANTIATE)
#undef MHC_SIM_INSTANTIATE

}  // namespace mhc::sim
