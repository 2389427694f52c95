#pragma once
// The planner's parts that its files share (planner.hpp says what the planner does):
//   planner.cpp          single-block effects, the separable model, the DP per global setting and
//                        family of choices, and advise() that runs the stages in order
//   search.cpp           the exact search over neighbouring combinations, and the orders it moves by
//   ranking.cpp          the answers ranked, each that reads the same once
//   allocator_values.cpp the allocator settings searched (max_split_size_mb, roundup_power2_divisions)
//   refusals.cpp         what the search does not offer on a block, and why
// and here: every setting predicted once for the whole search (Predictions).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mhc/advise/planner.hpp"
#include "mhc/common/error.hpp"

namespace mhc::advise::planning {

constexpr int kChoices = static_cast<int>(BlockChoice::Count);

// What each block's choice does alone (global setting as captured).
struct BlockEffects {
    std::vector<int64_t> base_window;
    int64_t base_time = 0;
    // [block][choice]: window deltas (empty: choice not available) and added time
    std::vector<std::vector<std::vector<int64_t>>> delta;
    std::vector<std::vector<int64_t>> time;
};

// A combination: the global setting (by its index) and each block's choice.
struct Combo {
    size_t global;
    std::vector<BlockChoice> per;
};

// The ranking's order (docs/advise.md "Search", 6): fitting first, then faster, then the setting
// that changes less (its compact JSON shorter), then the smaller reserved peak, then the JSON's
// byte order.
bool ranked_before(const Candidate& lhs, const Candidate& rhs);

// Of two candidates, the one the exact search moves towards: one that fits before one that does
// not, of two that fit the ranking's first, of two that do not the smaller reserved peak, then the
// smaller live peak, then the ranking's first.
bool closer(const Candidate& lhs, const Candidate& rhs);

// Every setting predicted so far, by its JSON, as a candidate against the captured step; each
// counted in advice.evaluations.
class Predictions {
public:
    Predictions(const Evaluator& ev, const PlannerOptions& options, const std::vector<std::string>& confs,
                Advice& advice)
        : ev_(ev), options_(options), confs_(confs), advice_(advice) {}

    Candidate candidate(const Setting& setting, const Prediction& prediction) const {
        Candidate cand;
        cand.setting = setting;
        cand.prediction = prediction;
        // against the captured step; at the capacity, with what giving cached memory back costs
        cand.loss = advice_.baseline.step_time > 0 ? static_cast<double>(time_at_capacity(cand.prediction)) /
                                                             static_cast<double>(advice_.baseline.step_time) -
                                                         1
                                                   : 0;
        cand.fits = fits(cand.prediction.memory,
                         options_.capacity);   // runs at the capacity (docs/advise.md "What fits")
        cand.within_budget = options_.budget < 0 || cand.loss <= options_.budget + 1e-12;
        return cand;
    }

    // A combination left out: after every other one in each order of the search.
    static Candidate broken(const Setting& setting) {
        Candidate cand;
        cand.setting = setting;
        cand.broken = true;
        cand.prediction.step_time = cand.prediction.memory.peak = cand.prediction.memory.reserved =
            cand.prediction.memory.reserved_at = INT64_MAX / 4;
        return cand;
    }

    // The setting as it is (its own allocator setting).
    Candidate predict(const Setting& setting) {
        std::string key = to_json(setting);
        auto it = seen_.find(key);
        if (it != seen_.end()) return it->second;
        predict_under(setting, {setting.allocator});
        return seen_[key];
    }

    // The setting under each allocator setting of the search (its own aside), in that order: the
    // step transformed once for those not predicted yet.
    std::vector<Candidate> predict_each(const Setting& setting) {
        std::vector<Setting> each(confs_.size(), setting);
        std::vector<std::string> missing;
        for (size_t i = 0; i < confs_.size(); ++i) {
            each[i].allocator = confs_[i];
            if (seen_.find(to_json(each[i])) == seen_.end()) missing.push_back(confs_[i]);
        }
        if (!missing.empty()) predict_under(setting, missing);
        std::vector<Candidate> out;
        out.reserve(confs_.size());
        for (const Setting& under : each) out.push_back(seen_[to_json(under)]);
        return out;
    }

    // A setting's step time and live-bytes peak, measured once for the whole search (no allocator
    // setting changes either): from its exact prediction when there is one, else Evaluator::quick
    // (counted in advice.evaluations). The live peak bounds every allocator setting's reserved peak
    // from below (the reserved bytes hold the live ones), so a setting whose live peak exceeds the
    // capacity runs at it under none.
    struct Quick {
        int64_t time = 0, peak = 0;
    };
    Quick quick(const Setting& setting) {
        Setting under = setting;
        under.allocator = confs_.front();
        if (auto known = seen_.find(to_json(under)); known != seen_.end())
            return {known->second.prediction.step_time, known->second.prediction.memory.peak};
        const std::string key = to_json(setting);
        auto known = quick_.find(key);
        if (known == quick_.end()) {
            const Evaluator::Quick measured = ev_.quick(setting);
            known = quick_.emplace(key, Quick{measured.step_time, measured.live.peak}).first;
            ++advice_.evaluations;
        }
        return known->second;
    }

    void keep(const Candidate& cand) { seen_[to_json(cand.setting)] = cand; }
    const std::map<std::string, Candidate>& seen() const { return seen_; }

private:
    // Predicts `setting` under each of `confs` into seen_: the step transformed once.
    void predict_under(const Setting& setting, const std::vector<std::string>& confs) {
        std::vector<Prediction> got;
        bool ok = true;
        try {
            got = ev_.predict(setting, confs, options_.capacity);
        } catch (const Error& e) {
            // one combination a transform gets wrong is left out, not the whole search
            if (e.kind() != Error::Kind::Internal) throw;
            if (advice_.broken++ == 0) advice_.broken_first = e.what();
            ok = false;
        }
        for (size_t j = 0; j < confs.size(); ++j) {
            Setting under = setting;
            under.allocator = confs[j];
            seen_[to_json(under)] = ok ? candidate(under, got[j]) : broken(under);
        }
        advice_.evaluations += static_cast<int64_t>(confs.size());
    }

    const Evaluator& ev_;
    const PlannerOptions& options_;
    const std::vector<std::string>& confs_;
    Advice& advice_;
    std::map<std::string, Candidate> seen_;
    std::map<std::string, Quick> quick_;   // by the setting's JSON (no allocator setting)
};

// The exact search (docs/advise.md "Search", 5) from the best of `starts`, each combination
// predicted under each allocator setting of `predictions`.
void refine(const Evaluator& ev, const std::vector<Setting>& globals, const std::vector<OffloadSetting>& offloads,
            const BlockEffects& effects, const PlannerOptions& opts, const std::vector<Combo>& starts,
            Predictions& predictions, Advice& advice);

// Every distinct setting predicted, fastest first, and the first `top` that fit within the budget
// (advice.all, advice.ranked).
void rank_distinct(const std::map<std::string, Candidate>& seen, const PlannerOptions& options, Advice& advice);

// How many values of max_split_size_mb and of roundup_power2_divisions the allocator search tried.
void count_allocator_values(const Base& base, const PlannerOptions& options, Advice& advice);

}  // namespace mhc::advise::planning
