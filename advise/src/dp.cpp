// The DP over blocks (dp.hpp states the model and what is optimal).
#include "mhc/advise/dp.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

namespace mhc::advise {

namespace {

constexpr int64_t kNone = INT64_MIN;

bool fits(int64_t window, int64_t held, int64_t capacity) { return window == kNone || window + held <= capacity; }

bool gap_fits(const SeparableModel& m, size_t held_blocks, int64_t sf, int64_t sb, int64_t capacity) {
    return (held_blocks >= m.gap_f.size() || fits(m.gap_f[held_blocks], sf, capacity)) &&
           (held_blocks >= m.gap_b.size() || fits(m.gap_b[held_blocks], sb, capacity));
}

bool allowed_choice(const std::vector<uint8_t>& allowed, size_t c) { return allowed.empty() || (c < allowed.size() && allowed[c]); }

struct State {
    int64_t sf, sb, t;
    int32_t parent;
    int32_t choice;
};

// Keeps the states that no other state beats in sf, sb and time; states within one quantum in
// both sums are merged into the fastest.
std::vector<State> prune(std::vector<State> v, int64_t quantum) {
    std::unordered_map<uint64_t, size_t> bucket;
    std::vector<State> merged;
    auto floor_div = [&](int64_t x) { return x >= 0 ? x / quantum : -((-x + quantum - 1) / quantum); };
    for (const State& s : v) {
        uint64_t key = (static_cast<uint64_t>(floor_div(s.sf)) << 32) ^ static_cast<uint64_t>(floor_div(s.sb) & 0xffffffff);
        auto [it, fresh] = bucket.emplace(key, merged.size());
        if (fresh) merged.push_back(s);
        else if (s.t < merged[it->second].t) merged[it->second] = s;
    }
    std::sort(merged.begin(), merged.end(), [](const State& a, const State& b) {
        if (a.t != b.t) return a.t < b.t;
        if (a.sf != b.sf) return a.sf < b.sf;
        return a.sb < b.sb;
    });
    std::map<int64_t, int64_t> stair;   // sf -> sb of kept states: sf up, sb down
    std::vector<State> out;
    for (const State& s : merged) {
        auto it = stair.upper_bound(s.sf);
        if (it != stair.begin() && std::prev(it)->second <= s.sb) continue;   // a faster state holds no more
        out.push_back(s);
        auto lo = stair.lower_bound(s.sf);
        while (lo != stair.end() && lo->second >= s.sb) lo = stair.erase(lo);
        stair[s.sf] = s.sb;
    }
    return out;
}

}  // namespace

int64_t model_peak(const SeparableModel& m, const std::vector<int>& choice) {
    int64_t peak = kNone, sf = 0, sb = 0;
    auto gap = [&](size_t held) {
        if (held < m.gap_f.size() && m.gap_f[held] != kNone) peak = std::max(peak, m.gap_f[held] + sf);
        if (held < m.gap_b.size() && m.gap_b[held] != kNone) peak = std::max(peak, m.gap_b[held] + sb);
    };
    gap(0);
    for (size_t k = 0; k < m.blocks.size(); ++k) {
        const BlockOption& o = m.blocks[k][static_cast<size_t>(choice[k])];
        if (o.wf != kNone) peak = std::max(peak, o.wf + sf);
        if (o.wb != kNone) peak = std::max(peak, o.wb + sb);
        sf += o.df;
        sb += o.db;
        gap(k + 1);
    }
    return peak;
}

int64_t model_time(const SeparableModel& m, const std::vector<int>& choice) {
    int64_t t = 0;
    for (size_t k = 0; k < m.blocks.size(); ++k) t += m.blocks[k][static_cast<size_t>(choice[k])].time;
    return t;
}

DpResult solve(const SeparableModel& m, int64_t capacity, const std::vector<uint8_t>& allowed, int64_t quantum) {
    DpResult r;
    const size_t n = m.blocks.size();
    if (!gap_fits(m, 0, 0, 0, capacity)) return r;
    std::vector<std::vector<State>> layers(n + 1);
    layers[0].push_back({0, 0, 0, -1, -1});
    for (size_t k = 0; k < n; ++k) {
        std::vector<State> next;
        for (size_t i = 0; i < layers[k].size(); ++i) {
            const State& s = layers[k][i];
            for (size_t c = 0; c < m.blocks[k].size(); ++c) {
                if (!allowed_choice(allowed, c)) continue;
                const BlockOption& o = m.blocks[k][c];
                if (!fits(o.wf, s.sf, capacity) || !fits(o.wb, s.sb, capacity)) continue;
                State t{s.sf + o.df, s.sb + o.db, s.t + o.time, static_cast<int32_t>(i), static_cast<int32_t>(c)};
                if (gap_fits(m, k + 1, t.sf, t.sb, capacity)) next.push_back(t);
            }
        }
        layers[k + 1] = prune(std::move(next), quantum);
        r.states = std::max<int64_t>(r.states, static_cast<int64_t>(layers[k + 1].size()));
        if (layers[k + 1].empty()) return r;
    }
    // the fastest final state (prune sorted them by time)
    const std::vector<State>& last = layers[n];
    size_t best = 0;
    r.feasible = true;
    r.choice.assign(n, 0);
    for (size_t k = n, i = best; k > 0; --k) {
        const State& s = layers[k][i];
        r.choice[k - 1] = s.choice;
        i = static_cast<size_t>(s.parent);
    }
    r.time = last[best].t;
    r.peak = model_peak(m, r.choice);
    return r;
}

DpResult brute_force(const SeparableModel& m, int64_t capacity, const std::vector<uint8_t>& allowed) {
    DpResult r;
    const size_t n = m.blocks.size();
    std::vector<int> c(n, 0);
    for (;;) {
        bool ok = true;
        for (size_t k = 0; k < n; ++k) ok = ok && allowed_choice(allowed, static_cast<size_t>(c[k]));
        if (ok) {
            int64_t peak = model_peak(m, c), t = model_time(m, c);
            if (peak <= capacity && (!r.feasible || t < r.time)) {
                r.feasible = true;
                r.choice = c;
                r.time = t;
                r.peak = peak;
            }
        }
        size_t k = 0;
        while (k < n && ++c[k] == static_cast<int>(m.blocks[k].size())) c[k++] = 0;
        if (k == n) break;
    }
    return r;
}

}  // namespace mhc::advise
