// torch.optim's for-loop steps as the tensors each parameter's lines make (forloop_steps.hpp).
// Read from torch 2.15's torch/optim/{adam,nadam,radam,adamax,rmsprop,adadelta,adagrad,rprop,asgd}.py, the
// `_single_tensor_*` functions without capturable or differentiable: in-place ops make nothing,
// `x.sqrt()`, `x / c`, `x.add(y)`, `-x` each make a tensor, `c / x` makes two (its reciprocal,
// then the product).
#include "mhc/advise/forloop_steps.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace mhc::advise {

namespace {

// The names: the loop's `grad`, the names that live from one parameter to the next (`denom`,
// `avg`, `std`, `delta`, `bias_corrected_exp_avg`), and temporaries of one line.
constexpr uint8_t kGrad = 0, kHeld = 1, kHeld2 = 2, kT0 = 3, kT1 = 4, kT2 = 5, kT3 = 6, kT4 = 7;
constexpr size_t kSlots = 8;
constexpr int64_t kScalarBytes = 4;   // a 0-dim fp32 tensor

LoopLine make(uint8_t slot) { return {LoopOp::Make, slot, 0}; }
LoopLine drop(uint8_t slot) { return {LoopOp::Drop, slot, 0}; }
LoopLine move(uint8_t from, uint8_t to) { return {LoopOp::Move, from, to}; }
LoopLine mask(uint8_t slot) { return {LoopOp::Make, slot, 0, 4}; }   // a bool tensor of the fp32 copy
LoopLine scalar(uint8_t slot) { return {LoopOp::Scalar, slot, 0}; }   // one fp32 element

// Rprop's lines after `grad = grads[i]` (and -grad): `sign = grad.mul(prev).sign()` (two made, the
// product freed, the old sign freed at the rebinding), `sign[sign.gt(0)] = etaplus` and the lt and
// eq lines (a bool mask each, freed after: a scalar into a bool mask is masked_fill_ in place),
// `grad = grad.clone()`, `grad[sign.eq(etaminus)] = 0` (a mask), `param.addcmul_(grad.sign(),
// step_size, value=-1)`.
void rprop_lines(LoopProgram& program) {
    for (const LoopLine line : {make(kT0), make(kT1), drop(kT0), move(kT1, kHeld), mask(kT0), drop(kT0), mask(kT0),
                                drop(kT0), mask(kT0), drop(kT0), make(kGrad), mask(kT0), drop(kT0), make(kT0),
                                drop(kT0)})
        program.push_back(line);
}

bool flag(const nlohmann::json& defaults, const char* key) {
    return defaults.contains(key) && defaults[key].is_boolean() && defaults[key].get<bool>();
}

// `weight_decay` as a number (absent: 0); nullopt when it is something else.
std::optional<double> number(const nlohmann::json& defaults, const char* key) {
    if (!defaults.contains(key)) return 0.0;
    const nlohmann::json& value = defaults[key];
    if (!value.is_number()) return std::nullopt;
    return value.get<double>();
}

// RAdam's rho_t > 5 in step `step` (its rectified branch), with beta2 from `betas`.
std::optional<bool> radam_rectified(const nlohmann::json& defaults, int64_t step) {
    const nlohmann::json betas = defaults.value("betas", nlohmann::json::array({0.9, 0.999}));
    if (!betas.is_array() || betas.size() != 2 || !betas[1].is_number()) return std::nullopt;
    const double beta2 = betas[1].get<double>();
    if (!(beta2 > 0 && beta2 < 1)) return std::nullopt;
    const double rho_inf = 2 / (1 - beta2) - 1;
    const double power = std::pow(beta2, static_cast<double>(step));
    const double rho_t = rho_inf - 2 * static_cast<double>(step) * power / (1 - power);
    return rho_t > 5.0;
}

// ASGD's `mu.item() != 1` in step `step` (1 for the first): mu is 1 until a step ends with
// `mu.copy_(torch.as_tensor(1 / max(1, step - t0)))`, an fp32 tensor, so the previous step's
// count decides, rounded to fp32 as the state holds it. nullopt where t0 is no number.
std::optional<bool> asgd_mu_not_one(const nlohmann::json& defaults, int64_t step) {
    const nlohmann::json t0 = defaults.value("t0", nlohmann::json(1e6));
    if (!t0.is_number() || step < 1) return std::nullopt;
    if (step == 1) return false;
    const double previous = static_cast<double>(step - 1);
    return static_cast<float>(1.0 / std::max(1.0, previous - t0.get<double>())) != 1.0F;
}

// ASGD's for-loop (torch/optim/asgd.py, _single_tensor_asgd, not capturable): `grad = grads[i]`,
// -grad (maximize), grad.add(param, alpha=weight_decay), where mu is not 1 `ax.add_(param.sub(ax)
// .mul_(mu))` (one tensor, freed after the line), then `new_eta` and `new_mu` (torch.as_tensor
// of a Python number: one fp32 element each), held to the next parameter's.
std::optional<LoopProgram> asgd_program(const nlohmann::json& defaults, bool maximize, double weight_decay,
                                        int64_t step) {
    const std::optional<bool> averaging = asgd_mu_not_one(defaults, step);
    if (!averaging) return std::nullopt;
    LoopProgram program{drop(kGrad)};
    if (maximize) program.push_back(make(kGrad));
    if (weight_decay != 0) program.push_back(make(kGrad));
    if (*averaging) {
        program.push_back(make(kT0));
        program.push_back(drop(kT0));
    }
    program.push_back(scalar(kHeld));
    program.push_back(scalar(kHeld2));
    return program;
}

}   // namespace

std::optional<LoopProgram> forloop_program(const std::string& optimizer_class, const nlohmann::json& defaults,
                                           int64_t step_number) {
    if (!defaults.is_object() || flag(defaults, "capturable") || flag(defaults, "differentiable")) return std::nullopt;
    const std::optional<double> weight_decay = number(defaults, "weight_decay");
    if (!weight_decay) return std::nullopt;
    const bool maximize = flag(defaults, "maximize");
    const bool adam = optimizer_class.empty() || optimizer_class == "torch.optim.adam.Adam" ||
                      optimizer_class == "torch.optim.adamw.AdamW";
    const bool nadam = optimizer_class == "torch.optim.nadam.NAdam";
    const bool radam = optimizer_class == "torch.optim.radam.RAdam";
    // decoupled weight decay (AdamW; Adam, NAdam, RAdam with decoupled_weight_decay) is param.mul_
    const bool decoupled = optimizer_class.empty() || optimizer_class == "torch.optim.adamw.AdamW" ||
                           flag(defaults, "decoupled_weight_decay");
    LoopProgram program;
    if (adam || nadam || radam) {
        // `grad = grads[i] if not maximize else -grads[i]`: the new one made while the old is held
        program.push_back(maximize ? make(kGrad) : drop(kGrad));
        if (*weight_decay != 0 && !decoupled) program.push_back(make(kGrad));   // grad.add(param, alpha=wd)
        if (adam || nadam) {
            // Adam: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps) (amsgrad: of the
            // max, made in place); NAdam: denom = exp_avg_sq.div(bias_correction2).sqrt()
            for (const LoopLine line : {make(kT0), make(kT1), drop(kT0), move(kT1, kHeld)}) program.push_back(line);
        } else {
            const std::optional<bool> rectified = radam_rectified(defaults, step_number);
            if (!rectified) return std::nullopt;
            program.push_back(make(kHeld));   // bias_corrected_exp_avg = exp_avg / bias_correction1
            if (*rectified) {                 // bcea * lr * (bc2 ** 0.5 / exp_avg_sq.sqrt().add_(eps)) * rect
                for (const LoopLine line : {make(kT0), make(kT1), make(kT2), make(kT3), drop(kT1), drop(kT2), make(kT4),
                                            drop(kT0), drop(kT3), make(kT0), drop(kT4), drop(kT0)})
                    program.push_back(line);
            } else {   // bcea * lr
                program.push_back(make(kT0));
                program.push_back(drop(kT0));
            }
        }
        return program;
    }
    if (optimizer_class == "torch.optim.asgd.ASGD") return asgd_program(defaults, maximize, *weight_decay, step_number);
    const bool adamax = optimizer_class == "torch.optim.adamax.Adamax";
    const bool rmsprop = optimizer_class == "torch.optim.rmsprop.RMSprop";
    const bool adadelta = optimizer_class == "torch.optim.adadelta.Adadelta";
    const bool adagrad = optimizer_class == "torch.optim.adagrad.Adagrad";
    const bool rprop = optimizer_class == "torch.optim.rprop.Rprop";
    if (!adamax && !rmsprop && !adadelta && !adagrad && !rprop) return std::nullopt;
    // `grad = grads[i]` (or the zip's), then `grad = grad if not maximize else -grad`
    program.push_back(drop(kGrad));
    if (maximize) program.push_back(make(kGrad));
    if (rprop) {   // Rprop has no weight decay
        rprop_lines(program);
        return program;
    }
    if (*weight_decay != 0) program.push_back(make(kGrad));
    if (adagrad) {   // std = state_sum.sqrt().add_(eps), held to the next parameter's
        program.push_back(make(kHeld));
    } else if (adamax) {   // torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
        program.push_back(make(kT0));
        program.push_back(drop(kT0));
    } else if (rmsprop) {   // avg = square_avg.sqrt() (centered: square_avg.addcmul(...).sqrt_())
        program.push_back(make(kHeld));
    } else {   // std = square_avg.add(eps).sqrt_(); delta = acc_delta.add(eps).sqrt_()
        program.push_back(make(kHeld));
        program.push_back(make(kHeld2));
    }
    return program;
}

int64_t forloop_most(const std::vector<int64_t>& sizes, const LoopProgram& program) {
    std::vector<LoopParam> params;
    params.reserve(sizes.size());
    for (const int64_t bytes : sizes) params.push_back({bytes, 0, 0});
    return forloop_most(params, program);
}

namespace {

// What the loop holds: its slots, the sparse branch's names, all live bytes and their most.
struct LoopState {
    std::array<int64_t, kSlots> held{};
    int64_t coalesced = 0, std_values = 0, live = 0, most = 0;
    void make(int64_t bytes) {
        live += bytes;
        most = std::max(most, live);
    }
    void free(int64_t& bytes) {
        live -= bytes;
        bytes = 0;
    }
};

void run_program(LoopState& st, int64_t bytes, const LoopProgram& program) {
    for (const LoopLine& line : program) {
        int64_t& slot = st.held[line.slot];
        if (line.op == LoopOp::Make || line.op == LoopOp::Scalar) {
            const int64_t made = line.op == LoopOp::Scalar ? kScalarBytes : bytes / line.divisor;
            st.make(made);
            st.free(slot);
            slot = made;
        } else if (line.op == LoopOp::Drop) {
            st.free(slot);
        } else {
            st.free(st.held[line.to]);
            st.held[line.to] = slot;
            slot = 0;
        }
    }
}

void run_sparse_adagrad(LoopState& st, const LoopParam& param) {
    st.free(st.held[kGrad]);   // grad = grads[i]
    st.make(param.indices + param.values);   // grad = grad.coalesce(); grad_indices, grad_values rebound
    st.free(st.coalesced);
    st.coalesced = param.indices + param.values;
    int64_t pow = param.values;   // state_sum.add_(_make_sparse(grad, grad_indices, grad_values.pow(2)))
    st.make(pow);
    st.free(pow);
    st.make(param.values);   // std = state_sum.sparse_mask(grad): a dense std is freed, a sparse one's values
    st.free(st.held[kHeld]);   // stay bound to std_values until the next line rebinds it
    st.free(st.std_values);
    st.std_values = param.values;
    int64_t quotient = param.values;   // param.add_(_make_sparse(grad, grad_indices, grad_values / std_values))
    st.make(quotient);
    st.free(quotient);
}

}   // namespace

int64_t forloop_most(const std::vector<LoopParam>& params, const LoopProgram& program) {
    LoopState st;
    for (const LoopParam& param : params) {
        if (param.values > 0) run_sparse_adagrad(st, param);
        else run_program(st, param.bytes, program);
    }
    return st.most;
}

}   // namespace mhc::advise
