"""nn.LSTM, nn.GRU and nn.RNN captured as a GPU runs them: cuDNN's fused RNN (aten::_cudnn_rnn).

On fake CPU tensors `aten::lstm` (and gru, rnn_tanh, rnn_relu) would take the CPU's path
(aten::mkldnn_rnn_layer per layer). While a capture runs, the four ops on fake tensors take the
path of a CUDA tensor instead (PyTorch's aten/src/ATen/native/cudnn/RNN.cpp, _cudnn_impl and
_cudnn_rnn; AutocastRNN.cpp; read, not copied):

- the parameters are views of one flat buffer (nn.RNNBase.flatten_parameters on the GPU), so
  try_get_weight_buf finds them and nothing is copied; the capture's parameters stay one storage
  each (the same bytes);
- under autocast (the capture's CUDA policy) `_cudnn_rnn` takes fp16, whatever the autocast
  dtype (AutocastRNN.cpp casts to kHalf): the input, hx and cx are cast, and the weights are
  copied into a new fp16 flat buffer (one copy_ per parameter into a tensor set_ on it: autograd
  sees the copies, so each parameter's gradient comes back as its own fp32 tensor); the capture
  makes one fp16 tensor per weight (the same bytes and lifetime, other blocks);
- `_cudnn_rnn` makes the output, hy, cy and, in training, the reserve space, which autograd keeps
  for the backward with the input, hx, cx, the output and the weight buffer; a batch_first input
  is copied to sequence-first (`input.contiguous()` of the transposed input) for the kernel's
  length;
- `_cudnn_rnn_backward` zero-fills grad_hy and grad_cy where the loss does not use hy/cy, copies
  the input and grad_output to sequence-first (batch_first), makes dx, dhx, dcx and one flat
  weight gradient (`zeros(weight_buf)`), whose slices are the parameters' gradients (fp32: the
  `.grad` of every parameter of the module is a view of that one allocation).

nn.LSTMCell and nn.GRUCell (aten::lstm_cell, gru_cell) take CUDA's fused cell on fake tensors too
(RNN.cpp's LSTMCell and GRUCell on a CUDA input): the two gate matmuls, then
_thnn_fused_lstm_cell / _thnn_fused_gru_cell, which keep one workspace of the gates for the
backward (batch x 4 hidden, GRU batch x 5 hidden) where the CPU's composite keeps each gate's
activations and products.

Estimated (cuDNN's own sizes need a GPU: cudnnGetRNNTempSpaceSizes): the reserve space, in the
input's dtype, per time step: for every layer and direction LSTM 5 x hidden (its 4 gates and the
cell state), GRU 6 x hidden, RNN 1 x hidden (its activation; not checked), and the output of every
layer but the last (hidden x directions), twice with dropout between layers (the mask; not
checked). Checked on the two fp32 reserve sizes cuDNN reported in pytorch/pytorch#2895 (a P100,
2017), 4 layers of 320 units over 123 inputs (what the issue's parameter counts give): LSTM
736,000,000 B gives steps x batch = 25,000 (the issue does not state them), and with it the GRU
rule gives the GRU's 864,000,000 B exactly (GRU 4 x hidden, the backward's minimum, would give
672,000,000). Newer cuDNN versions may size it otherwise. Not modelled: cuDNN's
workspaces (taken and given back inside each call) and the dropout state (about 2 MiB, made once
per device for a module with dropout between layers). The capture's meta says so
(`capture.cudnn_rnn*`).

A PackedSequence input (pack_padded_sequence) takes cuDNN's packed path (`lstm.data` and the
others: _cudnn_rnn with batch_sizes), its reserve space sized by the packed rows, where the
batch's lengths have values kept (batch_values.py: the lengths tensor of the batch, or anything
made from it); pad_packed_sequence and the pack's backward, composite kernels that read
batch_sizes, run as PyTorch writes them (PackedSequence.cpp) on those values.
"""
from __future__ import annotations

import contextlib
import json
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensor

_aten = torch.ops.aten
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
_OVERRIDE_WARNING = r"(?s).*Overriding a previously registered kernel"
_KEYS = ("AutogradCPU", "CPU")

# cuDNN's modes (cudnnRNNMode_t) and the gate blocks of each.
RELU, TANH, LSTM, GRU = 0, 1, 2, 3
_GATES = {RELU: 1, TANH: 1, LSTM: 4, GRU: 3}
# What the reserve keeps per step, layer and direction, in hidden sizes (the module's docstring).
_KEPT = {RELU: 1, TANH: 1, LSTM: 5, GRU: 6}

FORWARD = "aten::_cudnn_rnn"
BACKWARD = "aten::_cudnn_rnn_backward"


def _geometry(input, batch_first, batch_sizes=()):
    """(steps, batch) of the input; a packed one's (rows of the packed data, 1): what sizes
    the reserve space and the FLOPs is the number of (step, sequence) pairs the kernel runs."""
    if len(batch_sizes):
        return int(sum(batch_sizes)), 1
    t, b = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    return int(t), int(b)


def reserve_bytes(mode: int, seq: int, batch: int, hidden: int, out_size: int, layers: int, directions: int,
                  dropout: float, elem: int) -> int:
    """The estimated reserve space of cuDNN's training forward (the module's docstring)."""
    per_step = layers * directions * _KEPT[mode] * hidden
    between = (layers - 1) * directions * out_size * (2 if dropout > 0 else 1)
    return seq * batch * (per_step + between) * elem


def _meta_cudnn_rnn(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
                    batch_first, dropout, train, bidirectional, batch_sizes, dropout_state):
    """_cudnn_rnn's outputs with the reserve space estimated (torch's own meta kernel makes it empty).
    A packed input (batch_sizes given) is its data, one row per (step, sequence): the output is
    packed alike, the states are the longest batch's."""
    seq, batch = _geometry(input, batch_first, batch_sizes)
    dirs = 2 if bidirectional else 1
    out_size = proj_size or hidden_size
    if len(batch_sizes):
        shape, states = [seq, out_size * dirs], int(batch_sizes[0])
    else:
        shape = [batch, seq, out_size * dirs] if batch_first else [seq, batch, out_size * dirs]
        states = batch
    output = input.new_empty(shape)
    hy = hx.new_empty([num_layers * dirs, states, out_size])
    cy = cx.new_empty([num_layers * dirs, states, hidden_size]) if cx is not None else hx.new_empty([0])
    nbytes = reserve_bytes(mode, seq, batch, hidden_size, out_size, num_layers, dirs, dropout,
                           input.element_size()) if train else 0
    reserve = input.new_empty([nbytes], dtype=torch.uint8)
    return output, hy, cy, reserve, weight_buf


def _meta_cudnn_rnn_backward(input, weight, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy,
                             grad_cy, mode, hidden_size, proj_size, num_layers, batch_first, dropout, train,
                             bidirectional, batch_sizes, dropout_state, reserve, output_mask):
    """dx, dhx, dcx and the weights' gradients as slices of one flat buffer (_viewParams)."""
    dx = torch.empty_like(input, memory_format=torch.contiguous_format)
    dhx = torch.empty_like(hx, memory_format=torch.contiguous_format)
    dcx = torch.empty_like(cx, memory_format=torch.contiguous_format) if cx is not None else None
    grads = []
    if output_mask[3]:
        dw = torch.zeros(sum(w.numel() for w in weight), dtype=weight[0].dtype, device=input.device)
        offset = 0
        for w in weight:
            grads.append(dw[offset:offset + w.numel()].view(w.shape))
            offset += w.numel()
    return dx, dhx, dcx, grads


def transient_buffers(func, args, kwargs, name: str) -> list[tuple[int, str]]:
    """What `_cudnn_rnn` and its backward take and give back inside the call, besides cuDNN's own
    workspace (not modelled): the sequence-first copies of a batch_first input and gradient,
    and the zeros standing for the gradients of unused hy and cy."""
    from .workspaces import _arg

    input = _arg(func, args, kwargs, "input")
    batch_first = _arg(func, args, kwargs, "batch_first", False)
    if not isinstance(input, torch.Tensor):
        return []
    copy = input.numel() * input.element_size() if batch_first else 0
    if name == FORWARD:
        return [(copy, "cuDNN RNN: the input copied sequence-first")]
    if name != BACKWARD:
        return []
    out = []
    hx, cx = _arg(func, args, kwargs, "hx"), _arg(func, args, kwargs, "cx")
    if _arg(func, args, kwargs, "grad_hy") is None and isinstance(hx, torch.Tensor):
        out.append((hx.numel() * hx.element_size(), "cuDNN RNN backward: zeros for the unused hy's gradient"))
    if _arg(func, args, kwargs, "grad_cy") is None and isinstance(cx, torch.Tensor):
        out.append((cx.numel() * cx.element_size(), "cuDNN RNN backward: zeros for the unused cy's gradient"))
    grad_output = _arg(func, args, kwargs, "grad_output")
    if batch_first:
        out.append((copy, "cuDNN RNN backward: the input copied sequence-first"))
        if isinstance(grad_output, torch.Tensor):
            out.append((grad_output.numel() * grad_output.element_size(),
                        "cuDNN RNN backward: the output's gradient copied sequence-first"))
    return out


def flops(func, args, kwargs) -> int | None:
    """2 x multiply-adds of the gates' GEMMs over every step (input and recurrent weights); the
    backward twice the forward (data and weights). None for other ops."""
    name = func._schema.name
    if name not in (FORWARD, BACKWARD):
        return None
    from .workspaces import _arg

    input = _arg(func, args, kwargs, "input")
    mode = _arg(func, args, kwargs, "mode")
    hidden = _arg(func, args, kwargs, "hidden_size")
    proj = _arg(func, args, kwargs, "proj_size") or 0
    layers = _arg(func, args, kwargs, "num_layers")
    dirs = 2 if _arg(func, args, kwargs, "bidirectional") else 1
    seq, batch = _geometry(input, _arg(func, args, kwargs, "batch_first"), _arg(func, args, kwargs, "batch_sizes", ()))
    out_size = proj or hidden
    total = 0
    for layer in range(layers):
        size_in = input.shape[-1] if layer == 0 else out_size * dirs
        total += 2 * seq * batch * _GATES[mode] * hidden * (size_in + out_size) * dirs
    return total if name == FORWARD else 2 * total


class Cast:
    """Whether `_cudnn_rnn` runs under CUDA autocast now (the capture's emulated policy)."""

    def __init__(self, cuda_policy: bool):
        self.cuda_policy = cuda_policy

    def on(self) -> bool:
        return self.cuda_policy and torch.is_autocast_enabled("cpu")


def _to_half(t):
    if t is None or not t.is_floating_point() or t.dtype in (torch.float16, torch.float64):
        return t
    return t.to(torch.float16)


def _flat_half(weights):
    """AutocastRNN.cpp's copy_weights_to_flat_buf_views: each weight copied into an fp16 tensor
    (copy_, which autograd sees: each parameter's gradient comes back through it as its own fp32
    tensor). The GPU's copies are slices of one flat buffer (set_ on its storage); here each is
    its own tensor (fake tensors set_ on a storage are never freed): the same bytes, kept as long
    (the backward keeps the weights), in one block per weight instead of one."""
    views = []
    for w in weights:
        v = torch.empty((w.numel(), 1), dtype=torch.float16, device=w.device)
        v.copy_(w.view_as(v))
        views.append(v)
    return views[0].detach(), views


def _run(cast: Cast, input, hx, cx, params, has_biases, mode, num_layers, dropout, train, bidirectional,
         batch_first, batch_sizes=()):
    hidden = int((cx if cx is not None else hx).shape[2])
    proj = int(hx.shape[2]) if cx is not None and cx.shape[2] != hx.shape[2] else 0
    stride0 = (4 if has_biases else 2) + (1 if proj else 0)
    weights = list(params)
    weight_buf = weights[0].detach()  # stands for the flat buffer the GPU's parameters are views of
    if cast.on() and weights[0].dtype != torch.float16 and weights[0].dtype != torch.float64:
        weight_buf, weights = _flat_half(weights)
        input, hx, cx = _to_half(input), _to_half(hx), _to_half(cx)
    with torch.autocast("cpu", enabled=False):
        out = _aten._cudnn_rnn.default(input, weights, stride0, weight_buf, hx, cx, mode, hidden, proj, num_layers,
                                       batch_first, dropout, train, bidirectional, list(batch_sizes), None)
    return out[0], out[1], out[2]


def _composite(op, *args):
    return op._op_dk(_COMPOSITE, *args)


def _sizes(batch_sizes) -> list[int] | None:
    """A PackedSequence's batch_sizes as numbers: the values kept beside a fake tensor made from the
    batch's lengths (batch_values.py), else None (the composite path, which stops on fake tensors)."""
    from .batch_values import shadow_of

    real = shadow_of(batch_sizes)
    return None if real is None else [int(v) for v in real.tolist()]


def _pad_packed(data, batch_sizes, batch_first, padding_value, total_length):
    """pad_packed_sequence as PyTorch's kernel runs it on any device (PackedSequence.cpp's
    _pad_packed_sequence, composite: autograd records its ops): the output filled with the padding
    value, one copy for each run of steps with the same batch size, the lengths on the host."""
    sizes = _sizes(batch_sizes)
    if not isinstance(data, FakeTensor) or sizes is None:
        return _composite(_aten._pad_packed_sequence.default, data, batch_sizes, batch_first, padding_value,
                          total_length)
    steps = len(sizes)
    if total_length != -1 and total_length < steps:
        raise RuntimeError(f"Expected total_length to be at least the length of the longest sequence input, "
                           f"but got total_length={total_length} and max sequence length being {steps}")
    rows = data.shape[1:]
    output = torch.full((max(total_length, steps), sizes[0], *rows), padding_value, dtype=data.dtype,
                        device=data.device)
    lengths = [0] * sizes[0]
    offset, prev_size, prev_i = 0, sizes[0], 0
    for i in range(steps + 1):
        size = sizes[i] if i != steps else 0
        if size != prev_size:
            n = prev_size * (i - prev_i)
            block = data[offset:offset + n].view(i - prev_i, prev_size, *rows)
            output[prev_i:i, :prev_size].copy_(block)
            offset += n
            for j in range(size, prev_size):
                lengths[j] = i
            prev_size, prev_i = size, i
    out_lengths = torch.tensor(lengths, dtype=torch.int64, device=batch_sizes.device)
    _keep_values(out_lengths, lengths)
    return (output.transpose(0, 1) if batch_first else output), out_lengths


def _pack_backward(grad, input_size, batch_sizes, batch_first):
    """pack_padded_sequence's backward as PyTorch's kernel runs it (composite): zeros of the
    padded input, one copy per step of that step's rows of the gradient."""
    sizes = _sizes(batch_sizes)
    if not isinstance(grad, FakeTensor) or sizes is None:
        return _composite(_aten._pack_padded_sequence_backward.default, grad, input_size, batch_sizes, batch_first)
    size = list(input_size)
    if batch_first:
        size[0], size[1] = size[1], size[0]
    grad_input = torch.zeros(size, dtype=grad.dtype, device=grad.device)
    offset = 0
    for i, n in enumerate(sizes):
        grad_input[i, :n].copy_(grad[offset:offset + n])
        offset += n
    return grad_input.transpose(0, 1) if batch_first else grad_input


def _keep_values(fake, values) -> None:
    """values kept beside the fake tensor fake (batch_values.py), made on the host's real tensors."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from . import batch_values

    with unset_fake_temporarily():
        real = torch.tensor(values, dtype=fake.dtype)
    batch_values._keep(fake, real)


def _kernels(cast: Cast):
    def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        if not isinstance(input, FakeTensor):
            return _composite(_aten.lstm.input, input, hx, params, has_biases, num_layers, dropout, train,
                              bidirectional, batch_first)
        return _run(cast, input, hx[0], hx[1], params, has_biases, LSTM, num_layers, dropout, train, bidirectional,
                    batch_first)

    def lstm_data(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional):
        sizes = _sizes(batch_sizes)
        if not isinstance(data, FakeTensor) or sizes is None:
            return _composite(_aten.lstm.data, data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
                              bidirectional)
        return _run(cast, data, hx[0], hx[1], params, has_biases, LSTM, num_layers, dropout, train, bidirectional,
                    False, sizes)

    def one_hidden_data(op, mode):
        def kernel(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional):
            sizes = _sizes(batch_sizes)
            if not isinstance(data, FakeTensor) or sizes is None:
                return _composite(op, data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
                                  bidirectional)
            out, hy, _ = _run(cast, data, hx, None, params, has_biases, mode, num_layers, dropout, train,
                              bidirectional, False, sizes)
            return out, hy
        return kernel

    def one_hidden(op, mode):
        def kernel(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
            if not isinstance(input, FakeTensor):
                return _composite(op, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                  batch_first)
            out, hy, _ = _run(cast, input, hx, None, params, has_biases, mode, num_layers, dropout, train,
                              bidirectional, batch_first)
            return out, hy
        return kernel

    def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        if not isinstance(input, FakeTensor):
            return _composite(_aten.lstm_cell.default, input, hx, w_ih, w_hh, b_ih, b_hh)
        igates, hgates = torch.matmul(input, w_ih.t()), torch.matmul(hx[0], w_hh.t())
        hy, cy, _ = _aten._thnn_fused_lstm_cell.default(igates, hgates, hx[1], b_ih, b_hh)
        return hy, cy

    def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        if not isinstance(input, FakeTensor):
            return _composite(_aten.gru_cell.default, input, hx, w_ih, w_hh, b_ih, b_hh)
        igates, hgates = torch.matmul(input, w_ih.t()), torch.matmul(hx, w_hh.t())
        return _aten._thnn_fused_gru_cell.default(igates, hgates, hx, b_ih, b_hh)[0]

    return {"lstm_cell": lstm_cell, "gru_cell": gru_cell,
            "lstm.input": lstm, "gru.input": one_hidden(_aten.gru.input, GRU),
            "rnn_tanh.input": one_hidden(_aten.rnn_tanh.input, TANH),
            "rnn_relu.input": one_hidden(_aten.rnn_relu.input, RELU),
            "lstm.data": lstm_data, "gru.data": one_hidden_data(_aten.gru.data, GRU),
            "rnn_tanh.data": one_hidden_data(_aten.rnn_tanh.data, TANH),
            "rnn_relu.data": one_hidden_data(_aten.rnn_relu.data, RELU),
            "_pad_packed_sequence": _pad_packed, "_pack_padded_sequence_backward": _pack_backward}


@contextlib.contextmanager
def rnn_as_on_gpu(cuda_autocast_policy: bool):
    """For a capture's duration: RNN ops on fake tensors take cuDNN's path (the module's docstring)."""
    kernels = _kernels(Cast(cuda_autocast_policy))
    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_OVERRIDE_WARNING, category=UserWarning)
            for name, kernel in kernels.items():
                for key in _KEYS:
                    lib.impl(name, kernel, key)
            # torch registers a Python meta kernel of its own for _cudnn_rnn; torch 2.11's
            # Library.impl refuses to override one unless asked (2.15 allows it by default)
            lib.impl("_cudnn_rnn", _meta_cudnn_rnn, "Meta", allow_override=True)
            lib.impl("_cudnn_rnn_backward", _meta_cudnn_rnn_backward, "Meta", allow_override=True)
        yield
    finally:
        lib._destroy()


def meta(model: torch.nn.Module) -> dict[str, str]:
    """What the capture says of its recurrent layers (docs/torch.md, "Recurrent layers")."""
    names = [f"{type(model).__name__}.{n}" for n, m in model.named_modules() if isinstance(m, torch.nn.RNNBase)]
    if not names:
        return {}
    return {"capture.cudnn_rnn": json.dumps(names),
            "capture.cudnn_rnn.estimated": "reserve space (per step, layer and direction LSTM 5, GRU 6, RNN 1 x "
                                           "hidden, and inner layers' outputs: docs/torch.md)",
            "capture.cudnn_rnn.unmodelled": "cuDNN workspaces, the dropout state"}


__all__ = ["rnn_as_on_gpu", "meta", "reserve_bytes", "transient_buffers", "flops", "FORWARD", "BACKWARD"]
