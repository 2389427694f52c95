// The planner (planner.hpp): single-block effects, the separable model, the DP per global
// combination and family of choices, exact predictions with the caching allocator model.
#include "mhc/advise/planner.hpp"

#include "mhc/advise/transforms.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/trace/torch_sizes.hpp"

namespace mhc::advise {

namespace {

constexpr int64_t kNone = INT64_MIN;
constexpr int kChoices = static_cast<int>(BlockChoice::Count);
// Rounds of the exact search from each global setting's start; each round improves strictly, so
// it ends on its own long before this on every step measured (docs/advise.md "Search").
constexpr int kRefineRounds = 64;

// Where each live-bytes window sits: the block that owns it (-1: none), whether it is in a
// forward, and (outside blocks) how many blocks are held then.
struct Windows {
    std::vector<int32_t> owner, held;
    std::vector<uint8_t> fwd;
};

Windows classify(const Base& base) {
    // per pass (a step with gradient accumulation holds its blocks once per micro-batch)
    const size_t seqs = base.korder.size(), nb = base.info.block_name.size(), ns = base.pass_step.size();
    Windows windows;
    windows.owner.assign(seqs + 2, -1);
    windows.held.assign(seqs + 2, 0);
    windows.fwd.assign(seqs + 2, 0);
    std::vector<int32_t> first_fwd(nb * ns, INT32_MAX), last_fwd(nb * ns, -1);
    std::vector<int32_t> first_bwd(nb * ns, INT32_MAX), last_bwd(nb * ns, -1);
    for (size_t s = 0; s < seqs; ++s) {
        const int32_t module = base.module[s];
        const int32_t block = module >= 0 ? base.info.module_block[static_cast<size_t>(module)] : -1;
        windows.owner[s] = block;
        windows.fwd[s] = base.phase[s] == Phase::Forward;
        if (block < 0) continue;
        size_t slot = static_cast<size_t>(block) * ns + static_cast<size_t>(base.pass[s]);
        const auto at = static_cast<int32_t>(s);
        if (base.phase[s] == Phase::Forward) {
            first_fwd[slot] = std::min(first_fwd[slot], at);
            last_fwd[slot] = std::max(last_fwd[slot], at);
        }
        if (base.phase[s] == Phase::Backward) {
            first_bwd[slot] = std::min(first_bwd[slot], at);
            last_bwd[slot] = std::max(last_bwd[slot], at);
        }
    }
    // An op of a module outside every block that runs in the middle of a block's forward or
    // backward (a shared activation module the blocks call, one not registered under them) is
    // that block's: the block is not held there, its forward not done.
    for (size_t s = 0; s < seqs; ++s) {
        if (windows.owner[s] >= 0) continue;
        const auto at = static_cast<int32_t>(s);
        const size_t si = static_cast<size_t>(base.pass[s]);
        for (size_t k = 0; k < nb; ++k) {
            const size_t slot = k * ns + si;
            if ((first_fwd[slot] < at && at < last_fwd[slot]) || (first_bwd[slot] < at && at < last_bwd[slot])) {
                windows.owner[s] = static_cast<int32_t>(k);
                break;
            }
        }
    }
    for (size_t s = 0; s < seqs; ++s) {
        if (windows.owner[s] >= 0) continue;
        size_t si = static_cast<size_t>(base.pass[s]);
        int32_t held = 0;
        for (size_t k = 0; k < nb; ++k)
            held += first_fwd[k * ns + si] < static_cast<int32_t>(s) && last_bwd[k * ns + si] > static_cast<int32_t>(s);
        windows.held[s] = held;
    }
    return windows;
}

bool block_has_type(const Base& base, size_t block, const std::string& type) {
    for (size_t m = 0; m < base.info.module_name.size(); ++m)
        if (base.info.module_type[m] == type &&
            base.info.within(static_cast<int32_t>(m), base.info.block_module[block]))
            return true;
    return false;
}

}  // namespace

std::string_view to_string(BlockChoice choice) {
    switch (choice) {
        case BlockChoice::Keep: return "keep";
        case BlockChoice::Full: return "checkpoint";
        case BlockChoice::SaveMatmuls: return "selective checkpoint";
        case BlockChoice::Mhc: return "mhc recompute";
        case BlockChoice::Offload: return "offload";
        case BlockChoice::FullOffload: return "checkpoint + offload";
        case BlockChoice::Count: break;
    }
    return "?";
}

Setting combine(const Base& base, const Setting& global, const std::vector<BlockChoice>& per_block,
                const OffloadSetting& offload) {
    Setting setting = global;
    setting.checkpoint.clear();
    setting.offload.reset();
    const std::pair<BlockChoice, Policy> groups[] = {{BlockChoice::Full, Policy::Full},
                                                     {BlockChoice::SaveMatmuls, Policy::SaveMatmuls},
                                                     {BlockChoice::Mhc, Policy::Mhc}};
    // checkpoint + offload: the block in the full checkpoint's group and in the offload's modules,
    // whose hooks then go around the checkpoint and take what it saves (the call's inputs)
    for (auto [choice, policy] : groups) {
        CheckpointGroup group;
        group.policy = policy;
        for (size_t k = 0; k < per_block.size(); ++k)
            if (per_block[k] == choice || (choice == BlockChoice::Full && per_block[k] == BlockChoice::FullOffload))
                group.modules.push_back(base.info.block_name[k]);
        if (!group.modules.empty()) setting.checkpoint.push_back(group);
    }
    std::vector<std::string> off;
    for (size_t k = 0; k < per_block.size(); ++k)
        if (per_block[k] == BlockChoice::Offload || per_block[k] == BlockChoice::FullOffload)
            off.push_back(base.info.block_name[k]);
    if (!off.empty()) {
        setting.offload = offload;
        setting.offload->modules = off;
    }
    return setting;
}

namespace {

// What each block's choice does alone (global setting as captured).
struct BlockEffects {
    std::vector<int64_t> base_window;
    int64_t base_time = 0;
    // [block][choice]: window deltas (empty: choice not available) and added time
    std::vector<std::vector<std::vector<int64_t>>> delta;
    std::vector<std::vector<int64_t>> time;
};

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

namespace {

bool offloads(int choice) {
    return choice == static_cast<int>(BlockChoice::Offload) || choice == static_cast<int>(BlockChoice::FullOffload);
}

// Each block choice alone under `offload`; with `from` (the same under another offload mode), only
// the choices that offload are evaluated again, the others copied.
BlockEffects block_effects(const Evaluator& ev, const PlannerOptions& options, const OffloadSetting& offload,
                           const BlockEffects* from, int64_t& evaluations) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    if (from != nullptr) {
        BlockEffects effects = *from;
        for (size_t k = 0; k < nb; ++k)
            for (int c = 1; c < kChoices; ++c) {
                std::vector<int64_t>& delta = effects.delta[k][static_cast<size_t>(c)];
                if (!offloads(c) || delta.empty()) continue;
                std::vector<BlockChoice> per(nb, BlockChoice::Keep);
                per[k] = static_cast<BlockChoice>(c);
                Evaluator::Quick quick = ev.quick(combine(base, Setting{}, per, offload));
                ++evaluations;
                for (size_t w = 0; w < delta.size(); ++w) delta[w] = quick.live.window[w] - effects.base_window[w];
                effects.time[k][static_cast<size_t>(c)] = quick.step_time - effects.base_time;
            }
        return effects;
    }
    BlockEffects effects;
    Evaluator::Quick q0 = ev.quick(Setting{});
    ++evaluations;
    effects.base_window = q0.live.window;
    effects.base_time = q0.step_time;
    effects.delta.assign(nb, std::vector<std::vector<int64_t>>(kChoices));
    effects.time.assign(nb, std::vector<int64_t>(kChoices, 0));
    for (size_t k = 0; k < nb; ++k) {
        effects.delta[k][0].assign(effects.base_window.size(), 0);
        const bool mhc = block_has_type(base, k, kMhcMaps);
        const bool selective = offers_selective(base, k);
        // none of checkpointing or offloading where a later backward reads the block's saves again
        if (!reread_refusal(base, base.info.block_module[k]).empty()) continue;
        const bool recomputable = cache_refusal(base, base.info.block_module[k]).empty();
        for (int c = 1; c < kChoices; ++c) {
            if (c == static_cast<int>(BlockChoice::Mhc) && !mhc) continue;
            if ((c == static_cast<int>(BlockChoice::Full) || c == static_cast<int>(BlockChoice::SaveMatmuls) ||
                 c == static_cast<int>(BlockChoice::FullOffload)) &&
                !recomputable)
                continue;
            if (c == static_cast<int>(BlockChoice::SaveMatmuls) && !selective) continue;
            std::vector<BlockChoice> per(nb, BlockChoice::Keep);
            per[k] = static_cast<BlockChoice>(c);
            Evaluator::Quick quick = ev.quick(combine(base, Setting{}, per, offload));
            ++evaluations;
            std::vector<int64_t>& delta = effects.delta[k][static_cast<size_t>(c)];
            delta.resize(quick.live.window.size());
            for (size_t w = 0; w < delta.size(); ++w) delta[w] = quick.live.window[w] - effects.base_window[w];
            effects.time[k][static_cast<size_t>(c)] = quick.step_time - q0.step_time;
        }
        if (options.progress && (k + 1) % 8 == 0)
            options.progress("evaluated the choices of " + std::to_string(k + 1) + " of " + std::to_string(nb) +
                             " blocks");
    }
    return effects;
}

SeparableModel build_model(const BlockEffects& effects, const Windows& windows, const std::vector<int64_t>& m0,
                           size_t nb) {
    SeparableModel model;
    model.blocks.assign(nb, std::vector<BlockOption>(kChoices));
    model.gap_f.assign(nb + 1, kNone);
    model.gap_b.assign(nb + 1, kNone);
    for (size_t s = 0; s < m0.size(); ++s) {
        if (windows.owner[s] >= 0) continue;
        auto& gap = windows.fwd[s] ? model.gap_f : model.gap_b;
        size_t held_blocks = static_cast<size_t>(std::min<int32_t>(windows.held[s], static_cast<int32_t>(nb)));
        gap[held_blocks] = std::max(gap[held_blocks], m0[s]);
    }
    for (size_t k = 0; k < nb; ++k)
        for (size_t c = 0; c < static_cast<size_t>(kChoices); ++c) {
            BlockOption& opt = model.blocks[k][c];
            const std::vector<int64_t>& delta = effects.delta[k][c];
            if (delta.empty()) {   // not available: never feasible
                opt.wf = opt.wb = INT64_MAX / 4;
                continue;
            }
            opt.wf = opt.wb = kNone;
            int64_t df = kNone, db = kNone;
            for (size_t s = 0; s < m0.size(); ++s) {
                const int32_t own = windows.owner[s];
                if (own == static_cast<int32_t>(k)) {
                    int64_t& win = windows.fwd[s] ? opt.wf : opt.wb;
                    win = std::max(win, m0[s] + delta[s]);
                    continue;
                }
                const bool held = own > static_cast<int32_t>(k) ||
                                  (own < 0 && windows.held[s] > static_cast<int32_t>(k));
                if (!held) continue;
                int64_t& hd = windows.fwd[s] ? df : db;
                hd = std::max(hd, delta[s]);   // the least saving seen while held: conservative
            }
            opt.df = df == kNone ? 0 : df;
            opt.db = db == kNone ? 0 : db;
            opt.time = effects.time[k][c];
        }
    return model;
}

// The ranking's order (docs/advise.md "Search", 5): fitting first, then faster, then the setting
// that changes less (its compact JSON shorter), then the smaller reserved peak, then the JSON's
// byte order.
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

// Of two candidates, the one the exact search moves towards: one that fits before one that does
// not, of two that fit the ranking's first, of two that do not the smaller reserved peak, then the
// smaller live peak, then the ranking's first.
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

// A combination: the global setting (by its index) and each block's choice.
struct Combo {
    size_t global;
    std::vector<BlockChoice> per;
};

// The exact search (docs/advise.md "Search", 5): from the best combination the DP returned (or a
// global setting alone), moves to the best of its neighbours (one block's choice changed, or the
// global setting), each predicted exactly under each allocator setting, while that one is
// better: faster and fitting once the combination fits (a neighbour whose step time is not below
// the combination's is not predicted); before, fitting or closer.
void refine(const Evaluator& ev, const std::vector<Setting>& globals, const std::vector<OffloadSetting>& offloads,
            const BlockEffects& effects, const PlannerOptions& opts, const std::vector<Combo>& starts,
            const std::function<std::vector<Candidate>(const Setting&)>& predict_each, Advice& advice) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    auto value = [&](const Combo& combo) {   // the combination under its better allocator setting
        Candidate best;
        bool have = false;
        for (Candidate& cand : predict_each(combine(base, globals[combo.global], combo.per, offloads[combo.global]))) {
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
    // step times by setting: a global setting under another offload mode is the same setting
    // where no block offloads
    std::map<std::string, int64_t> times;
    for (int round = 0; round < kRefineRounds; ++round) {
        Combo next = cur;
        Candidate got = now;
        // only a faster one can be better once the combination fits: its time first (no
        // allocator setting changes it); returns that time (-1: not measured)
        auto consider = [&](const Combo& combo) -> int64_t {
            int64_t time = -1;
            if (now.fits) {
                const Setting setting = combine(base, globals[combo.global], combo.per, offloads[combo.global]);
                const std::string key = to_json(setting);
                auto known = times.find(key);
                if (known == times.end()) {
                    known = times.emplace(key, ev.quick(setting).step_time).first;
                    ++advice.evaluations;
                }
                time = known->second;
                if (time >= time_at_capacity(now.prediction)) return time;
            }
            Candidate cand = value(combo);
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

}  // namespace

std::vector<int64_t> split_size_values(const trace::TraceData& step, size_t most) {
    constexpr int64_t kMiB = int64_t{1} << 20;
    constexpr int64_t kLeast = trace::torch::kLargeBuffer / kMiB;   // max_split_size_mb must be more than 20
    // The sizes in MiB where what N does changes: a request of r bytes is oversize when
    // r / MiB >= N (rounded down), a segment of g bytes (a multiple of 2 MiB) holds blocks of N MiB
    // or more only when g / MiB >= N.
    std::set<int64_t> edges;
    for (size_t i = 0; i < step.allocations.size(); ++i) {
        if (step.allocations.device[i] < 0) continue;   // host memory: not the caching allocator's
        const int64_t rounded = trace::torch::round_size(step.allocations.bytes[i], 0);
        for (const int64_t edge : {rounded / kMiB, sim::CachingAllocator::segment_size(rounded) / kMiB})
            if (edge > kLeast) edges.insert(edge);
    }
    // Each class (lo, hi] of N, from the largest: its roundest member, the multiple of the largest
    // power of two within it (one only: two such multiples would hold a multiple of twice it).
    std::vector<int64_t> out;
    for (auto it = edges.rbegin(); it != edges.rend() && out.size() < most; ++it) {
        const int64_t hi = *it;
        const int64_t lo = std::next(it) == edges.rend() ? kLeast : *std::next(it);
        for (int bit = 62; bit >= 0; --bit) {
            const int64_t unit = int64_t{1} << bit;
            if (hi / unit * unit > lo) {
                out.push_back(hi / unit * unit);
                break;
            }
        }
    }
    return out;
}

std::vector<int64_t> roundup_values(const trace::TraceData& step, size_t most) {
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < step.allocations.size(); ++i)
        if (step.allocations.device[i] >= 0) sizes.push_back(step.allocations.bytes[i]);
    auto rounded = [&](int64_t divisions) {
        std::vector<int64_t> out;
        out.reserve(sizes.size());
        for (const int64_t bytes : sizes) out.push_back(trace::torch::round_size(bytes, divisions));
        return out;
    };
    std::vector<std::vector<int64_t>> seen{rounded(0)};
    std::vector<int64_t> out;
    for (const int64_t divisions : {2, 4, 8, 16}) {
        if (out.size() >= most) break;
        std::vector<int64_t> got = rounded(divisions);
        if (std::find(seen.begin(), seen.end(), got) != seen.end()) continue;
        seen.push_back(std::move(got));
        out.push_back(divisions);
    }
    return out;
}

std::vector<std::string> search_allocator_confs(const Evaluator& ev, const PlannerOptions& opts, int64_t& trials) {
    std::vector<std::string> confs = opts.allocator_confs;
    const std::vector<int64_t> values = opts.split_sizes > 0
                                            ? split_size_values(*ev.base().trace, static_cast<size_t>(opts.split_sizes))
                                            : std::vector<int64_t>{};
    const std::vector<int64_t> divisions = opts.roundup_divisions > 0
                                               ? roundup_values(*ev.base().trace,
                                                                static_cast<size_t>(opts.roundup_divisions))
                                               : std::vector<int64_t>{};
    if (values.empty() && divisions.empty()) return confs;
    // On the captured step: the search's own allocator settings, then each value alone and with
    // expandable segments (max_split_size_mb largest value first, then roundup_power2_divisions);
    // one transformed step, a caching model run each (two where it runs at the capacity).
    std::vector<std::string> tries = confs;
    for (const int64_t mib : values)
        for (const char* with : {"", "expandable_segments:True,"})
            tries.push_back(with + std::string("max_split_size_mb:") + std::to_string(mib));
    for (const int64_t division : divisions)
        for (const char* with : {"", "expandable_segments:True,"})
            tries.push_back(with + std::string("roundup_power2_divisions:") + std::to_string(division));
    // each at the capacity (docs/advise.md "Search", allocator settings): one that runs there
    // first, then the less time giving cached memory back costs there, then the smaller reserved
    // peak there, then without a limit; one that does not run, by its reserved peak without a limit
    const std::vector<Prediction> got = ev.predict(Setting{}, tries, opts.capacity);
    trials += static_cast<int64_t>(tries.size());
    auto key = [&](const Memory& memory) {
        const bool runs = opts.capacity > 0 && fits(memory, opts.capacity);
        return std::make_tuple(runs ? 0 : 1, runs ? memory.steady_cost : 0, runs ? memory.retry_cost : 0,
                               runs ? memory.reserved_at : 0, memory.reserved);
    };
    auto least = key(got[0].memory);   // the best of the search's own allocator settings
    for (size_t i = 1; i < confs.size(); ++i) least = std::min(least, key(got[i].memory));
    size_t best = tries.size();
    for (size_t i = confs.size(); i < tries.size(); ++i)
        if (key(got[i].memory) < least) {   // strictly better: of equals, the first (larger value, alone)
            least = key(got[i].memory);
            best = i;
        }
    if (best < tries.size()) confs.push_back(tries[best]);
    return confs;
}

namespace {

// Global combinations: optimizer implementation x placement.
std::vector<Setting> global_settings(const Base& base, const PlannerOptions& options) {
    std::vector<Setting> globals;
    // a host optimizer is refused then (and under DDP or FSDP2, or for torch.func's gradients: make_host_optimizer)
    const bool grads_read_late = !grads_used_after_backward(base).empty() || !base.info.data_parallel.empty() ||
                                 !base.info.torch_func_modules.empty();
    for (int fused = 0; fused < 2; ++fused)
        for (int host = 0; host < 2; ++host) {
            if (fused && (!options.fused_optimizer || base.optimizer_impl != "foreach" || !base.info.adam_optimizer() ||
                          !base.info.fused_refused.empty()))
                continue;
            if (fused && host) continue;   // a host step replaces the GPU's kernels either way
            if (host && (!options.host_optimizer || base.opt_first.empty() || base.opt_first[0] < 0 || grads_read_late))
                continue;
            Setting candidate;
            if (fused) candidate.optimizer_impl = OptimizerImpl::Fused;
            candidate.optimizer_on_host = host;
            globals.push_back(candidate);
        }
    return globals;
}

// How many values of max_split_size_mb and of roundup_power2_divisions the allocator search tried
// (search_allocator_confs: the search's own settings, then each value alone and with expandable
// segments).
void count_allocator_values(const Base& base, const PlannerOptions& options, Advice& advice) {
    if (advice.allocator_trials <= 0) return;
    advice.roundup_values =
        options.roundup_divisions > 0
            ? static_cast<int64_t>(roundup_values(*base.trace, static_cast<size_t>(options.roundup_divisions)).size())
            : 0;
    advice.split_values =
        (advice.allocator_trials - static_cast<int64_t>(options.allocator_confs.size())) / 2 - advice.roundup_values;
}

// Every distinct setting predicted, fastest first, and the first `top` that fit within the budget;
// settings that read the same count once (the first that fits): the same choices on as many
// blocks of each stack, the same global settings, whatever the allocator.
void rank_distinct(const std::map<std::string, Candidate>& seen, const PlannerOptions& options, Advice& advice) {
    for (auto& [key, c] : seen) advice.all.push_back(c);
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

    Candidate predict(const Setting& setting) {
        std::string key = to_json(setting);
        auto it = seen_.find(key);
        if (it != seen_.end()) return it->second;
        Candidate cand = candidate(setting, ev_.predict(setting, options_.capacity));
        ++advice_.evaluations;
        seen_[key] = cand;
        return cand;
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
        if (!missing.empty()) {
            const std::vector<Prediction> got = ev_.predict(setting, missing, options_.capacity);
            for (size_t j = 0; j < missing.size(); ++j) {
                Setting under = setting;
                under.allocator = missing[j];
                seen_[to_json(under)] = candidate(under, got[j]);
            }
            advice_.evaluations += static_cast<int64_t>(missing.size());
        }
        std::vector<Candidate> out;
        out.reserve(confs_.size());
        for (const Setting& under : each) out.push_back(seen_[to_json(under)]);
        return out;
    }

    void keep(const Candidate& cand) { seen_[to_json(cand.setting)] = cand; }
    const std::map<std::string, Candidate>& seen() const { return seen_; }

private:
    const Evaluator& ev_;
    const PlannerOptions& options_;
    const std::vector<std::string>& confs_;
    Advice& advice_;
    std::map<std::string, Candidate> seen_;
};

// The DP over the blocks for one global setting (by its index) and one family of block choices;
// each combination it returns is predicted exactly under each allocator setting and added to
// `dp_points`. The DP's capacity is lowered by a margin for the caching allocator's rounding and
// fragmentation, grown by the excess of an answer that does not run (at most 6 tries).
void search_family(const Evaluator& ev, const PlannerOptions& options, const SeparableModel& model, size_t gi,
                   const Setting& global, const OffloadSetting& offload, const std::vector<uint8_t>& family,
                   int64_t base_margin,
                   Predictions& predictions, std::vector<Combo>& dp_points, Advice& advice) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    int64_t margin = base_margin;
    for (int iter = 0; iter < 6; ++iter) {
        DpResult result = solve(model, options.capacity - margin, family);
        ++advice.dp_runs;
        advice.max_states = std::max(advice.max_states, result.states);
        if (!result.feasible && iter == 0 && margin > 0) {
            // A combination's own reserved-minus-peak can be below the global setting's:
            // try once more without the margin (the exact prediction decides).
            margin = 0;
            continue;
        }
        if (!result.feasible) break;
        std::vector<BlockChoice> per(nb);
        for (size_t k = 0; k < nb; ++k) per[k] = static_cast<BlockChoice>(result.choice[k]);
        dp_points.push_back({gi, per});
        // Of its allocator settings, one that runs at the capacity, else the least reserving:
        // when none runs, the margin grows by that one's excess (its unlimited reserved peak
        // is then above the capacity: at or below it nothing fails).
        Candidate best;
        bool have = false;
        for (Candidate& cand : predictions.predict_each(combine(base, global, per, offload))) {
            cand.blocks = per;
            cand.model_peak = result.peak;
            predictions.keep(cand);
            if (!have || (cand.fits && !best.fits) ||
                (cand.fits == best.fits && cand.prediction.memory.reserved < best.prediction.memory.reserved)) {
                best = cand;
                have = true;
            }
        }
        if (best.fits) break;
        margin += best.prediction.memory.reserved - options.capacity + (16 << 20);
    }
}

}  // namespace

Advice advise(const Evaluator& ev, const PlannerOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    Advice advice;
    advice.baseline = ev.predict(Setting{}, options.capacity);
    ++advice.evaluations;
    if (options.progress)
        options.progress("evaluating " + std::to_string(nb) + " blocks x " + std::to_string(kChoices - 1) + " choices");
    // The block choices that offload use one mode per combination (one SavedTensorOffload): each
    // mode searched is a dimension of the global setting, with the blocks' effects under it.
    std::vector<OffloadSetting> modes;
    for (const OffloadMode mode : options.offload_modes) {
        modes.push_back(options.offload);
        modes.back().mode = mode;
        if (mode == OffloadMode::Sync) modes.back().prefetch = -1;   // the mode's default: none
    }
    if (modes.empty()) modes.push_back(options.offload);
    std::vector<BlockEffects> effects;
    effects.reserve(modes.size());
    for (const OffloadSetting& mode : modes)
        effects.push_back(block_effects(ev, options, mode, effects.empty() ? nullptr : &effects.front(),
                                        advice.evaluations));
    const Windows windows = classify(base);

    std::vector<Setting> globals = global_settings(base, options);
    add_reshard_choices(base, globals);   // FSDP2: reshard_after_forward false (transforms/reshard.cpp)
    // each global setting under each offload mode (one mode alone where no block offers an offload)
    bool any_offload = false;
    for (size_t k = 0; k < nb; ++k)
        any_offload |= !effects.front().delta[k][static_cast<size_t>(BlockChoice::Offload)].empty();
    const size_t mode_count = any_offload ? modes.size() : 1;
    std::vector<size_t> mode_of;
    std::vector<OffloadSetting> offloads;
    {
        const std::vector<Setting> one = globals;
        globals.clear();
        for (size_t m = 0; m < mode_count; ++m)
            for (const Setting& global : one) {
                globals.push_back(global);
                mode_of.push_back(m);
                offloads.push_back(modes[m]);
            }
    }
    // Families of block choices: all of them, and each alone (answers people can read).
    const std::vector<std::vector<uint8_t>> families = {{1, 1, 1, 1, 1, 1}, {1, 1, 0, 0, 0, 0}, {1, 0, 1, 0, 0, 0},
                                                        {1, 0, 0, 1, 0, 0}, {1, 0, 0, 0, 1, 0}, {1, 0, 0, 0, 0, 1},
                                                        {1, 0, 0, 0, 0, 0}};
    static_assert(kChoices == 6, "a family per choice: one more row and column per choice added");
    // The allocator settings every combination is predicted under (as captured, expandable
    // segments, and a max_split_size_mb where the captured step says it reserves less).
    const std::vector<std::string> confs = search_allocator_confs(ev, options, advice.allocator_trials);
    advice.allocator_confs = confs;
    count_allocator_values(base, options, advice);
    if (confs.size() > options.allocator_confs.size()) advice.split_conf = confs.back();
    Predictions predictions(ev, options, confs, advice);
    // every combination the DP returned, as (global, block choices): where the exact search starts
    std::vector<Combo> dp_points;
    for (size_t gi = 0; gi < globals.size(); ++gi) {
        const Setting& global = globals[gi];
        dp_points.push_back({gi, std::vector<BlockChoice>(nb, BlockChoice::Keep)});
        const SeparableModel model = build_model(effects[mode_of[gi]], windows, ev.quick(global).live.window, nb);
        ++advice.evaluations;
        // The caching allocator's rounding and fragmentation, as the global setting alone has them.
        const Prediction pg = predictions.predict(global).prediction;
        const int64_t base_margin = std::max<int64_t>(0, pg.memory.reserved - pg.memory.peak);
        for (const auto& family : families) {
            // under a second mode, the families without an offload are the first mode's again
            if (mode_of[gi] > 0 && !family[static_cast<size_t>(BlockChoice::Offload)] &&
                !family[static_cast<size_t>(BlockChoice::FullOffload)])
                continue;
            search_family(ev, options, model, gi, global, offloads[gi], family, base_margin, predictions, dp_points,
                          advice);
        }
    }
    // The exact search from each offload mode's best start: from the best of all, it can stop at a
    // combination of one mode that does not fit and that no one or two changes take to a fitting one
    // of the other (a 4-block step at its least capacities: a sync offload closest, a streamed fits).
    for (size_t m = 0; m < mode_count; ++m) {
        std::vector<Combo> starts;
        for (const Combo& point : dp_points)
            if (mode_of[point.global] == m) starts.push_back(point);
        if (starts.empty()) continue;
        refine(
            ev, globals, offloads, effects.front(), options, starts,
            [&predictions](const Setting& setting) { return predictions.predict_each(setting); }, advice);
    }
    rank_distinct(predictions.seen(), options, advice);
    advice.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return advice;
}

}  // namespace mhc::advise
