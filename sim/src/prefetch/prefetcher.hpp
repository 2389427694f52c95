#pragma once
// Prefetchers: the policies that swap allocations in before a kernel needs them and, with
// early swap-out (docs/simulator.md rule 10), say how much memory is coming. The engine keeps
// memory, transfers, eviction and events; a prefetcher sees the engine only through
// PrefetchTarget and is told about the run through the hooks of Prefetcher.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "../policies.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"

namespace mhc::sim {

class Prefetcher;

// What the engine offers a prefetcher (Engine<Policy> implements it). The cheap checks are
// inline here so that scanning a window of candidates costs no virtual call per candidate.
class PrefetchTarget {
public:
    virtual ~PrefetchTarget() = default;
    Residency residency(int32_t a) const { return state[a]; }
    // Every allocation's residency (fixed in place for the run): for loops over many, which
    // would reload it after each call otherwise.
    const Residency* residencies() const { return state.data(); }
    // Starts a new protection window: what protect() marks from now on is not evicted to make
    // room for a prefetch or by an early swap-out; what the previous window marked may be.
    void new_window() { floor = ++stamp; }
    void protect(int32_t a) { protect_stamp[a] = stamp; }
    // A window that slides over kernels (lookahead, periodic): protect_through() keeps an
    // allocation protected up to a kernel's window, slide_window() makes a kernel's window
    // the current one, so that what enters a window is marked once. Kernel numbers rise from
    // one slide_window() to the next, and a prefetcher uses either this or new_window().
    void protect_through(int32_t alloc, int32_t kernel) {
        protect_stamp[alloc] = std::max(protect_stamp[alloc], kernel + 1);
    }
    void slide_window(int32_t kernel) { floor = kernel + 1; }
    // Swaps `a` in at t if it is on the host and room can be made without waiting and
    // without evicting anything protected; otherwise nothing happens. a < 0: nothing.
    void prefetch(int32_t a, int64_t t) {
        if (a >= 0 && state[a] == Residency::Host) start_prefetch(a, t);
    }
    bool is_protected(int32_t alloc) const { return protect_stamp[alloc] >= floor; }
    // The allocations off the GPU with their data on the host or on its way there (Host,
    // InD2H): the only ones a prefetch can swap in now or once a swap-out lands. Kept, by
    // their next use, for a prefetcher that calls track_off_gpu() when it is made.
    void track_off_gpu() { off_tracked = true; }
    // The first kernel after the current one that uses an allocation off the GPU (kNever:
    // none). An allocation's next use does not change while it is off the GPU: only a
    // kernel's start, with its operands resident, moves it.
    int32_t first_off_gpu_use() {
        const int32_t* next = context().next_of.data();
        while (!off_gpu.empty()) {
            const OffGpu top = off_gpu.front();
            const Residency where = state[top.alloc];
            if ((where == Residency::Host || where == Residency::InD2H) && next[top.alloc] == top.next_use)
                return top.next_use;
            std::pop_heap(off_gpu.begin(), off_gpu.end(), later_use);   // back on the GPU or freed since
            off_gpu.pop_back();
        }
        return kNever;
    }
    // is_protected() for loops over many: a is protected when stamps[a] >= floor.
    struct Protection {
        const int32_t* stamps;
        int32_t floor;
    };
    Protection protection() const { return {protect_stamp.data(), floor}; }
    // Early swap-out after kernel s launched at t: evicts the eviction policy's victims while
    // the link is free, as long as `by` foresees a demand that does not fit (rule 10).
    // Returns how many allocations it evicted.
    virtual int64_t early_swap_out(int32_t s, int64_t t, const Prefetcher& by) = 0;
    // Early swap-out of a victim the prefetcher chose itself (forecast, rule 10): `v` is
    // swapped out at t if the eviction queue is free by kernel s+1's start (else LinkBusy) and
    // `v` is evictable, dirty, not protected and fits in the host buffer (else Refused).
    enum class Early { Evicted, LinkBusy, Refused };
    virtual Early early_swap_out_of(int32_t v, int32_t s, int64_t t) = 0;
    // Whether early_swap_out_of(., s, .) could evict anything now (early swap-out on, the
    // eviction queue free by kernel s+1's start): a cheap test before ranking candidates.
    virtual bool early_swap_out_open(int32_t s) const = 0;
    // Bytes allocated and not resident (on the host, dropped or being swapped out), and the
    // device capacity (ideal bytes).
    virtual int64_t off_bytes() const = 0;
    virtual int64_t capacity() const = 0;
    // Bytes allocated and not freed (ideal sizes).
    virtual int64_t live_bytes() const = 0;
    // The engine's view of each allocation (next use, last writer, ...).
    virtual const Ctx& context() const = 0;

protected:
    virtual void start_prefetch(int32_t a, int64_t t) = 0;
    // The engine calls this as `alloc` leaves the GPU for the host (next_use: its next use).
    void note_off_gpu(int32_t alloc, int32_t next_use) {
        if (!off_tracked) return;
        off_gpu.push_back({next_use, alloc});
        std::push_heap(off_gpu.begin(), off_gpu.end(), later_use);
    }
    std::vector<Residency> state;        // per allocation
    std::vector<int32_t> protect_stamp;  // >= floor: protected in the current window
    int32_t stamp = 0, floor = 0;

private:
    struct OffGpu {
        int32_t next_use, alloc;
    };
    static bool later_use(const OffGpu& one, const OffGpu& other) { return one.next_use > other.next_use; }
    std::vector<OffGpu> off_gpu;   // a min-heap by next use; entries stale since are dropped when met
    bool off_tracked = false;
};

// A prefetch policy. Hooks the engine calls, in event order:
class Prefetcher {
public:
    Prefetcher(const Prepared& p, PrefetchTarget& e) : P(p), eng(e) {}
    virtual ~Prefetcher() = default;
    // Set by policies that learn from every allocation and access (on_alloc, on_access);
    // the engine skips those per-row calls otherwise.
    bool watches_accesses = false;
    // Set by policies that learn from operands that were not ready in time (on_wait).
    bool learns_from_waits = false;
    // Set by policies that act after a kernel launches (after_launch).
    bool acts_after_launch = true;

    // Allocation a was allocated (and is resident).
    virtual void on_alloc(int32_t) {}
    // Access j (of allocation a) by kernel s, when s starts.
    virtual void on_access(int32_t, int64_t, int32_t) {}
    // Kernel s waited `wait` ns for its access j (swap-in or recompute not done in time).
    virtual void on_wait(int32_t, int64_t, int64_t) {}
    // Kernel s launched at simulated time t: request swap-ins (and early swap-outs).
    virtual void after_launch(int32_t, int64_t) {}
    // For early swap-out after kernel s: the peak live bytes foreseen while victim v would be
    // off the GPU; INT64_MIN when none is foreseen (v is not worth evicting early).
    virtual int64_t early_demand(int32_t, int32_t) const { return INT64_MIN; }
    // The run ended: report what the policy measured.
    virtual void finish(Result&) {}

protected:
    const Prepared& P;
    PrefetchTarget& eng;
};

// The prefetcher named by a parsed --prefetch (sim/src/prefetch/<name>.cpp).
std::unique_ptr<Prefetcher> make_prefetcher(const PrefetchSpec& spec, const Prepared& p, PrefetchTarget& e);

}  // namespace mhc::sim
