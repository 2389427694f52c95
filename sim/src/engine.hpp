#pragma once
// The event-driven engine (docs/simulator.md states every rule it follows). A template over
// the eviction policy, so that the per-event calls into the policy are direct calls; the
// prefetcher (prefetch/*.cpp) is a plug-in that asks for swap-ins through PrefetchTarget.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "mhc/common/units.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/result.hpp"
#include "host_copy_order.hpp"
#include "inflight.hpp"
#include "link_queues.hpp"
#include "memory_samples.hpp"
#include "policies.hpp"
#include "prefetch/prefetcher.hpp"
#include "prepared.hpp"

namespace mhc::sim {

template <class Policy>
class Engine final : public PrefetchTarget {
public:
    Engine(const Prepared& p, const Config& c, Result& r, int64_t capacity, int64_t host_capacity);
    void run();   // begin(), advance() with no cross-rank events, finish()

    // A coupled (multi-rank) run in pieces (coupled.cpp, docs/simulator.md "Coupled ranks").
    // gate_of[seq]: the index of the kernel's cross-rank event, -1 for the others. begin(),
    // then advance() until it returns -1 (the run ended); a value g >= 0 means the run is
    // paused at the end of cross-rank event g, to be resumed by release(delay): the event's
    // end moves to its recorded end + delay when that is later (a coupled wait). arrival(g):
    // the delay (simulated - recorded start) with which the rank reached event g, kNoArrival
    // until it did. halt() ends a run early (another rank ran out of memory: its makespan
    // ends at the last event it processed); finish() last.
    static constexpr int64_t kNoArrival = INT64_MIN;
    void begin(const std::vector<int32_t>* gate_of, size_t events);
    int32_t advance();
    void release(int64_t delay);
    void halt() { done = halted = true; }
    void finish();
    int64_t arrival(int32_t g) const { return arrivals[static_cast<size_t>(g)]; }
    bool oom_happened() const { return result.oom.happened; }

private:
    using EK = trace::EventKind;
    // memory (ideal or caching allocator)
    bool try_reserve(int32_t a);
    void release_bytes(int32_t a);
    bool fits_after_pending(int32_t a) const;
    void note_peak();
    // transfers
    int64_t start_transfer(int32_t a, bool h2d, int64_t t);
    void complete_until(int64_t until) {   // the transfers that end by then land (inline: mostly none)
        if (inflight.next_end() <= until) complete_landed(until);
    }
    void complete_landed(int64_t until);
    bool host_room(int64_t bytes);
    void drop_host_copy(int32_t a);
    // eviction
    int32_t pick_victim(bool for_prefetch);
    int32_t early_victim(int32_t passed);
    static constexpr bool kWalksVictims = requires(const Policy& policy) { policy.pick_after(int32_t{}); };
    void evict(int32_t v, int64_t t);
    bool make_room(int32_t a, int64_t& t, bool for_prefetch);
    void restore_aside();
    // events
    bool on_alloc(int32_t alloc);
    void on_free(int32_t alloc);
    bool on_kernel_start(int32_t seq);
    bool recompute(int32_t a, int32_t s, int64_t& t, int depth, int64_t& ready);
    void unpin_recompute_inputs();
    void on_kernel_end(int32_t seq);
    // what prefetchers may ask (PrefetchTarget)
    void start_prefetch(int32_t a, int64_t t) override;
    int64_t early_swap_out(int32_t s, int64_t t, const Prefetcher& by) override;
    Early early_swap_out_of(int32_t v, int32_t s, int64_t t) override;
    bool early_swap_out_open(int32_t s) const override;
    int64_t live_bytes() const override { return allocated_bytes; }
    int64_t off_bytes() const override { return allocated_bytes - resident_bytes; }
    int64_t capacity() const override { return cap; }
    const Ctx& context() const override { return ctx; }

    void reserve_events(size_t allocations, size_t kernels);
    void event(EK k, int64_t t0, int64_t t1, int32_t a, int32_t s, int64_t bytes);
    void stall(int64_t now, int64_t until, int32_t a, int32_t s);
    void fail_invariant(const std::string& what);
    void oom(int64_t t, int32_t a, int32_t s, int64_t bytes_needed);
    int64_t alloc_id(int32_t a) const { return a >= 0 ? prepared.t->allocations.id[a] : 0; }
    int64_t kernel_id(int32_t s) const { return s >= 0 ? prepared.t->kernels.id[prepared.korder[s]] : 0; }
    // A transfer in flight whose completion still changes something (not freed or cancelled).
    bool live(const Transfer& x) const {
        return x.epoch == epoch[x.alloc] && state[x.alloc] == (x.h2d ? Residency::InH2D : Residency::InD2H);
    }

    const Prepared& prepared;
    const Config& config;
    Result& result;
    Ctx ctx;
    Policy pol;
    std::unique_ptr<Prefetcher> pre;
    bool pre_watches = false, pre_waits = false, pre_acts = false;   // which of its hooks it wants
    const AllocatorKind allocator_kind;
    CachingAllocator ca;
    bool warmed = false;   // the caching model's warm start done (warm_start, prepared.hpp)
    int64_t cap, host_cap;
    bool done = false;
    EventOrigin origin;               // the recorded event being processed (for replay)

    std::vector<int16_t> pins;
    std::vector<uint32_t> epoch;
    std::vector<int64_t> ready_at;
    std::vector<int32_t> block;
    std::vector<int32_t> aside;       // victims set aside during one make_room
    HostCopyOrder cached_host;   // resident allocations whose host copy is valid too
    Inflight inflight;

    int64_t used = 0, pending_release = 0, host_used = 0, shift = 0, tick = 0;
    // Bytes of swap-outs in flight per pool number (caching model with private pools; else empty).
    std::vector<int64_t> pending_pool;
    // Private pools the recording gave back before `recorded` (a recorded allocation or free time).
    void pools_due(int64_t recorded) {
        if (allocator_kind == AllocatorKind::Caching && !pending_pool.empty() && ca.pools_due(recorded))
            used = ca.reserved();
    }
    void add_pending(int32_t alloc, int64_t bytes) {
        pending_release += bytes;
        if (!pending_pool.empty()) pending_pool[static_cast<size_t>(prepared.pool_of(alloc))] += bytes;
    }
    // The program's own host memory (the trace's device -1 allocations), live at the current
    // recorded time: counted in host bytes, not against the host buffer (docs/simulator.md).
    int64_t program_host = 0;
    size_t host_event = 0;
    // ideal bytes: allocated and not freed / of those, on the GPU or in H2D (early swap-out)
    int64_t allocated_bytes = 0, resident_bytes = 0;
    LinkQueues link;
    int64_t recompute_free = INT64_MIN / 2;   // the GPU is busy recomputing until then
    // Recursive recomputation: inputs pinned while the current kernel's operands are
    // restored, the chain being recomputed (cycle guard), and the allocation that failed.
    std::vector<int32_t> rc_pinned;
    std::vector<uint8_t> rc_active;
    int32_t rc_oom = -1;
    static constexpr int kMaxRecomputeDepth = 32;
    int64_t t_last = INT64_MIN;   // the latest simulated time reached (negative times included)

    MemorySamples samples;

    // the event loop (coupled runs: paused at cross-rank events)
    std::unique_ptr<EventCursor> cursor;
    RecordedEvent cur;
    uint32_t n_events = 0;
    const std::vector<int32_t>* gates = nullptr;
    std::vector<int64_t> arrivals;
    bool paused = false;
    bool halted = false;                 // stopped by halt(): its makespan ends where it stopped
    bool step(const RecordedEvent& recorded);   // one event; false when the run must stop (OOM)
    int32_t gate(int32_t seq) const { return gates ? (*gates)[static_cast<size_t>(seq)] : -1; }
};

// The eviction policies' classes, each an Engine the library is compiled for. The engine's
// members are defined in engine.cpp (state, memory, transfers, eviction, what a run records),
// engine_events.cpp (the pass over the events), engine_recompute.cpp and engine_prefetch.cpp;
// each file instantiates, for every policy, what it defines that the others call.
#define MHC_SIM_EVICTION_POLICIES(X) X(LruPolicy) X(LargestPolicy) X(BeladyPolicy) X(DtrPolicy) X(CostAwarePolicy)

// The one place where an eviction policy's kind becomes its class: returns
// f(std::type_identity<Policy>{}).
template <class F>
decltype(auto) with_eviction_policy(EvictionKind kind, F&& f) {
    switch (kind) {
        case EvictionKind::Lru: return f(std::type_identity<LruPolicy>{});
        case EvictionKind::Largest: return f(std::type_identity<LargestPolicy>{});
        case EvictionKind::Belady: return f(std::type_identity<BeladyPolicy>{});
        case EvictionKind::Dtr: return f(std::type_identity<DtrPolicy>{});
        case EvictionKind::CostAware: break;
    }
    return f(std::type_identity<CostAwarePolicy>{});
}

// A run's result before the engine fills it (configuration, baseline, capacities resolved),
// and its closing figures after: the same for simulate() and the coupled runners.
Result start_result(const Prepared& prep, const Config& config, int64_t& cap, int64_t& host_cap);
void end_result(const Prepared& prep, Result& result, double seconds);

}  // namespace mhc::sim
