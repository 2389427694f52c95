// Training steps from the optimizer's step annotations (steps.hpp).
#include "steps.hpp"

#include <algorithm>
#include <map>

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

bool is_optimizer_zero_grad(std::string_view name) {
    constexpr std::string_view prefix = "Optimizer.zero_grad#", suffix = ".zero_grad";
    if (name.substr(0, prefix.size()) != prefix) return false;
    const std::string_view rest = name.substr(prefix.size(), name.find(',') - prefix.size());
    return rest.size() > suffix.size() && rest.substr(rest.size() - suffix.size()) == suffix;
}

bool is_loop_range(std::string_view name) {
    constexpr std::string_view loader = "enumerate(DataLoader)#";   // torch.utils.data's __next__
    return is_optimizer_zero_grad(name) || name.substr(0, loader.size()) == loader;
}

namespace {

struct OuterRange {
    std::string name;   // without what NVTX appends after a comma
    int64_t t_start, t_end;
    int64_t work;   // NamedSpan::work
    const std::vector<int64_t>* inputs;   // NamedSpan::inputs
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
        out.push_back(
            OuterRange{range->name.substr(0, range->name.find(',')), range->t_start, range->t_end, range->work,
                       &range->inputs});
    }
    return out;
}

// Whether values[k] for k >= first fall, by k mod period, into two sets of classes with every
// value of the lower set times `ratio` below every value of the upper: ranges that take turns (a
// GAN's discriminator and generator Adam steps) rather than one optimizer's noise. Each class needs
// 3 values at least.
bool takes_turns(const std::vector<int64_t>& values, size_t first, size_t period, double ratio) {
    std::vector<int64_t> low(period, INT64_MAX), high(period, INT64_MIN);
    std::vector<size_t> count(period, 0);
    for (size_t k = first; k < values.size(); ++k) {
        const size_t cls = k % period;
        low[cls] = std::min(low[cls], values[k]);
        high[cls] = std::max(high[cls], values[k]);
        ++count[cls];
    }
    if (std::any_of(count.begin(), count.end(), [](size_t seen) { return seen < 3; })) return false;
    std::vector<size_t> order(period);
    for (size_t cls = 0; cls < period; ++cls) order[cls] = cls;
    std::sort(order.begin(), order.end(), [&](size_t lhs, size_t rhs) { return low[lhs] < low[rhs]; });
    int64_t below = INT64_MIN;
    for (size_t cut = 1; cut < period; ++cut) {
        below = std::max(below, high[order[cut - 1]]);
        int64_t above = INT64_MAX;
        for (size_t at = cut; at < period; ++at) above = std::min(above, low[order[at]]);
        if (static_cast<double>(below) * ratio < static_cast<double>(above)) return true;
    }
    return false;
}

int64_t median(std::vector<int64_t> values) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[(values.size() - 1) / 2];
}

// Where the reader knows every range's work: whether each class of `period` (the first period left
// out, as for durations) runs the same median work, and that work; none where it is not known or
// differs.
std::optional<int64_t> same_work(const std::vector<const OuterRange*>& anchors, size_t period) {
    std::vector<std::vector<int64_t>> by_class(period);
    for (size_t k = 0; k < anchors.size(); ++k) {
        if (anchors[k]->work < 0) return std::nullopt;
        if (k >= period) by_class[k % period].push_back(anchors[k]->work);
    }
    const int64_t first = median(by_class[0]);
    if (first <= 0) return std::nullopt;   // nothing run (a fused optimizer allocates nothing): no signal
    for (const auto& values : by_class)
        if (values.empty() || median(values) != first) return std::nullopt;
    return first;
}

// Of two sorted id lists, the share of the shorter's ids the other holds.
double overlap(const std::vector<int64_t>& lhs, const std::vector<int64_t>& rhs) {
    size_t shared = 0;
    for (auto left = lhs.begin(), right = rhs.begin(); left != lhs.end() && right != rhs.end();) {
        if (*left < *right) ++left;
        else if (*right < *left) ++right;
        else ++shared, ++left, ++right;
    }
    return static_cast<double>(shared) / static_cast<double>(std::max<size_t>(1, std::min(lhs.size(), rhs.size())));
}

// Where every anchor's tensors are known: the period (1 to 4, the smallest) with which they step
// the same tensors: each range shares at least half of its tensors with the one `period` after it
// and under half with those between (each optimizer its own parameters; its state and gradients
// too where they live on). None where not known, too few ranges (2 of each class) or no such period.
std::optional<size_t> inputs_period(const std::vector<const OuterRange*>& anchors) {
    for (const OuterRange* range : anchors)
        if (range->inputs == nullptr || range->inputs->empty()) return std::nullopt;
    for (size_t period = 1; period <= 4 && anchors.size() >= 2 * period; ++period) {
        bool fits = true;
        for (size_t k = 0; fits && k + period < anchors.size(); ++k) {
            fits = overlap(*anchors[k]->inputs, *anchors[k + period]->inputs) >= 0.5;
            for (size_t between = 1; fits && between < period && k + between < anchors.size(); ++between)
                fits = overlap(*anchors[k]->inputs, *anchors[k + between]->inputs) < 0.5;
        }
        if (fits) return period;
    }
    return std::nullopt;
}

// The period (2 to 4, the smallest found; 1 if none) with which the anchor's ranges take turns:
// their durations (first period left out: an optimizer's first step builds its state) part by a
// factor of 1.5, or the gaps between them by 10 (stepping back to back, nothing between). Durations
// alone do not make a period where every class runs the same work (same_work): one optimizer
// stepping unevenly (said in uneven_period). A step ends after the class of ranges followed by the
// longest gaps (the next iteration's forward and backward), so the phase is the class after it.
void find_period(const std::vector<const OuterRange*>& anchors, OptimizerSteps& out) {
    std::vector<int64_t> durations, gaps;
    for (size_t k = 0; k < anchors.size(); ++k) {
        durations.push_back(anchors[k]->t_end - anchors[k]->t_start);
        if (k + 1 < anchors.size()) gaps.push_back(anchors[k + 1]->t_start - anchors[k]->t_end);
    }
    // The tensors, where known, decide (since 2026-12-05, fifth): two optimizers of one class
    // stepping the same work in the same time take turns by them alone; before, they were read as
    // one, each step half an iteration.
    const std::optional<size_t> by_inputs = inputs_period(anchors);
    if (by_inputs) out.by_inputs = true;
    out.inputs_known = std::all_of(anchors.begin(), anchors.end(), [](const OuterRange* range) {
        return range->inputs != nullptr && !range->inputs->empty();
    });
    for (size_t period = 2; period <= 4; ++period) {
        if (by_inputs && period != *by_inputs) continue;
        bool by_duration = takes_turns(durations, period, period, 1.5);
        if (by_inputs) by_duration = false;
        if (by_duration && !by_inputs) {
            if (const std::optional<int64_t> work = same_work(anchors, period)) {
                if (out.uneven_period == 0) out.uneven_period = static_cast<int32_t>(period), out.uneven_work = *work;
                by_duration = false;
            }
        }
        if (!by_inputs && !by_duration && !takes_turns(gaps, period, period, 10.0)) continue;
        out.period = static_cast<int32_t>(period);
        out.period_by = by_inputs ? "tensors" : by_duration ? "durations" : "gaps";
        std::vector<std::vector<int64_t>> by_class(period);
        for (size_t k = period; k < gaps.size(); ++k) by_class[k % period].push_back(gaps[k]);
        size_t last = 0;
        for (size_t cls = 1; cls < period; ++cls)
            if (median(by_class[cls]) > median(by_class[last])) last = cls;
        // Where tensors showed the period and no class is followed by longer gaps, the first range
        // begins a step (nothing says otherwise); durations and gaps keep the class after the first.
        bool alike = by_inputs.has_value();
        for (size_t cls = 1; cls < period; ++cls) alike &= median(by_class[cls]) == median(by_class[0]);
        out.phase = alike ? 0 : static_cast<int32_t>((last + 1) % period);
        return;
    }
}

// The ends of the steps: a step begins with each period-th range of the anchor (from its phase)
// and holds the ranges after it; others' ranges before the first anchor's are in step 0.
std::vector<int64_t> step_ends(const std::vector<OuterRange>& outer, const OptimizerSteps& found) {
    std::vector<int64_t> ends;
    int64_t index = 0;   // of the anchor's ranges
    for (const OuterRange& range : outer) {
        bool starts = false;
        if (range.name == found.anchor) {
            starts = index == 0 ? ends.empty() : index >= found.phase && (index - found.phase) % found.period == 0;
            ++index;
        }
        if (starts || ends.empty()) ends.push_back(range.t_end);
        else ends.back() = range.t_end;
    }
    return ends;
}

// How far before each later step's start a range of one name begins (the median), if one begins
// within the first 1/`part` of every later step; none otherwise. `starts` sorted.
std::optional<int64_t> leading_offset(const std::vector<int64_t>& starts, const std::vector<int64_t>& ends, int part) {
    std::vector<int64_t> offsets;
    for (size_t k = 1; k < ends.size(); ++k) {
        auto next = std::lower_bound(starts.begin(), starts.end(), ends[k - 1]);
        if (next == starts.end() || *next >= ends[k]) return std::nullopt;
        const int64_t offset = *next - ends[k - 1];
        if (static_cast<double>(offset) * part > static_cast<double>(ends[k] - ends[k - 1])) return std::nullopt;
        offsets.push_back(offset);
    }
    return median(offsets);
}

// Where step 0 begins: `t_first`, unless the loop's own ranges (zero_grad, the DataLoader's next
// batch) show where its body begins: ranges of one name begin within the first tenth of every
// later step (the loop fetches the batch or zeroes the gradients first, or zeroes them last in the
// step before, the same place) and one begins before the first optimizer step: step 0 then begins
// that far (the median) before the last of them. Of several such names, the latest such start.
// Where no name begins within the first tenth of every later step, within the first half (since
// 2026-12-05, later: a loop that moves its batch to the GPU before zeroing the gradients, param's
// linear model at 20 to 29% of each step, or zeroes them after the forward pass; before, step 0
// held the whole setup, 41 times the median step there).
//
// Where the loop range's thread is known (NamedSpan::thread_starts, thread_names) and the range is
// placed by the first-half rule, step 0 begins no
// later than the first of the ops and calls before that range that repeat, in order back from it,
// those between a later step's start and its first such range (the most that do over the later
// steps) (since 2026-12-05, fifth): a first iteration that runs the same head as the later ones
// before its zero_grad but slower (a first batch's transfer, a first forward's kernel selection)
// keeps it; by the time lead alone it began before step 0 and was in no step. Ops of another
// name end the match: the setup before, or a later step's lead that is the tail of the iteration
// before (a loss.item()), is not taken for the first iteration's head.
std::optional<int64_t> lead_by_ops(const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                                   const std::vector<int64_t>& thread, const std::vector<uint32_t>& names,
                                   int64_t first) {
    const size_t before = std::lower_bound(thread.begin(), thread.end(), first) - thread.begin();
    size_t most = 0;
    for (size_t k = 1; k < ends.size(); ++k) {
        auto next = std::lower_bound(starts.begin(), starts.end(), ends[k - 1]);
        if (next == starts.end()) break;
        const size_t from = std::lower_bound(thread.begin(), thread.end(), ends[k - 1]) - thread.begin();
        const size_t to = std::lower_bound(thread.begin(), thread.end(), *next) - thread.begin();
        size_t same = 0;
        while (same < to - from && same < before && names[to - 1 - same] == names[before - 1 - same]) ++same;
        most = std::max(most, same);
    }
    if (most == 0) return std::nullopt;
    return thread[before - most];
}

int64_t first_step_start(const std::vector<NamedSpan>& ranges, const std::vector<OuterRange>& outer,
                         const std::vector<int64_t>& ends, int64_t t_first, std::string& from) {
    std::map<std::string, std::vector<int64_t>> by_name;
    std::map<std::string, const NamedSpan*> threads;   // a range of each name whose thread is known
    for (const NamedSpan& range : ranges)
        if (is_loop_range(range.name)) {
            const std::string name = range.name.substr(0, range.name.find(','));
            by_name[name].push_back(range.t_start);
            if (range.thread_starts != nullptr && range.thread_names != nullptr) threads.emplace(name, &range);
        }
    if (ends.size() < 2) return t_first;
    for (auto& [name, starts] : by_name) std::sort(starts.begin(), starts.end());
    for (const int part : {10, 2}) {
        std::optional<int64_t> best;
        std::string best_name;
        for (const auto& [name, starts] : by_name) {
            const std::optional<int64_t> offset = leading_offset(starts, ends, part);
            auto after = std::upper_bound(starts.begin(), starts.end(), outer.front().t_start);
            if (!offset || after == starts.begin() || *(after - 1) < t_first) continue;
            int64_t begin = *(after - 1) - *offset;
            // The first-half rule only (a head of ops before the range); within the first tenth
            // the range begins the iteration, as before.
            if (auto thread = threads.find(name); part == 2 && thread != threads.end())
                if (const auto by_ops = lead_by_ops(starts, ends, *thread->second->thread_starts,
                                                    *thread->second->thread_names, *(after - 1)))
                    begin = std::min(begin, *by_ops);
            if (!best || begin > *best) best = begin, best_name = name;
        }
        if (!best) continue;
        if (*best <= t_first) return t_first;   // (t_first may be INT64_MIN: ids)
        from = best_name;
        return *best;
    }
    return t_first;
}

}   // namespace

OptimizerSteps optimizer_steps(const std::vector<NamedSpan>& ranges, int64_t t_first, const std::string& work_unit) {
    OptimizerSteps out;
    out.work_unit = work_unit;
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
    // after it; it ends where its last range ends. Where that one's ranges take turns (two of one
    // class), a step begins with every period-th.
    out.anchor = out.names[static_cast<size_t>(std::max_element(counts.begin(), counts.end()) - counts.begin())];
    std::vector<const OuterRange*> anchors;
    for (const OuterRange& range : outer)
        if (range.name == out.anchor) anchors.push_back(&range);
    find_period(anchors, out);
    const std::vector<int64_t> ends = step_ends(outer, out);
    int64_t begin = first_step_start(ranges, outer, ends, t_first, out.first_from);
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
    if (period > 1)
        out += ": a step per " + std::to_string(period) + " " + anchor + " ranges (their " + period_by + " take turns)";
    else if (names.size() > 1) out += ": a step per " + anchor + " with the others' after it";
    if (period > 1 && names.size() > 1) out += ", the others' after them";
    if (nested > 0) out += " (" + std::to_string(nested) + " inside another not counted)";
    if (period == 1 && uneven_period > 1)
        out += ": a step per " + anchor + " range (their durations take turns with a period of " +
               std::to_string(uneven_period) + " but each runs the same " + std::to_string(uneven_work) + " " +
               work_unit + ": one optimizer stepping unevenly)";
    if (!first_from.empty()) out += "; step 0 from the last " + first_from + " before the first";
    return out;
}

namespace {

// Where step 0 begins at the trace's start and lasts over 3 times the median later step: it holds
// what came before the loop's first iteration (loading the model, building the data) too.
std::string long_first_step(const std::vector<StepSpan>& steps, bool moved) {
    // An execution trace's step 0 begins at INT64_MIN (its node ids are no times: optimizer_steps'
    // t_first): no length to compare (t_end - INT64_MIN overflowed: UBSan, test_kineto_steps).
    if (moved || steps.size() < 3 || steps[0].t_start == INT64_MIN) return {};
    std::vector<int64_t> lengths;
    for (size_t k = 1; k < steps.size(); ++k) lengths.push_back(steps[k].t_end - steps[k].t_start);
    const int64_t typical = median(lengths), first = steps[0].t_end - steps[0].t_start;
    if (typical <= 0 || first <= 3 * typical) return {};
    return "step 0 of the optimizer's steps lasts " + std::to_string(first / typical) +
           " times the median step: it holds the trace's start before the loop's first iteration (setup) too, since "
           "nothing marks where that iteration began (no zero_grad or DataLoader range leading every step)";
}

}   // namespace

std::string OptimizerSteps::warning() const {
    std::string out;
    for (const std::string& part : {turns_warning(), uneven_warning(), long_first_step(steps, !first_from.empty())})
        if (!part.empty()) out += (out.empty() ? "" : "; ") + part;
    return out;
}

std::string OptimizerSteps::uneven_warning() const {
    if (period > 1 || uneven_period < 2) return {};
    return "steps taken from the optimizer-step ranges: " + anchor + "'s durations take turns with a period of " +
           std::to_string(uneven_period) + ", but every one of them runs the same " + std::to_string(uneven_work) +
           " " + work_unit + ", so they are read as one optimizer stepping unevenly, a step each; were they " +
           std::to_string(uneven_period) + " optimizers of one class stepping the same work in turns, the steps are " +
           std::to_string(uneven_period) + " times too short";
}

std::string OptimizerSteps::optimizers_said() const {
    if (steps.empty()) return {};
    const std::string count = period > 1 ? std::to_string(period) + " optimizers" : "one optimizer";
    if (by_inputs)
        return count + " of " + anchor + ": " +
               (period > 1 ? "its ranges take turns stepping " + std::to_string(period) + " sets of tensors"
                           : "every range steps the same tensors");
    if (period > 1) return count + " of " + anchor + " (their " + period_by + " take turns)";
    if (uneven_period > 1)
        return "one optimizer of " + anchor + ": its ranges' durations take turns, but each runs the same " +
               std::to_string(uneven_work) + " " + work_unit;
    return "one optimizer of " + anchor + " assumed: " +
           (inputs_known ? "its ranges' tensors show no period of 1 to 4 ranges (too few ranges: 2 a class at least, "
                           "or no set repeats)"
                         : "the trace records no tensors of its ranges") +
           ", and two optimizers of one class stepping the same "
           "work in the same time (two identical models, a GAN whose two networks are alike) would look the same; "
           "each step would then be half an iteration";
}

std::string OptimizerSteps::turns_warning() const {
    if (period > 1 && by_inputs) return {};   // each optimizer's own tensors show it (meta steps_optimizers)
    if (period > 1)
        return "steps taken from the optimizer-step ranges: " + anchor + "'s take turns with a period of " +
               std::to_string(period) + " (their " + period_by +
               ": several optimizers of one class, as a GAN's two Adam), so a step is " + std::to_string(period) +
               " of them; where one optimizer steps unevenly, the steps are " + std::to_string(period) +
               " times too long";
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

std::string joined_steps_said(int64_t skew) {
    return "; the ranges of one step begin up to " + std::to_string(skew) +
           " ns apart across processes: each marker spans them all (the first start to the last end), "
           "and a kernel is in the step its launch fell in among its own process's ranges";
}

bool LaunchedBeforeRecording::take(int64_t correlation, int64_t first_call, int32_t step_of_start) {
    if (correlation <= 0 || correlation >= first_call) return false;
    lowest_ = count_ == 0 ? correlation : std::min(lowest_, correlation);
    highest_ = std::max(highest_, correlation);
    ++count_;
    ++by_start_[step_of_start];
    return true;
}

void LaunchedBeforeRecording::say(Result& result, const std::string& key) const {
    if (count_ == 0) return;
    std::string steps;
    for (const auto& [step, count] : by_start_)
        if (step >= 0) steps += (steps.empty() ? "" : ", ") + std::to_string(step) + ": " + std::to_string(count);
    result.meta[key] = std::to_string(count_) + " kernels whose launch the file lacks, of correlation ids " +
                       std::to_string(lowest_) + " to " + std::to_string(highest_) +
                       ", below every call the file holds of their process: launched before recording began, "
                       "so in no step" +
                       (steps.empty() ? std::string() : " (their start fell in step " + steps + ")");
}

}   // namespace mhc::trace::import
