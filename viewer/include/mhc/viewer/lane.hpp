#pragma once
// A Lane is one timeline track: intervals sorted by start time. Kernels of one stream,
// copies of one direction, markers of one kind, simulated events of one kind are lanes.
#include <cstdint>
#include <string>
#include <vector>

namespace mhc::viewer {

// What a lane holds; decides colours and tooltips in the front-end.
enum class LaneKind : uint8_t { Kernels, Copies, Markers, Events, Highlight };

struct Lane {
    LaneKind kind = LaneKind::Kernels;
    std::string title;
    int32_t device = 0;
    int64_t stream = 0;       // kernels/copies: stream; markers: marker kind; events: event kind
    std::vector<int64_t> t_start, t_end;
    std::vector<int32_t> key;  // colour/label key: string id (kernels, markers), event kind, ...
    std::vector<int64_t> ref;  // row id: kernel id, copy id, marker id, event row index

    size_t size() const { return t_start.size(); }
    bool empty() const { return t_start.empty(); }
    void push(int64_t s, int64_t e, int32_t k, int64_t r) {
        t_start.push_back(s); t_end.push_back(e < s ? s : e); key.push_back(k); ref.push_back(r);
    }
    // Sorts by start (stable) and builds the search structure; call once after the last push.
    void finish();

    // First item whose end reaches t (items before it end before t): binary search.
    size_t first_ending_at_or_after(int64_t t) const;
    // Largest end among items [0, i] (t_end itself when ends are already monotonic).
    int64_t end_max(size_t i) const { return end_sorted_ ? t_end[i] : end_max_[i]; }

private:
    bool end_sorted_ = true;
    std::vector<int64_t> end_max_;   // prefix max of t_end, only when ends are not monotonic
};

}  // namespace mhc::viewer
