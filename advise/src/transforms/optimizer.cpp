// The optimizer's implementation and placement: AdamW(fused=True) instead of the foreach
// kernels, and the optimizer state and step on the host (ZeRO-Offload on one GPU).
// docs/simulator.md "Settings: optimizer" states the rules this file follows.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "mhc/advise/forloop_steps.hpp"
#include "mhc/advise/transforms.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/limits.hpp"
#include "sparse_grads.hpp"

namespace mhc::advise {

namespace {

// A time worked out in double (bytes over a bandwidth, a count times a cost) as whole ns, rounded
// down as docs/advise.md's figures are. Past 2^62 ns (146 years) it is refused: it was cast to
// int64 unchecked (undefined behaviour for a trace's 2^56-byte parameters over 1 kB/s).
int64_t whole_ns(const Base& base, double ns, const char* what) {
    if (!(ns >= 0 && ns <= static_cast<double>(trace::limits::kMaxAbsTime)))
        throw Error(base.trace->path + ": " + what + " would take more than 2^62 ns at the bandwidth given (" +
                    std::to_string(ns) + " ns)");
    return static_cast<int64_t>(ns);
}

// What one step's optimizer ops touch, by category.
struct StepTensors {
    std::set<int32_t> params, grads, state;
    int64_t bytes(const Plan& plan, const std::set<int32_t>& ids) const {
        int64_t total = 0;
        for (int32_t alloc : ids) total += plan.allocs[static_cast<size_t>(alloc)].bytes;
        return total;
    }
    // What a fused multi-tensor AdamW kernel reads and writes: gradients once, parameters and
    // state read and written (the capture's roofline counts a mutated tensor twice).
    int64_t adam_bytes(const Plan& plan) const {
        return bytes(plan, grads) + 2 * (bytes(plan, params) + bytes(plan, state));
    }
};

// From the recorded ops first..last (other settings may already have replaced its kernels).
StepTensors step_tensors(const Base& base, int32_t first, int32_t last) {
    const Plan& plan = base.plan;
    StepTensors st;
    for (int32_t s = first; s >= 0 && s <= last; ++s) {
        if (base.phase[static_cast<size_t>(s)] != Phase::Optimizer) continue;
        for (const PlanAccess& access : plan.ops[static_cast<size_t>(s)].acc) {
            const trace::Category cat = plan.allocs[static_cast<size_t>(access.alloc)].category;
            if (cat == trace::Category::Param) st.params.insert(access.alloc);
            else if (cat == trace::Category::Grad) st.grads.insert(access.alloc);
            else if (cat == trace::Category::Optimizer) st.state.insert(access.alloc);
        }
    }
    return st;
}

StepTensors step_tensors(const Base& base, size_t si) {
    return step_tensors(base, base.opt_first[si], base.opt_last[si]);
}

// An op that only makes optimizer state (zeros_like of the first step's lazy init).
bool makes_state_only(const Base& base, const Plan& plan, int32_t seq) {
    bool makes = false;
    for (const PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc) {
        if (plan.allocs[static_cast<size_t>(access.alloc)].category != trace::Category::Optimizer) return false;
        makes |= access.alloc < static_cast<int32_t>(base.creator.size()) &&
                 base.creator[static_cast<size_t>(access.alloc)] == seq;
    }
    return makes;
}

class FusedOptimizer final : public Transform {
public:
    void apply(const Context& ctx, Plan& plan) const override {
        const Base& base = ctx.base;
        if (base.optimizer_impl == "fused") return;
        for (size_t si = 0; si < base.steps.size(); ++si) {
            if (base.opt_first[si] < 0) continue;
            // One fused kernel per optimizer.step() call: a step function may step several times a
            // captured step (PPO's mini-batches, each backward then step), and each call's
            // gradients are gone (zero_grad(set_to_none=True)) before the next backward makes new ones.
            for (int32_t first = base.opt_first[si]; first >= 0 && first <= base.opt_last[si];) {
                int32_t last = first;
                while (last + 1 <= base.opt_last[si] && !is_pass_op(base.phase[static_cast<size_t>(last) + 1])) ++last;
                fuse(base, plan, si, first, last);
                first = last + 1;
                while (first <= base.opt_last[si] && base.phase[static_cast<size_t>(first)] != Phase::Optimizer)
                    ++first;
            }
        }
    }

private:
    static bool is_pass_op(Phase ph) { return ph == Phase::Forward || ph == Phase::Backward || ph == Phase::Recompute; }

    static void fuse(const Base& base, Plan& plan, size_t si, int32_t first, int32_t last) {
        StepTensors st = step_tensors(base, first, last);
        // The fused kernel goes where the last foreach kernel was: with parameter groups
        // (torch steps them one after the other, each group's state made lazily before its
        // kernels) every group's state exists only from there.
        int32_t last_removed = -1;
        for (int32_t s = first; s <= last; ++s) {
            if (base.phase[static_cast<size_t>(s)] != Phase::Optimizer || makes_state_only(base, plan, s)) continue;
            last_removed = s;
            plan.remove_op(s);
            // the foreach kernels' temporaries are never made
            base.for_made(s, [&](int32_t alloc) {
                if (plan.allocs[static_cast<size_t>(alloc)].category != trace::Category::Optimizer) plan.allocs[static_cast<size_t>(alloc)].removed = true;
            });
        }
        if (last_removed < 0) return;
        Op fused;
        fused.kind = OpKind::Kernel;
        fused.name = plan.intern("aten::_fused_adamw_");
        fused.step = base.steps[si];
        fused.phase = Phase::Optimizer;
        fused.anchor = last_removed;
        const int64_t moved = st.adam_bytes(base.plan);
        fused.duration = whole_ns(base, static_cast<double>(moved) / base.hbm_bw * 1e9, "the fused optimizer step") +
                         base.launch_overhead;
        for (int32_t param : st.params) fused.acc.push_back({param, trace::AccessMode::ReadWrite});
        for (int32_t grad : st.grads) fused.acc.push_back({grad, trace::AccessMode::Read});
        for (int32_t state : st.state) fused.acc.push_back({state, trace::AccessMode::ReadWrite});
        plan.insert_before(last_removed, plan.add_op(fused));
    }
};

// A gradient's device life in a later pass of gradient accumulation: a new storage from the
// pass's first backward access of gradient g, which the pass's backward ops use instead.
int32_t grad_life(const Base& base, Plan& plan, int32_t grad, int32_t pass) {
    Alloc life = plan.allocs[static_cast<size_t>(grad)];
    life.src = -1;
    life.made = {base.first_access_in_pass(grad, Phase::Backward, pass), false};
    life.made_offset = 0;
    const int32_t dev = plan.add_alloc(life);
    base.for_acc(grad, [&](int32_t seq, trace::AccessMode) {
        if (base.pass[static_cast<size_t>(seq)] != pass || base.phase[static_cast<size_t>(seq)] != Phase::Backward)
            return;
        for (PlanAccess& pa : plan.ops[static_cast<size_t>(seq)].acc)
            if (pa.alloc == grad) pa.alloc = dev;
    });
    return dev;
}

// Host bytes of a device tensor the host optimizer keeps a copy of: the optimizer steps fp32
// copies of its parameters (mhc_torch.apply's master copies; their gradient buffers, state and
// temporaries are fp32 too), so a 16-bit tensor takes twice its bytes there.
int64_t host_bytes(const Base& base, int64_t bytes) {
    const std::string& dtype = base.info.optimizer_dtype;
    if (dtype == "bfloat16" || dtype == "float16") return bytes * 2;
    if (dtype == "float64") return bytes / 2;
    return bytes;
}

// The most bytes the recorded step's temporaries (what its optimizer kernels made, other than
// state and parameters: foreach AdamW's square roots of every second moment) held at once.
int64_t step_temporaries(const Base& base, const Plan& plan, size_t si) {
    std::vector<int32_t> temps;
    for (int32_t s = base.opt_first[si]; s >= 0 && s <= base.opt_last[si]; ++s)
        if (base.phase[static_cast<size_t>(s)] == Phase::Optimizer)
            base.for_made(s, [&](int32_t made) {
                const Alloc& al = plan.allocs[static_cast<size_t>(made)];   // (a fused step's are gone)
                if (!al.removed && al.category != trace::Category::Optimizer && al.category != trace::Category::Param)
                    temps.push_back(made);
            });
    int64_t most = 0;
    for (int32_t s = base.opt_first[si]; s >= 0 && s <= base.opt_last[si]; ++s) {
        int64_t live = 0;
        for (int32_t temp : temps) {
            const Alloc& al = plan.allocs[static_cast<size_t>(temp)];
            if (al.made.op <= s && (al.freed.op == kNoFree || al.freed.op >= s)) live += al.bytes;
        }
        most = std::max(most, live);
    }
    return most;
}

// The captured optimizer's defaults (meta capture.optimizer_defaults; an object or empty, as
// CaptureInfo checked), and whether one of them is true.
nlohmann::json optimizer_defaults(const Base& base) {
    if (base.info.optimizer_defaults.empty()) return nlohmann::json();
    return nlohmann::json::parse(base.info.optimizer_defaults, nullptr, false);
}
bool default_on(const nlohmann::json& defaults, const char* key) {
    return defaults.contains(key) && defaults[key].is_boolean() && defaults[key].get<bool>();
}

// torch.optim's classes whose for-loop mhc_torch.apply runs on the host copies whatever the
// user's foreach (python/mhc_torch/optimizers.py, _LOOPED): the ones modelled line by line (the
// empty class: a capture that did not record it, read as AdamW, as forloop_program reads it).
bool looped_on_host(const std::string& optimizer_class) {
    static const std::set<std::string> looped = {
        "", "torch.optim.sgd.SGD", "torch.optim.adam.Adam", "torch.optim.adamw.AdamW", "torch.optim.nadam.NAdam",
        "torch.optim.radam.RAdam", "torch.optim.adamax.Adamax", "torch.optim.rmsprop.RMSprop",
        "torch.optim.adadelta.Adadelta", "torch.optim.adagrad.Adagrad", "torch.optim.rprop.Rprop"};
    return looped.count(optimizer_class) > 0;
}

// Whether the host step runs torch's for-loop: the setting's impl if it names one; else not for
// the user's fused; else for torch.optim's looped classes always (foreach on CPU copies would
// make each temporary for all parameters at once), for another class unless its foreach is true
// (foreach=None on CPU tensors is the for-loop).
bool host_runs_forloop(const nlohmann::json& defaults, const Setting& setting, const std::string& optimizer_class) {
    if (setting.optimizer_impl == OptimizerImpl::Forloop) return true;
    if (setting.optimizer_impl != OptimizerImpl::AsCaptured) return false;
    if (default_on(defaults, "fused")) return false;
    return looped_on_host(optimizer_class) || !default_on(defaults, "foreach");
}

// The implementation the host step runs: the for-loop where host_runs_forloop says so, fused
// where the setting asks for it or the user's optimizer is fused, else foreach.
HostImpl host_impl(const nlohmann::json& defaults, const Setting& setting, bool forloop) {
    if (forloop) return HostImpl::Forloop;
    if (setting.optimizer_impl == OptimizerImpl::Fused) return HostImpl::Fused;
    if (setting.optimizer_impl == OptimizerImpl::AsCaptured && default_on(defaults, "fused")) return HostImpl::Fused;
    return HostImpl::Foreach;
}

// The captured defaults as the host copies' optimizer has them: capturable (CUDA graphs, which
// torch refuses for CPU tensors) is off there.
nlohmann::json host_defaults(nlohmann::json defaults) {
    if (defaults.is_object() && defaults.contains("capturable")) defaults["capturable"] = false;
    return defaults;
}

// What makes a new tensor in torch's for-loop SGD (_single_tensor_sgd), per parameter.
struct ForloopSgd {
    bool maximize = false, weight_decay = false, momentum = false, nesterov = false;
};

// The host step's for-loop SGD, when it runs one whose temporaries follow from the parameters'
// sizes (not differentiable; hyperparameters as numbers).
std::optional<ForloopSgd> host_forloop_sgd(const std::string& optimizer_class, const nlohmann::json& defaults) {
    if (optimizer_class != "torch.optim.sgd.SGD" || !defaults.is_object() || default_on(defaults, "differentiable"))
        return std::nullopt;
    auto nonzero = [&](const char* key) {
        return defaults.contains(key) && defaults[key].is_number() && defaults[key].get<double>() != 0;
    };
    for (const char* key : {"weight_decay", "momentum"})
        if (defaults.contains(key) && !defaults[key].is_number()) return std::nullopt;
    ForloopSgd sgd;
    sgd.maximize = default_on(defaults, "maximize");
    sgd.weight_decay = nonzero("weight_decay");
    sgd.momentum = nonzero("momentum");
    sgd.nesterov = sgd.momentum && default_on(defaults, "nesterov");
    return sgd;
}

// The for-loop SGD step's bytes above the state it ends with, at their most: for each parameter
// in turn (the trace's order of their allocations) -grad (maximize), grad + decay x param (weight
// decay) and grad + momentum x buf (nesterov) are each a new tensor of its host bytes, the loop's
// variable freeing its old one when reassigned and holding the last until the next parameter's
// grad is taken. In a step that makes the momentum buffers (the first), each is cloned from the
// gradient as its parameter comes, so the state grows as the loop goes; the model makes it all
// when the host step starts, hence "above the state it ends with" (0 when the loop holds less).
int64_t forloop_sgd_temporaries(const Base& base, const StepTensors& st, const ForloopSgd& sgd,
                                bool makes_state) {
    std::vector<int64_t> sizes;
    for (int32_t prm : st.params) sizes.push_back(host_bytes(base, base.plan.allocs[static_cast<size_t>(prm)].bytes));
    int64_t all_state = 0;
    if (sgd.momentum)
        for (int64_t bytes : sizes) all_state += bytes;
    int64_t state = makes_state ? 0 : all_state, most = state, held = 0;
    for (int64_t bytes : sizes) {
        int64_t variable = 0;   // grads[i] itself: the previous tensor freed, nothing made
        if (sgd.maximize) {
            most = std::max(most, state + held + bytes);
            variable = bytes;
        }
        if (sgd.weight_decay) {
            most = std::max(most, state + variable + bytes);
            variable = bytes;
        }
        if (sgd.momentum) {
            if (makes_state) {
                state += bytes;
                most = std::max(most, state + variable);
            }
            if (sgd.nesterov) {
                most = std::max(most, state + variable + bytes);
                variable = bytes;
            } else {
                variable = 0;   // grad = buf: the state
            }
        }
        held = variable;
    }
    return std::max<int64_t>(0, most - all_state);
}

// The host step's for-loop (other than SGD's) at its most above its state: each parameter's
// lines in turn (the trace's order of their allocations) in host bytes (forloop_steps.hpp).
// A sparse COO gradient (nn.Embedding(sparse=True)'s) is two allocations under the gradient's label,
// its indices then its values (the order a capture records a sparse tensor's parts in).
std::map<std::string, std::vector<int32_t>> grad_parts(const Plan& plan, const StepTensors& st) {
    std::map<std::string, std::vector<int32_t>> parts;
    for (int32_t grad : st.grads)   // in id order
        parts[plan.strings[static_cast<size_t>(plan.allocs[static_cast<size_t>(grad)].label)]].push_back(grad);
    return parts;
}

// The coalesced gradient Adagrad's sparse branch steps on: one entry per distinct index, as the
// device step's coalesce recorded it (a capture counts the batch's distinct ids); a gradient
// accumulated over passes holds each pass's entries, so a row looked up in two passes is two of
// them until coalesced. Where the device step made none, the gradient's entries (an upper bound).
void coalesced_sizes(const Base& base, int32_t values, LoopParam& param) {
    bool found = false;
    base.for_acc(values, [&](int32_t seq, trace::AccessMode) {
        if (found || base.phase[static_cast<size_t>(seq)] != Phase::Optimizer) return;
        std::vector<int32_t> made;
        base.for_made(seq, [&](int32_t alloc) { made.push_back(alloc); });
        if (made.size() != 2) return;
        const std::string& label =
            base.plan.strings[static_cast<size_t>(base.plan.allocs[static_cast<size_t>(made[1])].label)];
        if (label.size() < 15 || label.compare(label.size() - 15, 15, "aten::_coalesce") != 0) return;
        param.indices = base.plan.allocs[static_cast<size_t>(made[0])].bytes;
        param.values = host_bytes(base, base.plan.allocs[static_cast<size_t>(made[1])].bytes);
        found = true;
    });
}

int64_t forloop_temporaries(const Base& base, const StepTensors& st, const LoopProgram& program) {
    const Plan& plan = base.plan;
    const std::map<std::string, std::vector<int32_t>> parts = grad_parts(plan, st);
    std::vector<LoopParam> params;
    for (int32_t prm : st.params) {
        const Alloc& al = plan.allocs[static_cast<size_t>(prm)];
        LoopParam param{host_bytes(base, al.bytes), 0, 0};
        const auto grad = parts.find(plan.strings[static_cast<size_t>(al.label)] + ".grad");
        if (grad != parts.end() && grad->second.size() == 2) {   // the host's values are fp32, its indices int64
            param.indices = plan.allocs[static_cast<size_t>(grad->second[0])].bytes;
            param.values = host_bytes(base, plan.allocs[static_cast<size_t>(grad->second[1])].bytes);
            coalesced_sizes(base, grad->second[1], param);
        }
        params.push_back(param);
    }
    return forloop_most(params, program);
}

// Moves allocations to the host, each sized once: state of a parameter's size (the moments) is
// in the host copy's dtype; a step counter (a 4-byte fp32 scalar) is one whatever the parameters are.
class HostPlacement {
public:
    HostPlacement(const Base& base, const StepTensors& st, std::set<int32_t>& on_host)
        : base_(base), on_host_(on_host) {
        for (int32_t prm : st.params) param_sizes_.insert(base.plan.allocs[static_cast<size_t>(prm)].bytes);
    }
    void move(Plan& plan, int32_t alloc) {
        Alloc& al = plan.allocs[static_cast<size_t>(alloc)];
        if (on_host_.insert(alloc).second && param_sizes_.count(al.bytes)) al.bytes = host_bytes(base_, al.bytes);
        al.device = -1;
    }

private:
    const Base& base_;
    std::set<int64_t> param_sizes_;
    std::set<int32_t>& on_host_;   // allocations moved to the host, over every step
};

class HostOptimizer final : public Transform {
public:
    void apply(const Context& ctx, Plan& plan) const override {
        const Base& base = ctx.base;
        std::set<std::pair<int64_t, size_t>> host_grads_made;   // by label and part: one host buffer each
        std::set<int32_t> on_host;           // allocations moved to the host (sized once)
        // The captured optimizer's defaults, read once: whether the host runs torch's for-loop
        // (SGD's rule of its own, the others' lines by forloop_program)
        const nlohmann::json defaults = host_defaults(optimizer_defaults(base));
        const bool forloop = host_runs_forloop(defaults, ctx.setting, base.info.optimizer_class);
        const std::optional<ForloopSgd> sgd = forloop ? host_forloop_sgd(base.info.optimizer_class, defaults)
                                                      : std::nullopt;
        int64_t host_steps = 0;
        for (size_t si = 0; si < base.steps.size(); ++si) {
            if (base.opt_first[si] < 0) continue;
            ++host_steps;
            const StepTensors st = step_tensors(base, si);
            HostPlacement placement(base, st, on_host);
            const std::optional<LoopProgram> program =
                forloop && !sgd ? forloop_program(base.info.optimizer_class, defaults, host_steps) : std::nullopt;
            // Measured before the device step is removed (its temporaries are marked removed).
            int64_t temporaries = program ? forloop_temporaries(base, st, *program)
                                  : sgd   ? 0
                                          : host_bytes(base, step_temporaries(base, plan, si));
            const std::vector<int32_t> made_here = remove_device_step(base, plan, si, placement);
            if (sgd) temporaries = forloop_sgd_temporaries(base, st, *sgd, !made_here.empty());
            for (int32_t state : st.state) placement.move(plan, state);
            Op host = host_step(ctx, plan, si, st, host_impl(defaults, ctx.setting, forloop));
            std::vector<int32_t> free_at_host;   // host copies of sparse gradients accumulated in the step
            move_gradients(base, plan, si, st, host, host_grads_made, free_at_host);
            if (si == 0) add_master_copies(base, plan, st);
            const int32_t host_op = plan.add_op(host);
            for (int32_t copy : free_at_host) plan.allocs[static_cast<size_t>(copy)].freed = {host_op, true};
            plan.insert_before(base.opt_first[si], host_op);
            for (int32_t made : made_here) {
                Alloc& al = plan.allocs[static_cast<size_t>(made)];
                al.made = {host_op, false};
                al.made_offset = 0;
            }
            if (temporaries > 0) {   // the host step's temporaries, for as long as it runs
                Alloc temp;
                temp.bytes = temporaries;
                temp.device = -1;
                temp.category = trace::Category::Workspace;
                temp.label = plan.intern("host optimizer step temporaries");
                temp.made = {host_op, false};
                temp.freed = {host_op, true};
                plan.add_alloc(temp);
            }
            Op up;
            up.kind = OpKind::CopyH2D;
            up.name = plan.intern("parameters H2D");
            up.bytes = st.bytes(base.plan, st.params);
            up.step = base.steps[si];
            up.phase = Phase::Optimizer;
            up.anchor = base.opt_first[si];
            plan.insert_before(base.opt_first[si], plan.add_op(up));
        }
    }

private:
    // The GPU runs no optimizer kernel (recorded or made by another setting): the state the
    // step made lives on the host, its temporaries are the host step's. Returns the state made
    // here (the first step's), which the host step makes.
    static std::vector<int32_t> remove_device_step(const Base& base, Plan& plan, size_t si,
                                                   HostPlacement& placement) {
        std::vector<int32_t> made_here;
        for (int32_t s = base.opt_first[si]; s <= base.opt_last[si]; ++s) {
            for (auto* side : {&plan.before[static_cast<size_t>(s)], &plan.after[static_cast<size_t>(s)]})
                for (int32_t op : *side)
                    if (plan.ops[static_cast<size_t>(op)].phase == Phase::Optimizer &&
                        plan.ops[static_cast<size_t>(op)].kind == OpKind::Kernel)
                        plan.remove_op(op);
            if (base.phase[static_cast<size_t>(s)] != Phase::Optimizer) continue;
            plan.remove_op(s);
            base.for_made(s, [&](int32_t alloc) {
                Alloc& al = plan.allocs[static_cast<size_t>(alloc)];
                if (al.category == trace::Category::Optimizer) {
                    placement.move(plan, alloc);
                    made_here.push_back(alloc);
                } else if (al.category != trace::Category::Param) {
                    al.removed = true;
                }
            });
        }
        return made_here;
    }

    // The host step: its bytes streamed at the host's bandwidth plus a cost per tensor.
    static Op host_step(const Context& ctx, Plan& plan, size_t si, const StepTensors& st, HostImpl impl) {
        const Base& base = ctx.base;
        const int64_t moved = host_bytes(base, st.adam_bytes(base.plan));
        Op host;
        host.kind = OpKind::HostWork;
        host.name = plan.intern("host optimizer step");
        host.step = base.steps[si];
        host.phase = Phase::Optimizer;
        host.anchor = base.opt_first[si];
        // The bytes' time rounded down and the tensors' cost to the nearest ns, each and their sum
        // within the bound.
        const int64_t bytes_ns = whole_ns(base,
                                          static_cast<double>(moved) / ctx.host.bandwidth_Bps * 1e9 *
                                              host_impl_factor(impl, base.info.optimizer_class),
                                          "the host optimizer step");
        const int64_t tensors_ns = whole_ns(
            base, std::round(static_cast<double>(st.params.size()) * ctx.host.per_tensor_s * 1e9),
            "the host optimizer's per-tensor cost");
        if (tensors_ns > trace::limits::kMaxAbsTime - bytes_ns)
            throw Error(base.trace->path + ": the host optimizer step would take more than 2^62 ns");
        host.duration = bytes_ns + tensors_ns;
        return host;
    }

    // Each gradient goes to its host buffer once accumulated; the device copy is freed. With
    // gradient accumulation that happens in every pass (mhc_torch.apply adds each pass's
    // gradient to the host buffer): one device life per pass, from its first backward access in
    // the pass to its last. The host step waits for every copy.
    static void move_gradients(const Base& base, Plan& plan, size_t si, const StepTensors& st, Op& host,
                               std::set<std::pair<int64_t, size_t>>& host_grads_made,
                               std::vector<int32_t>& free_at_host) {
        // The host copy of a sparse gradient (indices and values) replaces the last step's: one
        // buffer per part, of the first step's entries; accumulated over passes, a copy per pass
        // (sparse_grads.hpp).
        const std::map<std::string, std::vector<int32_t>> parts = grad_parts(base.plan, st);
        std::set<int32_t> placed;
        for (const auto& [label, same] : parts)
            if (move_accumulated_sparse(base, plan, si, same, host, free_at_host, &host_bytes))
                placed.insert(same.begin(), same.end());
        // Per op that ends a gradient's life in a pass after the first: the largest host copy
        // its hooks add to a buffer (one after another, each freed before the next is made).
        std::map<int32_t, int64_t> accumulated;
        for (int32_t grad : st.grads) {
            if (grad >= static_cast<int32_t>(base.creator.size()) || placed.count(grad)) continue;
            const std::vector<int32_t>& same = parts.at(
                base.plan.strings[static_cast<size_t>(base.plan.allocs[static_cast<size_t>(grad)].label)]);
            const auto part = static_cast<size_t>(std::find(same.begin(), same.end(), grad) - same.begin());
            bool first_life = true;
            for (size_t pi = 0; pi < base.pass_step.size(); ++pi) {
                if (base.pass_step[pi] != static_cast<int32_t>(si)) continue;
                const auto pass = static_cast<int32_t>(pi);
                const int32_t last = base.last_access_in_pass(grad, Phase::Backward, pass);
                if (last < 0) continue;
                int32_t dev = grad;
                const bool accumulates = !first_life;
                if (accumulates) dev = grad_life(base, plan, grad, pass);
                first_life = false;
                Alloc& life = plan.allocs[static_cast<size_t>(dev)];
                life.freed = {last, true};
                life.freed_offset = 0;
                plan.copies.push_back({false, life.bytes, last, false});
                host.waits.push_back(static_cast<int32_t>(plan.copies.size() - 1));
                if (host_grads_made.insert({life.label, part}).second) {
                    Alloc buffer = life;
                    buffer.src = -1;
                    buffer.device = -1;
                    buffer.bytes = host_bytes(base, life.bytes);
                    buffer.made = {last, true};
                    buffer.freed = {kNoFree, false};
                    buffer.made_offset = buffer.freed_offset = 0;
                    plan.add_alloc(buffer);
                }
                if (accumulates) {   // the host's copy of this pass's gradient, added to the buffer
                    int64_t& most = accumulated[last];
                    most = std::max(most, host_bytes(base, life.bytes));
                }
            }
        }
        for (const auto& [op, bytes] : accumulated) {   // held around that op
            Alloc added;
            added.bytes = bytes;
            added.device = -1;
            added.category = trace::Category::Workspace;
            added.label = plan.intern("gradient accumulation on the host");
            added.made = {op, false};
            added.freed = {op, true};
            plan.add_alloc(added);
        }
    }

    // The fp32 master copies the host steps on, from the start of the step on.
    static void add_master_copies(const Base& base, Plan& plan, const StepTensors& st) {
        for (int32_t prm : st.params) {
            Alloc copy = base.plan.allocs[static_cast<size_t>(prm)];
            copy.src = -1;
            copy.device = -1;
            copy.bytes = host_bytes(base, copy.bytes);
            copy.made = {plan.begin_op(), false};
            copy.freed = {kNoFree, false};
            copy.made_offset = copy.freed_offset = 0;
            plan.add_alloc(copy);
        }
    }
};

}  // namespace

std::unique_ptr<Transform> make_fused_optimizer(const Base& base) {
    if (base.optimizer_impl.empty())
        throw Error("setting: field 'optimizer.impl': the captured optimizer step runs neither foreach nor fused AdamW "
                    "kernels; only a foreach AdamW step can be turned into a fused one");
    return std::make_unique<FusedOptimizer>();
}

// An op of the step's own code that reads a gradient between the backward that wrote it and the
// optimizer step (clipping, GradScaler's unscale, PCGrad's flattening of each task's gradients
// after its backward), where a host optimizer, which takes each gradient from the backward as it
// is accumulated and drops the device copy, leaves it nothing to read: "name (kernel id)", or
// empty. Every gradient of the step counts, not only those the optimizer steps (PCGrad steps a
// projected sum it made itself and reads the backward's gradients).
std::string grads_used_after_backward(const Base& base) {
    const auto recorded = static_cast<int32_t>(base.creator.size());
    for (size_t si = 0; si < base.steps.size(); ++si) {
        if (base.opt_first[si] < 0) continue;
        for (int32_t grad = 0; grad < recorded; ++grad) {
            if (base.plan.allocs[static_cast<size_t>(grad)].category != trace::Category::Grad) continue;
            const int32_t written = base.last_access(grad, Phase::Backward, base.steps[si]);
            std::string found;
            base.for_acc(grad, [&](int32_t seq, trace::AccessMode) {
                const Phase ph = base.phase[static_cast<size_t>(seq)];
                if (!found.empty() || written < 0 || seq <= written || seq >= base.opt_first[si] ||
                    ph == Phase::Backward || ph == Phase::Optimizer)
                    return;
                const size_t row = static_cast<size_t>(base.korder[static_cast<size_t>(seq)]);
                found = base.trace->str(base.trace->kernels.name[row]) + " (kernel " +
                        std::to_string(base.trace->kernels.id[row]) + ")";
            });
            if (!found.empty()) return found;
        }
    }
    return "";
}

double host_impl_factor(HostImpl impl, const std::string& optimizer_class) {
    // Foreach took 0.98 to 1.50 of the for-loop's CPU time (AdamW 2,282.1 against 2,325.0 ms, Adam
    // 1,501.1 / 1,495.1, SGD with momentum 447.2 / 577.2, Adagrad 1,438.0 / 956.5), and between 1.0
    // and 1.7 for AdamW in earlier runs under other loads: no factor that holds, so the for-loop's
    // time. Fused: AdamW 412.9 ms (0.18), Adam 304.5 (0.20), SGD 308.7 (0.53), Adagrad 195.1 (0.20).
    if (impl != HostImpl::Fused) return 1.0;
    static const std::map<std::string, double> fused = {
        {"torch.optim.adam.Adam", 0.20}, {"torch.optim.sgd.SGD", 0.53}, {"torch.optim.adagrad.Adagrad", 0.20}};
    const auto it = fused.find(optimizer_class);
    return it != fused.end() ? it->second : 0.18;   // AdamW's, and a class not measured
}

std::string host_step_note(const CaptureInfo& info) {
    // a capture that recorded neither (made before they were): nothing to tell the steps apart by
    if (info.optimizer_class.empty() && info.optimizer_defaults.empty()) return "";
    nlohmann::json defaults;
    if (!info.optimizer_defaults.empty()) defaults = nlohmann::json::parse(info.optimizer_defaults, nullptr, false);
    defaults = host_defaults(defaults);
    const std::string& cls = info.optimizer_class;
    // the user's fused step runs as fused on the host's CPU copies: the recorded step's (none)
    if (default_on(defaults, "fused")) return "";
    const bool forloop = looped_on_host(cls) || !default_on(defaults, "foreach");
    if (forloop && (host_forloop_sgd(cls, defaults) || forloop_program(cls, defaults, 1))) return "";
    const std::string name = cls.empty() ? std::string("the optimizer") : cls;
    return "the optimizer on the host: " + name + "'s host step is not modelled" +
           (forloop ? "" : " (its foreach kept)") +
           ": its temporaries are taken as its recorded step's, in fp32; --verify measures them";
}

std::unique_ptr<Transform> make_host_optimizer(const Base& base) {
    bool any = false;
    for (int32_t first : base.opt_first) any |= first >= 0;
    if (!any) throw Error("setting: field 'optimizer.state': the capture has no optimizer step");
    if (base.info.data_parallel == "ddp")
        throw Error(
            "setting: field 'optimizer.state': the step runs under DDP, whose all-reduce needs the gradients on "
            "the GPU; ZeRO-Offload replaces DDP (DeepSpeed's engine) and is not modelled from a DDP capture");
    if (!base.info.data_parallel.empty())
        throw Error(
            "setting: field 'optimizer.state': the step runs under FSDP2, whose reduce-scatter leaves each "
            "rank's gradient shards on the GPU; FSDP2's own CPUOffloadPolicy (parameters, gradients and the "
            "optimizer step on the host) is not modelled");
    // Per-sample gradients from torch.func (DP-SGD): the step writes .grad itself, after the
    // transforms, and no backward accumulates a gradient to send down (DeepSpeed takes them from
    // its engine's backward).
    if (!base.info.torch_func_modules.empty())
        throw Error("setting: field 'optimizer.state': the step computes its gradients with torch.func's grad (meta "
                    "capture.torch_func_modules) and sets .grad itself; a host optimizer takes each gradient from "
                    "the backward as it is accumulated, which such a step does not run");
    // The host model sends each gradient down once the backward has accumulated it and drops the
    // device copy; a step that reads the gradients on the device after the backward (clipping,
    // GradScaler's unscale) would read dropped memory (mhc_torch.apply clips on the host copies).
    const std::string used = grads_used_after_backward(base);
    if (!used.empty())
        throw Error(
            "setting: field 'optimizer.state': the step reads the gradients on the GPU between the backward "
            "and the optimizer step (" +
            used +
            ": gradient clipping, unscaling, gradient surgery?), which a host optimizer "
            "does on its host copies; this model of it cannot follow such a step");
    return std::make_unique<HostOptimizer>();
}

}  // namespace mhc::advise
