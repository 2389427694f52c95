// What the search does not offer on a block, and why (planner.hpp: selective_refusal,
// reread_refusal, cache_refusal, offers_selective, check_selective).
#include "mhc/advise/planner.hpp"

#include "mhc/advise/transforms.hpp"
#include "mhc/common/error.hpp"

namespace mhc::advise {

namespace {

// Selective checkpointing of a module called several times a pass under autocast stops in the
// backward: autocast casts the shared weights in the first call only and serves the later calls
// from its cache, while each call's recomputation casts them again, an op its forward did not
// run ("aten._to_copy.default invocation index 6 encountered during backward but not found in
// storage": ALBERT's shared layer, bf16 autocast). Not offered for such a block.
//
// A block whose forward runs no op selective checkpointing keeps (an nn.LSTM block: cuDNN's fused
// aten::_cudnn_rnn is no matmul of the save list, as in torchtitan's) would be checkpointed in
// full by it: the same figures as full checkpointing, a duplicate answer. Not offered either.
//
// Nor for a block whose forward writes in place into the output of an op the save list keeps:
// selective checkpointing caches that output and stops in the backward when it has changed
// ("Tensor cached during selective activation checkpoint has been mutated": timm's EfficientNet,
// whose squeeze-and-excitation runs SiLU(inplace=True) on its 1 x 1 convolution's output).
// The forward op (a seq) that writes in place into the output of kept op `seq` in its pass, -1 if none.
int32_t kept_output_writer(const Base& base, size_t seq) {
    int32_t writer = -1;
    base.for_made(static_cast<int32_t>(seq), [&](int32_t alloc) {
        // not its output: a workspace it made first (the thread's cuBLAS workspace, made by the
        // step's first matmul and written by every later one)
        if (base.plan.allocs[static_cast<size_t>(alloc)].category == trace::Category::Workspace) return;
        base.for_acc(alloc, [&](int32_t op_seq, trace::AccessMode mode) {
            if (writer < 0 && op_seq > static_cast<int32_t>(seq) && mode != trace::AccessMode::Read &&
                base.phase[static_cast<size_t>(op_seq)] == Phase::Forward &&
                base.pass[static_cast<size_t>(op_seq)] == base.pass[seq])
                writer = op_seq;
        });
    });
    return writer;
}

// Whether the forward of `module` runs an op the save list keeps (in the capture's first pass
// that runs it, as every pass runs the same ops).
bool keeps_an_output(const Base& base, int32_t module) {
    for (size_t s = 0; s < base.korder.size(); ++s)
        if (base.phase[s] == Phase::Forward && base.info.within(base.module[s], module) &&
            kept_by_save_matmuls(base.plan.strings[static_cast<size_t>(base.plan.ops[s].name)]))
            return true;
    return false;
}

std::string module_label(const Base& base, int32_t module) {
    if (module < 0) return "the step";
    const std::string& user = base.info.user_name(module);
    return user.empty() ? base.info.module_name[static_cast<size_t>(module)] : user;
}

// Checkpointing and offloading both stop inside torch.func's jvp: one reason for the two refusals.
std::string jvp_refusal(const Base& base, int32_t module) {
    for (const int32_t inside : base.info.jvp_modules)
        if (base.info.within(module, inside) || base.info.within(inside, module))
            return "its forward runs inside torch.func's jvp (" + module_label(base, inside) +
                   ", meta capture.jvp_modules: forward-mode AD), where PyTorch's checkpoint recomputes it without "
                   "its tangents (\"A different number of tensors was saved during the original forward and "
                   "recomputation\") and an offload's saved-tensor hooks meet functorch's wrapped tensors (\"Cannot "
                   "access storage of TensorWrapper\"); the global settings apply";
    return "";
}

}  // namespace

std::string selective_refusal(const Base& base, int32_t module) {
    if (std::string jvp = jvp_refusal(base, module); !jvp.empty()) return jvp;
    for (size_t s = 0; s < base.korder.size(); ++s) {
        if (base.phase[s] != Phase::Forward || !base.info.within(base.module[s], module)) continue;
        const std::string& kept = base.plan.strings[static_cast<size_t>(base.plan.ops[s].name)];
        if (!kept_by_save_matmuls(kept)) continue;
        const int32_t writer = kept_output_writer(base, s);
        if (writer < 0) continue;
        return "its forward writes in place (" +
               base.plan.strings[static_cast<size_t>(base.plan.ops[static_cast<size_t>(writer)].name)] + " in " +
               module_label(base, base.module[static_cast<size_t>(writer)]) + ") into the output of " + kept + " in " +
               module_label(base, base.module[s]) +
               ", which selective checkpointing keeps: PyTorch stops in the backward (\"Tensor cached during selective "
               "activation checkpoint has been mutated\"); use policy full, or make that write out of place";
    }
    if (base.trace->meta_or("capture.autocast", "none") == "none") return "";
    for (const auto& [called, row] : base.info.call_starts)
        if (base.info.within(called, module) || base.info.within(module, called))
            return "module " + module_label(base, called) +
                   " is called several times a pass, and under autocast its weights are cast in the first call only "
                   "while each call's recompute casts them again: PyTorch stops in the backward (\"invocation index ... "
                   "encountered during backward but not found in storage\"); use policy full";
    return "";
}

std::string reread_refusal(const Base& base, int32_t module) {
    if (base.trace->meta_or("capture.save_on_cpu", "") == "true")
        return "the step offloads what it saves itself (torch.autograd.graph.save_on_cpu, captured as a synchronous "
               "offload of everything its forward saves: meta capture.save_on_cpu), and checkpointing or offloading a "
               "module inside it is not modelled; the global settings are";
    for (const int32_t inside : base.info.torch_func_modules)
        if (base.info.within(module, inside) || base.info.within(inside, module))
            return "its forward runs inside torch.func's grad (" + module_label(base, inside) +
                   ", meta capture.torch_func_modules: per-sample gradients with vmap(grad(...))), which refuses the "
                   "saved-tensor hooks that checkpointing and offloading are: PyTorch stops (\"torch.func.{grad, vjp, "
                   "jacrev, hessian} don't yet support saved tensor hooks\"); the global settings apply";
    if (std::string jvp = jvp_refusal(base, module); !jvp.empty()) return jvp;
    for (size_t s = 0; s < base.korder.size(); ++s) {
        if (base.phase[s] != Phase::Forward || !base.info.within(base.module[s], module)) continue;
        int32_t again = -1;
        base.for_made(static_cast<int32_t>(s), [&](int32_t alloc) {
            base.for_acc(alloc, [&](int32_t op_seq, trace::AccessMode) {
                const Phase ph = base.phase[static_cast<size_t>(op_seq)];
                if (again < 0 && (ph == Phase::Backward || ph == Phase::Recompute) &&
                    base.pass[static_cast<size_t>(op_seq)] != base.pass[s])
                    again = op_seq;
            });
        });
        if (again < 0) continue;
        return "what its forward saves is read again by a later backward (" +
               base.plan.strings[static_cast<size_t>(base.plan.ops[static_cast<size_t>(again)].name)] +
               " in backward pass " + std::to_string(base.pass[static_cast<size_t>(again)] + 1) +
               " of the step reads the output of " + base.plan.strings[static_cast<size_t>(base.plan.ops[s].name)] +
               " in " + module_label(base, base.module[s]) + " from pass " + std::to_string(base.pass[s] + 1) +
               ": a graph kept by torch.autograd.grad(..., create_graph=True) or retain_graph=True, as a gradient "
               "penalty's): checkpointing would recompute it there again and an offload's copy is gone by then, "
               "which is not modelled";
    }
    return "";
}

std::string cache_refusal(const Base& base, int32_t module) {
    for (const int32_t caller : base.info.kept_cache_callers)
        if (base.info.within(caller, module))
            return "its forward (" + module_label(base, caller) +
                   ") updates a key/value cache that checkpointing leaves on (the forward is given use_cache=True: "
                   "meta capture.kept_cache_callers): the recompute in the backward appends its keys and values to "
                   "the cache again, and transformers' attention stops on a mask of half the keys' length; train "
                   "without use_cache=True, or checkpoint with the model's own gradient_checkpointing_enable(), "
                   "which turns the cache off";
    return "";
}

bool offers_selective(const Base& base, size_t block) {
    const int32_t blk = base.info.block_module[block];
    return keeps_an_output(base, blk) && selective_refusal(base, blk).empty();
}

void check_selective(const Base& base, const Setting& setting) {
    for (size_t gi = 0; gi < setting.checkpoint.size(); ++gi) {
        const CheckpointGroup& group = setting.checkpoint[gi];
        const std::string field = setting.checkpoint.size() == 1 ? "checkpoint.modules"
                                                                 : "checkpoint[" + std::to_string(gi) + "].modules";
        const std::vector<int32_t> modules = resolve_modules(base.info, group.modules, field);
        for (size_t i = 0; i < modules.size(); ++i) {
            if (std::string why = reread_refusal(base, modules[i]); !why.empty())
                throw Error("setting: field '" + field + "': module '" + group.modules[i] + "': " + why);
            if (group.policy == Policy::Mhc) continue;   // the maps inside run no cache update
            if (std::string why = cache_refusal(base, modules[i]); !why.empty())
                throw Error("setting: field '" + field + "': module '" + group.modules[i] + "': " + why);
            if (group.policy != Policy::SaveMatmuls) continue;
            if (std::string why = selective_refusal(base, modules[i]); !why.empty())
                throw Error("setting: field '" + field + "': policy save_matmuls: module '" + group.modules[i] +
                            "': " + why);
        }
    }
    if (setting.offload && setting.offload->modules) {
        const std::vector<int32_t> modules = resolve_modules(base.info, *setting.offload->modules, "offload.modules");
        for (size_t i = 0; i < modules.size(); ++i)
            if (std::string why = reread_refusal(base, modules[i]); !why.empty())
                throw Error("setting: field 'offload.modules': module '" + (*setting.offload->modules)[i] +
                            "': " + why);
    }
}

}  // namespace mhc::advise
