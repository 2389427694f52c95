#include "mhc/viewer/curve.hpp"

#include <algorithm>
#include <cmath>
#include <array>
#include <numeric>

#include "mhc/trace/event_order.hpp"
#include "mhc/trace/model.hpp"

namespace mhc::viewer {

void Curve::assign(std::vector<int64_t> t, std::vector<double> v) {
    // Coalesce equal times (last value wins) so that every sample has its own time.
    size_t w = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        if (w > 0 && t[w - 1] == t[i]) { v[w - 1] = v[i]; continue; }
        t[w] = t[i]; v[w] = v[i]; ++w;
    }
    t.resize(w); v.resize(w);
    t_ = std::move(t);
    v_ = std::move(v);
    levels_.clear();
    peak_ = 0; peak_t_ = t_.empty() ? 0 : t_.front();
    for (size_t i = 0; i < v_.size(); ++i)
        if (v_[i] > peak_) { peak_ = v_[i]; peak_t_ = t_[i]; }
    // Level 0 pairs the raw values; each next level pairs the previous one.
    if (v_.size() < 2) return;
    std::vector<MinMax> cur((v_.size() + 1) / 2);
    for (size_t i = 0; i < cur.size(); ++i) {
        double a = v_[2 * i], b = (2 * i + 1 < v_.size()) ? v_[2 * i + 1] : a;
        cur[i] = {std::min(a, b), std::max(a, b)};
    }
    levels_.push_back(std::move(cur));
    while (levels_.back().size() > 1) {
        const auto& p = levels_.back();
        std::vector<MinMax> next((p.size() + 1) / 2);
        for (size_t i = 0; i < next.size(); ++i) {
            MinMax a = p[2 * i], b = (2 * i + 1 < p.size()) ? p[2 * i + 1] : a;
            next[i] = {std::min(a.min, b.min), std::max(a.max, b.max)};
        }
        levels_.push_back(std::move(next));
    }
}

Curve Curve::from_intervals(const std::vector<int64_t>& t_alloc, const std::vector<int64_t>& t_free,
                            const std::vector<int64_t>& bytes) {
    return from_events(trace::memory_events(t_alloc, t_free), bytes);
}

Curve Curve::from_events(const std::vector<trace::MemoryEvent>& ev, const std::vector<int64_t>& bytes) {
    // Events at one instant in the trace's order (trace/event_order.hpp): a buffer reused at
    // once is not counted twice. One sample per instant, its final value; a block alive only
    // at an instant (t_free == t_alloc) is drawn for 1 ns at the height it reached, so that
    // the curve's peak counts it as the trace's peak does.
    std::vector<int64_t> t;
    std::vector<double> v;
    t.reserve(ev.size()); v.reserve(ev.size());
    int64_t live = 0;
    for (size_t k = 0; k < ev.size();) {
        const int64_t now = ev[k].time;
        int64_t high = INT64_MIN;
        for (; k < ev.size() && ev[k].time == now; ++k) {
            const int64_t b = bytes[static_cast<size_t>(ev[k].row)];
            live += ev[k].free ? -b : b;
            high = std::max(high, live);
        }
        const bool next_at_once = k < ev.size() && ev[k].time == now + 1;
        if (high > live && !next_at_once && now < INT64_MAX) {
            t.push_back(now);
            v.push_back(static_cast<double>(high));
            t.push_back(now + 1);
        } else {
            t.push_back(now);
        }
        v.push_back(static_cast<double>(live));
        if (high > live && next_at_once) v.back() = static_cast<double>(high);   // the next instant sets the value after it
    }
    Curve c;
    c.assign(std::move(t), std::move(v));
    return c;
}

void StepSeries::push(int64_t t, double v) {
    if (!t_.empty() && t_.back() == t) {
        v_.back() = static_cast<float>(v);
        return;
    }
    t_.push_back(t);
    v_.push_back(static_cast<float>(v));
}

double StepSeries::value_at(int64_t t) const {
    auto it = std::upper_bound(t_.begin(), t_.end(), t);
    return it == t_.begin() ? 0.0 : v_[static_cast<size_t>(it - t_.begin()) - 1];
}

double StepSeries::value_at(int64_t t, size_t& hint) const {
    const size_t n = t_.size();
    if (hint >= n || t_[hint] > t) return value_at(t);   // before the hint: no gallop
    size_t lo = hint, step = 1;   // t_[lo] <= t
    while (lo + step < n && t_[lo + step] <= t) {
        lo += step;
        step *= 2;
    }
    auto it = std::upper_bound(t_.begin() + static_cast<std::ptrdiff_t>(lo),
                               t_.begin() + static_cast<std::ptrdiff_t>(std::min(n, lo + step)), t);
    hint = static_cast<size_t>(it - t_.begin()) - 1;
    return v_[hint];
}

double Curve::value_at(int64_t t) const {
    auto it = std::upper_bound(t_.begin(), t_.end(), t);
    return it == t_.begin() ? 0.0 : v_[static_cast<size_t>(it - t_.begin()) - 1];
}

Curve::MinMax Curve::index_range(size_t lo, size_t hi) const {
    MinMax r{v_[lo], v_[lo]};
    auto take = [&](MinMax m) { r.min = std::min(r.min, m.min); r.max = std::max(r.max, m.max); };
    // Raw values at the ragged ends, then whole blocks from the pyramid, bottom up.
    if (lo % 2 == 1) { take({v_[lo], v_[lo]}); ++lo; }
    if (hi % 2 == 0 && hi >= lo) { take({v_[hi], v_[hi]}); if (hi == 0) return r; --hi; }
    if (lo > hi) return r;
    size_t a = lo / 2, b = hi / 2;
    for (size_t k = 0; k < levels_.size() && a <= b; ++k) {
        const auto& L = levels_[k];
        if (a % 2 == 1) take(L[a++]);
        if (b % 2 == 0 && a <= b) { take(L[b]); if (b == 0) break; --b; }
        if (a > b) break;
        a /= 2; b /= 2;
    }
    return r;
}

Curve::MinMax Curve::range(int64_t a, int64_t b) const {
    if (t_.empty()) return {0, 0};
    auto first = std::upper_bound(t_.begin(), t_.end(), a);
    auto last = std::lower_bound(t_.begin(), t_.end(), b);
    return between(static_cast<size_t>(first - t_.begin()), static_cast<size_t>(last - t_.begin()));
}

Curve::MinMax Curve::between(size_t first, size_t last) const {
    // The sample in force at a (the one before `first`), then every sample that starts inside
    // [a, b) (those before `last`).
    bool before_start = first == 0;
    size_t lo = before_start ? 0 : first - 1;
    if (last == 0) return {0, 0};
    MinMax r = index_range(lo, last - 1);
    if (before_start) r.min = std::min(r.min, 0.0);
    return r;
}

namespace {

// The first index from `from` on whose time is past `t` (`strict`: t_[i] > t, else t_[i] >= t),
// knowing none before `from` is: a gallop, so that increasing queries stay near each other in
// memory instead of starting each binary search over the whole array.
size_t gallop(const std::vector<int64_t>& t, size_t from, int64_t v, bool strict) {
    auto past = [&](size_t i) { return strict ? t[i] > v : t[i] >= v; };
    const size_t n = t.size();
    if (from >= n || past(from)) return from;
    size_t lo = from, step = 1;   // !past(lo)
    while (lo + step < n && !past(lo + step)) {
        lo += step;
        step *= 2;
    }
    size_t hi = std::min(n, lo + step);   // past(hi) or hi == n
    auto it = strict ? std::upper_bound(t.begin() + static_cast<std::ptrdiff_t>(lo + 1), t.begin() + static_cast<std::ptrdiff_t>(hi), v)
                     : std::lower_bound(t.begin() + static_cast<std::ptrdiff_t>(lo + 1), t.begin() + static_cast<std::ptrdiff_t>(hi), v);
    return static_cast<size_t>(it - t.begin());
}

}  // namespace

int64_t Curve::argmax(int64_t a, int64_t b) const {
    double m = range(a, b).max;
    // Descend: narrow [a, b) by halves while the maximum stays inside (O(log^2 n)).
    while (b - a > 1) {
        int64_t mid = a + (b - a) / 2;
        if (range(a, mid).max >= m) b = mid; else a = mid;
    }
    return a;
}

size_t Curve::argmax_index(size_t lo, size_t hi) const {
    // The pyramid nodes covering [lo, hi] from left to right (as index_range takes them: from
    // both ends, the right ones reversed after), the first holding the maximum, then down it.
    struct Node {
        int level = -1;   // -1: a raw value
        size_t index = 0;
        double max = 0;
    };
    std::array<Node, 2 * 64> left{}, right{};
    size_t nl = 0, nr = 0;
    if (lo % 2 == 1 || lo == hi) {
        left[nl++] = {-1, lo, v_[lo]};
        ++lo;
    }
    if (lo <= hi && hi % 2 == 0) {
        right[nr++] = {-1, hi, v_[hi]};
        if (hi == 0) lo = 1;
        else --hi;
    }
    if (lo <= hi) {
        size_t first = lo / 2, last = hi / 2;
        for (size_t k = 0; k < levels_.size() && first <= last; ++k) {
            const auto& level = levels_[k];
            if (first == last) {
                left[nl++] = {static_cast<int>(k), first, level[first].max};
                break;
            }
            if (first % 2 == 1) {
                left[nl++] = {static_cast<int>(k), first, level[first].max};
                ++first;
            }
            if (last % 2 == 0) {
                right[nr++] = {static_cast<int>(k), last, level[last].max};
                --last;
            }
            if (first > last) break;
            first /= 2;
            last /= 2;
        }
    }
    while (nr > 0) left[nl++] = right[--nr];
    double best = left[0].max;
    for (size_t k = 1; k < nl; ++k) best = std::max(best, left[k].max);
    Node node = left[0];
    for (size_t k = 0; k < nl; ++k)
        if (left[k].max >= best) {
            node = left[k];
            break;
        }
    // Down: the left child when it holds the maximum (a missing right child repeats the left).
    while (node.level >= 0) {
        const size_t child = 2 * node.index;
        if (node.level == 0) return v_[child] >= best || child + 1 >= v_.size() ? child : child + 1;
        const auto& below = levels_[static_cast<size_t>(node.level - 1)];
        const bool left_child = below[child].max >= best || child + 1 >= below.size();
        const size_t next = left_child ? child : child + 1;
        node = {node.level - 1, next, below[next].max};
    }
    return node.index;
}

void prepare_curve(const Curve& c,   // NOLINT(readability-identifier-length): the curve, as always named here
                   TimeRange range, int width, CurveColumns& out, bool instants) {
    out.min.assign(static_cast<size_t>(std::max(width, 0)), 0.f);
    out.max.assign(out.min.size(), 0.f);
    out.at.assign(instants ? out.min.size() : 0, 0);
    out.y_max = 0;
    out.peak_col = -1;
    if (width <= 0 || range.span() <= 0) return;
    const double ns_per_col = static_cast<double>(range.span()) / width;
    // Column boundaries increase: each search gallops on from the last one.
    size_t first = 0, last = 0;
    for (int x = 0; x < width; ++x) {
        int64_t a = range.t0 + static_cast<int64_t>(x * ns_per_col);
        int64_t b = range.t0 + static_cast<int64_t>((x + 1) * ns_per_col);
        if (b <= a) b = a + 1;
        first = gallop(c.times(), first, a, true);
        last = gallop(c.times(), std::max(last, first), b, false);
        Curve::MinMax m = c.empty() ? Curve::MinMax{0, 0} : c.between(first, last);
        out.min[static_cast<size_t>(x)] = static_cast<float>(m.min);
        out.max[static_cast<size_t>(x)] = static_cast<float>(m.max);
        if (m.max > out.y_max) { out.y_max = m.max; out.peak_col = x; }
        if (instants) {
            // The sample in force at a (index first - 1, shown from a) and those starting inside.
            int64_t at = a;
            if (last > 0 && last > first) {
                const size_t top = c.argmax_index(first > 0 ? first - 1 : 0, last - 1);
                if (top >= first) at = c.times()[top];
            }
            out.at[static_cast<size_t>(x)] = at;
        }
    }
}

Curve::MinMax columns_min_max(const CurveColumns& cols, size_t columns) {
    const size_t drawn = std::min({columns, cols.min.size(), cols.max.size()});
    if (drawn == 0) return {};
    Curve::MinMax out{cols.min[0], cols.max[0]};
    for (size_t x = 1; x < drawn; ++x) {
        out.min = std::min(out.min, static_cast<double>(cols.min[x]));
        out.max = std::max(out.max, static_cast<double>(cols.max[x]));
    }
    return out;
}

size_t columns_before_first_sample(const Curve& curve, TimeRange range, int width) {
    if (curve.empty() || width <= 0 || range.span() <= 0 || curve.times().front() <= range.t0) return 0;
    const double column = std::floor(range.x_of(curve.times().front(), width));
    return static_cast<size_t>(std::clamp(column, 0.0, static_cast<double>(width)));
}

}  // namespace mhc::viewer
