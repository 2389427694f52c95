#pragma once
// Kernel times from a measured step (docs/advise.md, "A measured step time"). A capture times its
// kernels by a roofline of the GPU's datasheet, which a real step rarely reaches (an H200 ran
// GPT-2 small's step in 60.0 ms where the roofline said 30.6). A user who measured the step
// without any setting gives that time: every compute kernel's time is scaled by one factor so
// that the baseline's step takes it, and what settings add (recomputed kernels, casts, optimizer
// kernels) is scaled alike. Copies (the link model), collectives (the ring model) and host work
// keep their own models: against slower compute, a setting's transfers hide better.
#include <cstdint>

#include "mhc/advise/plan.hpp"
#include "mhc/sim/link.hpp"

namespace mhc::advise {

struct Calibration {
    double factor = 1;            // measured compute time / the roofline's
    int64_t estimated_step = 0;   // ns: the baseline's last step on the roofline
    int64_t measured_step = 0;    // ns: as given
    int64_t calibrated_step = 0;  // ns: the baseline's last step after scaling (measured, within 0.1%)
};

// The baseline's last captured step (from the end of the step before it; the whole capture when it
// holds one step), timed as Evaluator::predict times it.
int64_t last_step_time(const Base& base, const sim::LinkModel& link);

// Scales base's compute kernels so that its last step takes `measured_step` ns. Throws mhc::Error
// (bad input) when no factor gets there: the copies and collectives the compute stream waits for
// take longer than the measured step, or the factor would leave [1/100, 100].
Calibration calibrate_compute(Base& base, const sim::LinkModel& link, int64_t measured_step);

}  // namespace mhc::advise
