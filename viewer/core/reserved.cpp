#include "mhc/viewer/reserved.hpp"

#include <algorithm>
#include <exception>
#include <vector>

#include "mhc/common/units.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::viewer {

namespace {

// The reserved bytes by pool of `device` (ReservedCurves::pool_reserved, default_reserved): its
// segment rows, each in the pool private_pools gives it (the default pool when none).
void pool_reserved_curves(const trace::TraceData& data, int32_t device, const sim::PrivatePools& pools,
                          ReservedCurves& curves) {
    const size_t lines = std::min<size_t>(static_cast<size_t>(pools.pools), ReservedCurves::kPoolLines);
    const bool rest = static_cast<size_t>(pools.pools) > lines;
    // Per line (0: the default pool, 1..lines: a pool, lines + 1: the rest): the rows' intervals.
    std::vector<std::vector<int64_t>> t_alloc(lines + 2), t_free(lines + 2), bytes(lines + 2);
    for (const trace::Segment& segment : data.segments) {
        if (segment.device != device) continue;
        const auto it = pools.segment.find(&segment);
        const auto pool = static_cast<size_t>(it == pools.segment.end() ? 0 : it->second);
        const size_t line = pool <= lines ? pool : lines + 1;
        t_alloc[line].push_back(segment.t_alloc);
        t_free[line].push_back(segment.t_free);
        bytes[line].push_back(segment.bytes);
    }
    curves.default_reserved = Curve::from_intervals(t_alloc[0], t_free[0], bytes[0]);
    for (size_t line = 1; line <= lines; ++line)
        curves.pool_reserved.push_back(
            {"pool " + std::to_string(line), Curve::from_intervals(t_alloc[line], t_free[line], bytes[line])});
    if (rest)
        curves.pool_reserved.push_back(
            {std::to_string(pools.pools - static_cast<int64_t>(lines)) + " other pools",
             Curve::from_intervals(t_alloc[lines + 1], t_free[lines + 1], bytes[lines + 1])});
}

// The live bytes of `device`'s allocations in private pools (ReservedCurves::pool_live).
void private_pool_curve(const trace::TraceData& data, int32_t device, ReservedCurves& curves) {
    try {
        const sim::PrivatePools pools = sim::private_pools(data, device);
        if (pools.pools > 0) pool_reserved_curves(data, device, pools, curves);
        if (pools.allocations == 0) return;
        std::vector<int64_t> t_alloc, t_free, bytes;
        const auto& allocations = data.allocations;
        for (size_t i = 0; i < allocations.size(); ++i) {
            if (pools.allocation[i] == 0) continue;
            t_alloc.push_back(allocations.t_alloc[i]);
            t_free.push_back(allocations.t_free[i]);
            bytes.push_back(allocations.bytes[i]);
        }
        curves.pool_live = Curve::from_intervals(t_alloc, t_free, bytes);
        curves.pools = pools.pools;
    } catch (const std::exception& e) { curves.pool_error = e.what(); }
}

}   // namespace

ReservedCurves reserved_curves(const std::string& path, int32_t device) {
    ReservedCurves curves;
    if (!trace::Reader(path).has_segments()) return curves;
    const trace::TraceData data = trace::load_trace(path);
    if (data.segments.empty()) return curves;
    std::vector<int64_t> t_alloc, t_free, bytes;
    for (const trace::Segment& segment : data.segments) {
        t_alloc.push_back(segment.t_alloc);
        t_free.push_back(segment.t_free);
        bytes.push_back(segment.bytes);
    }
    curves.recorded = Curve::from_intervals(t_alloc, t_free, bytes);
    // The recorded curve stands alone when the model cannot be made; the view says why.
    try {
        const sim::AllocatorComparison model = sim::compare_allocator(data, data.segments, -1, "");
        curves.model.assign(model.sample_times, std::vector<double>(model.model_reserved.begin(), model.model_reserved.end()));
        curves.model_device = model.device;
    } catch (const std::exception& e) {
        curves.model_error = std::string("the caching allocator model: ") + e.what();
    }
    private_pool_curve(data, device, curves);
    return curves;
}

std::string reserved_mismatch(const Curve& reserved, const Curve& live) {
    if (reserved.empty() || live.empty()) return {};
    const double held = reserved.value_at(live.peak_time());
    if (held >= live.peak()) return {};
    return "recorded reserved not shown: the trace's segments hold " + format_bytes(static_cast<int64_t>(held)) +
           " at the live bytes' peak of " + format_bytes(static_cast<int64_t>(live.peak())) +
           ", so they do not hold its allocations";
}

}  // namespace mhc::viewer
