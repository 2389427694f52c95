#include "mhc/viewer/find.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
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

namespace {

// A lane's positions by (start, id).
struct ByStart {
    const Lane& lane;
    bool operator()(uint32_t one, uint32_t other) const {
        return lane.t_start[one] != lane.t_start[other] ? lane.t_start[one] < lane.t_start[other]
                                                        : lane.ref[one] < lane.ref[other];
    }
};

// The first of `at` at or after (t_start, kernel) in a lane's (start, id) order.
size_t first_not_before(const Lane& lane, const std::vector<uint32_t>& at, int64_t t_start, int64_t kernel) {
    return static_cast<size_t>(std::partition_point(at.begin(), at.end(),
                                                    [&](uint32_t pos) {
                                                        return lane.t_start[pos] != t_start
                                                                   ? lane.t_start[pos] < t_start
                                                                   : lane.ref[pos] < kernel;
                                                    }) -
                               at.begin());
}

// The first of `at` starting at or after `t`.
size_t first_starting_at(const Lane& lane, const std::vector<uint32_t>& at, size_t from, size_t to, int64_t when) {
    return static_cast<size_t>(std::partition_point(at.begin() + static_cast<std::ptrdiff_t>(from),
                                                    at.begin() + static_cast<std::ptrdiff_t>(to),
                                                    [&](uint32_t pos) { return lane.t_start[pos] < when; }) -
                               at.begin());
}

bool before(const KernelMatch& one, const KernelMatch& other) { return by_start(one, other); }

}   // namespace

bool FindState::start(const ViewTrace& view, const ViewRun* shown, std::string_view text) {
    const std::vector<Lane>& lanes = shown && !shown->kernel_lanes.empty() ? shown->kernel_lanes : view.kernel_lanes;
    size_t kernels = 0;
    for (const Lane& lane : lanes) kernels += lane.size();
    const int64_t run_id = shown ? shown->info.id : 0;
    const bool same_lanes = lanes_ == &lanes && kernels_ == kernels && parts_.size() == lanes.size() && view_ == &view;
    if (same_lanes && of == text && run == run_id) return false;
    // A text that contains the one before (one more letter typed) matches a subset of its matches: those
    // found so far are re-checked in place and the scan goes on where it stopped.
    const bool narrower = same_lanes && run == run_id && !of.empty() && !text.empty() && contains_ci(text, of);
    if (!narrower) parts_.assign(lanes.size(), Part{});
    lanes_ = &lanes;
    kernels_ = kernels;
    view_ = &view;
    of = std::string(text);
    run = run_id;
    verdict_.assign(view.strings.size(), 0);
    work_total_ = work_done_ = 0;
    for (size_t l = 0; l < parts_.size(); ++l) {
        Part& part = parts_[l];
        if (part.pending > 0) {   // the text before's own re-check was under way: its candidates together
            part.at.erase(part.at.begin() + static_cast<std::ptrdiff_t>(part.kept),
                          part.at.begin() + static_cast<std::ptrdiff_t>(part.read));
        }
        part.pending = part.at.size();
        part.read = part.kept = 0;
        part.longest = 0;
        if (text.empty()) part.scanned = lanes[l].size();   // nothing to find
        work_total_ += part.pending + lanes[l].size() - part.scanned;
    }
    if (!text.empty()) ++(narrower ? refinements : searches);
    ++generation_;
    index = -1;
    longest = 0;
    selected = -1;   // which match is selected: found again once done
    selected_match_ = {};
    return true;
}

bool FindState::matches(int32_t name) {
    if (name < 0 || static_cast<size_t>(name) >= verdict_.size()) return contains_ci(view_->str(name), of);
    uint8_t& verdict = verdict_[static_cast<size_t>(name)];
    if (verdict == 0) verdict = contains_ci(view_->str(name), of) ? 1 : 2;
    return verdict == 1;
}

bool FindState::work(size_t budget) {
    if (done()) return false;
    ++slices;
    ++generation_;
    size_t used = 0;
    for (size_t l = 0; l < parts_.size() && used < budget; ++l) {
        Part& part = parts_[l];
        const Lane& lane = (*lanes_)[l];
        // The text before's matches, re-checked in place.
        while (part.read < part.pending && used < budget) {
            const uint32_t pos = part.at[part.read++];
            ++used;
            if (!matches(lane.key[pos])) continue;
            part.at[part.kept++] = pos;
            part.longest = std::max(part.longest, lane.t_end[pos] - lane.t_start[pos]);
        }
        if (part.read < part.pending) break;
        if (part.pending > 0) {
            part.at.resize(part.kept);
            part.pending = part.read = part.kept = 0;
        }
        // The lane's kernels not looked at yet.
        const size_t stop = std::min(lane.size(), part.scanned + (budget - used));
        for (size_t i = part.scanned; i < stop; ++i) {
            if (!matches(lane.key[i])) continue;
            const auto pos = static_cast<uint32_t>(i);
            if (part.in_order && !part.at.empty() && ByStart{lane}(pos, part.at.back())) part.in_order = false;
            part.at.push_back(pos);
            part.longest = std::max(part.longest, lane.t_end[i] - lane.t_start[i]);
        }
        used += stop - part.scanned;
        part.scanned = stop;
        // Complete: equal starts in the lane in id order (its order is by start only).
        if (part.scanned == lane.size() && !part.in_order) {
            std::sort(part.at.begin(), part.at.end(), ByStart{lane});
            part.in_order = true;
        }
    }
    work_done_ = std::min(work_total_, work_done_ + used);
    if (used == 0) work_done_ = work_total_;   // nothing was left (rounding of the budget)
    return true;
}

void FindState::completed(int64_t selected_kernel) {
    longest = 0;
    for (const Part& part : parts_) longest = std::max(longest, part.longest);
    index = -1;
    selected_match_ = {};
    selected = selected_kernel;
    if (!selected_kernel || of.empty() || !locate(selected_kernel)) return;
    const Lane& lane = (*lanes_)[located_lane_];
    if (!matches(lane.key[located_pos_])) return;
    selected_match_ = match_at(located_lane_, located_pos_);
    index = static_cast<int64_t>(rank(selected_match_.t_start, selected_match_.kernel));
}

bool FindState::update(const ViewTrace& view, const ViewRun* shown, std::string_view text, int64_t selected_kernel) {
    bool changed = start(view, shown, text);
    if (!done()) {
        work(std::max<size_t>(slice, 1));
        changed = true;
        if (done()) completed(selected_kernel);
    } else if (changed) {
        completed(selected_kernel);
    }
    if (done() && selected != selected_kernel) completed(selected_kernel);
    return changed;
}

bool FindState::finish(const ViewTrace& view, const ViewRun* shown, std::string_view text, int64_t selected_kernel) {
    bool changed = start(view, shown, text);
    if (!done()) {
        work(work_total_ - work_done_ + 1);
        changed = true;
    }
    if (changed || selected != selected_kernel) completed(selected_kernel);
    return changed;
}

double FindState::progress() const {
    return work_total_ == 0 ? 1.0 : static_cast<double>(work_done_) / static_cast<double>(work_total_);
}

size_t FindState::count() const {
    size_t total = 0;
    for (const Part& part : parts_) total += part.pending > 0 ? part.kept + (part.pending - part.read) : part.at.size();
    return total;
}

bool FindState::locate(int64_t kernel) {
    if (located_ == kernel && located_in_ == lanes_) return located_found_;
    located_ = kernel;
    located_in_ = lanes_;
    located_found_ = false;
    for (size_t l = 0; l < lanes_->size() && !located_found_; ++l) {
        const std::vector<int64_t>& refs = (*lanes_)[l].ref;
        const auto it = std::find(refs.begin(), refs.end(), kernel);
        if (it == refs.end()) continue;
        located_found_ = true;
        located_lane_ = static_cast<uint32_t>(l);
        located_pos_ = static_cast<uint32_t>(it - refs.begin());
    }
    return located_found_;
}

KernelMatch FindState::match_at(uint32_t lane, uint32_t pos) const {
    const Lane& row = (*lanes_)[lane];
    return {row.t_start[pos], row.t_end[pos], row.ref[pos], lane, row.key[pos]};
}

size_t FindState::rank(int64_t t_start, int64_t kernel) const {
    size_t before_it = 0;
    for (size_t l = 0; l < parts_.size(); ++l)
        before_it += first_not_before((*lanes_)[l], parts_[l].at, t_start, kernel);
    return before_it;
}

int64_t FindState::next(int64_t current, int64_t from, bool backward, KernelMatch* match) {
    if (!done() || !lanes_ || count() == 0) return -1;
    std::optional<KernelMatch> best;
    uint32_t best_pos = 0;
    auto consider = [&](uint32_t lane_index, size_t nth, bool later) {
        if (nth >= parts_[lane_index].at.size()) return;
        const KernelMatch candidate = match_at(lane_index, parts_[lane_index].at[nth]);
        if (!best || (later ? before(*best, candidate) : before(candidate, *best))) {
            best = candidate;
            best_pos = parts_[lane_index].at[nth];
        }
    };
    // After (before) the kernel selected when it is a match, else from `from` on (before `from`).
    const bool at_current = current != 0 && locate(current) && matches((*lanes_)[located_lane_].key[located_pos_]);
    const KernelMatch here = at_current ? match_at(located_lane_, located_pos_) : KernelMatch{};
    for (uint32_t l = 0; l < parts_.size(); ++l) {
        const Lane& lane = (*lanes_)[l];
        const std::vector<uint32_t>& at = parts_[l].at;
        // The first match at or after the kernel selected (after it: in its own lane, the one past it;
        // ids are unique, so in another lane the first at or after is after), or starting at `from`.
        const size_t first = at_current ? first_not_before(lane, at, here.t_start, here.kernel) +
                                              (!backward && l == here.lane ? 1 : 0)
                                        : first_starting_at(lane, at, 0, at.size(), from);
        if (backward) {
            if (first > 0) consider(l, first - 1, true);
        } else {
            consider(l, first, false);
        }
    }
    if (!best) {   // wrap around: the first (the last)
        for (uint32_t l = 0; l < parts_.size(); ++l)
            if (!parts_[l].at.empty()) consider(l, backward ? parts_[l].at.size() - 1 : 0, backward);
    }
    if (!best) return -1;
    if (match) *match = *best;
    // It is the kernel selected now: its index, and where it lies (no search for it when selected).
    index = static_cast<int64_t>(rank(best->t_start, best->kernel));
    selected = best->kernel;
    selected_match_ = *best;
    located_ = best->kernel;
    located_in_ = lanes_;
    located_found_ = true;
    located_lane_ = best->lane;
    located_pos_ = best_pos;
    return index;
}

std::vector<KernelMatch> FindState::all() const {
    std::vector<KernelMatch> out;
    if (!lanes_) return out;
    for (uint32_t l = 0; l < parts_.size(); ++l)
        for (uint32_t pos : parts_[l].at) out.push_back(match_at(l, pos));
    std::sort(out.begin(), out.end(), by_start);
    return out;
}

const std::vector<std::vector<MatchMark>>& FindState::marks(TimeRange range, float width, float min_px) const {
    // Kept for the next frame: the same view of the same matches (hovering, a still view) costs nothing.
    MarksCache& cache = marks_cache_;
    if (cache.generation == generation_ && cache.range.t0 == range.t0 && cache.range.t1 == range.t1 &&
        cache.width == width && cache.min_px == min_px)
        return cache.marks;
    cache = {generation_, range, width, min_px, {}};
    std::vector<std::vector<MatchMark>>& out = cache.marks;
    out.assign(parts_.size(), {});
    if (!lanes_ || !done() || range.span() <= 0 || width <= 0) return out;
    for (size_t l = 0; l < parts_.size(); ++l) {
        const Lane& lane = (*lanes_)[l];
        const std::vector<uint32_t>& at = parts_[l].at;
        std::vector<MatchMark>& marks = out[l];
        // A match's box as match_marks draws it.
        auto box = [&](uint32_t pos) {
            const int64_t start = lane.t_start[pos], end = std::max(lane.t_end[pos], start);
            auto x0 = static_cast<float>(range.x_of(start, width));
            auto x1 = static_cast<float>(range.x_of(end, width));
            if (x1 - x0 < min_px) {
                const float middle = (x0 + x1) / 2;
                x0 = middle - min_px / 2;
                x1 = middle + min_px / 2;
            }
            return std::pair<float, float>{std::clamp(x0, 0.f, width), std::clamp(x1, 0.f, width)};
        };
        auto add = [&](float x0, float x1, uint32_t count) {
            if (!marks.empty() && x0 <= marks.back().x1) {
                marks.back().x1 = std::max(marks.back().x1, x1);
                marks.back().count += count;
            } else {
                marks.push_back({x0, x1, count});
            }
        };
        size_t cur = first_starting_at(lane, at, 0, at.size(), range.t0 - longest);
        const size_t in_view_end = first_starting_at(lane, at, cur, at.size(), range.t1);
        // Those starting before the range, one by one (the ones ended before it are not in view).
        for (; cur < in_view_end && lane.t_start[at[cur]] < range.t0; ++cur) {
            const int64_t start = lane.t_start[at[cur]], end = lane.t_end[at[cur]];
            if (end < range.t0 || (end == range.t0 && end > start)) continue;
            const auto [x0, x1] = box(at[cur]);
            add(x0, x1, 1);
        }
        // Those starting in it by pixel column: when the lane's ends come in order as its starts do,
        // the matches starting in one column form one run of the marks (each reaches the next: a
        // narrow one is widened to min_px, at least 2 px, around its middle), its first has the least
        // x0 and its last the greatest x1, so the column's matches are added at once (a binary search
        // for the column's end) with the same result as one at a time.
        const bool by_column = lane.ends_sorted() && min_px >= 2;
        while (cur < in_view_end) {
            if (!by_column) {
                const auto [x0, x1] = box(at[cur]);
                add(x0, x1, 1);
                ++cur;
                continue;
            }
            const float column_end = std::floor(static_cast<float>(range.x_of(lane.t_start[at[cur]], width))) + 1;
            auto in_column = [&](size_t index) {
                return static_cast<float>(range.x_of(lane.t_start[at[index]], width)) < column_end;
            };
            // The column's end by galloping from cur (steps 1, 2, 4, ...), then halving: it is near, and
            // the memory read stays near too (a plain binary search over the rest read far first).
            size_t low = cur + 1, step = 1;
            while (low + step <= in_view_end && in_column(low + step - 1)) {
                low += step;
                step *= 2;
            }
            size_t high = std::min(low + step - 1, in_view_end);   // in_column(high) is false or high is the end
            while (low < high) {
                const size_t middle = low + (high - low) / 2;
                if (in_column(middle)) low = middle + 1;
                else high = middle;
            }
            const size_t end = low;
            const float x0 = box(at[cur]).first, x1 = box(at[end - 1]).second;
            add(x0, std::max(x1, box(at[cur]).second), static_cast<uint32_t>(end - cur));
            cur = end;
        }
    }
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
