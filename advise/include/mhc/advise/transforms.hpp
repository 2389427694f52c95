#pragma once
// Settings as transformations of a captured step (docs/simulator.md "Settings"): each setting
// is one Transform (one per file in advise/src/transforms/) that edits the Plan the way the
// setting changes what PyTorch runs and keeps: recomputed kernels, storages freed early or
// kept, copies to and from the host, work moved to the host.
#include <memory>
#include <vector>

#include "mhc/advise/plan.hpp"
#include "mhc/advise/setting.hpp"

namespace mhc::advise {

// Figures of the machine a transform needs beyond the trace.
struct HostModel {
    double bandwidth_Bps = 100e9;   // host memory bandwidth the for-loop optimizer step streams at
    // The step's cost per parameter tensor whatever its size (the optimizer's per-tensor calls):
    // torch's CPU AdamW(foreach=True) took 14.3-14.9 us a tensor on one core of the machine in
    // docs/results.md "Settings" (bench/advise/host_adamw.py measures a user's own host).
    double per_tensor_s = 15e-6;
};

// The host step's implementation (what mhc_torch.apply runs on the CPU copies) and its bytes'
// time against the for-loop's, which the bandwidth above describes, for torch.optim class
// `optimizer_class` (capture.optimizer_class): torch's CPU steps on GPT-2 small's 148 parameter
// tensors (124.4M fp32), best CPU time of 3 steps, 2 threads, torch 2.15, 2026-12-07
// (bench/advise/host_step_impls.py; docs/advise.md "Host step implementations").
enum class HostImpl : uint8_t { Forloop, Foreach, Fused };
double host_impl_factor(HostImpl impl, const std::string& optimizer_class);

struct Context {
    const Base& base;
    const Setting& setting;
    HostModel host;
    // Per module: inside a checkpointed module (its saved tensors go to the checkpoint, not to
    // an offload hook around it).
    std::vector<uint8_t> in_checkpoint;
    // Per seq: the module whose call runs it. The kernel's own module, but for a forward kernel of
    // a module not registered under the model (transformers' Mamba reference causal_conv1d_fn
    // calls ACT2FN["silu"], a new SiLUActivation each call): the innermost module holding the
    // nearest forward kernels of the model's own modules before and after it in its pass, when
    // it has both (-1 otherwise). Checkpoint and offload act on that module's calls.
    std::vector<int32_t> caller;
};

// The `caller` of Context, for every seq of `b`.
std::vector<int32_t> forward_callers(const Base& base);

class Transform {
public:
    virtual ~Transform() = default;
    virtual void apply(const Context& c, Plan& p) const = 0;
};

// The module indices of `names`; throws mhc::Error (bad input) naming `field` and the first
// name the model lacks.
std::vector<int32_t> resolve_modules(const CaptureInfo& info, const std::vector<std::string>& names,
                                     const std::string& field);

// One transform per part of the setting, in the order they apply (checkpoint, offload,
// optimizer implementation, optimizer placement, weights). Throws mhc::Error (bad input) for a
// setting this capture cannot express (a module it lacks, overlapping checkpoint regions,
// an optimizer change the trace does not support).
std::vector<std::unique_ptr<Transform>> make_transforms(const Base& b, const Setting& s);
Context make_context(const Base& b, const Setting& s, HostModel host = {});

// The transforms, one per file.
std::unique_ptr<Transform> make_checkpoint(const Base& b, const std::vector<CheckpointGroup>& groups);
// The key/value cache copies of the Hugging Face models holding a checkpointed region, which the
// setting turns the cache of off (transforms/model_cache.cpp): removed, their readers reading what
// they copied. Checkpoint::apply calls it last.
void drop_model_cache(const Base& base, Plan& plan, const std::vector<int32_t>& checkpointed);
std::unique_ptr<Transform> make_offload(const Base& b, const OffloadSetting& o);
std::unique_ptr<Transform> make_fused_optimizer(const Base& b);
std::unique_ptr<Transform> make_host_optimizer(const Base& b);
// FSDP2's reshard_after_forward per fully_shard module (transforms/reshard.cpp): false on a group
// the capture resharded; true or absent keeps the capture; other cases are refused (bad input).
std::unique_ptr<Transform> make_reshard(const Base& base, const std::vector<std::pair<std::string, int>>& values);
// FSDP2's groups that all-gather (module names, "blocks.0"), in forward order; and those the
// capture resharded after the forward (all-gathered again in the backward).
std::vector<std::string> fsdp2_groups(const Base& base);
std::vector<std::string> fsdp2_resharded_groups(const Base& base);
// The search's global settings for FSDP2: each of `globals` again with reshard_after_forward false
// on the group the backward gathers first (the last of the forward), and on every resharded group.
void add_reshard_choices(const Base& base, std::vector<Setting>& globals);
// The first op (its name and kernel id) that reads a gradient on the device after the backward
// and before the optimizer step (gradient clipping, GradScaler's unscale); empty when none.
std::string grads_used_after_backward(const Base& base);
// One line saying that the host optimizer's step temporaries of the captured optimizer are not
// modelled (a class of the user's own, torch.optim.LBFGS, a foreach step kept): they are the
// recorded device step's, in fp32 (transforms/optimizer.cpp); empty where they are modelled.
std::string host_step_note(const CaptureInfo& info);

// The class of mHC's hyper-connection maps (python/mhc_torch/mhc_model.py): what "mhc" recomputes.
extern const std::string kMhcMaps;
// The ops whose outputs selective checkpointing ("save_matmuls") keeps: mm, bmm, addmm, baddbmm,
// convolution, scaled-dot-product attention (python/mhc_torch/checkpointing.py, _MATMULS).
bool kept_by_save_matmuls(const std::string& op);

// The checkpointed regions of a setting (module, policy): "mhc" expands to the hyper-connection
// maps under the named modules.
struct Region {
    int32_t module = -1;
    Policy policy = Policy::Full;
};
std::vector<Region> checkpoint_regions(const CaptureInfo& info, const std::vector<CheckpointGroup>& groups);

}  // namespace mhc::advise
