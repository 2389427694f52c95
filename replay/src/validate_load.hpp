#pragma once
// The load probe of a validation (validate_load.cpp): how busy the machine was around the
// replays, so that a verdict can say that measured times include other work.
#include <chrono>
#include <cstdint>

#include "mhc/replay/validate.hpp"

namespace mhc::replay::detail {

// Busy and total jiffies of all CPUs (/proc/stat), and this process's CPU seconds.
struct CpuSample {
    double busy = -1, total = -1, self_s = 0;
    std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};
CpuSample cpu_sample();
double load_average();   // the 1-minute load average, -1 when unknown
// This process's peak resident set so far in bytes (getrusage's ru_maxrss), -1 when unknown.
int64_t peak_resident_bytes();
// Its resident set now in bytes (/proc/self/statm), -1 when unknown.
int64_t resident_bytes();

// The process's peak memory with each page counted once. The kernel's resident set counts a page
// once per mapping, and the page pool maps some of its pages twice (PageMapper::aliased_host_bytes),
// so ru_maxrss alone overstates it by those. sample(aliased) at moments the aliases are known
// (after each phase and replay): the resident set then, less them; the high-water mark exactly
// while nothing was ever aliased; and at the end the high-water mark less the most aliased
// bytes seen. Each is memory the process held at once, so the largest is the peak (it can miss a
// moment between samples when the pool's aliases stood below their most, never count a page twice).
class ResidentPeak {
public:
    void sample(int64_t aliased_bytes);
    int64_t bytes() const;   // -1 when unknown
    int64_t most_aliased() const { return most_aliased_; }

private:
    int64_t peak_ = -1, most_aliased_ = 0;
};
// load.others_share from samples before and after the replays: the other processes' share of
// all cores meanwhile (left at -1 when /proc/stat could not be read).
void measure_others_share(Load& load, const CpuSample& before, const CpuSample& after);

}  // namespace mhc::replay::detail
