// The host link's timing of transfers (link_queues.hpp).
#include "link_queues.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "mhc/common/error.hpp"

namespace mhc::sim {

LinkQueues::LinkQueues(const Prepared& prep, const Config& config) : prepared(prep), link(config.link) {
    if (config.max_swap_ops_per_sec > 0) op_gap = static_cast<int64_t>(std::ceil(1e9 / config.max_swap_ops_per_sec));
}

LinkQueues::Slot LinkQueues::book(int64_t bytes, bool h2d, int64_t time, int64_t shift) {
    const int dir = h2d ? 0 : 1;
    const int queue = queue_of(h2d);
    int64_t start = std::max(time, busy[queue]);
    if (op_gap > 0) {
        // the first transfer has no previous one, whatever its time (a trace may start at -2^62 ns)
        if (any_op) start = std::max(start, last_op + op_gap);
        last_op = start;
        any_op = true;
    }
    const Direction& direction = h2d ? link.h2d : link.d2h;
    double bw = direction.bandwidth_Bps;
    if (link.copy_engines >= 2 && busy[1 - dir] > start) bw *= link.duplex_factor;
    const int64_t recorded = start - shift;
    if (prepared.nccl.contains(recorded, nccl_hint)) bw *= 1.0 - link.nccl_share;
    if (h2d ? prepared.h2d_busy.contains(recorded, h2d_hint) : prepared.d2h_busy.contains(recorded, d2h_hint))
        bw *= 1.0 - link.memcpy_share;
    const double dur_ns = std::ceil(direction.latency_s * 1e9 + static_cast<double>(bytes) / bw * 1e9);
    // Times stay within +-2^62 ns (trace limits): a transfer past that is a link too slow for
    // this trace, not a number to wrap around.
    constexpr int64_t kTimeLimit = int64_t{1} << 62;
    if (!(dur_ns < static_cast<double>(kTimeLimit))) {
        // %.15g: whole digits as far as a double holds them, an exponent past that (std::to_string
        // wrote 1.9e304 s as its 305 digits under --duplex-factor 1e-300; %.3g lost the figure)
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.15g", dur_ns / 1e9);
        throw Error("link " + link.name + ": a transfer of " + std::to_string(bytes) + " bytes takes " + seconds +
                    " s, past the simulator's time range (2^62 ns): the link is too slow for this trace");
    }
    // A short transfer past the range: the trace's own times sit at its end (a trace shifted
    // near 2^62 ns), which the link is not to blame for.
    if (start > kTimeLimit - static_cast<int64_t>(dur_ns))
        throw Error("a transfer of " + std::to_string(bytes) + " bytes at " + std::to_string(start) +
                    " ns (simulated; recorded time " + std::to_string(recorded) + " ns) would end past the "
                    "simulator's time range (2^62 ns): the trace's times are too close to its end; shift "
                    "them towards 0");
    const int64_t end = start + std::max<int64_t>(static_cast<int64_t>(dur_ns), 1);
    busy[queue] = end;
    return {start, end, queue};
}

}  // namespace mhc::sim
