// The out-of-memory report (oom_report.hpp).
#include "oom_report.hpp"

#include <algorithm>
#include <string>

#include "mhc/common/units.hpp"

namespace mhc::sim {

namespace {

// The caching model's why: short by bytes, or fragmented (the free bytes hold the request but
// no free block or new segment fits it).
void explain_caching(Oom& o, const OomFigures& f, const CachingAllocator& ca) {
    o.largest_free_block = ca.largest_free_block();
    const int64_t cap = f.capacity;
    int64_t free_bytes = cap - f.live;
    o.fragmentation = free_bytes >= o.bytes_needed;
    o.bytes_short = o.fragmentation ? std::max<int64_t>(o.bytes_needed - std::max(o.largest_free_block, cap - ca.reserved()), 0)
                                    : o.bytes_needed - free_bytes;
    // The least the allocator adds for the request: a segment (or, expandable, whole pages).
    // Where that is more than all the free bytes, nothing is fragmented: the allocator's unit
    // is larger than what is left (a 2 MiB small-pool segment under a 1.6 MiB capacity).
    const int64_t grow = ca.growth_for(o.bytes_needed);
    const std::string unit = ca.settings().expandable_segments ? "the pages it maps" : "the segment it takes";
    o.why = "needs " + format_bytes(o.bytes_needed) + "; " + format_bytes(f.live) + " in use (" +
            format_bytes(f.pinned) + " pinned by running kernels), " + format_bytes(ca.reserved()) +
            " reserved in segments of " + format_bytes(cap) +
            (!o.fragmentation ? "; short by " + format_bytes(o.bytes_short)
             : grow > free_bytes
                 ? "; the free bytes hold the request but not " + unit + " for it (" + format_bytes(grow) +
                       "), largest free block " + format_bytes(o.largest_free_block)
                 : "; the free bytes suffice but no free block or new segment fits "
                   "(fragmentation), largest free block " + format_bytes(o.largest_free_block));
}

}  // namespace

void explain_oom(Oom& o, const Prepared& p, int32_t a, int32_t s, const OomFigures& f,
                 const CachingAllocator* caching) {
    const auto& al = p.t->allocations;
    o.bytes_needed = caching ? caching->rounded(al.bytes[a]) : f.need;
    o.bytes_pinned = f.pinned;
    if (s >= 0) {
        o.where = "kernel " + std::to_string(o.kernel) + " (" + p.t->str(p.t->kernels.name[p.korder[s]]) +
                  ") needs allocation " + std::to_string(o.allocation);
    } else {
        const std::string label = p.t->str(al.label[a]);   // unlabelled: no empty "()"
        o.where = "allocation " + std::to_string(o.allocation) + (label.empty() ? "" : " (" + label + ")");
    }
    if (caching) {
        explain_caching(o, f, *caching);
    } else {
        o.bytes_short = f.used + f.need - f.capacity;
        o.why = "needs " + format_bytes(f.need) + " but " + format_bytes(f.used) + " of " + format_bytes(f.capacity) +
                " are held and nothing more can be evicted (" + format_bytes(f.pinned) +
                " pinned by running kernels); short by " + format_bytes(o.bytes_short);
    }
}

}  // namespace mhc::sim
