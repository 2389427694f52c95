// The exact search over neighbouring combinations (docs/advise.md "Search", 5), and the orders
// it moves and ranks by.
#include <map>

#include "mhc/advise/transforms.hpp"
#include "planner_parts.hpp"

namespace mhc::advise::planning {

namespace {

// Rounds of the exact search from each global setting's start; each round improves strictly, so
// it ends on its own long before this on every step measured (docs/advise.md "Search").
constexpr int kRefineRounds = 64;

}  // namespace

bool ranked_before(const Candidate& lhs, const Candidate& rhs) {
    if (lhs.fits != rhs.fits) return lhs.fits;
    // the time at the capacity: the step's and what giving cached memory back there costs
    const int64_t tl = time_at_capacity(lhs.prediction), tr = time_at_capacity(rhs.prediction);
    if (tl != tr) return tl < tr;
    // as fast in steady steps: the one that pays less once (the first step's release)
    const int64_t ol = time_as_captured(lhs.prediction), orr = time_as_captured(rhs.prediction);
    if (ol != orr) return ol < orr;
    const std::string jl = to_json(lhs.setting), jr = to_json(rhs.setting);
    if (jl.size() != jr.size()) return jl.size() < jr.size();   // equally fast: the one that changes less
    if (lhs.prediction.memory.reserved != rhs.prediction.memory.reserved)
        return lhs.prediction.memory.reserved < rhs.prediction.memory.reserved;
    return jl < jr;   // a total order: the same answers whatever was tried first
}

bool closer(const Candidate& lhs, const Candidate& rhs) {
    if (!lhs.fits && !rhs.fits) {
        if (lhs.prediction.memory.reserved != rhs.prediction.memory.reserved)
            return lhs.prediction.memory.reserved < rhs.prediction.memory.reserved;
        // the reserved peak moves in the allocator's segments: the live peak shows the way across a plateau
        if (lhs.prediction.memory.peak != rhs.prediction.memory.peak)
            return lhs.prediction.memory.peak < rhs.prediction.memory.peak;
    }
    return ranked_before(lhs, rhs);
}

// The exact search (docs/advise.md "Search", 5): from the best combination the DP returned (or a
// global setting alone), moves to the best of its neighbours (one block's choice changed, or the
// global setting), each predicted exactly under each allocator setting, while that one is
// better: faster and fitting once the combination fits (a neighbour whose step time is not below
// the combination's is not predicted); before, fitting or closer.
void refine(const Evaluator& ev, const std::vector<Setting>& globals, const std::vector<OffloadSetting>& offloads,
            const BlockEffects& effects, const PlannerOptions& opts, const std::vector<Combo>& starts,
            Predictions& predictions, Advice& advice) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    auto value = [&](const Combo& combo) {   // the combination under its better allocator setting
        Candidate best;
        bool have = false;
        for (Candidate& cand : predictions.predict_each(combine(base, globals[combo.global], combo.per, offloads[combo.global]))) {
            if (!have || closer(cand, best)) {
                best = std::move(cand);
                have = true;
            }
        }
        return best;
    };
    Combo cur = starts.front();
    Candidate now = value(cur);
    for (const Combo& start : starts) {
        Candidate cand = value(start);
        if (closer(cand, now)) {
            cur = start;
            now = cand;
        }
    }
    // A change: one coordinate (a block, or nb for the global setting) and its new value.
    struct Change {
        size_t at, to;
        int64_t time;   // the changed combination's step time, when measured (the combination fits)
    };
    auto apply = [&](Combo combo, const Change& change) {
        if (change.at == nb) combo.global = change.to;
        else combo.per[change.at] = static_cast<BlockChoice>(change.to);
        return combo;
    };
    for (int round = 0; round < kRefineRounds; ++round) {
        Combo next = cur;
        Candidate got = now;
        // only a faster one that runs at the capacity can be better once the combination fits: its
        // time and live peak first (no allocator setting changes them; live bytes above the
        // capacity run under none), then the exact prediction; returns that time (-1: not measured,
        // or the combination is left out: the pre-screen does not check the step, and a left-out
        // change is no half of a pair move)
        auto consider = [&](const Combo& combo) -> int64_t {
            int64_t time = -1;
            if (now.fits) {
                const Predictions::Quick quick =
                    predictions.quick(combine(base, globals[combo.global], combo.per, offloads[combo.global]));
                time = quick.time;
                if (time >= time_at_capacity(now.prediction) || (opts.capacity > 0 && quick.peak > opts.capacity))
                    return time;
            }
            Candidate cand = value(combo);
            if (cand.broken) return -1;
            if (closer(cand, got)) {
                next = combo;
                got = cand;
            }
            return time;
        };
        std::vector<Change> singles;   // in block order then choice order, then the global settings
        for (size_t k = 0; k < nb; ++k)
            for (size_t c = 0; c < static_cast<size_t>(kChoices); ++c)
                if (static_cast<BlockChoice>(c) != cur.per[k] && !effects.delta[k][c].empty())
                    singles.push_back({k, c, -1});
        for (size_t h = 0; h < globals.size(); ++h)
            if (h != cur.global) singles.push_back({nb, h, -1});
        for (Change& change : singles) change.time = consider(apply(cur, change));
        // better only: faster when both fit (an equally fast neighbour earlier in the ranking is
        // ranked anyway); before, fitting or closer
        auto better = [&] {
            return now.fits ? got.fits && time_at_capacity(got.prediction) < time_at_capacity(now.prediction)
                            : got.fits || closer(got, now);
        };
        if (!better() && now.fits && opts.pair_moves) {
            // No single change is better: two at once, one of which alone is faster (it did not
            // fit) and one other, on another block or the global setting; each pair once.
            ++advice.pair_rounds;
            auto faster = [&](const Change& change) {
                return change.time >= 0 && change.time < time_at_capacity(now.prediction);
            };
            for (size_t i = 0; i < singles.size(); ++i) {
                if (!faster(singles[i])) continue;
                for (size_t j = 0; j < singles.size(); ++j) {
                    if (singles[j].at == singles[i].at || (faster(singles[j]) && j < i)) continue;
                    consider(apply(apply(cur, singles[i]), singles[j]));
                }
            }
        }
        ++advice.refine_rounds;
        if (!better()) break;
        cur = next;
        now = got;
    }
}

}  // namespace mhc::advise::planning
