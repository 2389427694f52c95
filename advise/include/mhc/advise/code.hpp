#pragma once
// The code that applies a setting in a training script (docs/advise.md "The code"): the
// PyTorch, Hugging Face and DeepSpeed calls with their arguments (an offload: mhc_torch's
// saved-tensor hooks, the ones predicted), and the mhc_torch.apply one-liner that does the same
// (and is what --verify runs).
#include <string>

#include "mhc/advise/capture_info.hpp"
#include "mhc/advise/setting.hpp"

namespace mhc::advise {

// "checkpoint 12 of 32 blocks + optimizer state on the host + expandable segments"
std::string describe(const Setting& s, const CaptureInfo& info);

// Python lines (no trailing newline) for a script that has `model` and `optimizer`.
std::string code_for(const Setting& s, const CaptureInfo& info);

}  // namespace mhc::advise
