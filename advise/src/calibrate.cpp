// Kernel times scaled to a measured step (calibrate.hpp).
#include "mhc/advise/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "mhc/advise/comm.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"

namespace mhc::advise {

namespace {

// Compute kernels of the recorded step: not collectives (their own model), not host work or marks.
bool scaled(const Plan& plan, const Op& op) {
    return op.kind == OpKind::Kernel && collective_of(plan.strings[static_cast<size_t>(op.name)]) == Collective::None;
}

struct Unscaled {
    std::vector<int64_t> duration;   // per recorded op
    double hbm_bw = 0;
    int64_t launch_overhead = 0;
};

void apply(Base& base, const Unscaled& unscaled, double factor) {
    Plan& plan = base.plan;
    for (size_t i = 0; i < unscaled.duration.size(); ++i)
        if (scaled(plan, plan.ops[i]))
            plan.ops[i].duration = std::llround(static_cast<double>(unscaled.duration[i]) * factor);
    // The roofline of kernels settings add (casts, optimizer kernels) slows alike.
    base.hbm_bw = unscaled.hbm_bw / factor;
    base.launch_overhead = std::llround(static_cast<double>(unscaled.launch_overhead) * factor);
}

}  // namespace

int64_t last_step_time(const Base& base, const sim::LinkModel& link) {
    const Plan& plan = base.plan;
    const Order order = order_of(plan);
    const Timing tm = timing(plan, order, link);
    // The end of each step: its ops' latest end.
    std::map<int32_t, int64_t> step_end;
    int64_t first = INT64_MAX;
    for (int32_t op : order.seq) {
        const Op& placed = plan.ops[static_cast<size_t>(op)];
        if (placed.kind == OpKind::Mark) continue;
        first = std::min(first, tm.start[static_cast<size_t>(op)]);
        if (placed.step < 0) continue;
        int64_t& end = step_end[placed.step];
        end = std::max(end, tm.end[static_cast<size_t>(op)]);
    }
    if (step_end.empty()) return tm.makespan;
    const int64_t last = step_end.rbegin()->second;
    const int64_t before = step_end.size() > 1 ? std::next(step_end.rbegin())->second : (first == INT64_MAX ? 0 : first);
    return last - before;
}

Calibration calibrate_compute(Base& base, const sim::LinkModel& link, int64_t measured_step) {
    if (measured_step <= 0) throw Error("--step-time: the measured step time must be positive");
    Unscaled unscaled;
    unscaled.hbm_bw = base.hbm_bw;
    unscaled.launch_overhead = base.launch_overhead;
    for (int32_t seq = 0; seq < base.plan.recorded; ++seq)
        unscaled.duration.push_back(base.plan.ops[static_cast<size_t>(seq)].duration);
    Calibration cal;
    cal.measured_step = measured_step;
    cal.estimated_step = last_step_time(base, link);
    if (cal.estimated_step <= 0) throw Error("--step-time: the captured step has no time to scale");
    // Compute scales by the factor; what it waits for (copies, collectives) does not, so the step
    // is not proportional to it: fixed-point steps on the compute part converge (the step grows
    // with the factor), checked to 0.1%.
    double factor = static_cast<double>(measured_step) / static_cast<double>(cal.estimated_step);
    int64_t step = 0;
    for (int i = 0; i < 50; ++i) {
        if (!(factor >= 0.01 && factor <= 100)) break;
        apply(base, unscaled, factor);
        step = last_step_time(base, link);
        if (std::abs(static_cast<double>(step - measured_step)) <= 1e-3 * static_cast<double>(measured_step)) {
            cal.factor = factor;
            cal.calibrated_step = step;
            return cal;
        }
        // The part that does not scale: what the step would take with no compute at all is at
        // most this; solve step = fixed + factor * compute for the next factor.
        apply(base, unscaled, factor * 2);
        const int64_t doubled = last_step_time(base, link);
        const double compute = static_cast<double>(doubled - step) / factor;   // per unit of factor
        if (compute <= 0) break;
        const double fixed = static_cast<double>(step) - factor * compute;
        factor = (static_cast<double>(measured_step) - fixed) / compute;
    }
    apply(base, unscaled, 1);
    throw Error("--step-time " + format_ns(measured_step) + ": no scaling of the kernels' times gives that step (the " +
                "capture's roofline says " + format_ns(cal.estimated_step) +
                "; kernel times are scaled by at most 100x either way, and the copies and collectives the step " +
                "waits for are not scaled)");
}

}  // namespace mhc::advise
