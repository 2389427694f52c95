// The answers mhc advise prints (answers.hpp).
#include "mhc/advise/answers.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "mhc/advise/code.hpp"
#include "mhc/common/units.hpp"

namespace mhc::advise {
namespace {

// The last step's span in the trace: from its first kernel's start to its last kernel's end.
int64_t last_step_span(const trace::TraceData& trace) {
    const auto& kernel_rows = trace.kernels;
    int64_t last = INT64_MIN, begin = INT64_MAX, end = INT64_MIN;
    for (size_t i = 0; i < kernel_rows.size(); ++i) last = std::max<int64_t>(last, kernel_rows.step[i]);
    for (size_t i = 0; i < kernel_rows.size(); ++i)
        if (kernel_rows.step[i] == last)
            begin = std::min(begin, kernel_rows.t_start[i]), end = std::max(end, kernel_rows.t_end[i]);
    return end > begin ? end - begin : 0;
}

// --budget as the user wrote it (0.03 -> "3%"), as `mhc sweep` says its budget.
std::string budget_text(double budget) {
    char text[32];
    std::snprintf(text, sizeof text, "%g%%", budget * 100);
    return text;
}

}  // namespace

std::optional<Answer> hf_off_answer(const Base& base, const Prediction& baseline) {
    const CaptureInfo::HfOff& figures = base.info.hf_off;
    if (figures.peak < 0 || figures.reserved < 0 || figures.step_ns <= 0 || baseline.step_time <= 0)
        return std::nullopt;
    const int64_t with = figures.with_step_ns > 0 ? figures.with_step_ns : last_step_span(*base.trace);
    if (with <= 0) return std::nullopt;
    Answer answer;
    answer.hf_off = true;
    Candidate& off = answer.candidate;
    off.prediction = baseline;
    off.prediction.memory.peak = figures.peak;
    off.prediction.memory.reserved = figures.reserved;
    off.prediction.host_peak = figures.host_peak;
    off.loss = static_cast<double>(figures.step_ns) / static_cast<double>(with) - 1;
    off.prediction.step_time = std::llround(static_cast<double>(baseline.step_time) * (1 + off.loss));
    return answer;
}

std::vector<Answer> ranked_answers(const Advice& advice, const Base& base, int64_t capacity, double budget, int top) {
    std::vector<Answer> answers;
    for (const Candidate& candidate : advice.ranked) answers.push_back(Answer{candidate, false});
    std::optional<Answer> off = hf_off_answer(base, advice.baseline);
    if (!off) return answers;
    Candidate& off_candidate = off->candidate;
    if (off_candidate.prediction.memory.reserved > capacity || (budget >= 0 && off_candidate.loss > budget))
        return answers;
    off_candidate.fits = off_candidate.within_budget = true;   // a capture's figures: no stream to run at the capacity
    off_candidate.prediction.memory.capacity = capacity;
    off_candidate.prediction.memory.reserved_at = off_candidate.prediction.memory.reserved;
    auto at = std::find_if(answers.begin(), answers.end(), [&](const Answer& answer) {
        return time_at_capacity(answer.candidate.prediction) > off_candidate.prediction.step_time;
    });
    answers.insert(at, *off);
    if (answers.size() > static_cast<size_t>(top)) answers.resize(static_cast<size_t>(top));
    return answers;
}

Answer predicted_answer(const Evaluator& ev, const Setting& setting, const Prediction& baseline) {
    Answer answer;
    Candidate& given = answer.candidate;
    given.setting = setting;
    given.prediction = ev.predict(setting);
    given.loss = static_cast<double>(given.prediction.step_time) / static_cast<double>(baseline.step_time) - 1;
    return answer;
}

std::string nothing_fits(const Advice& advice, const CaptureInfo& info, int64_t capacity, double budget) {
    const Candidate* fastest = nullptr;
    for (const Candidate& candidate : advice.all)
        if (candidate.fits && (!fastest || candidate.loss < fastest->loss)) fastest = &candidate;
    if (fastest)
        return "nothing fits " + format_bytes(capacity) + " within the loss budget of " + budget_text(budget) +
               ": the closest is " + describe(fastest->setting, info) + " at " + format_loss(fastest->loss) +
               " (estimated)";
    const Candidate* smallest = nullptr;
    for (const Candidate& candidate : advice.all)
        if (!smallest || candidate.prediction.memory.reserved < smallest->prediction.memory.reserved)
            smallest = &candidate;
    return "nothing fits " + format_bytes(capacity) + ": the closest is " +
           (smallest
                ? describe(smallest->setting, info) + ", reserved " + format_bytes(smallest->prediction.memory.reserved)
                : std::string("the baseline, reserved ") + format_bytes(advice.baseline.memory.reserved));
}

std::string describe(const Answer& answer, const CaptureInfo& info) {
    return answer.hf_off ? "the model's own gradient checkpointing off (captured)"
                         : describe(answer.candidate.setting, info);
}

std::string code_for(const Answer& answer, const CaptureInfo& info) {
    if (!answer.hf_off) return code_for(answer.candidate.setting, info);
    const std::string enable = info.hf_checkpoint_call.empty() ? "gradient_checkpointing_enable"
                                                               : info.hf_checkpoint_call;
    std::string off = enable;
    off.replace(off.rfind("_enable"), 7, "_disable");
    return "model." + off + "()   # or leave out the model." + enable +
           "(...) call; the figures are the step captured without it";
}

std::string format_loss(double loss) {
    char text[32];
    std::snprintf(text, sizeof text, "%+.2f%%", 100 * loss);
    return text;
}

}  // namespace mhc::advise
