#pragma once
// A run's clock: where a recorded time falls in a simulated run whose kernels moved (stalls,
// recomputations). Only kernels have simulated times (run_kernels); markers and copies are
// placed by the kernels around them:
//   map(t) = t + shift(k), shift(k) = run start - recorded start of kernel k, where k is the
//   kernel with the latest recorded start <= t (ties: the largest shift); before the first
//   kernel, and with no kernels, map(t) = t.
// So a marker that starts with a kernel starts with it in the run, a marker between kernels
// keeps its distance to the kernel before it, and a step that ends after its last kernel
// ends that far after the kernel's run time. Kernels a run never reached (OOM) do not count.
#include <cstdint>
#include <vector>

#include "mhc/viewer/lane.hpp"

namespace mhc::viewer {

class RunClock {
public:
    // One kernel the run reached: its recorded and simulated start.
    void add(int64_t recorded_start, int64_t run_start);
    void finish();   // call once after the last add
    bool empty() const { return start_.empty(); }
    int64_t map(int64_t recorded) const;
    // The lane's items with both ends mapped (an end never before its start), finished.
    Lane map_lane(const Lane& recorded) const;

private:
    std::vector<int64_t> start_, shift_;   // by recorded start, only where the shift changes
    std::vector<std::pair<int64_t, int64_t>> pending_;
};

}  // namespace mhc::viewer
