#include "mhc/viewer/lane.hpp"

#include "mhc/trace/model.hpp"

#include <algorithm>
#include <numeric>

namespace mhc::viewer {

namespace {
template <class T>
void permute(std::vector<T>& v, const std::vector<uint32_t>& order) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < order.size(); ++i) out[i] = v[order[i]];
    v.swap(out);
}
}  // namespace

void Lane::finish() {
    // Recorded streams come sorted; sort only when they do not (imports, nested ranges).
    if (!std::is_sorted(t_start.begin(), t_start.end())) {
        std::vector<uint32_t> order(t_start.size());
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(),
                         [&](uint32_t a, uint32_t b) { return t_start[a] < t_start[b]; });
        permute(t_start, order);
        permute(t_end, order);
        permute(key, order);
        permute(ref, order);
    }
    end_sorted_ = std::is_sorted(t_end.begin(), t_end.end());
    end_max_.clear();
    if (!end_sorted_) {
        end_max_.resize(t_end.size());
        int64_t m = INT64_MIN;
        for (size_t i = 0; i < t_end.size(); ++i) end_max_[i] = m = std::max(m, t_end[i]);
    }
}

void Lane::classify(const std::vector<uint8_t>& class_of_key, uint8_t fallback, int classes) {
    classes = std::clamp(classes, 1, 256);   // dominant_class sums into 256 slots
    classes_ = classes;
    cls_.resize(size());
    for (size_t i = 0; i < size(); ++i) {
        auto k = static_cast<size_t>(key[i]);
        uint8_t c = (key[i] >= 0 && k < class_of_key.size()) ? class_of_key[k] : fallback;
        cls_[i] = c < classes ? c : fallback;
    }
    size_t blocks = size() / kClassBlock;
    block_prefix_.assign((blocks + 1) * static_cast<size_t>(classes), 0);
    auto C = static_cast<size_t>(classes);
    for (size_t b = 0; b < blocks; ++b) {
        int64_t* next = &block_prefix_[(b + 1) * C];
        std::copy_n(&block_prefix_[b * C], C, next);
        for (size_t i = b * kClassBlock; i < (b + 1) * kClassBlock; ++i) next[cls_[i]] += t_end[i] - t_start[i];
    }
}

uint8_t Lane::dominant_class(size_t first, size_t count, bool* mixed) const {
    if (mixed) *mixed = false;
    if (cls_.empty() || count == 0) return 0;
    auto C = static_cast<size_t>(classes_);
    int64_t sum[256] = {};
    size_t end = std::min(first + count, size());
    size_t b0 = (first + kClassBlock - 1) / kClassBlock, b1 = end / kClassBlock;   // whole blocks [b0, b1)
    auto add = [&](size_t a, size_t z) {
        for (size_t i = a; i < z; ++i) sum[cls_[i]] += t_end[i] - t_start[i];
    };
    if (b0 < b1) {
        add(first, b0 * kClassBlock);
        for (size_t c = 0; c < C; ++c) sum[c] += block_prefix_[b1 * C + c] - block_prefix_[b0 * C + c];
        add(b1 * kClassBlock, end);
    } else {
        add(first, end);
    }
    // Ties (e.g. zero-length items only) go to the class of the run's first item.
    uint8_t best = cls_[first];
    for (size_t c = 0; c < C; ++c)
        if (sum[c] > sum[best]) best = static_cast<uint8_t>(c);
    if (mixed)
        for (size_t c = 0; c < C; ++c) *mixed = *mixed || (c != best && sum[c] > 0);
    return best;
}

std::vector<Lane> split_rows(const Lane& lane, size_t max_rows) {
    std::vector<Lane> rows;
    std::vector<int64_t> row_end;   // largest end placed in each row
    max_rows = std::max<size_t>(max_rows, 1);
    for (size_t i = 0; i < lane.size(); ++i) {
        size_t r = 0;
        while (r < row_end.size() && row_end[r] > lane.t_start[i]) ++r;
        if (r == row_end.size()) {
            if (r < max_rows) {
                Lane l;
                l.kind = lane.kind; l.device = lane.device; l.stream = lane.stream;
                l.row = static_cast<uint16_t>(r);
                if (r == 0) l.title = lane.title;
                rows.push_back(std::move(l));
                row_end.push_back(INT64_MIN);
            } else {
                r = max_rows - 1;
            }
        }
        rows[r].push(lane.t_start[i], lane.t_end[i], lane.key[i], lane.ref[i]);
        row_end[r] = std::max(row_end[r], lane.t_end[i]);
    }
    if (rows.empty()) {
        rows.push_back(lane);
        return rows;
    }
    for (Lane& l : rows) l.finish();
    return rows;
}

size_t Lane::first_ending_at_or_after(int64_t t) const {
    // end_max is non-decreasing, so the first index with end_max >= t is a partition point.
    size_t lo = 0, hi = size();
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (end_max(mid) < t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

std::string fit_label(const std::string& text, float room, float char_width) {
    if (char_width <= 0 || room <= 0) return "";
    auto chars = [](const std::string& line) {
        size_t count = 0;
        for (unsigned char byte : line) count += (byte & 0xC0) != 0x80;   // UTF-8: the characters' first bytes
        return count;
    };
    const auto fits = static_cast<size_t>(room / char_width);
    if (chars(text) <= fits) return text;
    if (fits < 5) return "";   // two characters and "...", or nothing
    // The first fits - 3 characters, then the dots.
    size_t keep = fits - 3, end = 0;
    for (size_t seen = 0; end < text.size(); ++end) {
        if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80) {
            if (seen == keep) break;
            ++seen;
        }
    }
    return text.substr(0, end) + "...";
}

std::string folded_label(uint32_t count, const std::string& what, float room, float char_width) {
    const std::string number = std::to_string(count);
    if (char_width <= 0 || room <= 0) return "";
    const auto fits = static_cast<size_t>(room / char_width);
    std::string whole = what.empty() ? number : number + " " + what;
    if (whole.size() <= fits) return whole;
    const size_t comma = what.find(", ");
    if (comma != std::string::npos) return folded_label(count, what.substr(0, comma), room, char_width);
    if (!what.empty() && number.size() + 6 <= fits) return fit_label(whole, room, char_width);   // "373 NCCL..."
    return number.size() <= fits ? number : "";
}

std::string folded_noun(const Lane& lane, const char* family, bool mixed, bool ops) {
    const char* items = ops ? "ops" : "kernels";
    switch (lane.kind) {
        case LaneKind::Kernels:
            if (!family) return items;
            return mixed ? std::string(items) + ", mostly " + family : family;
        case LaneKind::Copies: return "copies";
        case LaneKind::Markers:
            if (lane.stream == static_cast<int64_t>(trace::MarkerKind::Step)) return "steps";
            if (lane.stream == static_cast<int64_t>(trace::MarkerKind::Layer)) return "layers";
            return "ranges";
        case LaneKind::Events: return "events";
        case LaneKind::Highlight: return "accesses";
    }
    return {};
}

}  // namespace mhc::viewer
