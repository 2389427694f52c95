// Training steps from the optimizer's step annotations (steps.hpp).
#include "steps.hpp"

#include <algorithm>

namespace mhc::trace::import {

std::optional<int32_t> profiler_step_number(std::string_view name) {
    constexpr std::string_view prefix = "ProfilerStep#";
    if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
    size_t at = prefix.size();
    int64_t number = 0;
    while (at < name.size() && name[at] >= '0' && name[at] <= '9' && number <= INT32_MAX)
        number = number * 10 + (name[at++] - '0');
    if (at == prefix.size() || number > INT32_MAX || (at < name.size() && name[at] != ',')) return std::nullopt;
    return static_cast<int32_t>(number);
}

bool is_optimizer_step(std::string_view name) {
    constexpr std::string_view prefix = "Optimizer.step#";
    if (name.substr(0, prefix.size()) != prefix) return false;
    const std::string_view rest = name.substr(prefix.size(), name.find(',') - prefix.size());
    return rest.size() > 5 && rest.substr(rest.size() - 5) == ".step";
}

OptimizerSteps optimizer_steps(const std::vector<NamedSpan>& ranges, int64_t t_first) {
    std::vector<const NamedSpan*> found;
    for (const NamedSpan& range : ranges)
        if (is_optimizer_step(range.name)) found.push_back(&range);
    std::stable_sort(found.begin(), found.end(), [](const NamedSpan* lhs, const NamedSpan* rhs) {
        return lhs->t_start != rhs->t_start ? lhs->t_start < rhs->t_start : lhs->t_end > rhs->t_end;
    });
    OptimizerSteps out;
    int64_t begin = t_first;
    for (const NamedSpan* range : found) {
        if (!out.steps.empty() && range->t_start < out.steps.back().t_end) {   // inside the one before
            ++out.nested;
            continue;
        }
        const std::string name = range->name.substr(0, range->name.find(','));
        if (std::find(out.names.begin(), out.names.end(), name) == out.names.end()) out.names.push_back(name);
        const int64_t end = std::max(range->t_end, begin);
        out.steps.push_back(StepSpan{static_cast<int32_t>(out.steps.size()), std::min(begin, end), end});
        begin = end;
    }
    return out;
}

std::string OptimizerSteps::said() const {
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    std::string out = list + " ranges (no ProfilerStep#N in the trace)";
    if (nested > 0) out += " (" + std::to_string(nested) + " inside another not counted)";
    return out;
}

std::string OptimizerSteps::warning() const {
    if (names.size() < 2) return {};
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    return "steps taken from the optimizer-step ranges of " + std::to_string(names.size()) + " optimizers (" + list +
           "): where a training step runs each of them, it is counted once per optimizer";
}

int32_t step_at(const std::vector<StepSpan>& steps, int64_t time) {
    auto after = std::upper_bound(steps.begin(), steps.end(), time,
                                  [](int64_t value, const StepSpan& step) { return value < step.t_start; });
    if (after == steps.begin()) return -1;
    const StepSpan& step = *(after - 1);
    return time <= step.t_end ? step.step : -1;
}

}   // namespace mhc::trace::import
