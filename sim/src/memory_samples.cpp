// The run's memory timeline (memory_samples.hpp).
#include "memory_samples.hpp"

#include <algorithm>

namespace mhc::sim {

// Bucket b holds the recorded times r with floor((r - t_begin) * nb / (span + 1)) = b (clamped
// to 0 .. nb-1).
void MemorySamples::find_bucket(int64_t recorded) {
    const int64_t span = std::max<int64_t>(prepared.t_end - prepared.t_begin, 1);
    const int64_t nb = static_cast<int64_t>(buckets.size());
    // in 128 bits: (r - t_begin) * nb passes 2^63 where the span is near the trace's 2^62 ns limit
    // (it wrapped: a trace spanning 2^61 ns with 64 samples kept one bucket)
    __extension__ using I128 = __int128;
    const int64_t index = static_cast<int64_t>(
        std::clamp<I128>(static_cast<I128>(recorded - prepared.t_begin) * nb / (span + 1), 0, nb - 1));
    bucket = static_cast<size_t>(index);
    bucket_lo = bucket_hi = recorded;   // a span too long for the bounds below: divide each time
    if (span >= INT64_MAX / (nb + 1) || recorded < prepared.t_begin) return;
    // x = r - t_begin lies in bucket b iff b * (span+1) <= x * nb < (b+1) * (span+1)
    auto first_of = [&](int64_t of) { return prepared.t_begin + (of * (span + 1) + nb - 1) / nb; };
    bucket_lo = index == 0 ? INT64_MIN : first_of(index);
    bucket_hi = index == nb - 1 ? INT64_MAX : first_of(index + 1);
}

void MemorySamples::store(std::vector<trace::RunMemorySample>& memory) const {
    for (const Bucket& kept : buckets)
        if (kept.dev >= 0) memory.push_back({kept.t, kept.dev, kept.host});
}

}  // namespace mhc::sim
