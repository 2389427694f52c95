#pragma once
// The answers `mhc advise` prints (docs/advise.md): the settings the planner ranks and, where the
// capture measured it, the model's own gradient checkpointing turned off; with their words, their
// code, and why nothing fits when no answer does.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mhc/advise/planner.hpp"

namespace mhc::advise {

struct Answer {
    Candidate candidate;
    bool hf_off = false;   // the model's own gradient checkpointing turned off: figures a capture measured
};

// The Hugging Face model's own gradient checkpointing turned off, as an answer: the step the
// capture took again without it (meta capture.without_hf_checkpointing), its time relative to the
// captured step's last (both the capture's estimates) applied to the baseline's. None when the
// capture has no such figures or no reserved bytes for them.
std::optional<Answer> hf_off_answer(const Base& base, const Prediction& baseline);

// The search's ranked candidates, fastest first, with hf_off_answer ranked among them where it fits
// `capacity` within `budget` (< 0: none); at most `top`.
std::vector<Answer> ranked_answers(const Advice& advice, const Base& base, int64_t capacity, double budget, int top);

// One given setting, predicted, its loss against `baseline`.
Answer predicted_answer(const Evaluator& ev, const Setting& setting, const Prediction& baseline);

// Why the search has no answer, in one line: the fastest setting that fits (then the budget is
// what it misses), else the one that reserves least.
std::string nothing_fits(const Advice& advice, const CaptureInfo& info, int64_t capacity, double budget);

// The answer in words (code.hpp's describe for a setting) and the code that applies it.
std::string describe(const Answer& answer, const CaptureInfo& info);
std::string code_for(const Answer& answer, const CaptureInfo& info);

// A loss as printed: "+2.5%".
std::string format_loss(double loss);

}  // namespace mhc::advise
