#include "mhc/viewer/run_times.hpp"

#include <algorithm>
#include <unordered_map>

#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

int64_t RunTimes::op_before(int64_t at) const {
    const auto it = std::upper_bound(ops.begin(), ops.end(), std::make_pair(at, INT64_MAX));
    return it == ops.begin() ? -1 : std::prev(it)->second;
}

std::string RunTimes::at(int64_t time, int64_t resolution_ns) const {
    if (!order_only) return recorded.at(time, resolution_ns);
    const auto it = std::upper_bound(ops.begin(), ops.end(), std::make_pair(time, INT64_MAX));
    if (it == ops.begin()) return "the run's start + " + format_duration(time);
    const auto& [run_start, recorded_start] = *std::prev(it);
    const std::string op = recorded.at(recorded_start);
    return time == run_start ? op : op + " + " + format_duration(time - run_start);
}

std::string RunTimes::span(int64_t ns) const {
    return order_only ? format_duration(ns) + " of link time" : recorded.span(ns);
}

std::string RunTimes::interval(int64_t t0, int64_t t1) const {
    if (!order_only) return recorded.interval(t0, t1);
    return at(t0) + " .. " + at(t1) + " (" + span(t1 - t0) + ")";
}

RunTimes run_times(const ViewTrace& view, const ViewRun& run) {
    RunTimes out;
    out.recorded = view.time_text();
    out.order_only = view.order_only();
    if (!out.order_only) return out;
    // The run's kernel lanes are the trace's, item for item where reached (load_view_run).
    std::unordered_map<int64_t, int64_t> recorded_start;
    for (const Lane& lane : view.kernel_lanes)
        for (size_t i = 0; i < lane.size(); ++i) recorded_start[lane.ref[i]] = lane.t_start[i];
    for (const Lane& lane : run.kernel_lanes)
        for (size_t i = 0; i < lane.size(); ++i)
            if (auto it = recorded_start.find(lane.ref[i]); it != recorded_start.end())
                out.ops.emplace_back(lane.t_start[i], it->second);
    // Ties in run start: the latest recorded op last (the one the run reached last).
    std::sort(out.ops.begin(), out.ops.end());
    return out;
}

}   // namespace mhc::viewer
