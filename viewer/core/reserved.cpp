#include "mhc/viewer/reserved.hpp"

#include <exception>
#include <vector>

#include "mhc/sim/allocator_compare.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::viewer {

ReservedCurves reserved_curves(const std::string& path) {
    ReservedCurves r;
    if (!trace::Reader(path).has_segments()) return r;
    const trace::TraceData t = trace::load_trace(path);
    if (t.segments.empty()) return r;
    std::vector<int64_t> t_alloc, t_free, bytes;
    for (const trace::Segment& s : t.segments) {
        t_alloc.push_back(s.t_alloc);
        t_free.push_back(s.t_free);
        bytes.push_back(s.bytes);
    }
    r.recorded = Curve::from_intervals(t_alloc, t_free, bytes);
    // The recorded curve stands alone when the model cannot be made; the view says why.
    try {
        const sim::AllocatorComparison c = sim::compare_allocator(t, t.segments, -1, "");
        r.model.assign(c.sample_times, std::vector<double>(c.model_reserved.begin(), c.model_reserved.end()));
        r.model_device = c.device;
    } catch (const std::exception& e) {
        r.model_error = std::string("the caching allocator model: ") + e.what();
    }
    return r;
}

}  // namespace mhc::viewer
