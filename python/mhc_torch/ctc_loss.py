"""CTC loss on the capture's fake tensors (F.ctc_loss with the lengths given as Python lists).

torch has no fake kernel for aten::_ctc_loss (it is tagged dynamic_output_shape), so fake tensors
refused it, and the composite aten::ctc_loss.IntList builds its Mean reduction's divisor with
at::tensor(target_lengths), which fake tensors cannot hold either. With the lengths as lists the
shapes are known. While a capture runs, _ctc_loss and its backward get fake kernels with the
CUDA kernels' outputs (aten/src/ATen/native/cuda/LossCTC.cu, read, not copied): the loss per
sample and log_alpha, batch x input frames x (2 x the longest target + 1) in log_probs' dtype,
which autograd keeps for the backward; the backward makes the gradient (like log_probs) and
log_beta (like log_alpha, for the kernel's length: workspaces.py). ctc_loss.IntList on fake
tensors runs the composite's steps in Python (the reduction's divisor a constant). Lengths given
as tensors (ESPnet's, NeMo's, a Conformer's subsampled frame counts) hold values fake tensors do
not: the CUDA kernel sizes log_alpha by the longest target, at most the padded targets' width
(batch x S), which a collator pads to the batch's longest; that width is taken (an upper bound
where the batch is padded wider). Concatenated 1-D targets with tensor lengths give no bound and
still stop the capture: give the lengths as lists there. The GPU's cuDNN CTC (int32 targets on
the CPU, every input of full length, blank 0) is not modelled.
"""
from __future__ import annotations

import contextlib
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensor

_aten = torch.ops.aten
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
_OVERRIDE_WARNING = r"(?s).*Overriding a previously registered kernel"
BACKWARD = "aten::_ctc_loss_backward"
_MEAN, _SUM = 1, 2  # at::Reduction


def _fake_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    batch = log_probs.shape[1]
    longest = max(target_lengths) if len(target_lengths) else 0
    return log_probs.new_empty([batch]), log_probs.new_empty([batch, log_probs.shape[0], 2 * longest + 1])


def _fake_ctc_loss_tensor(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """_ctc_loss.Tensor (lengths as tensors): the longest target is taken as the padded width."""
    if targets.dim() != 2:
        from torch._subclasses.fake_tensor import DynamicOutputShapeException

        raise DynamicOutputShapeException(torch.ops.aten._ctc_loss.Tensor)
    return _fake_ctc_loss(log_probs, targets, None, [targets.shape[1]], blank, zero_infinity)


def _fake_ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                            blank, zero_infinity=False):
    return torch.empty_like(log_probs, memory_format=torch.contiguous_format)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=_MEAN, zero_infinity=False):
    if not isinstance(log_probs, FakeTensor):
        return _aten.ctc_loss.IntList._op_dk(_COMPOSITE, log_probs, targets, input_lengths, target_lengths, blank,
                                             reduction, zero_infinity)
    batched = log_probs.dim() == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    res = _aten._ctc_loss.default(lp, targets.to(lp.device, torch.long), input_lengths, target_lengths, blank,
                                  zero_infinity)[0]
    if zero_infinity:
        res = torch.where(res == float("inf"), res.new_zeros([]), res)
    if reduction == _MEAN:
        return (res / torch.tensor(list(target_lengths), dtype=res.dtype).clamp_min(1)).mean()
    if reduction == _SUM:
        return res.sum()
    return res if batched else res.squeeze(0)


def transient_buffers(func, args, kwargs, name: str) -> list[tuple[int, str]]:
    """log_beta, like log_alpha, for the backward kernel's length."""
    if name != BACKWARD:
        return []
    log_alpha = args[6] if len(args) > 6 else kwargs.get("log_alpha")
    return [(log_alpha.numel() * log_alpha.element_size(), "CTC loss backward: log_beta")]


@contextlib.contextmanager
def ctc_on_fake():
    """For a capture's duration (the module's docstring)."""
    fake = torch.library.Library("aten", "FRAGMENT")
    impl = torch.library.Library("aten", "IMPL")
    try:
        # aten's ops have a Meta kernel; torch 2.11 refuses to put a fake kernel beside one
        # unless asked (2.15 allows it by default)
        torch.library.register_fake("aten::_ctc_loss", _fake_ctc_loss, lib=fake, allow_override=True)
        torch.library.register_fake("aten::_ctc_loss_backward", _fake_ctc_loss_backward, lib=fake, allow_override=True)
        torch.library.register_fake("aten::_ctc_loss.Tensor", _fake_ctc_loss_tensor, lib=fake, allow_override=True)
        torch.library.register_fake("aten::_ctc_loss_backward.Tensor", _fake_ctc_loss_backward, lib=fake,
                                    allow_override=True)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_OVERRIDE_WARNING, category=UserWarning)
            for key in ("AutogradCPU", "CPU"):
                impl.impl("ctc_loss.IntList", _ctc_loss, key)
        yield
    finally:
        impl._destroy()
        fake._destroy()
