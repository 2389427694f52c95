// The engine's recomputation of dropped activations, as DTR does (docs/simulator.md rule 2).
#include "engine.hpp"

namespace mhc::sim {

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

#define MHC_SIM_INSTANTIATE(Policy)                                                            \
    template bool Engine<Policy>::recompute(int32_t, int32_t, int64_t&, int, int64_t&);        \
    template void Engine<Policy>::unpin_recompute_inputs();
MHC_SIM_EVICTION_POLICIES(MHC_SIM_INSTANTIATE)
#undef MHC_SIM_INSTANTIATE

}  // namespace mhc::sim
