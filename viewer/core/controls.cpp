#include "mhc/viewer/controls.hpp"

#include <algorithm>
#include <iterator>

#include "mhc/common/units.hpp"

namespace mhc::viewer {

StepControl step_control(const std::vector<StepSpan>& steps) {
    StepControl control;
    if (steps.empty()) {
        control.why = "no steps in this trace: it has no step markers and its kernels carry no step numbers";
        return control;
    }
    control.enabled = true;
    control.first = steps.front().step;
    control.last = steps.back().step;
    return control;
}

int32_t snap_step(const std::vector<StepSpan>& steps, int32_t value, int32_t previous) {
    if (steps.empty()) return value;
    auto by_step = [](const StepSpan& span, int32_t step) { return span.step < step; };
    if (value <= steps.front().step) return steps.front().step;
    if (value >= steps.back().step) return steps.back().step;
    auto it = std::lower_bound(steps.begin(), steps.end(), value, by_step);   // first step >= value
    if (it->step == value || value > previous) return it->step;
    return std::prev(it)->step;   // moved down: the nearest step below
}

std::string steps_origin(const ViewTrace& view) {
    if (view.steps_from.empty()) return {};
    return "steps from " + view.steps_from + ": step N ends where the N-th optimizer step ends";
}

std::vector<DeviceChoice> device_choices(const std::vector<DeviceMemory>& devices) {
    std::vector<DeviceChoice> out;
    if (devices.size() < 2) return out;
    for (const DeviceMemory& memory : devices)
        out.push_back({memory.device, device_name(memory.device) + " (peak " + format_bytes(memory.peak_bytes) + ")"});
    return out;
}

}   // namespace mhc::viewer
