// The out-of-memory report (oom_report.hpp).
#include "oom_report.hpp"

#include <algorithm>
#include <string>

#include "mhc/common/units.hpp"

namespace mhc::sim {

namespace {

// The caching model's why: short by bytes, or fragmented (the free bytes hold the request but
// no free block or new segment fits it).
void explain_caching(Oom& oom, const OomFigures& figures, const CachingAllocator& ca) {
    oom.largest_free_block = ca.largest_free_block();
    const int64_t cap = figures.capacity;
    int64_t free_bytes = cap - figures.live;
    oom.fragmentation = free_bytes >= oom.bytes_needed;
    oom.bytes_short = oom.fragmentation ? std::max<int64_t>(oom.bytes_needed - std::max(oom.largest_free_block, cap - ca.reserved()), 0)
                                    : oom.bytes_needed - free_bytes;
    // The least the allocator adds for the request: a segment (or, expandable, whole pages).
    // Where that is more than all the free bytes, nothing is fragmented: the allocator's unit
    // is larger than what is left (a 2 MiB small-pool segment under a 1.6 MiB capacity).
    const int64_t grow = ca.growth_for(oom.bytes_needed);
    const std::string unit = ca.settings().expandable_segments ? "the pages it maps" : "the segment it takes";
    oom.why = "needs " + format_bytes(oom.bytes_needed) + "; " + format_bytes(figures.live) + " in use (" +
            format_bytes(figures.pinned) + " pinned by running kernels), " + format_bytes(ca.reserved()) +
            " reserved in segments of " + format_bytes(cap) +
            (!oom.fragmentation ? "; short by " + format_bytes(oom.bytes_short)
             : grow > free_bytes
                 ? "; the free bytes hold the request but not " + unit + " for it (" + format_bytes(grow) +
                       "), largest free block " + format_bytes(oom.largest_free_block)
                 : "; the free bytes suffice but no free block or new segment fits "
                   "(fragmentation), largest free block " + format_bytes(oom.largest_free_block));
}

}  // namespace

void explain_oom(Oom& oom, const Prepared& prep, int32_t alloc, int32_t seq, const OomFigures& figures,
                 const CachingAllocator* caching) {
    const auto& al = prep.t->allocations;
    oom.bytes_needed = caching ? caching->rounded(al.bytes[alloc]) : figures.need;
    oom.bytes_pinned = figures.pinned;
    if (seq >= 0) {
        oom.where = "kernel " + std::to_string(oom.kernel) + " (" + prep.t->str(prep.t->kernels.name[prep.korder[seq]]) +
                  ") needs allocation " + std::to_string(oom.allocation);
    } else {
        const std::string label = prep.t->str(al.label[alloc]);   // unlabelled: no empty "()"
        oom.where = "allocation " + std::to_string(oom.allocation) + (label.empty() ? "" : " (" + label + ")");
    }
    if (caching) {
        explain_caching(oom, figures, *caching);
    } else {
        oom.bytes_short = figures.used + figures.need - figures.capacity;
        oom.why = "needs " + format_bytes(figures.need) + " but " + format_bytes(figures.used) + " of " + format_bytes(figures.capacity) +
                " are held and nothing more can be evicted (" + format_bytes(figures.pinned) +
                " pinned by running kernels); short by " + format_bytes(oom.bytes_short);
    }
}

}  // namespace mhc::sim
