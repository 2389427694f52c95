// The engine's pass over the recorded events in time order, and what each one does: an
// allocation, a free, a kernel's start and end (docs/simulator.md).
#include "engine.hpp"

namespace mhc::sim {

template <class Policy>
bool Engine<Policy>::step(const RecordedEvent& recorded) {
    origin = {recorded.what, false, recorded.row};
    // the program's host allocations and frees up to this instant (frees first at one instant)
    for (; host_event < prepared.host_events.size() && prepared.host_events[host_event].first <= recorded.time; ++host_event) {
        program_host += prepared.host_events[host_event].second;
        result.host_peak = std::max(result.host_peak, host_used + program_host);
    }
    bool oom_here = false;
    switch (recorded.what) {
        case Recorded::KernelEnd: on_kernel_end(recorded.seq); break;
        case Recorded::Free: on_free(recorded.row); break;
        case Recorded::Allocation: oom_here = !on_alloc(recorded.row); break;
        case Recorded::KernelStart: oom_here = !on_kernel_start(recorded.seq); break;
    }
    if (oom_here) return false;
    samples.sample(recorded.time, shift, used, host_used + program_host);
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
            const int32_t gate_index = gate(cur.seq);
            if (gate_index >= 0) {
                paused = true;
                return gate_index;
            }
        }
        if (!step(cur)) { done = true; break; }
        if (cur.what == Recorded::KernelStart) {
            const int32_t gate_index = gate(cur.seq);
            if (gate_index >= 0) arrivals[static_cast<size_t>(gate_index)] = shift;   // started at kstart + shift
        }
    }
    done = true;
    return -1;
}

template <class Policy>
void Engine<Policy>::release(int64_t delay) {
    paused = false;
    const int32_t seq = cur.seq;
    if (delay > shift) {
        // A coupled wait: the collective (or receive) ends when its slowest participant lets it.
        const int64_t now = prepared.kend[seq] + shift;
        event(EK::Stall, now, prepared.kend[seq] + delay, -1, seq, 0);
        result.coupled_wait_time += delay - shift;
        ++result.coupled_wait_count;
        shift = delay;
        t_last = std::max(t_last, prepared.kend[seq] + shift);
    }
    if (!step(cur)) done = true;
}

// ---- the events ---------------------------------------------------------------------------

template <class Policy>
bool Engine<Policy>::on_alloc(int32_t alloc) {
    int64_t now = prepared.t->allocations.t_alloc[alloc] + shift;
    int64_t time = now;
    if (!pending_pool.empty()) {   // the swap-outs landed by now first, as make room's first step
        complete_until(now);
        pools_due(prepared.t->allocations.t_alloc[alloc]);
    }
    ctx.last_touch[alloc] = ++tick;
    ctx.last_time[alloc] = now;
    if (!make_room(alloc, time, false)) {
        oom(time, alloc, -1, prepared.t->allocations.bytes[alloc]);
        return false;
    }
    if (time > now) stall(now, time, alloc, -1);
    state[alloc] = Residency::Gpu;
    allocated_bytes += prepared.t->allocations.bytes[alloc];
    resident_bytes += prepared.t->allocations.bytes[alloc];
    ctx.next_of[alloc] = prepared.first_use[alloc];
    if (pre_watches) pre->on_alloc(alloc);
    pol.insert(alloc);
    t_last = std::max(t_last, time);
    return true;
}

template <class Policy>
void Engine<Policy>::on_free(int32_t alloc) {
    int64_t now = prepared.t->allocations.t_free[alloc] + shift;
    complete_until(now);
    pools_due(prepared.t->allocations.t_free[alloc]);
    ctx.now = now;
    if (config.check_invariants && pins[alloc] > 0) fail_invariant("allocation " + std::to_string(alloc_id(alloc)) + " freed while a running kernel uses it");
    int64_t bytes = prepared.t->allocations.bytes[alloc];
    if (state[alloc] != Residency::NotYet && state[alloc] != Residency::Freed) allocated_bytes -= bytes;
    if (state[alloc] == Residency::Gpu || state[alloc] == Residency::InH2D) resident_bytes -= bytes;
    switch (state[alloc]) {
        case Residency::Gpu: pol.erase(alloc); release_bytes(alloc); break;
        case Residency::InH2D: release_bytes(alloc); ++epoch[alloc]; break;
        case Residency::InD2H:
            release_bytes(alloc);
            add_pending(alloc, -bytes);
            host_used -= bytes;
            ++epoch[alloc];
            break;
        default: break;
    }

    if (ctx.host_valid[alloc]) {
        ctx.host_valid[alloc] = 0;
        host_used -= bytes;
        cached_host.erase(alloc);
    }
    state[alloc] = Residency::Freed;
    if (config.check_invariants && pol.contains(alloc)) fail_invariant("freed allocation still resident");
    t_last = std::max(t_last, now);
}

template <class Policy>
bool Engine<Policy>::on_kernel_start(int32_t seq) {
    int64_t now = prepared.kstart[seq] + shift;
    complete_until(now);
    ctx.now = now;
    ctx.cur_seq = seq;
    int64_t b0 = prepared.acc_begin[seq], b1 = prepared.acc_begin[seq + 1];
    bool all_resident = true;   // then the loop below has nothing to do
    for (int64_t j = b0; j < b1; ++j) {
        int32_t alloc = prepared.acc_alloc[j];
        if (++pins[alloc] == 1 && pol.contains(alloc)) pol.erase(alloc);
        all_resident &= state[alloc] == Residency::Gpu;
    }
    int64_t time = now, ready = now;
    for (int64_t j = all_resident ? b1 : b0; j < b1; ++j) {
        int32_t alloc = prepared.acc_alloc[j];
        int64_t need_at = now;
        switch (state[alloc]) {
            case Residency::Gpu: break;
            case Residency::InH2D: need_at = ready_at[alloc]; break;
            case Residency::InD2H:   // still on the GPU: cancel the eviction
                state[alloc] = Residency::Gpu;
                resident_bytes += prepared.t->allocations.bytes[alloc];
                add_pending(alloc, -prepared.t->allocations.bytes[alloc]);
                host_used -= prepared.t->allocations.bytes[alloc];
                ++epoch[alloc];
                break;
            case Residency::Host:
                if (!make_room(alloc, time, false)) {
                    // the inputs of an operand recomputed before this one are pinned by no kernel
                    // (rule 7), as when the recomputation itself runs out of memory
                    if (!rc_pinned.empty()) unpin_recompute_inputs();
                    oom(time, alloc, seq, prepared.t->allocations.bytes[alloc]);
                    return false;
                }
                state[alloc] = Residency::InH2D;
                resident_bytes += prepared.t->allocations.bytes[alloc];
                need_at = ready_at[alloc] = start_transfer(alloc, true, time);
                break;
            case Residency::Dropped:
                if (!recompute(alloc, seq, time, 1, need_at)) {
                    unpin_recompute_inputs();
                    oom(time, rc_oom, seq, prepared.t->allocations.bytes[rc_oom]);
                    return false;
                }
                break;
            default: break;   // Residency::NotYet/Residency::Freed cannot happen: check_trace rejects such accesses
        }
        if (pre_waits && need_at > now) pre->on_wait(seq, j, need_at - now);
        ready = std::max(ready, need_at);
    }
    if (!rc_pinned.empty()) unpin_recompute_inputs();
    int64_t start = std::max(ready, time);
    complete_until(start);
    if (start > now) stall(now, start, -1, seq);
    ctx.now = start;
    for (int64_t j = b0; j < b1; ++j) {
        int32_t alloc = prepared.acc_alloc[j];
        // The one exemption: a zero-length kernel at the instant its operand is freed (frees
        // come first at an instant) needs nothing for no time; its operand is skipped.
        if (state[alloc] == Residency::Freed && prepared.kstart[seq] == prepared.kend[seq] && prepared.t->allocations.t_free[alloc] == prepared.kstart[seq]) continue;
        if (config.check_invariants && state[alloc] != Residency::Gpu)
            fail_invariant("kernel " + std::to_string(kernel_id(seq)) + " starts with allocation " +
                           std::to_string(alloc_id(alloc)) + " not resident");
        ctx.last_touch[alloc] = ++tick;
        ctx.last_time[alloc] = start;
        ctx.next_of[alloc] = prepared.next_use[j];
        if (pre_watches) pre->on_access(seq, j, alloc);
        if (prepared.acc_write[j]) {
            ctx.writer[alloc] = seq;
            drop_host_copy(alloc);   // the host copy is stale now
        }
    }
    int64_t dur = prepared.kend[seq] - prepared.kstart[seq];
    // Every kernel the run reaches is stored at its time, moved or not (a missing one is one the
    // run never reached: docs/trace-format.md, run_kernels).
    if (config.record_events) result.kernel_times.push_back({kernel_id(seq), start, start + dur});
    ++result.kernels_reached;
    result.last_kernel = kernel_id(seq);
    t_last = std::max(t_last, start + dur);
    origin.after_launch = true;
    if (pre_acts) pre->after_launch(seq, start);
    return true;
}

template <class Policy>
void Engine<Policy>::on_kernel_end(int32_t seq) {
    complete_until(prepared.kend[seq] + shift);
    ctx.now = prepared.kend[seq] + shift;
    for (int64_t j = prepared.acc_begin[seq]; j < prepared.acc_begin[seq + 1]; ++j) {
        int32_t alloc = prepared.acc_alloc[j];
        if (--pins[alloc] == 0 && state[alloc] == Residency::Gpu && !pol.contains(alloc)) pol.insert(alloc);
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
