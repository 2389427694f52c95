// The settings' transforms, in the order they apply, and what they share.
#include "mhc/advise/transforms.hpp"

#include "mhc/common/error.hpp"

namespace mhc::advise {

std::vector<int32_t> resolve_modules(const CaptureInfo& info, const std::vector<std::string>& names,
                                     const std::string& field) {
    std::vector<int32_t> out;
    for (const std::string& name : names) {
        int32_t module_index = info.find_module(name);
        if (module_index < 0 && !info.root.empty())
            module_index = info.find_module(info.root + "." + name);   // model.get_submodule's spelling
        if (module_index < 0) {
            std::string hint = info.block_name.empty() ? info.root : info.block_name.front();
            throw Error("setting: field '" + field + "': the model has no module '" + name + "' (" + info.path +
                        " records " + std::to_string(info.module_name.size()) + " modules, e.g. '" + hint + "')");
        }
        if (!info.made_in.empty() && info.made_in[static_cast<size_t>(module_index)] >= 0) {
            const int32_t made_in = info.made_in[static_cast<size_t>(module_index)];
            const std::string caller = info.user_name(made_in).empty() ? info.root : info.user_name(made_in);
            throw Error("setting: field '" + field + "': module '" + name + "' is made inside the forward of '" +
                        caller +
                        "' on each call, not registered under the model (model.get_submodule cannot reach it); "
                        "name '" +
                        caller + "' instead");
        }
        out.push_back(module_index);
    }
    return out;
}

Context make_context(const Base& base, const Setting& setting, HostModel host) {
    Context ctx{base, setting, host, {}, {}};
    std::vector<int32_t> roots;
    for (const Region& region : checkpoint_regions(base.info, setting.checkpoint)) roots.push_back(region.module);
    ctx.in_checkpoint = base.info.inside_any(roots);
    ctx.caller = forward_callers(base);
    return ctx;
}

namespace {

// The innermost module holding both `first` and `second` (by name), -1 if none does.
int32_t common_module(const CaptureInfo& info, int32_t first, int32_t second) {
    if (first < 0 || second < 0) return -1;
    std::string name = info.module_name[static_cast<size_t>(first)];
    for (;;) {
        const int32_t around = info.find_module(name);
        if (around >= 0 && info.within(second, around)) return around;
        const size_t dot = name.rfind('.');
        if (dot == std::string::npos) return -1;
        name.resize(dot);
    }
}

}  // namespace

std::vector<int32_t> forward_callers(const Base& base) {
    const size_t seqs = base.korder.size();
    std::vector<int32_t> caller(base.module.begin(), base.module.begin() + static_cast<std::ptrdiff_t>(seqs));
    const int32_t root = base.info.find_module(base.info.root);
    auto outside = [&](size_t seq) { return base.module[seq] >= 0 && !base.info.within(base.module[seq], root); };
    // the nearest forward kernel of the model's own modules before each seq, in its pass
    std::vector<int32_t> before(seqs, -1);
    int32_t last = -1;
    for (size_t seq = 0; seq < seqs; ++seq) {
        if (base.phase[seq] != Phase::Forward) continue;
        if (last >= 0 && base.pass[static_cast<size_t>(last)] != base.pass[seq]) last = -1;
        if (outside(seq)) before[seq] = last;
        else if (base.module[seq] >= 0) last = static_cast<int32_t>(seq);
    }
    int32_t next = -1;
    for (size_t seq = seqs; seq-- > 0;) {
        if (base.phase[seq] != Phase::Forward) continue;
        if (next >= 0 && base.pass[static_cast<size_t>(next)] != base.pass[seq]) next = -1;
        if (outside(seq)) {
            const int32_t prev = before[seq];
            caller[seq] = prev < 0 || next < 0 ? -1
                                               : common_module(base.info, base.module[static_cast<size_t>(prev)],
                                                               base.module[static_cast<size_t>(next)]);
        } else if (base.module[seq] >= 0) {
            next = static_cast<int32_t>(seq);
        }
    }
    return caller;
}

std::vector<std::unique_ptr<Transform>> make_transforms(const Base& base, const Setting& setting) {
    std::vector<std::unique_ptr<Transform>> transforms;
    if (!setting.checkpoint.empty()) transforms.push_back(make_checkpoint(base, setting.checkpoint));
    if (setting.offload) transforms.push_back(make_offload(base, *setting.offload));
    if (setting.optimizer_impl == OptimizerImpl::Fused && !base.info.adam_optimizer())
        throw Error(
            "setting: field 'optimizer.impl': the fused kernel is modelled for Adam and AdamW; the capture's "
            "optimizer is " +
            base.info.optimizer_class + ": capture the step with fused=True instead");
    if (setting.optimizer_impl == OptimizerImpl::Fused && !base.info.fused_refused.empty())
        throw Error("setting: field 'optimizer.impl': " + base.info.fused_refused);
    if (setting.optimizer_impl == OptimizerImpl::Fused) transforms.push_back(make_fused_optimizer(base));
    if (setting.optimizer_impl == OptimizerImpl::Foreach && base.optimizer_impl != "foreach")
        throw Error(
            "setting: field 'optimizer.impl': foreach adds temporaries the capture does not show "
            "(it ran " +
            (base.optimizer_impl.empty() ? std::string("neither foreach nor fused AdamW") : base.optimizer_impl) +
            "): capture the step with the foreach optimizer instead");
    if (setting.optimizer_impl == OptimizerImpl::Forloop)
        throw Error("setting: field 'optimizer.impl': forloop is not modelled from a capture of another implementation: "
                    "capture the step with it");
    if (setting.optimizer_on_host) transforms.push_back(make_host_optimizer(base));
    if (!setting.reshard_after_forward.empty()) transforms.push_back(make_reshard(base, setting.reshard_after_forward));
    if (setting.bf16_weights)
        throw Error("setting: field 'weights': bf16 weights change every activation's type, which a capture with fp32 "
                    "weights does not record: capture the step with bf16 weights instead (mhc-torch capture --weights bf16)");
    return transforms;
}

}  // namespace mhc::advise
