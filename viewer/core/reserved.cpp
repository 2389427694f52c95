#include "mhc/viewer/reserved.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "mhc/common/units.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::viewer {

namespace {

// The label holding most bytes among `device`'s allocations in private pool `pool` ("" when none
// has a label), with its share of the pool's allocated bytes.
std::pair<std::string, double> pool_holds(const trace::TraceData& data, const sim::PrivatePools& pools, int64_t pool) {
    std::map<int64_t, int64_t> by_label;
    int64_t total = 0;
    const auto& allocations = data.allocations;
    for (size_t i = 0; i < allocations.size(); ++i) {
        if (pools.allocation[i] != pool) continue;
        total += allocations.bytes[i];
        if (allocations.label[i] != 0) by_label[allocations.label[i]] += allocations.bytes[i];
    }
    const auto most = std::max_element(by_label.begin(), by_label.end(),
                                       [](const auto& one, const auto& other) { return one.second < other.second; });
    if (most == by_label.end() || total <= 0) return {"", 0.0};
    return {data.str(most->first), static_cast<double>(most->second) / static_cast<double>(total)};
}

std::string segment_count(size_t rows) { return std::to_string(rows) + (rows == 1 ? " segment row" : " segment rows"); }

// The reserved bytes by pool of `device` (ReservedCurves::pool_reserved, default_reserved): its
// segment rows, each in the pool private_pools gives it (the default pool when none), each pool
// named by its id in the snapshot and by what its allocations are.
void pool_reserved_curves(const trace::TraceData& data, int32_t device, const sim::PrivatePools& pools,
                          ReservedCurves& curves) {
    const size_t lines = std::min<size_t>(static_cast<size_t>(pools.pools), ReservedCurves::kPoolLines);
    const bool rest = static_cast<size_t>(pools.pools) > lines;
    // Per line (0: the default pool, 1..lines: a pool, lines + 1: the rest): the rows' intervals.
    std::vector<std::vector<int64_t>> t_alloc(lines + 2), t_free(lines + 2), bytes(lines + 2);
    std::set<int64_t> default_streams;
    for (const trace::Segment& segment : data.segments) {
        if (segment.device != device) continue;
        const auto it = pools.segment.find(&segment);
        const auto pool = static_cast<size_t>(it == pools.segment.end() ? 0 : it->second);
        const size_t line = pool <= lines ? pool : lines + 1;
        t_alloc[line].push_back(segment.t_alloc);
        t_free[line].push_back(segment.t_free);
        bytes[line].push_back(segment.bytes);
        if (pool == 0) default_streams.insert(segment.stream);
    }
    curves.default_reserved = Curve::from_intervals(t_alloc[0], t_free[0], bytes[0]);
    // PyTorch's default pool is one per stream: several streams' segments are said.
    if (default_streams.size() > 1) {
        std::string list;
        for (int64_t stream : default_streams) list += (list.empty() ? "" : ", ") + std::to_string(stream);
        curves.default_name = "default pool (streams " + list + ")";
    }
    curves.default_detail = "default pool (0, 0): every allocation not made in a private pool; " +
                            segment_count(bytes[0].size()) + " on " + std::to_string(default_streams.size()) +
                            (default_streams.size() == 1 ? " stream" : " streams");
    for (size_t line = 1; line <= lines; ++line) {
        const auto id = line < pools.ids.size() ? pools.ids[line] : std::pair<int64_t, int64_t>{0, 0};
        const auto [holds, share] = pool_holds(data, pools, static_cast<int64_t>(line));
        std::string detail = pool_name(id.first, id.second) + ": " + pool_kind(id.first, id.second) + "; " +
                             segment_count(bytes[line].size()) +
                             (pools.exact ? " (named by the trace events' pool_id)"
                                          : " (held at the end of the snapshot, or mapped in a range held then)");
        if (!holds.empty())
            detail += "; " + std::to_string(static_cast<int>(std::lround(share * 100))) +
                      "% of its allocated bytes were allocated at " + holds;
        curves.pool_reserved.push_back({pool_name(id.first, id.second), holds, detail,
                                        Curve::from_intervals(t_alloc[line], t_free[line], bytes[line])});
    }
    if (rest) {
        std::string name = std::to_string(pools.pools - static_cast<int64_t>(lines)) + " other pools";
        curves.pool_reserved.push_back(
            {name, "",
             name + ", summed: the private pools past the first " + std::to_string(lines) + " the trace names",
             Curve::from_intervals(t_alloc[lines + 1], t_free[lines + 1], bytes[lines + 1])});
    }
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

std::string pool_name(int64_t first, int64_t second) {
    const std::string id = "(" + std::to_string(first) + ", " + std::to_string(second) + ")";
    if (first == 0 && second == 0) return "default pool";
    if (second == 0) return "CUDA graph pool " + id;
    if (first == 0) return "MemPool " + id;
    return "pool " + id;
}

std::string pool_kind(int64_t first, int64_t second) {
    if (first == 0 && second == 0) return "the default pool: every allocation not made in a private pool";
    if (second == 0)
        return "a CUDA graph's private pool (torch.cuda.graph's capture, graph_pool_handle): its blocks serve only "
               "the graphs captured into it";
    if (first == 0)
        return "a torch.cuda.MemPool the program made: its blocks serve only allocations made under "
               "torch.cuda.use_mem_pool";
    return "a private pool: its blocks serve only its own allocations";
}

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
