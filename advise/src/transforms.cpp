// The settings' transforms, in the order they apply, and what they share.
#include "mhc/advise/transforms.hpp"

#include "mhc/common/error.hpp"

namespace mhc::advise {

std::vector<int32_t> resolve_modules(const CaptureInfo& info, const std::vector<std::string>& names,
                                     const std::string& field) {
    std::vector<int32_t> out;
    for (const std::string& n : names) {
        int32_t m = info.find_module(n);
        if (m < 0 && !info.root.empty()) m = info.find_module(info.root + "." + n);   // model.get_submodule's spelling
        if (m < 0) {
            std::string hint = info.block_name.empty() ? info.root : info.block_name.front();
            throw Error("setting: field '" + field + "': the model has no module '" + n + "' (" + info.path + " records " +
                        std::to_string(info.module_name.size()) + " modules, e.g. '" + hint + "')");
        }
        out.push_back(m);
    }
    return out;
}

Context make_context(const Base& b, const Setting& s, HostModel host) {
    Context c{b, s, host, {}};
    std::vector<int32_t> roots;
    for (const Region& r : checkpoint_regions(b.info, s.checkpoint)) roots.push_back(r.module);
    c.in_checkpoint = b.info.inside_any(roots);
    return c;
}

std::vector<std::unique_ptr<Transform>> make_transforms(const Base& b, const Setting& s) {
    std::vector<std::unique_ptr<Transform>> t;
    if (!s.checkpoint.empty()) t.push_back(make_checkpoint(b, s.checkpoint));
    if (s.offload) t.push_back(make_offload(b, *s.offload));
    if (s.optimizer_impl == OptimizerImpl::Fused && !b.info.adam_optimizer())
        throw Error(
            "setting: field 'optimizer.impl': the fused kernel is modelled for Adam and AdamW; the capture's "
            "optimizer is " +
            b.info.optimizer_class + ": capture the step with fused=True instead");
    if (s.optimizer_impl == OptimizerImpl::Fused) t.push_back(make_fused_optimizer(b));
    if (s.optimizer_impl == OptimizerImpl::Foreach && b.optimizer_impl != "foreach")
        throw Error("setting: field 'optimizer.impl': foreach adds temporaries the capture does not show "
                    "(it ran " + (b.optimizer_impl.empty() ? std::string("neither foreach nor fused AdamW") : b.optimizer_impl) +
                    "): capture the step with the foreach optimizer instead");
    if (s.optimizer_impl == OptimizerImpl::Forloop)
        throw Error("setting: field 'optimizer.impl': forloop is not modelled from a capture of another implementation: "
                    "capture the step with it");
    if (s.optimizer_on_host) t.push_back(make_host_optimizer(b));
    if (!s.reshard_after_forward.empty()) t.push_back(make_reshard(b, s.reshard_after_forward));
    if (s.bf16_weights)
        throw Error("setting: field 'weights': bf16 weights change every activation's type, which a capture with fp32 "
                    "weights does not record: capture the step with bf16 weights instead (mhc-torch capture --weights bf16)");
    return t;
}

}  // namespace mhc::advise
