// The engine's recomputation of dropped activations, as DTR does (docs/simulator.md rule 2).
#include "engine.hpp"

namespace mhc::sim {

// Recomputes the dropped allocation `alloc` for kernel seq as DTR does: each input (a read
// operand) of its producer that is not resident is first brought back — swapped in, or
// recomputed in turn (depth + 1) — and pinned until the kernel's operands are all restored; then
// `alloc` gets room and the producer reruns once its inputs are ready, after earlier
// recomputations (one at a time). `ready`: when `alloc` is ready. False on OOM (rc_oom: the
// allocation that failed).
template <class Policy>
bool Engine<Policy>::recompute(int32_t alloc, int32_t seq, int64_t& time, int depth, int64_t& ready) {
    const auto& al = prepared.t->allocations;
    result.recompute_depth_max = std::max<int64_t>(result.recompute_depth_max, depth);
    const int32_t writer = ctx.writer[alloc];
    int64_t inputs_ready = time;
    rc_active[alloc] = 1;
    for (int64_t j = prepared.acc_begin[writer]; j < prepared.acc_begin[writer + 1]; ++j) {
        const int32_t input = prepared.acc_alloc[j];
        if (input == alloc || !prepared.acc_read[j]) continue;
        if (++pins[input] == 1 && pol.contains(input)) pol.erase(input);   // kept while the chain is restored
        rc_pinned.push_back(input);
        if (state[input] == Residency::InD2H) {
            // Being swapped out: unlike an operand (rule 2), not cancelled — the chain waits for
            // the copy to land and swaps it back in (replay's plan has no silent cancellation).
            time = std::max(time, ready_at[input]);
            complete_until(time);
            ctx.now = time;
        }
        switch (state[input]) {
            case Residency::Gpu: break;
            case Residency::InH2D: inputs_ready = std::max(inputs_ready, ready_at[input]); break;
            case Residency::Host:
                if (!make_room(input, time, false)) { rc_oom = input; rc_active[alloc] = 0; return false; }
                state[input] = Residency::InH2D;
                resident_bytes += al.bytes[input];
                ready_at[input] = start_transfer(input, true, time);
                inputs_ready = std::max(inputs_ready, ready_at[input]);
                break;
            case Residency::Dropped:
                if (depth < kMaxRecomputeDepth && !rc_active[input] && ctx.writer[input] >= 0) {
                    int64_t rb = time;
                    if (!recompute(input, seq, time, depth + 1, rb)) { rc_active[alloc] = 0; return false; }
                    inputs_ready = std::max(inputs_ready, rb);
                } else {
                    ++result.recompute_inputs_assumed;   // a cycle or beyond the bound: assumed there
                }
                break;
            default: ++result.recompute_inputs_assumed; break;   // freed (or not yet): cannot come back
        }
    }
    rc_active[alloc] = 0;
    if (!make_room(alloc, time, false)) { rc_oom = alloc; return false; }
    const int64_t cost = prepared.kend[writer] - prepared.kstart[writer];
    const int64_t st = std::max({time, recompute_free, inputs_ready});
    recompute_free = ready = st + cost;
    state[alloc] = Residency::Gpu;
    resident_bytes += al.bytes[alloc];
    ++result.recompute_count;
    result.recompute_time += cost;
    event(EK::Recompute, st, st + cost, alloc, writer, al.bytes[alloc]);
    return true;
}

template <class Policy>
void Engine<Policy>::unpin_recompute_inputs() {
    for (int32_t input : rc_pinned)
        if (--pins[input] == 0 && state[input] == Residency::Gpu && !pol.contains(input)) pol.insert(input);
    rc_pinned.clear();
}

#define MHC_SIM_INSTANTIATE(Policy)                                                            \
    template bool Engine<Policy>::recompute(int32_t, int32_t, int64_t&, int, int64_t&);        \
    template void Engine<Policy>::unpin_recompute_inputs();
MHC_SIM_EVICTION_POLICIES(MHC_SIM_INSTANTIATE)
#undef MHC_SIM_INSTANTIATE

}  // namespace mhc::sim
