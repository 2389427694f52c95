#pragma once
// Compare on an order-only trace (an execution trace alone, a snapshot without times): runs aligned
// by op. Such a trace's "times" are op numbers (op k on [k, k + 1)), and a run's clock gives each op
// 1 ns plus the nanoseconds the link model gives its transfers and stalls (run_times.hpp), so two
// runs' clocks differ from each other and from the trace's: overlaid on one axis, op #900 of one run
// lay under op #40 of another, and the axis read the run clock's nanoseconds as "op #5736477" on a
// trace of 7752 ops. Aligned, every run is drawn on the trace's op axis: each of its items and
// memory samples at the op the run had reached then, what lay between two ops (the link time: a
// stall, a swap) inside the first one's place.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mhc/viewer/curve.hpp"
#include "mhc/viewer/lane.hpp"

namespace mhc::viewer {

struct ViewTrace;
struct ViewRun;

// A run's clock -> the trace's op axis: piecewise linear through each op the run reached (its run
// start -> its recorded start), so what happened between op k's start and op k + 1's lies in op k's
// place [k, k + 1); before the first op, at the first op; past the last op's start, in its place
// (what the run did after it ends at its end). Never decreasing.
class OpAlignment {
public:
    OpAlignment() = default;
    // `ops`: (run start, recorded start) of each kernel the run reached, by run start (RunTimes::ops).
    explicit OpAlignment(std::vector<std::pair<int64_t, int64_t>> ops);
    bool empty() const { return ops_.empty(); }
    int64_t at(int64_t run_time) const;
    // The link time the run spent at the op at recorded time `op` (between that op's start and
    // the next op's, less the ops' own nanoseconds): 0 where it went straight on.
    int64_t link_time_at(int64_t op) const;
    // The same over the ops in [first, last): what the run spent on its link from op `first`'s start
    // to op `last`'s, less the ops' own nanoseconds (a pixel column of a zoomed-out plot spans many).
    int64_t link_time_between(int64_t first, int64_t last) const;

private:
    std::vector<std::pair<int64_t, int64_t>> ops_;   // (run start, recorded start), both never decreasing
};

// One run drawn on the trace's op axis (Compare on an order-only trace).
struct AlignedRun {
    OpAlignment align;
    std::vector<Lane> kernel_lanes, event_lanes;   // the run's, mapped (event refs index ViewRun::events)
    // The run's device bytes by op: at each op the most the run held while at it (a swap-in's rise
    // and fall inside one op's place shows as its top), then what it held as it went on.
    Curve memory;
    int64_t t_end = 0;
};
// False when `run` cannot be aligned: the trace has times, or the run reached no op (a snapshot
// has no kernels; its run is drawn on its own clock).
bool alignable(const ViewTrace& view, const ViewRun& run);
AlignedRun align_by_op(const ViewTrace& view, const ViewRun& run);

// The curve `curve` on the op axis: samples mapped by `align`; those landing on one op become its
// maximum there, then their last value one op later unless the next op has samples of its own.
Curve align_curve(const Curve& curve, const OpAlignment& align);
// `lane` with each item [s, e) at [align(s), max(align(e), align(s) + 1)).
Lane align_lane(const Lane& lane, const OpAlignment& align);

// What the op axis's place `at` holds: "op #808 aten::mm" (the first lane's op there), "op #808" when
// no op lies there.
std::string op_at_text(const ViewTrace& view, int64_t at);

}   // namespace mhc::viewer
