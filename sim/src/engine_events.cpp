// The engine's pass over the recorded events in time order, and what each one does: an
// allocation, a free, a kernel's start and end (docs/simulator.md).
#include "engine.hpp"

namespace mhc::sim {

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
    samples.sample(e.time, shift, used, host_used + program_host);
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
    samples.store(result.memory);
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

// ---- the events ---------------------------------------------------------------------------

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

template <class Policy>
void Engine<Policy>::on_kernel_end(int32_t s) {
    complete_until(prepared.kend[s] + shift);
    ctx.now = prepared.kend[s] + shift;
    for (int64_t j = prepared.acc_begin[s]; j < prepared.acc_begin[s + 1]; ++j) {
        int32_t a = prepared.acc_alloc[j];
        if (--pins[a] == 0 && state[a] == Residency::Gpu && !pol.contains(a)) pol.insert(a);
    }
}

#define MHC_SIM_INSTANTIATE(Policy)                                                            \
    template void Engine<Policy>::run();                                                       \
    template void Engine<Policy>::begin(const std::vector<int32_t>*, size_t);                  \
    template int32_t Engine<Policy>::advance();                                                \
    template void Engine<Policy>::release(int64_t);                                            \
    template void Engine<Policy>::finish();
MHC_SIM_EVICTION_POLICIES(MHC_SIM_INSTANTIATE)
#undef MHC_SIM_INSTANTIATE

}  // namespace mhc::sim
