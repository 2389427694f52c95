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
    LookaheadPrefetcher(const Prepared& prep, PrefetchTarget& target, int kernels)
        : Prefetcher(prep, target), window(kernels) {
        target.track_off_gpu();
    }
    void after_launch(int32_t s, int64_t t) override;
    int64_t early_demand(int32_t v, int32_t s) const override;

private:
    int window;
    int32_t marked_through = -1;   // the last kernel whose operands are marked protected
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
    // Early swap-out after kernel s of a step >= 1 (rule 10): by the eviction policy's
    // victims and early_demand().
    virtual void swap_out_early(int32_t s, int64_t t) { eng.early_swap_out(s, t, *this); }

private:
    void translate_step(int32_t st);
    int window;
    // the accesses of step translated_step-1 as allocations of translated_step (translate_to_step)
    std::vector<int32_t> translated;   // -1: none
    int32_t translated_step = -1;
    int32_t entered_through = -1;   // the last kernel of that step whose accesses are marked protected
    // next use of each allocation as learnt from the previous step, -1 unknown
    std::vector<int32_t> learnt_next;
    std::vector<int32_t> last_seq;   // seq of its last access, -1
};

// The demand forecaster (forecast.cpp, docs/simulator.md "forecast"): live bytes per position
// of a step from all steps seen (median over the last kMaxSteps, with a trend), next uses
// learnt from earlier steps, and its own early-eviction choice (depth in the graph, time to
// next use, reload cost, compute load). Prefetches as periodic:8. Causal: it reads only what
// the kernels started so far recorded.
class ForecastPrefetcher final : public PeriodicPrefetcher {
public:
    ForecastPrefetcher(const Prepared& p, PrefetchTarget& e, int horizon_steps);
    void on_alloc(int32_t a) override;
    void on_access(int32_t s, int64_t j, int32_t a) override;
    void after_launch(int32_t s, int64_t t) override;
    int64_t early_demand(int32_t v, int32_t s) const override;
    void finish(Result& r) override;

    static constexpr int kMaxSteps = 32;      // steps the statistics look back over
    static constexpr int kPrefetchWindow = 8; // kernels (periodic's default)
    static constexpr int kLoadWindow = 32;    // kernels over which the compute load is measured

private:
    void swap_out_early(int32_t s, int64_t t) override;
    void observe(int32_t s);                 // kernel s started: depth, error, steps
    void close_step(int32_t st);             // step st is complete: its peak error
    void refit(int32_t st);                  // step st begins: fit on the steps before it
    double step_mean(int32_t step);          // its mean live bytes (not empty)
    bool steps_repeat(int32_t first, int32_t st);   // steps first .. st-1 alike
    void fit_levels(int32_t first, int32_t st, size_t len);
    std::vector<int64_t> predict(int32_t target_step) const;   // live bytes per position
    int32_t predicted_next(int32_t v, int32_t s) const;        // kNever, -1 unknown
    int64_t demand_until(int32_t nu, int32_t kernel) const;    // early_demand() of a next use
    void enter_kernel(int32_t kernel);       // on_access() sees this kernel's accesses from now on
    int32_t draw_candidates(int32_t kernel); // into kept; the farthest one's next use, -1 none
    double compute_load(int32_t s) const;
    struct ScoreBasis;                       // what score() reads that is the same for every candidate
    ScoreBasis score_basis(int32_t kernel) const;
    double score(const ScoreBasis& basis, int32_t alloc, int32_t nu) const;

    const Ctx& ctx;                            // the engine's view of each allocation
    int horizon;                               // steps ahead (forecast_horizon_error)
    int32_t cur_step = -1;                     // step of the last kernel seen
    // the model, refit at each step's end
    std::vector<int64_t> level;                // per position: median of detrended live bytes
    double trend = 0;                          // bytes per step
    std::vector<double> mean_of;               // per step: its mean live bytes, NaN until needed
    int32_t repeat_checked = 0;                // steps 1 .. this compared with the one before
    int32_t last_change = 0;                   // the last of those unlike the one before (or empty)
    std::vector<int64_t> pred_cur;             // predicted live bytes of the current step
    MaxTree pred_max;                          // range maxima of pred_cur
    int64_t pred_peak = INT64_MIN;
    std::vector<std::vector<int64_t>> ahead;   // [target step % horizon]: made horizon steps before
    std::vector<int32_t> ahead_step;           // target step of each slot, -1
    // next uses learnt from earlier steps, by access offset within a step: the kernel position
    // of the offset and the distance to the next use (-1, -1: none learnt)
    struct OffsetUse {
        int32_t pos = -1, dist = -1;
    };
    std::vector<OffsetUse> off_use;
    std::vector<int32_t> first_pos;            // by allocation rank: kernels from its step's start to its first use
    // per allocation, in one place: what the learning updates and the candidate scan reads
    struct Track {
        int32_t next_pred = -1;     // predicted next use, -1 unknown
        int32_t last_kernel = -1;   // kernel (seq) of its last access, -1 none
        int32_t last_off = -1;      // that access's offset among its step's accesses, -1 outside a step
        int32_t last_pos = 0;       // that kernel's position in its step
    };
    std::vector<Track> track;
    // the kernel whose accesses on_access() sees: its step, position and its step's first access
    int32_t acc_kernel = -1, acc_step = -1, acc_pos = 0;
    int64_t acc_base = 0;
    std::vector<int32_t> depth;                // per allocation: depth of its writer in its step
    std::vector<int32_t> depth_step;           // step of that depth
    int32_t depth_max_prev = 0, depth_max_cur = 0;
    double load_busy = 0;                      // kernel time over the last kLoadWindow kernels
    SampledSet live;                           // allocations allocated and not known freed
    XorshiftBlocks draws{SampledSet::kSeed};   // the random numbers of the candidate draws
    std::vector<uint32_t> drawn_in;            // per position in live.items: the last draw that took it
    uint32_t draw_count = 0;                   // draws so far
    std::vector<uint32_t> ranked_in;           // per allocation: the last ranking it was in
    uint32_t ranking = 0;                      // rankings so far
    std::vector<int32_t> cand;
    std::vector<std::pair<int32_t, int32_t>> kept;   // candidates and their predicted next use
    std::vector<std::pair<double, int32_t>> ranked;
    // error accounting
    double err_sum = 0, peak_err_sum = 0, hor_sum = 0;
    int64_t n = 0, peak_n = 0, hor_n = 0, step_actual_max = 0, evictions = 0;
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
    std::vector<int32_t> fired;   // the triggers due at this kernel, protected before any is prefetched
};

// An allocation of step `step`-1 as the allocation of step `step` that plays its part
// (periodic.cpp); -1 when there is none (yet).
int32_t translate_to_step(const Prepared& P, const PrefetchTarget& e, int32_t a_prev, int32_t step);

}  // namespace mhc::sim
