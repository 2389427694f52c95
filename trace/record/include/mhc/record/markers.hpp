#pragma once
// NVTX range names -> marker kinds: "step" anywhere in the name (case-insensitive, which
// covers PyTorch's "ProfilerStep#12") is a training step, "layer" a layer, anything else a
// plain range. The index is the last number in the name.
#include <cstdint>
#include <string_view>

#include "mhc/trace/model.hpp"

namespace mhc::record {

struct MarkerClass {
    trace::MarkerKind kind = trace::MarkerKind::Range;
    int32_t index = -1;
};

// `steps_seen` numbers steps whose name carries no number (0, 1, 2, ...).
MarkerClass classify_marker(std::string_view name, int32_t steps_seen);

// The last run of decimal digits in `name` (at most 9 digits kept), or -1.
int32_t last_number(std::string_view name);

}  // namespace mhc::record
