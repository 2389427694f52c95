"""torch.compile'd models and functions refused in one line: a capture records eager PyTorch op by
op."""
from __future__ import annotations

import contextlib
import sys

import torch

from .errors import CaptureError


def _refuse_compiled(model: torch.nn.Module) -> None:
    """A torch.compile'd model (an OptimizedModule, or `module.compile()` in place) is refused in
    one line: the capture records eager PyTorch op by op, while compiled code fuses kernels and
    recomputes by itself (and Dynamo on fake tensors inside the capture crashed the process)."""
    for name, m in model.named_modules():
        if type(m).__name__ == "OptimizedModule" or getattr(m, "_compiled_call_impl", None) is not None:
            what = f"module '{name}'" if name else f"the model ({type(m).__name__})"
            raise CaptureError(f"{what} is torch.compile'd: a capture records eager PyTorch op by op, and compiled "
                               "code fuses kernels and recomputes by itself; return the module without "
                               f"torch.compile from build_model(), or {_EAGER_HINT}")


_EAGER_HINT = "run with TORCHDYNAMO_DISABLE=1 (torch.compile then changes nothing; the capture is of the eager step)"


@contextlib.contextmanager
def _compiled_functions_refused():
    """A torch.compile'd function called inside the step (a decorated helper) crashed the process
    (Dynamo compiling on fake tensors inside the capture). Dynamo's wrapper asks, before it
    compiles, whether to run the function eagerly instead (torch 2.15: _is_eager_on_nested_compile)
    and, in every version, which callback to install (_callback_from_stance); inside the capture
    either question raises a CaptureError naming the function. torch 2.11 has only the second: a
    capture there died with a segmentation fault. Only when Dynamo is loaded (a model that
    compiles imported it)."""
    with _flex_attention_refused():
        eval_frame = sys.modules.get("torch._dynamo.eval_frame")
        if eval_frame is None:
            yield
            return
        with _compile_wrappers_refused(eval_frame):
            yield


@contextlib.contextmanager
def _flex_attention_refused():
    """FlexAttention (torch.nn.attention.flex_attention) runs as a higher-order op that it compiles
    even when called eagerly, which the capture's fake tensors have no rule for; the first thing
    it checks, its inputs' device, said "FlexAttention does not support backward on CPU" for a
    model written for the GPU, which a GPU runs. Refused in one line saying why, on fake tensors
    only (flex_attention looks the check up in its module at each call)."""
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    check = getattr(flex, "_validate_device", None)
    if check is None:
        yield
        return

    def validate(query, key, value):
        from torch._subclasses.fake_tensor import FakeTensor

        if isinstance(query, FakeTensor):
            raise CaptureError("flex_attention is not captured: it runs as a higher-order op that torch.compile's "
                               "machinery builds even in eager mode, which a capture (eager PyTorch op by op, on "
                               "fake tensors) cannot record; capture the model with F.scaled_dot_product_attention "
                               "in its place (its memory is not FlexAttention's)")
        return check(query, key, value)

    flex._validate_device = validate
    try:
        yield
    finally:
        flex._validate_device = check


@contextlib.contextmanager
def _compile_wrappers_refused(eval_frame):

    def refuse():
        fn = sys._getframe(2).f_locals.get("fn")   # the wrapper's compiled function
        name = getattr(fn, "__qualname__", None) or "a torch.compile'd function"
        raise CaptureError(f"function '{name}' is torch.compile'd: a capture records eager PyTorch op by op, and "
                           f"compiled code fuses kernels and recomputes by itself; {_EAGER_HINT}")

    patched = []
    ask = getattr(eval_frame, "_is_eager_on_nested_compile", None)
    if ask is not None:
        patched.append(("_is_eager_on_nested_compile", ask, lambda: refuse()))
    stance = getattr(eval_frame, "_callback_from_stance", None)
    if stance is not None:
        # None and False are the "run eagerly" callbacks (torch.compiler.disable): left alone.
        patched.append(("_callback_from_stance", stance,
                        lambda callback: stance(callback) if callback in (False, None) else refuse()))
    for name, _, new in patched:
        setattr(eval_frame, name, new)
    try:
        yield
    finally:
        for name, old, _ in patched:
            setattr(eval_frame, name, old)
