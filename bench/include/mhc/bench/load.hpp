#pragma once
// What the benchmarks print beside their figures on a shared machine: the load average, and the
// calling thread's CPU time (on a busy machine wall time measures the neighbours too).
#include <time.h>

#include <fstream>
#include <string>

namespace mhc::bench {

// "1.02 0.98 0.75": /proc/loadavg's 1, 5 and 15-minute averages.
inline std::string loadavg() {
    std::ifstream file("/proc/loadavg");
    std::string one, five, fifteen;
    file >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

inline double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace mhc::bench
