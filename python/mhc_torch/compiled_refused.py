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
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:
        yield
        return

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
