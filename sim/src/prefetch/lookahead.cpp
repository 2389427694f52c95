// prefetch lookahead:K, the oracle: swap in the operands of the next K kernels, and swap out
// early what the recorded future says will not fit (docs/simulator.md rules 9 and 10).
#include "prefetchers.hpp"

#include <algorithm>

namespace mhc::sim {

void LookaheadPrefetcher::after_launch(int32_t s, int64_t t) {
    const int32_t n = static_cast<int32_t>(P.korder.size());
    int32_t last = std::min<int64_t>(n - 1, static_cast<int64_t>(s) + window);
    // the window s .. last: the kernels it newly reaches mark their operands
    eng.slide_window(s);
    for (int32_t q = std::max(marked_through + 1, s); q <= last; ++q)
        for (int64_t j = P.acc_begin[q]; j < P.acc_begin[q + 1]; ++j) eng.protect_through(P.acc_alloc[j], q);
    marked_through = std::max(marked_through, last);
    // The next kernels' operands on the host, through local pointers (prefetch() is a call).
    // Only an allocation off the GPU (on the host, or on its way there and landing during the
    // loop) can be on the host here: what the loop evicts to make room is outside the window,
    // which is protected. So the loop starts at the first kernel that uses one, and the same
    // prefetches happen in the same order as over the whole window.
    const int32_t first = std::max(s + 1, eng.first_off_gpu_use());
    if (first <= last) {
        const Residency* residency = eng.residencies();
        const int32_t* operand = P.acc_alloc.data();
        for (int64_t j = P.acc_begin[first], end = P.acc_begin[last + 1]; j < end; ++j)
            if (residency[operand[j]] == Residency::Host) eng.prefetch(operand[j], t);
    }
    eng.early_swap_out(s, t, *this);
}

// Belady's MIN done ahead of time: the recorded live bytes over kernels s+1 .. e, which run
// while v would be away and still allocated (until its next use or its free).
int64_t LookaheadPrefetcher::early_demand(int32_t v, int32_t s) const {
    const int32_t n = static_cast<int32_t>(P.korder.size());
    int32_t nu = eng.context().next_of[v];
    int32_t e = nu == kNever ? n - 1 : nu - 1;
    int64_t tf = P.t->allocations.t_free[v];
    if (tf != trace::kNoTime)
        e = std::min<int32_t>(e, static_cast<int32_t>(std::lower_bound(P.kstart.begin(), P.kstart.end(), tf) -
                                                       P.kstart.begin()) - 1);
    return e > s ? P.live_max.max(static_cast<size_t>(s) + 1, static_cast<size_t>(e)) : INT64_MIN;
}

}  // namespace mhc::sim
