#include "mhc/viewer/find.hpp"

#include <algorithm>
#include <string>

#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/stats.hpp"

namespace mhc::viewer {

namespace {

bool by_start(const KernelMatch& one, const KernelMatch& other) {
    return one.t_start != other.t_start ? one.t_start < other.t_start : one.kernel < other.kernel;
}

// Whether each name contains the text, asked once per distinct name (names repeat: a training step's
// 286,000 kernels have a few hundred).
class NameVerdicts {
public:
    NameVerdicts(const ViewTrace& view, std::string_view text)
        : view_(view), text_(text), verdict_(view.strings.size(), 0) {}
    bool operator()(int32_t name) {
        if (name < 0 || static_cast<size_t>(name) >= verdict_.size()) return contains_ci(view_.str(name), text_);
        uint8_t& verdict = verdict_[static_cast<size_t>(name)];
        if (verdict == 0) verdict = contains_ci(view_.str(name), text_) ? 1 : 2;
        return verdict == 1;
    }

private:
    const ViewTrace& view_;
    std::string_view text_;
    std::vector<uint8_t> verdict_;   // 0: not asked yet, 1: contains the text, 2: does not
};

}   // namespace

std::vector<KernelMatch> find_kernels(const ViewTrace& view, const ViewRun* run, std::string_view text) {
    if (text.empty()) return {};
    const std::vector<Lane>& lanes = run && !run->kernel_lanes.empty() ? run->kernel_lanes : view.kernel_lanes;
    NameVerdicts contains(view, text);
    // Each lane's matches in its order (by start; ties by id within the lane, sorted if not), then the
    // lists merged two at a time: a pass over the kernels and log2(lanes) passes over the matches.
    std::vector<std::vector<KernelMatch>> lists;
    for (size_t index = 0; index < lanes.size(); ++index) {
        const Lane& lane = lanes[index];
        std::vector<KernelMatch> found;
        for (size_t i = 0; i < lane.size(); ++i)
            if (contains(lane.key[i]))
                found.push_back(
                    {lane.t_start[i], lane.t_end[i], lane.ref[i], static_cast<uint32_t>(index), lane.key[i]});
        if (!std::is_sorted(found.begin(), found.end(), by_start)) std::sort(found.begin(), found.end(), by_start);
        if (!found.empty()) lists.push_back(std::move(found));
    }
    while (lists.size() > 1) {
        std::vector<std::vector<KernelMatch>> merged;
        for (size_t i = 0; i + 1 < lists.size(); i += 2) {
            std::vector<KernelMatch> both(lists[i].size() + lists[i + 1].size());
            std::merge(lists[i].begin(), lists[i].end(), lists[i + 1].begin(), lists[i + 1].end(), both.begin(),
                       by_start);
            merged.push_back(std::move(both));
        }
        if (lists.size() % 2 == 1) merged.push_back(std::move(lists.back()));
        lists = std::move(merged);
    }
    return lists.empty() ? std::vector<KernelMatch>{} : std::move(lists.front());
}

std::vector<KernelMatch> refine_matches(const ViewTrace& view, const std::vector<KernelMatch>& matches,
                                        std::string_view text) {
    std::vector<KernelMatch> out;
    if (text.empty()) return out;
    NameVerdicts contains(view, text);
    for (const KernelMatch& match : matches)
        if (contains(match.name)) out.push_back(match);
    return out;
}

int64_t match_index(const std::vector<KernelMatch>& matches, int64_t kernel) {
    if (kernel == 0) return -1;
    for (size_t i = 0; i < matches.size(); ++i)
        if (matches[i].kernel == kernel) return static_cast<int64_t>(i);
    return -1;
}

bool FindState::update(const ViewTrace& view, const ViewRun* shown, std::string_view text, int64_t selected_kernel) {
    const int64_t run_id = shown ? shown->info.id : 0;
    bool changed = false;
    if (of != text || run != run_id) {
        // A text that contains the one before (one more letter typed) matches a subset of its matches.
        const bool narrower = run == run_id && !of.empty() && contains_ci(text, of);
        if (text.empty()) {
            matches.clear();
        } else if (narrower) {
            matches = refine_matches(view, matches, text);
            ++refinements;
        } else {
            matches = find_kernels(view, shown, text);
            ++searches;
        }
        longest = longest_match(matches);
        of = std::string(text);
        run = run_id;
        selected = -1;   // which match is selected: found again below
        changed = true;
    }
    if (selected != selected_kernel) {
        index = match_index(matches, selected_kernel);
        selected = selected_kernel;
    }
    return changed;
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

int64_t longest_match(const std::vector<KernelMatch>& matches) {
    int64_t longest = 0;
    for (const KernelMatch& match : matches) longest = std::max(longest, match.t_end - match.t_start);
    return longest;
}

std::vector<std::vector<MatchMark>> match_marks(const std::vector<KernelMatch>& matches, size_t lanes, TimeRange range,
                                                float width, int64_t longest, float min_px) {
    std::vector<std::vector<MatchMark>> out(lanes);
    if (range.span() <= 0 || width <= 0) return out;
    // Matches by start: those in view start before the range's end and after its start less the
    // longest match (a match is never longer).
    const auto first = std::lower_bound(matches.begin(), matches.end(), range.t0 - longest,
                                        [](const KernelMatch& match, int64_t at) { return match.t_start < at; });
    for (auto it = first; it != matches.end() && it->t_start < range.t1; ++it) {
        // Ended before the range (one of no length at its start is in it).
        if (it->t_end < range.t0 || (it->t_end == range.t0 && it->t_end > it->t_start) || it->lane >= lanes) continue;
        auto x0 = static_cast<float>(range.x_of(it->t_start, width));
        auto x1 = static_cast<float>(range.x_of(std::max(it->t_end, it->t_start), width));
        if (x1 - x0 < min_px) {
            const float middle = (x0 + x1) / 2;
            x0 = middle - min_px / 2;
            x1 = middle + min_px / 2;
        }
        x0 = std::clamp(x0, 0.f, width);
        x1 = std::clamp(x1, 0.f, width);
        std::vector<MatchMark>& marks = out[it->lane];
        // By start, so a lane's marks come left to right (a longer one before may reach further).
        if (!marks.empty() && x0 <= marks.back().x1) {
            marks.back().x1 = std::max(marks.back().x1, x1);
            ++marks.back().count;
        } else {
            marks.push_back({x0, x1, 1});
        }
    }
    return out;
}

std::string match_count_text(int64_t index, size_t count) {
    if (count == 0) return "no match";
    if (index < 0) return std::to_string(count) + (count == 1 ? " match" : " matches");
    return std::to_string(index + 1) + " of " + std::to_string(count);
}

}   // namespace mhc::viewer
