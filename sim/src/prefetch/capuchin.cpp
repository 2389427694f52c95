// prefetch capuchin: a prefetch trigger per access position of a step, learnt from step
// i-1 and moved earlier after each stall by the stall time (Capuchin's feedback).
#include "prefetchers.hpp"

#include <algorithm>

namespace mhc::sim {

// An access that stalled gets its prefetch trigger moved earlier by the stall time (in
// recorded kernel start times), for the next step.
void CapuchinPrefetcher::on_wait(int32_t s, int64_t j, int64_t stall) {
    int32_t st = P.step_of[s];
    if (st < 0) return;
    int32_t base = P.step_begin[st];
    size_t q = static_cast<size_t>(j - P.acc_begin[base]);
    if (q >= trig.size()) trig.resize(q + 1, 0);
    int32_t pos = s - base;
    int32_t old_pos = pos - trig[q];
    int32_t np = old_pos;
    while (np > 0 && P.kstart[base + old_pos] - P.kstart[base + np] < stall) --np;
    trig[q] = pos - np;
}

// At the start of step `step`: the triggers learnt so far, as (position, access of the
// previous step) sorted by position.
void CapuchinPrefetcher::plan_step(int32_t step) {
    plan.clear();
    plan_cursor = 0;
    int32_t prev = P.step_begin[step - 1], prev_end = P.step_begin[step];
    int64_t a0 = P.acc_begin[prev];
    for (int32_t q = prev; q < prev_end; ++q)
        for (int64_t j = P.acc_begin[q]; j < P.acc_begin[q + 1]; ++j) {
            size_t k = static_cast<size_t>(j - a0);
            if (k < trig.size() && trig[k] > 0) plan.push_back({std::max(q - prev - trig[k], 0), j});
        }
    std::stable_sort(plan.begin(), plan.end(), [](auto& x, auto& y) { return x.first < y.first; });
}

// Fires the triggers due at this position of the step (no early swap-out).
void CapuchinPrefetcher::after_launch(int32_t s, int64_t t) {
    eng.new_window();
    int32_t st = P.step_of[s];
    if (st < 1) return;   // nothing learnt yet
    int32_t pos = s - P.step_begin[st];
    if (s == P.step_begin[st]) plan_step(st);
    for (int64_t j = P.acc_begin[s]; j < P.acc_begin[s + 1]; ++j) eng.protect(P.acc_alloc[j]);
    // Every trigger due here is protected before the first of them is prefetched, so that one
    // prefetch never evicts what another of this round brings (protected one by one, a fired
    // allocation still resident could be the victim of an earlier one's prefetch).
    fired.clear();
    while (plan_cursor < plan.size() && plan[plan_cursor].first <= pos) {
        int32_t a = translate_to_step(P, eng, P.acc_alloc[plan[plan_cursor].second], st);
        ++plan_cursor;
        if (a >= 0) { eng.protect(a); fired.push_back(a); }
    }
    for (const int32_t alloc : fired) eng.prefetch(alloc, t);
}

}  // namespace mhc::sim
