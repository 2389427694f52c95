#pragma once
// The prefetch policies (one .cpp each), created only through make_prefetcher().
#include <utility>
#include <vector>

#include "prefetcher.hpp"

namespace mhc::sim {

struct NonePrefetcher final : Prefetcher {
    NonePrefetcher(const Prepared& p, PrefetchTarget& e);
};

class LookaheadPrefetcher final : public Prefetcher {
public:
    LookaheadPrefetcher(const Prepared& p, PrefetchTarget& e, int w) : Prefetcher(p, e), window(w) {}
    void after_launch(int32_t s, int64_t t) override;
    int64_t early_demand(int32_t v, int32_t s) const override;

private:
    int window;
};

// Learns step i-1 (kernels by position, allocations by rank within their step).
class PeriodicPrefetcher : public Prefetcher {
public:
    PeriodicPrefetcher(const Prepared& p, PrefetchTarget& e, int window);
    void on_alloc(int32_t a) override;
    void on_access(int32_t s, int64_t j, int32_t a) override;
    void after_launch(int32_t s, int64_t t) override;
    int64_t early_demand(int32_t v, int32_t s) const override;

protected:
    virtual void observe(int32_t) {}               // kernel s launched in a step >= 1
    virtual void on_early_evictions(int64_t) {}    // what early_swap_out evicted

private:
    int window;
    // next use of each allocation as learnt from the previous step, -1 unknown
    std::vector<int32_t> learnt_next;
    std::vector<int32_t> last_seq;   // seq of its last access, -1
};

// periodic:H's decisions plus a demand forecast whose error it reports.
class ForecastPrefetcher final : public PeriodicPrefetcher {
public:
    using PeriodicPrefetcher::PeriodicPrefetcher;
    void finish(Result& r) override;

private:
    void observe(int32_t s) override;
    void on_early_evictions(int64_t k) override { evictions += k; }
    void close_step();
    double err_sum = 0, peak_err_sum = 0;
    int64_t n = 0, peak_n = 0, step_actual_max = 0, evictions = 0;
    int32_t step = -1;
};

// Capuchin uses periodic's translation of step i-1's allocations, not its learning.
class CapuchinPrefetcher final : public Prefetcher {
public:
    CapuchinPrefetcher(const Prepared& p, PrefetchTarget& e) : Prefetcher(p, e) { learns_from_waits = true; }
    void on_wait(int32_t s, int64_t j, int64_t stall) override;
    void after_launch(int32_t s, int64_t t) override;

private:
    void plan_step(int32_t step);
    // per access position in a step: how many kernels before its use to prefetch
    std::vector<int32_t> trig;
    std::vector<std::pair<int32_t, int64_t>> plan;   // (position in step, access of prev step)
    size_t plan_cursor = 0;
};

// An allocation of step `step`-1 as the allocation of step `step` that plays its part
// (periodic.cpp); -1 when there is none (yet).
int32_t translate_to_step(const Prepared& P, const PrefetchTarget& e, int32_t a_prev, int32_t step);

}  // namespace mhc::sim
