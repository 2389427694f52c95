#include "mhc/viewer/find.hpp"

#include <algorithm>
#include <unordered_map>

#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/stats.hpp"

namespace mhc::viewer {

std::vector<KernelMatch> find_kernels(const ViewTrace& view, const ViewRun* run, std::string_view text) {
    std::vector<KernelMatch> out;
    if (text.empty()) return out;
    const std::vector<Lane>& lanes = run && !run->kernel_lanes.empty() ? run->kernel_lanes : view.kernel_lanes;
    std::unordered_map<int64_t, bool> name_matches;   // by name string id: names repeat
    for (const Lane& lane : lanes)
        for (size_t i = 0; i < lane.size(); ++i) {
            auto [it, fresh] = name_matches.try_emplace(lane.key[i], false);
            if (fresh) it->second = contains_ci(view.str(lane.key[i]), text);
            if (it->second) out.push_back({lane.t_start[i], lane.t_end[i], lane.ref[i]});
        }
    std::sort(out.begin(), out.end(), [](const KernelMatch& one, const KernelMatch& other) {
        return one.t_start != other.t_start ? one.t_start < other.t_start : one.kernel < other.kernel;
    });
    return out;
}

int64_t next_match(const std::vector<KernelMatch>& matches, int64_t current, int64_t from, bool backward) {
    if (matches.empty()) return -1;
    const auto count = static_cast<int64_t>(matches.size());
    for (int64_t i = 0; i < count; ++i)
        if (matches[static_cast<size_t>(i)].kernel == current)
            return backward ? (i + count - 1) % count : (i + 1) % count;
    const auto first_after = std::lower_bound(matches.begin(), matches.end(), from,
                                              [](const KernelMatch& match, int64_t at) { return match.t_start < at; });
    const int64_t index = first_after - matches.begin();
    if (backward) return index == 0 ? count - 1 : index - 1;
    return index == count ? 0 : index;
}

TimeRange range_for_match(const KernelMatch& match, TimeRange range, TimeRange limits) {
    const int64_t length = std::max<int64_t>(match.t_end - match.t_start, 1);
    const bool inside = match.t_start >= range.t0 && match.t_end <= range.t1;
    if (inside && length * 1000 >= range.span()) return range;
    const int64_t span = std::max<int64_t>(std::min(range.span(), length * 20), kMinSpan);
    const int64_t middle = match.t_start + length / 2;
    return clamp({middle - span / 2, middle - span / 2 + span}, limits);
}

}   // namespace mhc::viewer
