"""Backward formulas that fake tensors run out of place.

A few of PyTorch's autograd formulas build a gradient in a fresh zero tensor and fill it in place,
but take the out-of-place variant when an input is a tensor subclass, for composite compliance
(`areAnyTensorSubclassLike` in torch/csrc/autograd/FunctionsManual.cpp and
aten/src/ATen/native/TensorAdvancedIndexing.cpp): gather's backward (`scatter_add_`), the
backward of max/min/median/kthvalue along a dimension (`scatter_`) and of advanced indexing
(`index_put_`). Fake tensors are subclass-like, so a capture would see the zeros and a second
tensor of the same size where a GPU run has one: on the CS336 snapshot's model, a logits-sized
327,680,000 B too many at the start of the backward, and at its peak.

The capture folds such an op back: in the backward, an out-of-place op with an in-place variant
whose `self` is a zero (or empty) tensor just made by the backward and not used since, and whose
output has `self`'s size and dtype, is recorded as that in-place op: the output is the same
storage. The same pattern on real tensors only arises from these formulas, and there a GPU run
would also have written in place.
"""
from __future__ import annotations

import functools

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false

# Factories whose result a backward formula fills in place.
FRESH = {"aten::new_zeros", "aten::zeros", "aten::zeros_like", "aten::new_empty", "aten::empty_like",
         "aten::empty", "aten::new_empty_strided", "aten::empty_strided", "aten::new_full", "aten::full",
         "aten::full_like"}


@functools.lru_cache(maxsize=None)
def _has_inplace(name: str) -> bool:
    base = name.removeprefix("aten::")
    return hasattr(torch.ops.aten, base + "_")


def fold(name: str, args, new_outs, is_fresh) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(self, output) when this op is one that a real tensor's backward formula runs in place on
    `self`; `is_fresh(t)` says whether t's storage is a factory's output not used since."""
    if not args or not isinstance(args[0], torch.Tensor) or len(new_outs) != 1 or not _has_inplace(name):
        return None
    self_t, out = args[0], new_outs[0]
    if out.shape != self_t.shape or out.dtype != self_t.dtype or not self_t.is_contiguous():
        return None
    if out.untyped_storage().nbytes() != self_t.untyped_storage().nbytes() or not is_fresh(self_t):
        return None
    return self_t, out


class Accumulations:
    """Gradient accumulation in the backward, which a GPU run does in place.

    When two gradients meet at a tensor used twice (a residual branch, a weight used twice), the
    autograd engine's InputBuffer adds them in place into one it owns alone, and out of place
    only when neither is owned alone or an input is a tensor subclass (torch/csrc/autograd/
    input_buffer.cpp: `can_accumulate_inplace`); a view is never owned alone (its base holds the
    storage too), as real CPU tensors show: the two transposed weight gradients of a Linear called
    twice are summed out of place, two plain gradients of an activation in place. Fake tensors
    are subclass-like: the capture sees
    `aten::add` making a third buffer while the two inputs die just after. When one input of such
    an add is freed before the next op runs, nothing else held it, so a GPU run would have added
    into it: the capture then ends that input's allocation where the add starts and begins the
    output's there (at one instant frees come first), and the add reads and writes the output."""

    def __init__(self):
        self.pending = None  # (kernel, output allocation, input storage records)

    def after_kernel(self, rec, name: str, reads, new_outs, kernel) -> None:
        self.pending = None
        if name != "aten::add" or len(new_outs) != 1 or len(reads) != 2 or not rec.in_backward_formula():
            return
        out = new_outs[0]
        if any(t.shape != out.shape or t.dtype != out.dtype for t in reads):
            return
        out_rec = rec.storages.get(id(out.untyped_storage()))
        ins = [rec.storages.get(id(t.untyped_storage())) for t in reads]
        if out_rec is None or any(s is None or s is out_rec for s in ins):
            return
        # a view shares its storage with its base (the storage's use count is 2), so the engine
        # adds out of place into neither: a weight used twice gets the transposes of two mm
        # outputs (F.linear's weight.t()), and the real run keeps both while the sum is made
        ins = [s for s, t in zip(ins, reads) if not t._is_view() and is_non_overlapping_and_dense_or_false(t)]
        if ins:
            self.pending = (kernel, out_rec.alloc, ins)

    def on_free(self, rec, s) -> None:
        """`s` is being freed: fold the pending add into it if no op ran since."""
        if self.pending is None:
            return
        kernel, out_alloc, ins = self.pending
        if s not in ins or rec.kernels[-1] is not kernel or s.alloc.bytes != out_alloc.bytes:
            return
        self.pending = None
        kernel.accesses.pop(s.alloc.id, None)
        kernel.accesses[out_alloc.id] = 3  # read-write: the add's in-place form
        s.alloc.t_free = kernel.t_start
        out_alloc.t_alloc = kernel.t_start
