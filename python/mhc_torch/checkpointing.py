"""Activation checkpointing of chosen modules, with torch.utils.checkpoint (non-reentrant).

- full: the module's forward runs under torch.utils.checkpoint.checkpoint(use_reentrant=False):
  nothing it saves for the backward is kept; the backward re-runs the forward (stopping once it
  has recomputed what the backward needs). Its inputs stay alive until then (the recompute reads them).
- save_matmuls: selective checkpointing (create_selective_checkpoint_contexts): the outputs of
  matrix multiplications and attention are kept, every other op of the module is recomputed.
- mhc: in each mHC hyper-connection inside the module, the parts that compute and apply the mixing
  maps (RMSNorm, projection, sigmoids, Sinkhorn-Knopp, stream mixing) are checkpointed; the sublayer
  they wrap (attention, MLP) is left as it is. A module declares those parts with the attribute
  RECOMPUTE_PARTS (names of its methods), as mhc_model.HyperConnection does.
The forward is wrapped on the module instance, so parameter names and state dicts do not change.
"""
from __future__ import annotations

import functools
import inspect

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from . import placement

_aten = torch.ops.aten
# Ops whose outputs save_matmuls keeps: matmuls and attention (CUDA kernels and their CPU twins).
_MATMULS = {getattr(_aten, n) for n in (
    "mm", "bmm", "addmm", "baddbmm", "_scaled_mm", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_flash_attention_forward",
    "_efficient_attention_forward") if hasattr(_aten, n)}


def _save_matmuls_policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op.overloadpacket in _MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


def _checkpointed(fn, module: torch.nn.Module, context_fn=None):
    """fn (a method of module) run under non-reentrant checkpointing when autograd records (plain
    when it does not). What selective checkpointing keeps goes through the saved-tensor hooks
    around it (an offload moves it like any saved tensor), where this PyTorch has the option."""
    kwargs = {} if context_fn is None else {"context_fn": context_fn}
    if context_fn is not None and "respect_saved_tensors_hooks" in inspect.signature(checkpoint).parameters:
        kwargs["respect_saved_tensors_hooks"] = True

    def region(*args, **kw):  # the recompute calls this, not the module: say whose code it is
        with placement.in_module(module):
            return fn(*args, **kw)

    @functools.wraps(fn)
    def run(*args, **kw):
        if not torch.is_grad_enabled():
            return fn(*args, **kw)
        return checkpoint(region, *args, use_reentrant=False, **kwargs, **kw)
    return run


def checkpoint_module(module: torch.nn.Module, policy: str) -> None:
    """Checkpoints `module` in place with `policy` (full, save_matmuls, mhc)."""
    if policy == "mhc":
        for _, m in module.named_modules():
            for part in getattr(m, "RECOMPUTE_PARTS", ()):
                setattr(m, part, _checkpointed(getattr(m, part), m))
        return
    context_fn = (functools.partial(create_selective_checkpoint_contexts, _save_matmuls_policy)
                  if policy == "save_matmuls" else None)
    module.forward = _checkpointed(module.forward, module, context_fn)


def has_recompute_parts(module: torch.nn.Module) -> bool:
    return any(getattr(m, "RECOMPUTE_PARTS", ()) for _, m in module.named_modules())
