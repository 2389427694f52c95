#include "mhc/viewer/align.hpp"

#include <algorithm>

#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

OpAlignment::OpAlignment(std::vector<std::pair<int64_t, int64_t>> ops) : ops_(std::move(ops)) {
    std::sort(ops_.begin(), ops_.end());
    // One entry per run start (the op reached last then), recorded starts never decreasing (a run
    // that took ops out of their order is placed at the furthest op it had reached).
    std::vector<std::pair<int64_t, int64_t>> kept;
    kept.reserve(ops_.size());
    for (const auto& [run_start, recorded] : ops_) {
        const int64_t op = kept.empty() ? recorded : std::max(recorded, kept.back().second);
        if (!kept.empty() && kept.back().first == run_start) kept.back().second = op;
        else kept.emplace_back(run_start, op);
    }
    ops_ = std::move(kept);
}

int64_t OpAlignment::at(int64_t run_time) const {
    if (ops_.empty()) return run_time;
    const auto it = std::upper_bound(ops_.begin(), ops_.end(), std::make_pair(run_time, INT64_MAX));
    if (it == ops_.begin()) return ops_.front().second;
    const auto& [run_start, op] = *std::prev(it);
    if (it == ops_.end()) return std::min(op + (run_time - run_start), op + 1);   // the last op's place
    const auto& [next_start, next_op] = *it;
    // Linear between the two ops (one op apart on an execution trace: the whole gap is op's place).
    const double part = static_cast<double>(run_time - run_start) / static_cast<double>(next_start - run_start);
    return std::min(op + static_cast<int64_t>(part * static_cast<double>(next_op - op)), std::max(next_op - 1, op));
}

int64_t OpAlignment::link_time_at(int64_t op) const {
    const auto it = std::upper_bound(
        ops_.begin(), ops_.end(), op,
        [](int64_t at, const std::pair<int64_t, int64_t>& each) { return at < each.second; });
    if (it == ops_.begin() || it == ops_.end()) return 0;
    const auto& [run_start, recorded] = *std::prev(it);
    return std::max<int64_t>((it->first - run_start) - (it->second - recorded), 0);
}

int64_t OpAlignment::link_time_between(int64_t first, int64_t last) const {
    if (ops_.empty() || last <= first) return 0;
    // The run's clock at the start of the first op at or after `op` (past the last op: its start on).
    auto run_at = [&](int64_t op) {
        const auto it = std::lower_bound(
            ops_.begin(), ops_.end(), op,
            [](const std::pair<int64_t, int64_t>& each, int64_t at) { return each.second < at; });
        if (it == ops_.end()) return ops_.back().first + (op - ops_.back().second);
        return it->first - std::max<int64_t>(it->second - op, 0);
    };
    return std::max<int64_t>((run_at(last) - run_at(first)) - (last - first), 0);
}

Curve align_curve(const Curve& curve, const OpAlignment& align) {
    std::vector<int64_t> times;
    std::vector<double> values;
    const std::vector<int64_t>& sample_t = curve.times();
    const std::vector<double>& sample_v = curve.values();
    for (size_t i = 0; i < sample_t.size();) {
        const int64_t at = align.at(sample_t[i]);
        double most = sample_v[i], last = sample_v[i];
        size_t next = i + 1;
        for (; next < sample_t.size() && align.at(sample_t[next]) == at; ++next) {
            most = std::max(most, sample_v[next]);
            last = sample_v[next];
        }
        times.push_back(at);
        values.push_back(most);
        // What it went on with, one op later (samples of that op, next, replace it).
        if (last != most) {
            times.push_back(at + 1);
            values.push_back(last);
        }
        i = next;
    }
    Curve out;
    out.assign(std::move(times), std::move(values));
    return out;
}

Lane align_lane(const Lane& lane, const OpAlignment& align) {
    Lane out;
    out.kind = lane.kind;
    out.title = lane.title;
    out.device = lane.device;
    out.stream = lane.stream;
    out.row = lane.row;
    for (size_t i = 0; i < lane.size(); ++i) {
        const int64_t start = align.at(lane.t_start[i]);
        out.push(start, std::max(align.at(lane.t_end[i]), start + 1), lane.key[i], lane.ref[i]);
    }
    out.finish();
    return out;
}

bool alignable(const ViewTrace& view, const ViewRun& run) { return view.order_only() && !run.times.ops.empty(); }

AlignedRun align_by_op(const ViewTrace& view, const ViewRun& run) {
    AlignedRun out;
    out.align = OpAlignment(run.times.ops);
    for (const Lane& lane : run.kernel_lanes) {
        out.kernel_lanes.push_back(align_lane(lane, out.align));
        out.kernel_lanes.back().classify(view.family_of_name, static_cast<uint8_t>(KernelFamily::Other), kFamilyCount);
    }
    for (const Lane& lane : run.event_lanes) out.event_lanes.push_back(align_lane(lane, out.align));
    out.memory = align_curve(run.memory, out.align);
    out.t_end = out.align.at(run.t_end);
    return out;
}

std::string op_at_text(const ViewTrace& view, int64_t at) {
    const TimeText times = view.time_text();
    for (const Lane& lane : view.kernel_lanes) {
        const auto it = std::upper_bound(lane.t_start.begin(), lane.t_start.end(), at);
        if (it == lane.t_start.begin()) continue;
        const auto item = static_cast<size_t>(it - lane.t_start.begin()) - 1;
        if (at < lane.t_end[item] || lane.t_start[item] == at)
            return times.at(lane.t_start[item]) + " " + view.str(lane.key[item]);
    }
    return times.at(at);
}

}   // namespace mhc::viewer
