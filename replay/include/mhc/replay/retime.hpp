#pragma once
// The trace on the replay machine's clock. A recorded trace times its kernels on the machine
// that recorded them; a replay backend runs them as stand-ins that may take longer (on the
// host, touching the pages of a multi-GiB operand takes longer than the recorded kernel; a
// real Sinkhorn-Knopp on the CPU is slower than on a GPU). Comparing a prediction made with
// the recorded times against a measurement made with others mixes two machines. The baseline
// replay (no memory limit) measures the backend's own timeline; retime() moves the trace onto
// it, so that the simulator predicts for the machine that is measured, as it would with a
// trace recorded there.
#include "mhc/replay/replay.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::replay {

struct RetimeSummary {
    int64_t span_before_ns = 0, span_after_ns = 0;   // t_end - t_begin
    int64_t kernels_moved = 0;                        // kernels with a measured time
};

// A copy of `trace` in which every timestamp t of the baseline's device becomes t + L(t),
// L(t) being the largest lag (measured - recorded time, from the baseline's kernel starts
// and ends) reached at or before t. L never decreases, so every order of the trace is kept
// (accesses stay inside their allocations' lifetimes); kernels get their measured durations
// up to the lag reached before they started. Rows of other devices move by the same L, so
// orders across devices are kept too.
trace::TraceData retime(const trace::TraceData& trace, const Measured& baseline, RetimeSummary* summary = nullptr);

}  // namespace mhc::replay
