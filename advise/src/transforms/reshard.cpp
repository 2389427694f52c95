// FSDP2's reshard_after_forward=False on a fully_shard module whose capture resharded it: the
// group's unsharded parameters made by the forward's all-gather stay until its post-backward
// reshard, and the backward's all-gather (copy-in, collective, copy-out) and its output buffer
// are not made (FSDP2's unshard returns at once for a group already unsharded).
// docs/simulator.md "Settings: reshard_after_forward" states the rules this file follows.
#include <algorithm>
#include <map>

#include "mhc/advise/comm.hpp"
#include "mhc/advise/transforms.hpp"
#include "mhc/common/error.hpp"

namespace mhc::advise {

namespace {

const std::string kOutput = "FSDP2 all-gather output (";

// The group (module name) of an all-gather output's label, "" when it is none.
std::string group_of(const std::string& label) {
    if (label.rfind(kOutput, 0) != 0 || label.back() != ')') return "";
    return label.substr(kOutput.size(), label.size() - kOutput.size() - 1);
}

bool unsharded(const std::string& label) { return label.find(" (unsharded") != std::string::npos; }

// One all-gather of a group as the capture ran it: copy-in, collective, copy-out and what they make.
struct Gather {
    int32_t copy_in = -1, collective = -1, copy_out = -1, output = -1, pass = -1;
    Phase phase = Phase::Other;
    std::map<std::string, int32_t> params;   // label -> unsharded parameter allocation
};

std::map<std::string, std::vector<Gather>> gathers(const Base& base) {
    const Plan& plan = base.plan;
    std::map<std::string, std::vector<Gather>> out;
    for (int32_t op_seq = 0; op_seq < plan.recorded; ++op_seq) {
        const Op& op = plan.ops[static_cast<size_t>(op_seq)];
        if (collective_of(plan.strings[static_cast<size_t>(op.name)]) != Collective::AllGather || op.acc.empty())
            continue;
        Gather gather;
        gather.collective = op_seq;
        gather.output = op.acc.front().alloc;
        const std::string group = group_of(base.trace->str(plan.allocs[static_cast<size_t>(gather.output)].label));
        if (group.empty()) continue;
        gather.pass = base.pass[static_cast<size_t>(op_seq)];
        gather.phase = base.phase[static_cast<size_t>(op_seq)];
        gather.copy_in = base.creator[static_cast<size_t>(gather.output)];
        base.for_acc(gather.output, [&](int32_t seq, trace::AccessMode mode) {
            if (gather.copy_out < 0 && seq > op_seq && mode == trace::AccessMode::Read) gather.copy_out = seq;
        });
        if (gather.copy_out < 0) continue;
        for (const PlanAccess& access : plan.ops[static_cast<size_t>(gather.copy_out)].acc) {
            const std::string& label = base.trace->str(plan.allocs[static_cast<size_t>(access.alloc)].label);
            if (access.mode != trace::AccessMode::Read && unsharded(label)) gather.params[label] = access.alloc;
        }
        out[group].push_back(gather);
    }
    return out;
}

class KeepUnsharded final : public Transform {
public:
    explicit KeepUnsharded(std::vector<std::pair<Gather, Gather>> pairs) : pairs_(std::move(pairs)) {}
    void apply(const Context& ctx, Plan& plan) const override {
        std::vector<int32_t> to(plan.allocs.size(), -1);   // backward's unsharded parameter -> forward's
        for (const auto& [fwd, bwd] : pairs_) {
            for (const auto& [label, a_bwd] : bwd.params) {
                auto it = fwd.params.find(label);
                if (it == fwd.params.end()) continue;
                Alloc& kept = plan.allocs[static_cast<size_t>(it->second)];
                const Alloc& gone = plan.allocs[static_cast<size_t>(a_bwd)];
                kept.freed = gone.freed;
                kept.freed_offset = gone.freed_offset;
                plan.allocs[static_cast<size_t>(a_bwd)].removed = true;
                to[static_cast<size_t>(a_bwd)] = it->second;
            }
            plan.allocs[static_cast<size_t>(bwd.output)].removed = true;
            for (int32_t op : {bwd.copy_in, bwd.collective, bwd.copy_out})
                if (op >= 0) plan.remove_op(op);
        }
        for (Op& op : plan.ops)
            for (PlanAccess& access : op.acc)
                if (access.alloc < static_cast<int32_t>(to.size()) && to[static_cast<size_t>(access.alloc)] >= 0)
                    access.alloc = to[static_cast<size_t>(access.alloc)];
        // The next gather waits for the copy-out of the gather before it in this step, not for the
        // place of the removed one (docs/simulator.md "Collectives").
        issue_all_gathers(ctx.base, plan);
    }

private:
    std::vector<std::pair<Gather, Gather>> pairs_;
};

}   // namespace

std::vector<std::string> fsdp2_groups(const Base& base) {
    std::vector<std::pair<int32_t, std::string>> first;   // in the forward's order
    for (const auto& [group, list] : gathers(base)) first.emplace_back(list.front().collective, group);
    std::sort(first.begin(), first.end());
    std::vector<std::string> out;
    out.reserve(first.size());
    for (const auto& [at, group] : first) out.push_back(group);
    return out;
}

std::vector<std::string> fsdp2_resharded_groups(const Base& base) {
    std::vector<std::string> out;
    const auto all = gathers(base);
    for (const std::string& group : fsdp2_groups(base)) {
        const auto& list = all.at(group);
        if (std::any_of(list.begin(), list.end(), [](const Gather& gather) { return gather.phase == Phase::Backward; }))
            out.push_back(group);
    }
    return out;
}

void add_reshard_choices(const Base& base, std::vector<Setting>& globals) {
    if (base.info.data_parallel != "fsdp2") return;
    const std::vector<std::string> groups = fsdp2_resharded_groups(base);
    if (groups.empty()) return;
    std::vector<std::vector<std::pair<std::string, int>>> choices = {{{groups.back(), 0}}};
    if (groups.size() > 1) {
        choices.emplace_back();
        for (const std::string& gather : groups) choices.back().emplace_back(gather, 0);
    }
    const size_t count = globals.size();
    for (const auto& choice : choices)
        for (size_t i = 0; i < count; ++i) {
            Setting setting = globals[i];
            for (const auto& [group, value] : choice)
                setting.reshard_after_forward.emplace_back(
                    base.info.root.empty() ? group : base.info.root + "." + group, value);
            globals.push_back(setting);
        }
}

std::unique_ptr<Transform> make_reshard(const Base& base, const std::vector<std::pair<std::string, int>>& values) {
    const std::string field = "reshard_after_forward";
    if (base.info.data_parallel != "fsdp2")
        throw Error("setting: field '" + field + "': the step runs no FSDP2 (fully_shard) module");
    const auto all = gathers(base);
    std::string names;
    for (const std::string& gather : fsdp2_groups(base))
        names += (names.empty() ? "" : ", ") + base.info.root + "." + gather;
    std::vector<std::pair<Gather, Gather>> pairs;
    for (const auto& [module, value] : values) {
        // the module as the capture spells it ("FSDPNet.blocks.0"), or as FSDP2 names its group ("blocks.0")
        const std::string& root = base.info.root;
        const bool qualified = !root.empty() && module.size() > root.size() + 1 &&
                               module.compare(0, root.size() + 1, root + ".") == 0;
        auto it = all.find(qualified ? module.substr(root.size() + 1) : module);
        if (it == all.end())
            throw Error("setting: field '" + field + "." + module +
                        "': no fully_shard module of that name all-gathers in " + base.info.path +
                        " (its groups: " + (names.empty() ? "none" : names) + ")");
        const bool resharded = std::any_of(it->second.begin(), it->second.end(),
                                           [](const Gather& gather) { return gather.phase == Phase::Backward; });
        if (value >= 2)
            throw Error("setting: field '" + field + "." + module + "': resharding to a group of " +
                        std::to_string(value) +
                        " ranks is not modelled: capture the step with reshard_after_forward=" + std::to_string(value));
        if (value == 1 && !resharded)
            throw Error(
                "setting: field '" + field + "." + module +
                "': the capture kept it unsharded after the forward (False, or FSDP2's root); its resharding is "
                "not modelled: capture the step with reshard_after_forward=True");
        if (value == 1 || !resharded) continue;   // as captured
        for (const Gather& fwd : it->second) {
            if (fwd.phase != Phase::Forward) continue;
            for (const Gather& bwd : it->second)
                if (bwd.phase == Phase::Backward && bwd.pass == fwd.pass) {
                    pairs.emplace_back(fwd, bwd);
                    break;
                }
        }
    }
    return std::make_unique<KeepUnsharded>(std::move(pairs));
}

}   // namespace mhc::advise
