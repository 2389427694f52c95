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
// load.others_share from samples before and after the replays: the other processes' share of
// all cores meanwhile (left at -1 when /proc/stat could not be read).
void measure_others_share(Load& load, const CpuSample& before, const CpuSample& after);

}  // namespace mhc::replay::detail
