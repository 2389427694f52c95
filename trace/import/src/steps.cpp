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

namespace {

struct OuterRange {
    std::string name;   // without what NVTX appends after a comma
    int64_t t_start, t_end;
};

// The optimizer-step ranges in time order, those beginning inside the one before left out.
std::vector<OuterRange> outermost_ranges(const std::vector<NamedSpan>& ranges, int64_t& nested) {
    std::vector<const NamedSpan*> found;
    for (const NamedSpan& range : ranges)
        if (is_optimizer_step(range.name)) found.push_back(&range);
    std::stable_sort(found.begin(), found.end(), [](const NamedSpan* lhs, const NamedSpan* rhs) {
        return lhs->t_start != rhs->t_start ? lhs->t_start < rhs->t_start : lhs->t_end > rhs->t_end;
    });
    std::vector<OuterRange> out;
    for (const NamedSpan* range : found) {
        if (!out.empty() && range->t_start < out.back().t_end) {   // inside the one before
            ++nested;
            continue;
        }
        out.push_back(OuterRange{range->name.substr(0, range->name.find(',')), range->t_start, range->t_end});
    }
    return out;
}

}   // namespace

OptimizerSteps optimizer_steps(const std::vector<NamedSpan>& ranges, int64_t t_first) {
    OptimizerSteps out;
    const std::vector<OuterRange> outer = outermost_ranges(ranges, out.nested);
    std::vector<int64_t> counts;
    for (const OuterRange& range : outer) {
        auto at = std::find(out.names.begin(), out.names.end(), range.name);
        if (at == out.names.end()) {
            out.names.push_back(range.name);
            counts.push_back(0);
            at = out.names.end() - 1;
        }
        ++counts[static_cast<size_t>(at - out.names.begin())];
    }
    if (outer.empty()) return out;
    // Several optimizers (Shampoo then an EMA's, a GAN's two): a step begins with each range of
    // the one that steps most often (the first seen among equals) and holds the others' ranges
    // after it; it ends where its last range ends.
    out.anchor = out.names[static_cast<size_t>(std::max_element(counts.begin(), counts.end()) - counts.begin())];
    std::vector<int64_t> ends;   // others' ranges before the first anchor's are in step 0
    bool anchored = false;
    for (const OuterRange& range : outer) {
        const bool starts = range.name == out.anchor && (anchored || ends.empty());
        anchored = anchored || range.name == out.anchor;
        if (starts) ends.push_back(range.t_end);
        else if (ends.empty()) ends.push_back(range.t_end);
        else ends.back() = range.t_end;
    }
    int64_t begin = t_first;
    for (int64_t end_time : ends) {
        const int64_t end = std::max(end_time, begin);
        out.steps.push_back(StepSpan{static_cast<int32_t>(out.steps.size()), begin, end});
        begin = end;
    }
    return out;
}

std::string OptimizerSteps::said() const {
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    std::string out = list + " ranges (no ProfilerStep#N in the trace)";
    if (names.size() > 1) out += ": a step per " + anchor + " with the others' after it";
    if (nested > 0) out += " (" + std::to_string(nested) + " inside another not counted)";
    return out;
}

std::string OptimizerSteps::warning() const {
    if (names.size() < 2) return {};
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    return "steps taken from the optimizer-step ranges of " + std::to_string(names.size()) + " optimizers (" + list +
           "): one step per " + anchor +
           " range (the most frequent; the first seen among equals), the others' ranges in the step they follow; where "
           "the optimizers do not "
           "step together, the steps are cut at that optimizer's";
}

int32_t step_at(const std::vector<StepSpan>& steps, int64_t time) {
    auto after = std::upper_bound(steps.begin(), steps.end(), time,
                                  [](int64_t value, const StepSpan& step) { return value < step.t_start; });
    if (after == steps.begin()) return -1;
    const StepSpan& step = *(after - 1);
    return time <= step.t_end ? step.step : -1;
}

}   // namespace mhc::trace::import
