#include "mhc/viewer/controls.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>

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

std::vector<StepSpan> optimizer_steps(const ViewTrace& view, std::string& name) {
    static constexpr std::string_view kPrefix = "Optimizer.step#";
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const Lane& lane : view.marker_lanes) {
        if (lane.stream != static_cast<int64_t>(trace::MarkerKind::Range)) continue;
        for (size_t i = 0; i < lane.size(); ++i) {
            const std::string& text = view.str(lane.key[i]);
            if (text.compare(0, kPrefix.size(), kPrefix) != 0) continue;
            if (name.empty()) name = text;
            ranges.emplace_back(lane.t_start[i], lane.t_end[i]);
        }
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<StepSpan> steps;
    int64_t end = INT64_MIN;   // of the last range counted (nested ones extend it)
    for (const auto& [start, stop] : ranges) {
        if (!steps.empty() && start < end) {   // inside or over the one before: the same step
            end = std::max(end, stop);
            steps.back().t1 = end;
            continue;
        }
        const int64_t begin = steps.empty() ? view.t_begin : steps.back().t1;
        steps.push_back({static_cast<int32_t>(steps.size()), begin, stop});
        end = stop;
    }
    return steps;
}

std::string steps_origin(const ViewTrace& view) {
    if (view.steps_from.empty()) return {};
    return "steps from the optimizer's ranges (" + view.steps_from +
           "): the trace has no step markers; step N ends where its N-th optimizer step ends";
}

std::vector<DeviceChoice> device_choices(const std::vector<DeviceMemory>& devices) {
    std::vector<DeviceChoice> out;
    if (devices.size() < 2) return out;
    for (const DeviceMemory& memory : devices)
        out.push_back({memory.device, device_name(memory.device) + " (peak " + format_bytes(memory.peak_bytes) + ")"});
    return out;
}

}   // namespace mhc::viewer
