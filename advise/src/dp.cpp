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

bool gap_fits(const SeparableModel& model, size_t held_blocks, int64_t sf, int64_t sb, int64_t capacity) {
    return (held_blocks >= model.gap_f.size() || fits(model.gap_f[held_blocks], sf, capacity)) &&
           (held_blocks >= model.gap_b.size() || fits(model.gap_b[held_blocks], sb, capacity));
}

bool allowed_choice(const std::vector<uint8_t>& allowed, size_t choice) {
    return allowed.empty() || (choice < allowed.size() && allowed[choice]);
}

struct State {
    int64_t sf, sb, t;
    int32_t parent;
    int32_t choice;
};

// Keeps the states that no other state beats in sf, sb and time; states within one quantum in
// both sums are merged into the fastest.
std::vector<State> prune(const std::vector<State>& states, int64_t quantum) {
    std::unordered_map<uint64_t, size_t> bucket;
    std::vector<State> merged;
    auto floor_div = [&](int64_t value) { return value >= 0 ? value / quantum : -((-value + quantum - 1) / quantum); };
    for (const State& state : states) {
        uint64_t key = (static_cast<uint64_t>(floor_div(state.sf)) << 32) ^
                       static_cast<uint64_t>(floor_div(state.sb) & 0xffffffff);
        auto [it, fresh] = bucket.emplace(key, merged.size());
        if (fresh) merged.push_back(state);
        else if (state.t < merged[it->second].t) merged[it->second] = state;
    }
    std::sort(merged.begin(), merged.end(), [](const State& lhs, const State& rhs) {
        if (lhs.t != rhs.t) return lhs.t < rhs.t;
        if (lhs.sf != rhs.sf) return lhs.sf < rhs.sf;
        return lhs.sb < rhs.sb;
    });
    std::map<int64_t, int64_t> stair;   // sf -> sb of kept states: sf up, sb down
    std::vector<State> out;
    for (const State& state : merged) {
        auto it = stair.upper_bound(state.sf);
        if (it != stair.begin() && std::prev(it)->second <= state.sb) continue;   // a faster state holds no more
        out.push_back(state);
        auto lo = stair.lower_bound(state.sf);
        while (lo != stair.end() && lo->second >= state.sb) lo = stair.erase(lo);
        stair[state.sf] = state.sb;
    }
    return out;
}

}  // namespace

int64_t model_peak(const SeparableModel& model, const std::vector<int>& choice) {
    int64_t peak = kNone, sf = 0, sb = 0;
    auto gap = [&](size_t held) {
        if (held < model.gap_f.size() && model.gap_f[held] != kNone) peak = std::max(peak, model.gap_f[held] + sf);
        if (held < model.gap_b.size() && model.gap_b[held] != kNone) peak = std::max(peak, model.gap_b[held] + sb);
    };
    gap(0);
    for (size_t k = 0; k < model.blocks.size(); ++k) {
        const BlockOption& option = model.blocks[k][static_cast<size_t>(choice[k])];
        if (option.wf != kNone) peak = std::max(peak, option.wf + sf);
        if (option.wb != kNone) peak = std::max(peak, option.wb + sb);
        sf += option.df;
        sb += option.db;
        gap(k + 1);
    }
    return peak;
}

int64_t model_time(const SeparableModel& model, const std::vector<int>& choice) {
    int64_t time = 0;
    for (size_t k = 0; k < model.blocks.size(); ++k) time += model.blocks[k][static_cast<size_t>(choice[k])].time;
    return time;
}

DpResult solve(const SeparableModel& model, int64_t capacity, const std::vector<uint8_t>& allowed, int64_t quantum) {
    DpResult result;
    const size_t block_count = model.blocks.size();
    if (!gap_fits(model, 0, 0, 0, capacity)) return result;
    std::vector<std::vector<State>> layers(block_count + 1);
    layers[0].push_back({0, 0, 0, -1, -1});
    for (size_t k = 0; k < block_count; ++k) {
        std::vector<State> next;
        for (size_t i = 0; i < layers[k].size(); ++i) {
            const State& state = layers[k][i];
            for (size_t c = 0; c < model.blocks[k].size(); ++c) {
                if (!allowed_choice(allowed, c)) continue;
                const BlockOption& option = model.blocks[k][c];
                if (!fits(option.wf, state.sf, capacity) || !fits(option.wb, state.sb, capacity)) continue;
                State extended{state.sf + option.df, state.sb + option.db, state.t + option.time,
                               static_cast<int32_t>(i), static_cast<int32_t>(c)};
                if (gap_fits(model, k + 1, extended.sf, extended.sb, capacity)) next.push_back(extended);
            }
        }
        layers[k + 1] = prune(next, quantum);
        result.states = std::max<int64_t>(result.states, static_cast<int64_t>(layers[k + 1].size()));
        if (layers[k + 1].empty()) return result;
    }
    // the fastest final state (prune sorted them by time)
    const std::vector<State>& last = layers[block_count];
    size_t best = 0;
    result.feasible = true;
    result.choice.assign(block_count, 0);
    for (size_t k = block_count, i = best; k > 0; --k) {
        const State& state = layers[k][i];
        result.choice[k - 1] = state.choice;
        i = static_cast<size_t>(state.parent);
    }
    result.time = last[best].t;
    result.peak = model_peak(model, result.choice);
    return result;
}

DpResult brute_force(const SeparableModel& model, int64_t capacity, const std::vector<uint8_t>& allowed) {
    DpResult result;
    const size_t block_count = model.blocks.size();
    std::vector<int> choice(block_count, 0);
    for (;;) {
        bool ok = true;
        for (size_t k = 0; k < block_count; ++k) ok = ok && allowed_choice(allowed, static_cast<size_t>(choice[k]));
        if (ok) {
            int64_t peak = model_peak(model, choice), time = model_time(model, choice);
            if (peak <= capacity && (!result.feasible || time < result.time)) {
                result.feasible = true;
                result.choice = choice;
                result.time = time;
                result.peak = peak;
            }
        }
        size_t position = 0;
        while (position < block_count && ++choice[position] == static_cast<int>(model.blocks[position].size()))
            choice[position++] = 0;
        if (position == block_count) break;
    }
    return result;
}

}  // namespace mhc::advise
