#pragma once
// When a transfer runs on the host link (docs/simulator.md rule 8): the link's queues, the
// cap on swap operations per second, and the bandwidth a transfer loses to the other direction,
// to the trace's NCCL kernels and to its own copies. The engine asks; this answers with times.
#include <cstddef>
#include <cstdint>

#include "mhc/sim/config.hpp"
#include "prepared.hpp"

namespace mhc::sim {

class LinkQueues {
public:
    LinkQueues(const Prepared& prep, const Config& config);
    struct Slot {
        int64_t start, end;   // simulated ns
        int queue;            // the queue it runs in (Inflight::push)
    };
    // Books the link for a transfer of `bytes` asked for at simulated time t (shift: simulated
    // minus recorded time, to look up the recorded contention). Throws mhc::Error where its end
    // would pass the simulator's time range.
    Slot book(int64_t bytes, bool h2d, int64_t time, int64_t shift);
    // When the queue that swap-outs take is free (early swap-outs start only while it is).
    int64_t swap_out_free_at() const { return busy[queue_of(false)]; }

private:
    int queue_of(bool h2d) const { return link.copy_engines >= 2 && !h2d ? 1 : 0; }
    const Prepared& prepared;
    const LinkModel& link;
    // [0] H2D (or both), [1] D2H; free at every time before their first transfer (a trace's
    // times may be negative, down to -2^62 ns: a queue "free since 0" stalled such a trace until 0)
    int64_t busy[2] = {INT64_MIN / 2, INT64_MIN / 2};
    int64_t last_op = 0, op_gap = 0;   // the previous transfer's start (any_op: there is one)
    bool any_op = false;
    size_t nccl_hint = 0, h2d_hint = 0, d2h_hint = 0;   // Intervals::contains, forward in time
};

}  // namespace mhc::sim
