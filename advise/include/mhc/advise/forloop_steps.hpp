#pragma once
// The bytes torch.optim's for-loop steps (_single_tensor_<name> in torch/optim/<name>.py) make
// above their state, per parameter in turn: each line of the loop that makes a tensor, and the
// names that hold one from a parameter to the next. docs/simulator.md "Settings: optimizer".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mhc::advise {

// One parameter's loop as what its lines do to the names that hold tensors (slots): Make a tensor
// of the parameter's bytes and bind it to a slot (the slot's old tensor freed after: Python
// rebinds a name once the new value exists), Drop a slot (rebound to a tensor the loop did not
// make, or a temporary freed), Move a slot's tensor to another (the other's old one freed). A
// Make of `divisor` 4 makes a quarter of the parameter's bytes: a bool mask (`sign.gt(0)`) of
// the host step's fp32 copy, one byte an element. A Scalar makes a 4-byte tensor of one fp32
// element bound to a slot (ASGD's `torch.as_tensor(new_eta)`), whatever the parameter's size.
enum class LoopOp : uint8_t { Make, Drop, Move, Scalar };
struct LoopLine {
    LoopOp op = LoopOp::Make;
    uint8_t slot = 0, to = 0, divisor = 1;
};
using LoopProgram = std::vector<LoopLine>;

// The loop of torch.optim `optimizer_class` with these defaults (capture.optimizer_defaults) in
// its `step_number`th step (1 for the first; RAdam's rectified branch depends on it), or nullopt
// where it is not modelled (SGD: its own rule; capturable or differentiable, which neither a
// capture nor the host's CPU tensors run; an unknown class).
std::optional<LoopProgram> forloop_program(const std::string& optimizer_class, const nlohmann::json& defaults,
                                           int64_t step_number);

// The most bytes the loop's tensors hold at once over the parameters of `sizes` (bytes, in the
// order the loop visits them).
int64_t forloop_most(const std::vector<int64_t>& sizes, const LoopProgram& program);

// A parameter the loop visits: its bytes, and for a sparse COO gradient (nn.Embedding(sparse=True)'s)
// the bytes of its indices and of its values (both 0 for a dense gradient).
struct LoopParam {
    int64_t bytes = 0, indices = 0, values = 0;
};

// forloop_most where some gradients are sparse. Only Adagrad's loop takes them (the others raise);
// its sparse branch (torch/optim/adagrad.py, _single_tensor_adagrad) runs instead of the program:
// grad.coalesce() (indices and values, as many entries: an upper bound), grad_values.pow(2) freed
// after state_sum.add_, std = state_sum.sparse_mask(grad) (values; the indices are the gradient's),
// grad_values / std_values freed after param.add_. The coalesced gradient and std's values stay
// bound (grad_indices, grad_values, std_values) until a later sparse parameter rebinds them.
int64_t forloop_most(const std::vector<LoopParam>& params, const LoopProgram& program);

}   // namespace mhc::advise
