#pragma once
// Verification: the step captured again with a setting applied (mhc-torch capture --recipe
// --setting, through mhc_torch.apply, on fake tensors) against the simulator's prediction of
// that setting from the baseline capture.
#include <string>
#include <vector>

#include "mhc/advise/evaluate.hpp"
#include "mhc/advise/setting.hpp"

namespace mhc::advise {

// How to run mhc-torch: $MHC_TORCH (a command line, split at spaces), else the repository's
// .venv/bin/mhc-torch beside this executable's build or install tree, else mhc-torch on PATH.
std::vector<std::string> mhc_torch_command();

struct Captured {
    Memory memory;
    int64_t host_peak = 0;
    double seconds = 0;   // wall time of the capture
};

// The capture.recipe --verify runs: the trace's own when it names a preset (then `model` must be
// empty); when it names a model file (Python, which the capture runs), `model` must be given and
// takes its place (docs/advise.md, "Verification"). Throws mhc::Error, naming the file the
// recipe names, otherwise.
std::string recipe_to_run(const std::string& trace_path, const std::map<std::string, std::string>& meta,
                          const std::string& model);
// Captures `recipe` (the baseline's meta capture.recipe) with `setting` applied into `out` and
// measures it (measure(), with the setting's allocator settings; `capacity` > 0: also whether the
// captured stream of allocations runs at that capacity, by the same model as the prediction).
// Throws mhc::Error naming the trace when it has no recipe, and with mhc-torch's own last line
// when the capture fails.
Captured capture_with(const std::string& trace_path, const std::map<std::string, std::string>& meta,
                      const Setting& setting, const std::string& out, int64_t capacity = 0);

// |captured - predicted| / captured, 0 when both are 0.
double relative_error(int64_t predicted, int64_t captured);

}  // namespace mhc::advise
