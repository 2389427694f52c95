// The engine: one pass over the recorded events in time order (docs/simulator.md).
#include "engine.hpp"

#include <chrono>
#include <cmath>
#include <limits>

#include "mhc/common/error.hpp"
#include "mhc/sim/simulate.hpp"

namespace mhc::sim {

template <class Policy>
Engine<Policy>::Engine(const Prepared& p, const Config& c, Result& r, int64_t capacity, int64_t host_capacity)
    : prepared(p), config(c), result(r), allocator_kind(parse_allocator(c.allocator)),
      ca(capacity, allocator_kind == AllocatorKind::Caching ? allocator_settings_for(*p.t, c.allocator_conf)
                                                            : AllocatorSettings{}),
      cap(capacity), host_cap(host_capacity) {
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
    if (config.max_swap_ops_per_sec > 0) op_gap = static_cast<int64_t>(std::ceil(1e9 / config.max_swap_ops_per_sec));
    buckets.assign(static_cast<size_t>(config.memory_samples), Bucket{});
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

template <class Policy>
int64_t Engine<Policy>::start_transfer(int32_t a, bool h2d, int64_t t) {
    int dir = h2d ? 0 : 1;
    int q = config.link.copy_engines >= 2 ? dir : 0;
    int64_t start = std::max(t, busy[q]);
    if (op_gap > 0) {
        // the first transfer has no previous one, whatever its time (a trace may start at -2^62 ns)
        if (any_op) start = std::max(start, last_op + op_gap);
        last_op = start;
        any_op = true;
    }
    const Direction& d = h2d ? config.link.h2d : config.link.d2h;
    double bw = d.bandwidth_Bps;
    if (config.link.copy_engines >= 2 && busy[1 - dir] > start) bw *= config.link.duplex_factor;
    int64_t recorded = start - shift;
    if (prepared.nccl.contains(recorded, nccl_hint)) bw *= 1.0 - config.link.nccl_share;
    if (h2d ? prepared.h2d_busy.contains(recorded, h2d_hint) : prepared.d2h_busy.contains(recorded, d2h_hint))
        bw *= 1.0 - config.link.memcpy_share;
    int64_t bytes = prepared.t->allocations.bytes[a];
    double dur_ns = std::ceil(d.latency_s * 1e9 + static_cast<double>(bytes) / bw * 1e9);
    // Times stay within +-2^62 ns (trace limits): a transfer past that is a link too slow for
    // this trace, not a number to wrap around.
    constexpr int64_t kTimeLimit = int64_t{1} << 62;
    if (!(dur_ns < static_cast<double>(kTimeLimit)))
        throw Error("link " + config.link.name + ": a transfer of " + std::to_string(bytes) + " bytes takes " +
                    std::to_string(dur_ns / 1e9) + " s, past the simulator's time range (2^62 ns): "
                    "the link is too slow for this trace");
    // A short transfer past the range: the trace's own times sit at its end (a trace shifted
    // near 2^62 ns), which the link is not to blame for.
    if (start > kTimeLimit - static_cast<int64_t>(dur_ns))
        throw Error("a transfer of " + std::to_string(bytes) + " bytes at " + std::to_string(start) +
                    " ns (simulated; recorded time " + std::to_string(recorded) + " ns) would end past the "
                    "simulator's time range (2^62 ns): the trace's times are too close to its end; shift "
                    "them towards 0");
    int64_t dur = std::max<int64_t>(static_cast<int64_t>(dur_ns), 1);
    int64_t end = start + dur;
    busy[q] = end;
    (h2d ? ctx.h2d_busy_until : ctx.d2h_busy_until) = end;
    ctx.d2h_queue_busy_until = busy[config.link.copy_engines >= 2 ? 1 : 0];
    inflight.push({end, a, epoch[a], h2d}, q);
    if (h2d) {
        ++result.swap_in_count;
        result.swap_in_bytes += bytes;
        event(EK::SwapIn, start, end, a, -1, bytes);
    } else {
        ++result.swap_out_count;
        result.swap_out_bytes += bytes;
        event(EK::SwapOut, start, end, a, -1, bytes);
    }
    return end;
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

// Bucket b holds the recorded times r with floor((r - t_begin) * nb / (span + 1)) = b (clamped
// to 0 .. nb-1); events come in time order, so the division is done only when r leaves the
// current bucket's range [bucket_lo, bucket_hi).
template <class Policy>
void Engine<Policy>::sample(int64_t recorded) {
    if (recorded < bucket_lo || recorded >= bucket_hi) find_bucket(recorded);
    Bucket& current = buckets[bucket];
    if (used > current.dev) { current.dev = used; current.t = recorded + shift; current.host = host_used + program_host; }
}

template <class Policy>
void Engine<Policy>::find_bucket(int64_t recorded) {
    const int64_t span = std::max<int64_t>(prepared.t_end - prepared.t_begin, 1);
    const int64_t nb = static_cast<int64_t>(buckets.size());
    // in 128 bits: (r - t_begin) * nb passes 2^63 where the span is near the trace's 2^62 ns limit
    // (it wrapped: a trace spanning 2^61 ns with 64 samples kept one bucket)
    __extension__ using I128 = __int128;
    const int64_t index = static_cast<int64_t>(
        std::clamp<I128>(static_cast<I128>(recorded - prepared.t_begin) * nb / (span + 1), 0, nb - 1));
    bucket = static_cast<size_t>(index);
    bucket_lo = bucket_hi = recorded;   // a span too long for the bounds below: divide each time
    if (span >= INT64_MAX / (nb + 1) || recorded < prepared.t_begin) return;
    // x = r - t_begin lies in bucket b iff b * (span+1) <= x * nb < (b+1) * (span+1)
    auto first_of = [&](int64_t of) { return prepared.t_begin + (of * (span + 1) + nb - 1) / nb; };
    bucket_lo = index == 0 ? INT64_MIN : first_of(index);
    bucket_hi = index == nb - 1 ? INT64_MAX : first_of(index + 1);
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

template <class Policy>
void Engine<Policy>::oom(int64_t t, int32_t a, int32_t s, int64_t need) {
    Oom& o = result.oom;
    o.happened = true;
    o.time = t;
    o.recorded = s >= 0 ? prepared.kstart[s] : prepared.t->allocations.t_alloc[a];
    o.allocation = alloc_id(a);
    o.kernel = kernel_id(s);
    const auto& al = prepared.t->allocations;
    int64_t pinned = 0, live = 0;
    for (size_t i = 0; i < state.size(); ++i) {   // once, at the end of a failed run
        bool on_gpu = state[i] == Residency::Gpu || state[i] == Residency::InH2D || state[i] == Residency::InD2H;
        if (on_gpu) live += allocator_kind == AllocatorKind::Caching && block[i] >= 0 ? ca.block_size(block[i]) : al.bytes[i];
        if (on_gpu && pins[i] > 0) pinned += al.bytes[i];
    }
    const bool caching = allocator_kind == AllocatorKind::Caching;
    o.bytes_needed = caching ? ca.rounded(al.bytes[a]) : need;
    o.bytes_pinned = pinned;
    if (s >= 0) {
        o.where = "kernel " + std::to_string(o.kernel) + " (" + prepared.t->str(prepared.t->kernels.name[prepared.korder[s]]) +
                  ") needs allocation " + std::to_string(o.allocation);
    } else {
        const std::string label = prepared.t->str(al.label[a]);   // unlabelled: no empty "()"
        o.where = "allocation " + std::to_string(o.allocation) + (label.empty() ? "" : " (" + label + ")");
    }
    if (caching) {
        o.largest_free_block = ca.largest_free_block();
        int64_t free_bytes = cap - live;
        o.fragmentation = free_bytes >= o.bytes_needed;
        o.bytes_short = o.fragmentation ? std::max<int64_t>(o.bytes_needed - std::max(o.largest_free_block, cap - ca.reserved()), 0)
                                        : o.bytes_needed - free_bytes;
        // The least the allocator adds for the request: a segment (or, expandable, whole pages).
        // Where that is more than all the free bytes, nothing is fragmented: the allocator's unit
        // is larger than what is left (a 2 MiB small-pool segment under a 1.6 MiB capacity).
        const int64_t grow = ca.growth_for(o.bytes_needed);
        const std::string unit = ca.settings().expandable_segments ? "the pages it maps" : "the segment it takes";
        o.why = "needs " + format_bytes(o.bytes_needed) + "; " + format_bytes(live) + " in use (" +
                format_bytes(pinned) + " pinned by running kernels), " + format_bytes(ca.reserved()) +
                " reserved in segments of " + format_bytes(cap) +
                (!o.fragmentation ? "; short by " + format_bytes(o.bytes_short)
                 : grow > free_bytes
                     ? "; the free bytes hold the request but not " + unit + " for it (" + format_bytes(grow) +
                           "), largest free block " + format_bytes(o.largest_free_block)
                     : "; the free bytes suffice but no free block or new segment fits "
                       "(fragmentation), largest free block " + format_bytes(o.largest_free_block));
    } else {
        o.bytes_short = used + need - cap;
        o.why = "needs " + format_bytes(need) + " but " + format_bytes(used) + " of " + format_bytes(cap) +
                " are held and nothing more can be evicted (" + format_bytes(pinned) +
                " pinned by running kernels); short by " + format_bytes(o.bytes_short);
    }
    event(EK::Oom, t, t, a, s, o.bytes_short);
    done = true;
}

template <class Policy>
bool Engine<Policy>::on_alloc(int32_t a) {
    int64_t now = prepared.t->allocations.t_alloc[a] + shift;
    int64_t t = now;
    if (!pending_pool.empty()) {   // the swap-outs landed by now first, as make room's first step
        complete_until(now);
        pools_due(prepared.t->allocations.t_alloc[a]);
    }
    ctx.last_touch[a] = ++tick;
    ctx.last_time[a] = now;
    if (!make_room(a, t, false)) {
        oom(t, a, -1, prepared.t->allocations.bytes[a]);
        return false;
    }
    if (t > now) stall(now, t, a, -1);
    state[a] = Residency::Gpu;
    allocated_bytes += prepared.t->allocations.bytes[a];
    resident_bytes += prepared.t->allocations.bytes[a];
    ctx.next_of[a] = prepared.first_use[a];
    if (pre_watches) pre->on_alloc(a);
    pol.insert(a);
    t_last = std::max(t_last, t);
    return true;
}

template <class Policy>
void Engine<Policy>::on_free(int32_t a) {
    int64_t now = prepared.t->allocations.t_free[a] + shift;
    complete_until(now);
    pools_due(prepared.t->allocations.t_free[a]);
    ctx.now = now;
    if (config.check_invariants && pins[a] > 0) fail_invariant("allocation " + std::to_string(alloc_id(a)) + " freed while a running kernel uses it");
    int64_t b = prepared.t->allocations.bytes[a];
    if (state[a] != Residency::NotYet && state[a] != Residency::Freed) allocated_bytes -= b;
    if (state[a] == Residency::Gpu || state[a] == Residency::InH2D) resident_bytes -= b;
    switch (state[a]) {
        case Residency::Gpu: pol.erase(a); release_bytes(a); break;
        case Residency::InH2D: release_bytes(a); ++epoch[a]; break;
        case Residency::InD2H:
            release_bytes(a);
            add_pending(a, -b);
            host_used -= b;
            ++epoch[a];
            break;
        default: break;
    }

    if (ctx.host_valid[a]) {
        ctx.host_valid[a] = 0;
        host_used -= b;
        cached_host.erase(a);
    }
    state[a] = Residency::Freed;
    if (config.check_invariants && pol.contains(a)) fail_invariant("freed allocation still resident");
    t_last = std::max(t_last, now);
}

template <class Policy>
bool Engine<Policy>::on_kernel_start(int32_t s) {
    int64_t now = prepared.kstart[s] + shift;
    complete_until(now);
    ctx.now = now;
    ctx.cur_seq = s;
    int64_t b0 = prepared.acc_begin[s], b1 = prepared.acc_begin[s + 1];
    bool all_resident = true;   // then the loop below has nothing to do
    for (int64_t j = b0; j < b1; ++j) {
        int32_t a = prepared.acc_alloc[j];
        if (++pins[a] == 1 && pol.contains(a)) pol.erase(a);
        all_resident &= state[a] == Residency::Gpu;
    }
    int64_t t = now, ready = now;
    for (int64_t j = all_resident ? b1 : b0; j < b1; ++j) {
        int32_t a = prepared.acc_alloc[j];
        int64_t need_at = now;
        switch (state[a]) {
            case Residency::Gpu: break;
            case Residency::InH2D: need_at = ready_at[a]; break;
            case Residency::InD2H:   // still on the GPU: cancel the eviction
                state[a] = Residency::Gpu;
                resident_bytes += prepared.t->allocations.bytes[a];
                add_pending(a, -prepared.t->allocations.bytes[a]);
                host_used -= prepared.t->allocations.bytes[a];
                ++epoch[a];
                break;
            case Residency::Host:
                if (!make_room(a, t, false)) {
                    // the inputs of an operand recomputed before this one are pinned by no kernel
                    // (rule 7), as when the recomputation itself runs out of memory
                    if (!rc_pinned.empty()) unpin_recompute_inputs();
                    oom(t, a, s, prepared.t->allocations.bytes[a]);
                    return false;
                }
                state[a] = Residency::InH2D;
                resident_bytes += prepared.t->allocations.bytes[a];
                need_at = ready_at[a] = start_transfer(a, true, t);
                break;
            case Residency::Dropped:
                if (!recompute(a, s, t, 1, need_at)) {
                    unpin_recompute_inputs();
                    oom(t, rc_oom, s, prepared.t->allocations.bytes[rc_oom]);
                    return false;
                }
                break;
            default: break;   // Residency::NotYet/Residency::Freed cannot happen: check_trace rejects such accesses
        }
        if (pre_waits && need_at > now) pre->on_wait(s, j, need_at - now);
        ready = std::max(ready, need_at);
    }
    if (!rc_pinned.empty()) unpin_recompute_inputs();
    int64_t start = std::max(ready, t);
    complete_until(start);
    if (start > now) stall(now, start, -1, s);
    ctx.now = start;
    for (int64_t j = b0; j < b1; ++j) {
        int32_t a = prepared.acc_alloc[j];
        // The one exemption: a zero-length kernel at the instant its operand is freed (frees
        // come first at an instant) needs nothing for no time; its operand is skipped.
        if (state[a] == Residency::Freed && prepared.kstart[s] == prepared.kend[s] && prepared.t->allocations.t_free[a] == prepared.kstart[s]) continue;
        if (config.check_invariants && state[a] != Residency::Gpu)
            fail_invariant("kernel " + std::to_string(kernel_id(s)) + " starts with allocation " +
                           std::to_string(alloc_id(a)) + " not resident");
        ctx.last_touch[a] = ++tick;
        ctx.last_time[a] = start;
        ctx.next_of[a] = prepared.next_use[j];
        if (pre_watches) pre->on_access(s, j, a);
        if (prepared.acc_write[j]) {
            ctx.writer[a] = s;
            drop_host_copy(a);   // the host copy is stale now
        }
    }
    int64_t dur = prepared.kend[s] - prepared.kstart[s];
    // Every kernel the run reaches is stored at its time, moved or not (a missing one is one the
    // run never reached: docs/trace-format.md, run_kernels).
    if (config.record_events) result.kernel_times.push_back({kernel_id(s), start, start + dur});
    ++result.kernels_reached;
    result.last_kernel = kernel_id(s);
    t_last = std::max(t_last, start + dur);
    origin.after_launch = true;
    if (pre_acts) pre->after_launch(s, start);
    return true;
}

// Recomputes the dropped allocation `a` for kernel s as DTR does: each input (a read operand)
// of its producer that is not resident is first brought back — swapped in, or recomputed in
// turn (depth + 1) — and pinned until the kernel's operands are all restored; then `a` gets
// room and the producer reruns once its inputs are ready, after earlier recomputations (one
// at a time). `ready`: when `a` is ready. False on OOM (rc_oom: the allocation that failed).
template <class Policy>
bool Engine<Policy>::recompute(int32_t a, int32_t s, int64_t& t, int depth, int64_t& ready) {
    const auto& al = prepared.t->allocations;
    result.recompute_depth_max = std::max<int64_t>(result.recompute_depth_max, depth);
    const int32_t w = ctx.writer[a];
    int64_t inputs_ready = t;
    rc_active[a] = 1;
    for (int64_t j = prepared.acc_begin[w]; j < prepared.acc_begin[w + 1]; ++j) {
        const int32_t b = prepared.acc_alloc[j];
        if (b == a || !prepared.acc_read[j]) continue;
        if (++pins[b] == 1 && pol.contains(b)) pol.erase(b);   // kept while the chain is restored
        rc_pinned.push_back(b);
        if (state[b] == Residency::InD2H) {
            // Being swapped out: unlike an operand (rule 2), not cancelled — the chain waits for
            // the copy to land and swaps it back in (replay's plan has no silent cancellation).
            t = std::max(t, ready_at[b]);
            complete_until(t);
            ctx.now = t;
        }
        switch (state[b]) {
            case Residency::Gpu: break;
            case Residency::InH2D: inputs_ready = std::max(inputs_ready, ready_at[b]); break;
            case Residency::Host:
                if (!make_room(b, t, false)) { rc_oom = b; rc_active[a] = 0; return false; }
                state[b] = Residency::InH2D;
                resident_bytes += al.bytes[b];
                ready_at[b] = start_transfer(b, true, t);
                inputs_ready = std::max(inputs_ready, ready_at[b]);
                break;
            case Residency::Dropped:
                if (depth < kMaxRecomputeDepth && !rc_active[b] && ctx.writer[b] >= 0) {
                    int64_t rb = t;
                    if (!recompute(b, s, t, depth + 1, rb)) { rc_active[a] = 0; return false; }
                    inputs_ready = std::max(inputs_ready, rb);
                } else {
                    ++result.recompute_inputs_assumed;   // a cycle or beyond the bound: assumed there
                }
                break;
            default: ++result.recompute_inputs_assumed; break;   // freed (or not yet): cannot come back
        }
    }
    rc_active[a] = 0;
    if (!make_room(a, t, false)) { rc_oom = a; return false; }
    const int64_t cost = prepared.kend[w] - prepared.kstart[w];
    const int64_t st = std::max({t, recompute_free, inputs_ready});
    recompute_free = ready = st + cost;
    state[a] = Residency::Gpu;
    resident_bytes += al.bytes[a];
    ++result.recompute_count;
    result.recompute_time += cost;
    event(EK::Recompute, st, st + cost, a, w, al.bytes[a]);
    return true;
}

template <class Policy>
void Engine<Policy>::unpin_recompute_inputs() {
    for (int32_t b : rc_pinned)
        if (--pins[b] == 0 && state[b] == Residency::Gpu && !pol.contains(b)) pol.insert(b);
    rc_pinned.clear();
}

template <class Policy>
void Engine<Policy>::on_kernel_end(int32_t s) {
    complete_until(prepared.kend[s] + shift);
    ctx.now = prepared.kend[s] + shift;
    for (int64_t j = prepared.acc_begin[s]; j < prepared.acc_begin[s + 1]; ++j) {
        int32_t a = prepared.acc_alloc[j];
        if (--pins[a] == 0 && state[a] == Residency::Gpu && !pol.contains(a)) pol.insert(a);
    }
}

// ---- what prefetchers may ask ---------------------------------------------------------------

// A swap-in requested by the prefetcher (`a` is on the host): never waits, and never evicts
// what the current window protects.
template <class Policy>
void Engine<Policy>::start_prefetch(int32_t a, int64_t t) {
    if (!make_room(a, t, true)) return;
    state[a] = Residency::InH2D;
    resident_bytes += prepared.t->allocations.bytes[a];
    ++result.prefetch_count;
    event(EK::Prefetch, t, t, a, -1, prepared.t->allocations.bytes[a]);
    ready_at[a] = start_transfer(a, true, t);
}

// Early (proactive) swap-out, docs/simulator.md rule 10. While the eviction queue is free
// before the next kernel starts, and the demand the prefetcher foresees while the victim
// would be away does not fit beside what is already off the GPU, evict the policy's next
// victim now, so that its transfer overlaps compute instead of stalling the allocation that
// needs room.
template <class Policy>
int64_t Engine<Policy>::early_swap_out(int32_t s, int64_t t, const Prefetcher& by) {
    constexpr int kEarlySkips = 4;
    if (!early_swap_out_open(s)) return 0;
    int q = config.link.copy_engines >= 2 ? 1 : 0;
    int64_t next_start = prepared.kstart[s + 1] + shift;
    ctx.now = t;
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
    while (busy[q] <= next_start && !done) {
        const int32_t victim = early_victim(passed);
        if (victim < 0) break;
        if (ctx.host_valid[victim] || pol.may_drop(victim)) {
            // a clean eviction or a drop is instant: nothing to gain by doing it early
            if (++skipped > kEarlySkips) break;
            pass_over(victim);
            continue;
        }
        const int64_t demand = by.early_demand(victim, s);
        if (demand == INT64_MIN || demand - (allocated_bytes - resident_bytes) <= cap) {
            // look past a victim that is freed (or back) before any pressure
            if (++skipped > kEarlySkips) break;
            pass_over(victim);
            continue;
        }
        evict(victim, t);
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
bool Engine<Policy>::early_swap_out_open(int32_t s) const {
    const int32_t n = static_cast<int32_t>(prepared.korder.size());
    if (!config.early_swap_out || s + 1 >= n || cap >= kUnlimited || done) return false;
    return busy[config.link.copy_engines >= 2 ? 1 : 0] <= prepared.kstart[s + 1] + shift;
}

// Early swap-out of one victim chosen by the prefetcher (forecast): an evictable dirty victim
// outside the window that the host buffer can take.
template <class Policy>
typename PrefetchTarget::Early Engine<Policy>::early_swap_out_of(int32_t v, int32_t s, int64_t t) {
    if (!early_swap_out_open(s)) return Early::LinkBusy;
    if (state[v] != Residency::Gpu || pins[v] != 0 || !pol.contains(v) || is_protected(v) || ctx.host_valid[v] ||
        pol.may_drop(v) || !host_room(prepared.t->allocations.bytes[v]))
        return Early::Refused;
    ctx.now = t;
    evict(v, t);
    ++result.early_evictions;
    return Early::Evicted;
}

// ---- main loop ----------------------------------------------------------------------------

template <class Policy>
bool Engine<Policy>::step(const RecordedEvent& e) {
    origin = {e.what, false, e.row};
    // the program's host allocations and frees up to this instant (frees first at one instant)
    for (; host_event < prepared.host_events.size() && prepared.host_events[host_event].first <= e.time; ++host_event) {
        program_host += prepared.host_events[host_event].second;
        result.host_peak = std::max(result.host_peak, host_used + program_host);
    }
    bool oom_here = false;
    switch (e.what) {
        case Recorded::KernelEnd: on_kernel_end(e.seq); break;
        case Recorded::Free: on_free(e.row); break;
        case Recorded::Allocation: oom_here = !on_alloc(e.row); break;
        case Recorded::KernelStart: oom_here = !on_kernel_start(e.seq); break;
    }
    if (oom_here) return false;
    sample(e.time);
    if (config.check_invariants && host_used > host_cap) fail_invariant("host bytes exceed the host buffer");
    return true;
}

template <class Policy>
void Engine<Policy>::run() {
    begin(nullptr, 0);
    advance();
    finish();
}

template <class Policy>
void Engine<Policy>::finish() {
    pre->finish(result);
    result.baseline_makespan = prepared.t_end - prepared.t_begin;
    // An OOM run ends at its OOM, a halted one at its last event: its makespan is how far it
    // got (simulated time).
    const int64_t end = result.oom.happened ? result.oom.time : halted ? std::max(t_last, prepared.t_begin) : std::max(t_last, prepared.t_end + shift);
    result.simulated_makespan = end - prepared.t_begin;
    for (const Bucket& b : buckets)
        if (b.dev >= 0) result.memory.push_back({b.t, b.dev, b.host});
}

template <class Policy>
void Engine<Policy>::begin(const std::vector<int32_t>* gate_of, size_t events) {
    gates = gate_of;
    arrivals.assign(events, kNoArrival);
    cursor = std::make_unique<EventCursor>(prepared, *prepared.t);
}

template <class Policy>
int32_t Engine<Policy>::advance() {
    if (paused && done) paused = false;   // halted while it waited
    if (paused) return gate(cur.seq);
    while (!done && cursor->next(cur)) {
        if ((n_events++ & 4095) == 0 && config.cancel && config.cancel->load(std::memory_order_relaxed)) throw Cancelled();
        if (cur.what == Recorded::KernelEnd) {
            const int32_t g = gate(cur.seq);
            if (g >= 0) {
                paused = true;
                return g;
            }
        }
        if (!step(cur)) { done = true; break; }
        if (cur.what == Recorded::KernelStart) {
            const int32_t g = gate(cur.seq);
            if (g >= 0) arrivals[static_cast<size_t>(g)] = shift;   // started at kstart + shift
        }
    }
    done = true;
    return -1;
}

template <class Policy>
void Engine<Policy>::release(int64_t delay) {
    paused = false;
    const int32_t s = cur.seq;
    if (delay > shift) {
        // A coupled wait: the collective (or receive) ends when its slowest participant lets it.
        const int64_t now = prepared.kend[s] + shift;
        event(EK::Stall, now, prepared.kend[s] + delay, -1, s, 0);
        result.coupled_wait_time += delay - shift;
        ++result.coupled_wait_count;
        shift = delay;
        t_last = std::max(t_last, prepared.kend[s] + shift);
    }
    if (!step(cur)) done = true;
}

template class Engine<LruPolicy>;
template class Engine<LargestPolicy>;
template class Engine<BeladyPolicy>;
template class Engine<DtrPolicy>;
template class Engine<CostAwarePolicy>;

// ---- entry points -------------------------------------------------------------------------

// `share` of `bytes`, rounded down to a byte; a product within a few ulps of a whole number is that
// number: 70% is the double 0.69999999999999996, and floor(0.7 x 176,686,080) was 123,680,255 where
// 70% of the peak is 123,680,256 bytes (docs/simulator.md, "Capacity").
namespace {
int64_t share_of(double share, int64_t bytes) {
    const double product = share * static_cast<double>(bytes);
    // Past int64 the cast is undefined (a host buffer of 1000 x a capacity near 2^63 bytes).
    if (!(product < static_cast<double>(kUnlimited))) return kUnlimited;
    const double whole = std::nearbyint(product);
    if (std::abs(product - whole) <= 4 * std::numeric_limits<double>::epsilon() * std::abs(product))
        return static_cast<int64_t>(whole);
    return static_cast<int64_t>(std::floor(product));
}
}   // namespace

Result start_result(const Prepared& p, const Config& c, int64_t& cap, int64_t& host_cap) {
    Result r;
    r.config = c;
    r.config.cancel = nullptr;   // the flag belongs to the caller, not to the result
    r.device = p.device;
    r.assumed_accesses = p.assumed_accesses;
    r.warnings = trace_warnings(p);
    r.order_only = p.t->order_only();
    r.baseline_peak = baseline_peak(p, parse_allocator(c.allocator));
    if (std::string said = modelled_reserved_warning(p, c, r.baseline_peak); !said.empty()) r.warnings.push_back(said);
    cap = c.capacity.fraction > 0 ? share_of(c.capacity.fraction, r.baseline_peak) : c.capacity.bytes;
    host_cap = kUnlimited;
    if (c.cpu_buffer_ratio > 0 && cap < kUnlimited) host_cap = share_of(c.cpu_buffer_ratio, cap);
    r.capacity = cap;
    r.host_capacity = host_cap;
    r.rows = p.rows;
    return r;
}

void end_result(const Prepared& p, Result& r, double seconds) {
    r.peak_reduction = r.baseline_peak > 0 ? 1.0 - static_cast<double>(r.simulated_peak) / static_cast<double>(r.baseline_peak) : 0;
    // An OOM run's loss is that of the part that ran: simulated time to the OOM over the
    // recorded time of the event that failed (0 when it failed at the first event). A finished
    // run of a trace whose events are all at one instant has no loss: a share of a zero baseline
    // is not defined (NaN: no metric, null in --json, "-" in a sweep, never within a budget).
    const int64_t recorded_span = r.oom.happened ? r.oom.recorded - p.t_begin : r.baseline_makespan;
    if (recorded_span > 0)
        r.throughput_loss = static_cast<double>(r.simulated_makespan) / static_cast<double>(recorded_span) - 1.0;
    else r.throughput_loss = r.oom.happened ? 0 : std::numeric_limits<double>::quiet_NaN();
    r.seconds = seconds;
}

Result simulate(const Prepared& p, const Config& c) {
    validate(c);
    auto t0 = std::chrono::steady_clock::now();
    int64_t cap = 0, host_cap = 0;
    Result r = start_result(p, c, cap, host_cap);
    with_eviction_policy(parse_eviction(c.eviction), [&]<class Policy>(std::type_identity<Policy>) {
        Engine<Policy>(p, c, r, cap, host_cap).run();
    });
    end_result(p, r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return r;
}

Result simulate(const trace::TraceData& t, const Config& c) {
    auto p = prepare(t, c.device);
    return simulate(*p, c);
}

}  // namespace mhc::sim
