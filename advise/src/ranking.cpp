// Every distinct setting predicted, ranked, and the answers printed (docs/advise.md "Search", 6).
#include <algorithm>
#include <map>

#include "planner_parts.hpp"

namespace mhc::advise::planning {

namespace {

// The setting as its answer reads (docs/advise.md "Search", 6): each module list replaced by how
// many of its modules are in each stack (the name less its last component), the allocator cleared.
std::string reads_as(const Setting& setting) {
    auto counts = [](const std::vector<std::string>& modules) {
        std::map<std::string, int> per_stack;
        for (const std::string& name : modules)
            ++per_stack[name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.'))];
        std::vector<std::string> out;
        out.reserve(per_stack.size());
        for (const auto& [stack, count] : per_stack) out.push_back(stack + " x" + std::to_string(count));
        return out;
    };
    Setting key = setting;
    key.allocator.clear();
    if (key.offload && key.offload->modules) {
        // an offloaded block that is also checkpointed (its inputs offloaded) reads apart from one
        // that is not: checkpoint 2 + offload 1 is either one checkpointed and one with its inputs
        // offloaded, or two checkpointed and one offloaded
        std::vector<std::string> plain, inputs;
        for (const std::string& name : *key.offload->modules) {
            const bool wrapped = std::any_of(key.checkpoint.begin(), key.checkpoint.end(), [&](const CheckpointGroup& group) {
                return group.policy == Policy::Full &&
                       std::find(group.modules.begin(), group.modules.end(), name) != group.modules.end();
            });
            (wrapped ? inputs : plain).push_back(name);
        }
        key.offload->modules = counts(plain);
        for (const std::string& count : counts(inputs)) key.offload->modules->push_back("checkpointed " + count);
    }
    for (CheckpointGroup& group : key.checkpoint) group.modules = counts(group.modules);
    return to_json(key);
}

}  // namespace

// Settings that read the same count once (the first that fits): the same choices on as many
// blocks of each stack, the same global settings, whatever the allocator.
void rank_distinct(const std::map<std::string, Candidate>& seen, const PlannerOptions& options, Advice& advice) {
    for (auto& [key, c] : seen)
        if (!c.broken) advice.all.push_back(c);
    std::sort(advice.all.begin(), advice.all.end(), ranked_before);
    std::map<std::string, bool> shown;
    // An answer as fast as one shown above, with the same peaks, that holds at least as many host
    // bytes adds a change that changes nothing on the GPU (a streamed offload of checkpointed
    // blocks' inputs whose device copies the stash keeps to the backward): not printed.
    auto adds_nothing = [&](const Candidate& cand) {
        return std::any_of(advice.ranked.begin(), advice.ranked.end(), [&](const Candidate& above) {
            const Memory &mine = cand.prediction.memory, &theirs = above.prediction.memory;
            return time_at_capacity(cand.prediction) == time_at_capacity(above.prediction) &&
                   mine.peak == theirs.peak && mine.reserved == theirs.reserved &&
                   mine.reserved_at == theirs.reserved_at && cand.prediction.host_peak >= above.prediction.host_peak;
        });
    };
    for (const Candidate& cand : advice.all) {
        if (!cand.fits || !cand.within_budget || static_cast<int>(advice.ranked.size()) >= options.top) continue;
        const std::string key = reads_as(cand.setting);
        if (shown[key] || adds_nothing(cand)) continue;
        shown[key] = true;
        advice.ranked.push_back(cand);
    }
}

}  // namespace mhc::advise::planning
