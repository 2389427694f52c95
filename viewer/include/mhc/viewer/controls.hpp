#pragma once
// The toolbar's controls whose state depends on the trace, without drawing: the step field and
// its Go button, the memory device picker. The window draws what these say (app/widgets.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

// The step field: on when the trace has steps, starting at the first one (steps may start
// anywhere: a recording begun at step 12 has no step 0), and why it is off otherwise (the field
// read 0 and Go said "no step 0 in this trace").
struct StepControl {
    bool enabled = false;
    int32_t first = 0, last = 0;   // the trace's first and last step
    std::string why;               // when off: the tooltip saying why
};
// `steps` sorted by step (ViewTrace::steps).
StepControl step_control(const std::vector<StepSpan>& steps);
// The field's value after the user moved it from `previous` to `value`: a step the trace has, the
// nearest one in the direction moved (steps 0, 2, 4: from 2, + gives 4, not the missing 3), within
// [first, last]. `previous` for a value typed in: the value shown before.
int32_t snap_step(const std::vector<StepSpan>& steps, int32_t value, int32_t previous);

// Where the trace's steps come from when the importer took them from the optimizer's step ranges
// (meta steps_from; the step field's tooltip and the Steps tab say it); "" otherwise.
std::string steps_origin(const ViewTrace& view);

// The memory device picker: one entry per device with allocations ("GPU 0 (peak 305.18 MiB)"),
// shown only when there are two or more.
struct DeviceChoice {
    int32_t device = 0;
    std::string label;
};
std::vector<DeviceChoice> device_choices(const std::vector<DeviceMemory>& devices);

}   // namespace mhc::viewer
