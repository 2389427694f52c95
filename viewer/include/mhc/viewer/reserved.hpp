#pragma once
// The memory view's reserved-memory curves of a trace with a segments table
// (docs/trace-format.md): reserved vs allocated, as memory_viz's segment view shows them.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/viewer/curve.hpp"

namespace mhc::viewer {

struct ReservedCurves {
    // The recorded segments' bytes over time, all devices (as the live curve).
    Curve recorded;
    // The caching allocator model's reserved bytes for the same allocations (`mhc allocator`'s
    // replay: warm start from the recorded segments, the recorded settings; docs/simulator.md
    // "Comparing with a recording"), on the device with the largest recorded reserved peak.
    Curve model;
    int32_t model_device = 0;
    // Why the model curve is missing when the recorded one was made (one line, naming the
    // file); "" otherwise.
    std::string model_error;
    // The live bytes of the allocations in private pools (a CUDA graph's, a torch.cuda.MemPool's:
    // meta snapshot.segment_pools) on the device asked for, by sim::private_pools' rule (the one
    // `mhc allocator` and the simulator's caching model read them by), and how many pools there
    // are; empty and 0 without private pools. `pool_error`: why they are not shown (a malformed
    // meta entry), "" otherwise.
    Curve pool_live;
    int64_t pools = 0;
    std::string pool_error;
    // Reserved memory by pool on that device, where it has private pools: each private pool's
    // segment rows (by the same rule), in the order the trace names them, at most kPoolLines of them
    // with the rest summed in one more entry ("3 other pools"); and the default pool's (the device's
    // other segment rows). Empty without private pools.
    struct PoolReserved {
        std::string name;     // what the snapshot says it is (pool_name): "MemPool (0, 1)", or "3 other pools"
        std::string holds;    // the label holding most of its allocations' bytes ("" when none): what it is for
        std::string detail;   // for a tooltip: its kind in words, its segments, what its allocations are
        Curve reserved;
    };
    static constexpr size_t kPoolLines = 4;
    std::vector<PoolReserved> pool_reserved;
    Curve default_reserved;
    std::string default_name = "default pool";   // "default pool (streams 0, 7)" when on several streams
    std::string default_detail;
};

// Reads the trace at `path` on a connection of its own (so it may run on a worker thread while
// the view queries the viewer's Reader). A trace without segments gives two empty curves; it
// loads the whole trace only when there are segments. Throws mhc::Error naming the file and row
// when the segments cannot be read. `device`: whose private pools (the memory views' device).
ReservedCurves reserved_curves(const std::string& path, int32_t device = 0);

// A private pool by its snapshot id (PyTorch's MempoolId_t, docs/import.md `snapshot.pools_from`):
// (0, 0) "default pool", (n, 0) "CUDA graph pool (n, 0)" (a graph's capture, graph_pool_handle),
// (0, n) "MemPool (0, n)" (a torch.cuda.MemPool the program made), else "pool (a, b)".
std::string pool_name(int64_t first, int64_t second);
// What a pool of that id is, in a sentence (for a tooltip).
std::string pool_kind(int64_t first, int64_t second);

// Why the recorded reserved curve is not to be drawn over `live` (the allocations' curve), or "":
// segments holding fewer bytes than the live allocations at their peak do not hold them (an old
// recording's pool allocations lay outside its segments: 432 KiB of reserved under 556 MiB live
// read as memory allocated outside anything reserved).
std::string reserved_mismatch(const Curve& reserved, const Curve& live);

}  // namespace mhc::viewer
