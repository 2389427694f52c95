#pragma once
// The run's memory timeline: the recorded span cut into buckets, each keeping the moment of
// its highest device bytes (and the host bytes then), so that a run of any length stores a
// fixed number of samples.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mhc/trace/runs.hpp"
#include "prepared.hpp"

namespace mhc::sim {

class MemorySamples {
public:
    MemorySamples(const Prepared& prep, int samples) : prepared(prep), buckets(static_cast<size_t>(samples)) {}
    // Device and host bytes after the event at `recorded` (shift: simulated minus recorded time).
    // Events come in time order, so the bucket is looked up only when `recorded` leaves the
    // current one's range [bucket_lo, bucket_hi).
    void sample(int64_t recorded, int64_t shift, int64_t device, int64_t host) {
        if (recorded < bucket_lo || recorded >= bucket_hi) find_bucket(recorded);
        Bucket& current = buckets[bucket];
        if (device > current.dev) { current.dev = device; current.t = recorded + shift; current.host = host; }
    }
    // The buckets that saw an event, in time order.
    void store(std::vector<trace::RunMemorySample>& memory) const;

private:
    void find_bucket(int64_t recorded);
    const Prepared& prepared;
    struct Bucket { int64_t t = -1, dev = -1, host = 0; };
    std::vector<Bucket> buckets;
    size_t bucket = 0;                                      // the current bucket and
    int64_t bucket_lo = INT64_MAX, bucket_hi = INT64_MIN;   // its recorded times [lo, hi)
};

}  // namespace mhc::sim
