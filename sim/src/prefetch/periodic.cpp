// prefetch periodic[:K]: no oracle. What step i does is learnt from step i-1 (the steps'
// kernels and allocations lined up by position and rank): prefetch the next K kernels'
// operands as step i-1 used them, and swap out early by step i-1's memory demand.
#include "prefetchers.hpp"

#include <algorithm>

namespace mhc::sim {

PeriodicPrefetcher::PeriodicPrefetcher(const Prepared& p, PrefetchTarget& e, int window_)
    : Prefetcher(p, e), window(window_) {
    watches_accesses = true;
    const size_t na = P.t->allocations.size();
    learnt_next.assign(na, -1);
    last_seq.assign(na, -1);
}

// An allocation of step `step`-1 seen in the learnt sequence, as the allocation of step
// `step` that plays its part: the one allocated at the same rank within its step, or the
// same allocation when it outlives steps. -1 when there is none (yet).
int32_t translate_to_step(const Prepared& P, const PrefetchTarget& eng, int32_t a_prev, int32_t step) {
    if (P.alloc_step[a_prev] == step - 1) {
        int64_t idx = P.step_allocs_begin[step] + P.alloc_ordinal[a_prev];
        if (idx >= P.step_allocs_begin[step + 1]) return -1;
        int32_t a = P.step_allocs[idx];
        return eng.residency(a) == Residency::NotYet ? -1 : a;
    }
    return eng.residency(a_prev) == Residency::Freed ? -1 : a_prev;
}

// The accesses of step st-1, each as the allocation of step st that plays its part (what
// translate_to_step() decides from the trace alone), built once per step: the windows read
// each access `window` times.
void PeriodicPrefetcher::translate_step(int32_t st) {
    translated_step = st;
    entered_through = -1;
    const int64_t j0 = P.acc_begin[P.step_begin[st - 1]], j1 = P.acc_begin[P.step_begin[st]];
    translated.resize(static_cast<size_t>(j1 - j0));
    for (int64_t j = j0; j < j1; ++j) {
        const int32_t a_prev = P.acc_alloc[j];
        int32_t& counterpart = translated[static_cast<size_t>(j - j0)];
        counterpart = a_prev;
        if (P.alloc_step[a_prev] == st - 1) {
            const int64_t idx = P.step_allocs_begin[st] + P.alloc_ordinal[a_prev];
            counterpart = idx < P.step_allocs_begin[st + 1] ? P.step_allocs[idx] : -1;
        }
    }
}

// The next `window` kernels of the previous step's sequence: protected, then prefetched.
// Protection matters only for resident allocations and is read only while this runs (by the
// prefetches and early swap-outs below), when a counterpart translate_to_step() would drop
// (not made yet, or freed) is not resident: so every counterpart is marked, once, when the
// window reaches it, for the kernels whose windows hold it; and only one on the host is
// prefetched.
void PeriodicPrefetcher::after_launch(int32_t s, int64_t t) {
    eng.slide_window(s);
    int32_t st = P.step_of[s];
    if (st < 1) return;   // nothing learnt yet
    if (st != translated_step) translate_step(st);
    int32_t pos = s - P.step_begin[st];
    int32_t prev = P.step_begin[st - 1], prev_end = P.step_begin[st];
    int32_t lo = prev + pos, hi = std::min(prev + pos + window, prev_end - 1);
    for (int64_t j = P.acc_begin[s]; j < P.acc_begin[s + 1]; ++j) eng.protect_through(P.acc_alloc[j], s);
    const int64_t j0 = P.acc_begin[prev];
    const int32_t step_last = P.step_begin[st + 1] - 1;
    for (int32_t q = std::max(lo, entered_through) + 1; q <= hi; ++q) {   // entering the window
        const int32_t through = std::min(P.step_begin[st] + (q - prev) - 1, step_last);
        for (int64_t j = P.acc_begin[q]; j < P.acc_begin[q + 1]; ++j) {
            const int32_t counterpart = translated[static_cast<size_t>(j - j0)];
            if (counterpart >= 0) eng.protect_through(counterpart, through);
        }
    }
    entered_through = std::max(entered_through, hi);
    // (a counterpart on the host is made and not freed: the one translate_to_step() keeps)
    const Residency* residency = eng.residencies();
    const int32_t* counterparts = translated.data();
    for (int64_t j = P.acc_begin[lo + 1]; j < P.acc_begin[hi + 1]; ++j) {
        const int32_t counterpart = counterparts[j - j0];
        if (counterpart >= 0 && residency[counterpart] == Residency::Host) eng.prefetch(counterpart, t);
    }
    if (prev + pos >= prev_end) return;   // past the previous step's end: no demand known
    swap_out_early(s, t);
}

// The next use of `a`, accessed by access j of kernel s, learnt from the previous step: the
// access at the same position and operand rank in step i-1 was next used d kernels later,
// so this one is predicted d kernels after s. -1: unknown (step 0, or the steps' kernels or
// operands do not line up).
void PeriodicPrefetcher::on_access(int32_t s, int64_t j, int32_t a) {
    last_seq[a] = s;
    learnt_next[a] = -1;
    int32_t st = P.step_of[s];
    if (st < 1) return;
    int32_t q = P.step_begin[st - 1] + (s - P.step_begin[st]);
    if (q >= P.step_begin[st] || P.acc_begin[q + 1] - P.acc_begin[q] != P.acc_begin[s + 1] - P.acc_begin[s]) return;
    int32_t nu = P.next_use[P.acc_begin[q] + (j - P.acc_begin[s])];
    learnt_next[a] = nu == kNever ? kNever : static_cast<int32_t>(std::min<int64_t>(kNever - 1, static_cast<int64_t>(s) + (nu - q)));
}

// A new allocation's first use, learnt from its counterpart in the previous step (same rank
// among the step's allocations): its first use shifted by the distance between the two
// steps' first kernels, or never.
void PeriodicPrefetcher::on_alloc(int32_t a) {
    learnt_next[a] = -1;
    int32_t st = P.alloc_step[a];
    if (st < 1) return;
    int64_t idx = P.step_allocs_begin[st - 1] + P.alloc_ordinal[a];
    if (idx >= P.step_allocs_begin[st]) return;
    int32_t f = P.first_use[P.step_allocs[idx]];
    learnt_next[a] = f == kNever ? kNever : f + (P.step_begin[st] - P.step_begin[st - 1]);
}

// The previous step's live bytes over the next (learnt next use - s - 1) positions,
// continuing from its first kernel when they run past its end, shifted by today's drift
// from the previous step (allocations that outlive steps). No knowledge of next uses beyond
// what was learnt.
int64_t PeriodicPrefetcher::early_demand(int32_t v, int32_t s) const {
    const int32_t st = P.step_of[s];
    const int32_t prev = P.step_begin[st - 1], prev_end = P.step_begin[st], pos = s - P.step_begin[st];
    int32_t nu = learnt_next[v];   // unknown (-1): not a candidate, unless...
    if (nu < 0 && last_seq[v] < prev && P.t->allocations.t_alloc[v] < P.kstart[prev])
        nu = kNever;   // ...it lived through the whole previous step unused: far
    int64_t len = nu < 0 ? 0 : nu == kNever ? INT64_MAX : static_cast<int64_t>(nu) - s - 1;
    int64_t rest = prev_end - 1 - (prev + pos);
    int64_t demand = INT64_MIN;
    if (len > 0) demand = P.live_max.max(static_cast<size_t>(prev + pos + 1),
                                         static_cast<size_t>(prev + pos + std::min(len, rest)));
    if (len > rest) demand = std::max(demand, P.live_max.max(static_cast<size_t>(prev),
                                      static_cast<size_t>(prev + std::min<int64_t>(len - rest, prev_end - prev) - 1)));
    if (demand != INT64_MIN) demand += eng.live_bytes() - P.live_at[prev + pos];
    return demand;
}

}  // namespace mhc::sim
