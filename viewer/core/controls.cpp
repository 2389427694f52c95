#include "mhc/viewer/controls.hpp"

#include <algorithm>
#include <iterator>

#include "mhc/common/units.hpp"

namespace mhc::viewer {

StepControl step_control(const std::vector<StepSpan>& steps) {
    StepControl c;
    if (steps.empty()) {
        c.why = "no steps in this trace: it has no step markers and its kernels carry no step numbers";
        return c;
    }
    c.enabled = true;
    c.first = steps.front().step;
    c.last = steps.back().step;
    return c;
}

int32_t snap_step(const std::vector<StepSpan>& steps, int32_t value, int32_t previous) {
    if (steps.empty()) return value;
    auto by_step = [](const StepSpan& s, int32_t v) { return s.step < v; };
    if (value <= steps.front().step) return steps.front().step;
    if (value >= steps.back().step) return steps.back().step;
    auto it = std::lower_bound(steps.begin(), steps.end(), value, by_step);   // first step >= value
    if (it->step == value || value > previous) return it->step;
    return std::prev(it)->step;   // moved down: the nearest step below
}

std::vector<DeviceChoice> device_choices(const std::vector<DeviceMemory>& devices) {
    std::vector<DeviceChoice> out;
    if (devices.size() < 2) return out;
    for (const DeviceMemory& d : devices)
        out.push_back({d.device, device_name(d.device) + " (peak " + format_bytes(d.peak_bytes) + ")"});
    return out;
}

}   // namespace mhc::viewer
