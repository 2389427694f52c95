#pragma once
// Segment rows from a PyTorch memory snapshot (docs/trace-format.md, "segments"):
// segment_alloc/segment_free (cudaMalloc/cudaFree of a segment) and segment_map/segment_unmap
// (pages of an expandable segment) become rows; segments that existed before recording began
// are reconstructed from a free or unmap the trace cannot place, or from the end state.
// Events that cannot all be true (a free of a segment the trace saw die or never saw while the
// address was in use, overlapping live segments, an unmap of cudaMalloc'd memory) throw
// mhc::Error naming the file and the event ("device_traces[0][12] (segment_free): ...").
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mhc/trace/model.hpp"

namespace mhc::trace::import {

class SegmentLog {
public:
    explicit SegmentLog(std::string file) : file_(std::move(file)) {}

    // Event k of device_traces[dev]: `action` names it in errors, t is in ns.
    void alloc(int32_t dev, size_t k, const char* action, int64_t t, int64_t addr, int64_t size,
               int64_t stream, bool expandable);
    void free(int32_t dev, size_t k, const char* action, int64_t t, int64_t addr, int64_t size,
              int64_t stream, bool expandable);
    // End-state segment i (snapshot['segments'][i]): what no live row covers existed before
    // recording began (alive from 0, or from the last free at that place).
    void end_state(size_t i, int32_t dev, int64_t addr, int64_t size, int64_t stream, bool expandable);

    // Rows by t_alloc, then device and address, ids from 1.
    std::vector<Segment> take();

    int64_t reconstructed = 0;          // rows that began before recording
    int64_t live_not_in_end_state = 0;  // set by take(): live rows no end-state segment covers

private:
    struct Device {
        std::map<int64_t, size_t> live;     // start address -> row index, disjoint
        std::map<int64_t, int64_t> ever;    // union of every range the trace saw in use
        std::map<int64_t, int64_t> end;     // union of the end-state segments
    };
    Device& dev(int32_t d);
    size_t add_row(int32_t dev, int64_t stream, int64_t addr, int64_t bytes, int64_t t_alloc, int64_t t_free,
                   bool expandable);
    // Live rows overlapping [addr, addr + size), by address.
    std::vector<size_t> live_overlapping(Device& d, int64_t addr, int64_t size) const;
    static void add_range(std::map<int64_t, int64_t>& u, int64_t s, int64_t e);
    static bool overlaps(const std::map<int64_t, int64_t>& u, int64_t s, int64_t e);
    std::string hex(int64_t a) const;

    std::string file_;
    std::map<int32_t, Device> devices_;
    std::vector<Segment> rows_;
};

}  // namespace mhc::trace::import
