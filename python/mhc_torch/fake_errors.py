"""One-line CaptureErrors for the exceptions fake tensors raise on data-dependent ops, naming the
user's line and what to write instead."""
from __future__ import annotations

import os

import torch

from .errors import CaptureError


def _fake_error(e: BaseException, outer: BaseException | None = None) -> CaptureError | None:
    """A one-line CaptureError for the exceptions that fake tensors raise on data-dependent ops,
    naming the user's source line (from the traceback of `outer`, the exception that carried `e`
    up through the model's code, when there is one)."""
    from torch._subclasses import fake_tensor as ft

    kinds = tuple(getattr(ft, n) for n in ("DynamicOutputShapeException", "DataDependentOutputException",
                                           "UnsupportedOperatorException") if hasattr(ft, n))
    try:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
        kinds += (GuardOnDataDependentSymNode,)
    except ImportError:
        pass
    if not isinstance(e, kinds):
        return _jagged_error(e, outer)
    func = getattr(e, "func", None)
    op = str(func) if func is not None else str(e).splitlines()[0] if str(e) else type(e).__name__
    why = {"DynamicOutputShapeException": "its output shape depends on tensor values",
           "DataDependentOutputException": "its result depends on tensor values",
           "UnsupportedOperatorException": "it has no fake-tensor implementation"}.get(
        type(e).__name__, "it depends on tensor values")
    from .errors import called_from, user_frame, where

    frame = user_frame(outer or e) or user_frame(e)
    at = where(frame)
    if at:
        at += called_from(outer or e, frame) or (called_from(e, frame) if outer is not None else "")
    node = None if at else getattr(e, "mhc_backward_node", None)   # no line of the model's: the backward's node
    place = f" (at {at})" if at else f" (in the backward, in {node})" if node else ""
    if node and getattr(func, "_overloadpacket", None) is torch.ops.aten.nonzero:
        hint = ("; the backward of a write or read through a boolean mask in the forward (x[mask] = v, x[mask]) "
                "selects by the mask's values: write it as torch.where(mask, v, x), whose shapes do not depend on them")
    else:
        hint = (_eager_experts_hint(outer or e) or _optimizer_reads_values_hint(outer or e, func) or _mask_hint(func)
                or _ctc_hint(func) or _scalar_hint(func))
    return CaptureError(f"op {op} cannot run on fake tensors{place}: {why}{hint}")


def _optimizer_reads_values_hint(e: BaseException, func) -> str:
    """An optimizer whose step() reads the loss or the gradients into Python (torch.optim.LBFGS:
    `float(closure())`, its convergence tests and its strong-Wolfe line search decide how many
    times it calls the closure): the optimizer named, said after the error's line; "" when the
    value was read elsewhere."""
    if getattr(func, "_overloadpacket", None) is not torch.ops.aten._local_scalar_dense:
        return ""
    tb, found, closure = e.__traceback__, None, None
    optim = f"{os.sep}torch{os.sep}optim{os.sep}"
    while tb is not None:
        if optim in tb.tb_frame.f_code.co_filename:
            me = tb.tb_frame.f_locals.get("self")
            if isinstance(me, torch.optim.Optimizer):
                found = found or me
                closure = closure or tb.tb_frame.f_locals.get("closure")
        tb = tb.tb_next
    if found is None:
        return ""
    name = type(found).__name__
    if closure is None:   # torch.optim.Adafactor: its parameters' and update's norms scale the update
        return (f"; {name}.step() reads values of its parameters or its update into Python (`.item()`), which "
                "fake tensors do not hold: its step cannot be captured; capture the model with an optimizer whose "
                "step the capture can run (torch.optim.AdamW, transformers' Adafactor)")
    return (f"; {name}.step() reads the loss or the gradients into Python to decide how many times it runs the "
            "closure (convergence tests, a line search), which fake tensors do not hold: capture the step with "
            f"the optimizer training starts with (Adam before {name}), or call the closure a fixed number of times "
            "in a step of your own")


def _jagged_error(e: BaseException, outer: BaseException | None) -> CaptureError | None:
    """A nested tensor of jagged layout (torch.nested.nested_tensor(..., layout=torch.jagged),
    nested_tensor_from_jagged) made under the capture: its ragged dimension is a symbolic size
    ("nested int") that PyTorch makes only in a shape environment, which fake tensors without
    torch.compile have not (`self.shape_env must not be None`, raised deep in torch). Said in one
    line naming the user's line, with what to capture instead; None for any other error."""
    import traceback

    if not isinstance(e, AssertionError) or "shape_env" not in str(e):
        return None
    frames = traceback.extract_tb(e.__traceback__)
    if not any(f"{os.sep}torch{os.sep}nested{os.sep}" in f.filename or "nested_int" in f.name for f in frames):
        return None
    from .errors import called_from, user_frame, where

    frame = user_frame(outer or e) or user_frame(e)
    at = where(frame)
    if at:
        at += called_from(outer or e, frame)
    place = f" (at {at})" if at else ""
    return CaptureError(f"a nested tensor of jagged layout (torch.nested, layout=torch.jagged) cannot be captured"
                        f"{place}: its ragged dimension is a symbolic size that fake tensors have only under "
                        "torch.compile's shape environment; capture the step with the sequences padded to the "
                        "longest and a padding mask, or packed into one row with position ids restarting at each "
                        "document (the same tokens, the memory of the padded or packed batch)")


def _ctc_hint(func) -> str:
    """What to write instead of F.ctc_loss with tensor lengths (python/mhc_torch/ctc_loss.py): its
    log_alpha's shape comes from the longest target length, a value the capture's fake tensors do
    not hold; given as Python lists the lengths are known."""
    packets = tuple(getattr(torch.ops.aten, n) for n in ("_ctc_loss", "ctc_loss") if hasattr(torch.ops.aten, n))
    if getattr(func, "_overloadpacket", None) not in packets:
        return ""
    return ("; F.ctc_loss's buffers are sized by the lengths' values: give input_lengths and target_lengths "
            "as Python lists (lengths.tolist()), which the capture supports")


def _scalar_hint(func) -> str:
    """What a value read into Python is, said after the error's line: int(t), t.item(), float(t)
    or `if t:` of a fake tensor, which holds no values (a counter or position kept in a tensor:
    MoCo's queue pointer, `int(self.queue_ptr)`)."""
    if getattr(func, "_overloadpacket", None) is not torch.ops.aten._local_scalar_dense:
        return ""
    return ("; a value read into Python (int(t), t.item(), float(t), `if t:`), which fake tensors do not hold: a "
            "counter or position kept in a tensor (a queue's pointer in a buffer) can be kept as a Python int "
            "instead, the same on the GPU without a synchronisation")


def _mask_hint(func) -> str:
    """What to write instead of a selection by a boolean mask (x[mask], masked_select: nonzero's
    output, as many rows as the mask has True values), said after the error's line: a loss over
    the masked rows only (a GNN's training nodes, a masked language model's masked tokens) keeps
    its shapes with ignore_index or a weighted mean."""
    if getattr(func, "_overloadpacket", None) not in (torch.ops.aten.nonzero, torch.ops.aten.masked_select):
        return ""
    return ("; a selection by a boolean mask (x[mask], masked_select, nonzero) keeps as many elements as the mask "
            "has True values: for a loss over the masked rows keep the shapes, as in cross_entropy(logits, "
            "labels.masked_fill(~mask, -100)) (its ignore_index) or (loss * mask).sum() / mask.sum()")


def _eager_experts_hint(e: BaseException) -> str:
    """Hugging Face mixture-of-experts layers with experts_implementation="eager" loop over the
    experts a batch routes to (`nonzero`, `torch.where` on the routing mask): what to capture
    instead, said after the error's line. The "grouped_mm" experts (transformers' default) sort
    the tokens by expert and run grouped matmuls whose shapes do not depend on the routing."""
    tb, found = e.__traceback__, None
    while tb is not None:   # the innermost module of such a model: its experts
        module = tb.tb_frame.f_locals.get("self")
        # transformers sets experts_implementation on every model's config ("eager" where it has
        # no experts, Wav2Vec2ForCTC's): only an experts module (its decorator's attributes) counts
        if getattr(getattr(module, "config", None), "_experts_implementation", None) == "eager" and (
                hasattr(module, "_is_expert_parallel") or hasattr(module, "num_experts")):
            found = module
        tb = tb.tb_next
    if found is not None:
        return ("; the mixture-of-experts layer " + type(found).__name__ + " runs its experts with "
                "experts_implementation=\"eager\", which picks the experts a batch routes to by value: build "
                "the model with experts_implementation=\"grouped_mm\" (transformers' default), whose shapes "
                "do not depend on the routing (docs/torch.md)")
    return ""
