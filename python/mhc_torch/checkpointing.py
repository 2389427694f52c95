"""Activation checkpointing of chosen modules, with torch.utils.checkpoint (non-reentrant).

- full: the module's forward runs under torch.utils.checkpoint.checkpoint(use_reentrant=False):
  nothing it saves for the backward is kept; the backward re-runs the forward (stopping once it
  has recomputed what the backward needs). Its inputs stay alive until then (the recompute reads them).
- save_matmuls: selective checkpointing (create_selective_checkpoint_contexts): the outputs of
  matrix multiplications, convolutions and attention are kept, every other op of the module is
  recomputed.
- mhc: every mHC hyper-connection's maps inside the module (RMSNorm of the n streams, projection,
  sigmoids, Sinkhorn-Knopp: mhc_model.HcMaps, or any module whose class sets MHC_RECOMPUTE) is
  checkpointed as with full; the stream mixing and the sublayers (attention, MLP) are left as they are.
The forward is wrapped on the module instance, so parameter names and state dicts do not change.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import types

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from . import placement

_aten = torch.ops.aten
# Ops whose outputs save_matmuls keeps: matmuls, convolutions (a CNN's matmuls) and attention
# (CUDA kernels and their CPU twins). Not a mixture of experts' aten._grouped_mm: torchtitan's
# default save list (mm and the attention kernels) recomputes it too (its output's size follows the
# routing; torchtitan adds it only in an experiment), so "keep matmuls" means what it means there.
_MATMULS = {getattr(_aten, n) for n in (
    "mm", "bmm", "addmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_attention_math", "_scaled_dot_product_attention_math_for_mps") if hasattr(_aten, n)}


def _save_matmuls_policy(ctx, op, *args, **kwargs):
    # Functional overloads only, as the printed policy's `.default` ops: a torch.compile'd module
    # runs its matmuls as `mm.out` into buffers the compiled code reuses, and a cached `out=` result
    # is then mutated ("Tensor cached during selective activation checkpoint has been mutated").
    keep = op.overloadpacket in _MATMULS and not op._schema.is_mutable
    return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE


def _checkpointed(fn, module: torch.nn.Module, context_fn=None):
    """fn (a method of module) run under non-reentrant checkpointing when autograd records (plain
    when it does not). What selective checkpointing keeps goes through the saved-tensor hooks
    around it (an offload moves it like any saved tensor), where this PyTorch has the option."""
    return _CheckpointedForward(fn, module, context_fn)


class _CheckpointedForward:
    """A module's forward under checkpointing, set on the module instance (_checkpointed). A
    copy.deepcopy of the module (DPO's frozen reference model, an EMA teacher made after the setting
    was applied) gets one that runs the copy's own forward: a closure kept the original module, so
    the copy ran the original's layers (its weights, and its checkpoint under the copy's no_grad;
    transformers' Llama then stopped on a mask of another shape)."""

    def __init__(self, fn, module: torch.nn.Module, context_fn=None):
        self.fn, self.module, self.context_fn = fn, module, context_fn
        functools.update_wrapper(self, fn)
        respect = context_fn is not None and "respect_saved_tensors_hooks" in inspect.signature(checkpoint).parameters
        self.kwargs = {"context_fn": marking_recompute(context_fn, respect_saved_tensors_hooks=True if respect else None)}
        if respect:
            self.kwargs["respect_saved_tensors_hooks"] = True

    def _region(self, *args, **kw):  # the recompute calls this, not the module: say whose code it is
        with placement.in_module(self.module), _saves_told():
            return self.fn(*args, **kw)

    def __call__(self, *args, **kw):
        if not torch.is_grad_enabled():
            return self.fn(*args, **kw)
        return checkpoint(self._region, *args, use_reentrant=False, **self.kwargs, **kw)

    def __deepcopy__(self, memo):
        module = memo.get(id(self.module), self.module)   # the copy under way, its __dict__ being copied
        fn = self.fn
        if inspect.ismethod(fn) and fn.__self__ is self.module:
            fn = types.MethodType(fn.__func__, module)
        else:
            fn = copy.deepcopy(fn, memo)
        return _CheckpointedForward(fn, module, self.context_fn)


def _is_checkpoints_pack_hook(hook) -> bool:
    """Whether `hook` is non-reentrant checkpoint's pack hook: marked `_checkpoint_internal` in
    torch 2.15; unmarked in torch 2.11, known there by where it is defined."""
    return bool(getattr(hook, "_checkpoint_internal", False)) or (
        getattr(hook, "__module__", "") == "torch.utils.checkpoint"
        and getattr(hook, "__qualname__", "") == "_checkpoint_hook.__init__.<locals>.pack_hook")


def recomputing_in_backward() -> bool:
    """Whether an op the autograd engine runs with autograd recording is a recompute of forward code
    (a checkpoint's, or a custom Function's backward that re-runs its forward under enable_grad)
    rather than a backward that builds a graph of its own (torch.autograd.grad(...,
    create_graph=True): a WGAN-GP's gradient penalty, a double backward), whose ops also record.
    Told by the recompute's marks: this module's context_fn count, a checkpoint's own saved-tensor
    hook on top (the recomputation's hook, checkpoint-internal in torch 2.15, known by where it is
    defined before), or the engine running a Python Function's node (reentrant checkpoint's
    CheckpointFunctionBackward); where the engine names no node, a recompute as before."""
    if _recomputing[0]:
        return True
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)
    if top is not None and (_is_checkpoints_pack_hook(top[0]) or (
            getattr(top[0], "__module__", "") == "torch.utils.checkpoint"
            and "_recomputation_hook" in getattr(top[0], "__qualname__", ""))):
        return True
    node = torch._C._current_autograd_node()
    return node is None or isinstance(node, torch.autograd.function.BackwardCFunction)


@contextlib.contextmanager
def _saves_told():
    """Inside a checkpointed region autograd gives what it saves to the checkpoint's hook, which
    keeps none of it, and hooks outside the region do not see it. While a capture listens, a hook
    on top tells it each save of the region's first run (placement.note_saved) and passes the
    tensor on to the checkpoint's hook, which it stands in for as the checkpoint's own would
    (PyTorch's checkpoint-internal marks, so that selective checkpointing still finds the hooks
    outside). Without a capture, or if the checkpoint's hook is not the one expected, nothing."""
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)
    if not placement.listened() or top is None or not _is_checkpoints_pack_hook(top[0]):
        yield
        return
    inner_pack, inner_unpack = top

    def pack(t):
        if not _recomputing[0]:  # the forward, not the recompute
            placement.note_saved(t)
        return inner_pack(t)
    pack._checkpoint_internal = True
    pack._user_hooks = getattr(inner_pack, "_user_hooks", None)
    with torch.autograd.graph.saved_tensors_hooks(pack, inner_unpack):
        yield


# Recomputations under way, in any thread (a GPU step's backward runs in autograd's device
# threads): checkpoint's context_fn (public: its second context manager runs around the
# recompute) counts them, and BatchNorm's hooks read the count.
_recomputing = [0]
# The checkpointed calls whose forward, and whose recompute, run now (innermost last): what a
# call's forward leaves for its own recompute (spectral norm's power-iteration start) is the call's.
_forwards: list["_Call"] = []
_recomputes: list["_Call"] = []


class _Call:
    """One checkpointed call: for each module that keeps state for its recompute, the values its
    forward started from, one entry per time the forward ran it (the recompute runs it as often,
    in the same order). It lives as long as checkpoint keeps the call's contexts: the graph."""

    def __init__(self):
        self.starts: dict[int, list] = {}
        self.read: dict[int, int] = {}   # how many of each module's the recompute under way has used
        # modules whose buffers the recompute under way swapped for copies, with the attribute that
        # keeps their own: put back when the recompute ends, also where checkpoint stops it early
        # (it stops inside the op that makes the last tensor it needs, before the module's forward
        # hook, which left that module with the copies: a QAT block's last fake quantizer)
        self.swapped: list[tuple[torch.nn.Module, str]] = []


class _InForward:
    def __init__(self, inner, call):
        self.inner, self.call = inner, call

    def __enter__(self):
        self.inner.__enter__()
        _forwards.append(self.call)

    def __exit__(self, *exc):
        _forwards.pop()
        return self.inner.__exit__(*exc)


class _InRecompute:
    """The recompute's context: `inner` entered, the recompute counted. Entered once per
    recompute (a checkpoint recomputes again for each backward that unpacks), so a class."""

    def __init__(self, inner, call=None):
        self.inner, self.call = inner, call

    def __enter__(self):
        self.inner.__enter__()
        _recomputing[0] += 1
        if self.call is not None:
            self.call.read = {}   # each recompute runs the forward's modules from their first time
            _recomputes.append(self.call)

    def __exit__(self, *exc):
        if self.call is not None:
            _recomputes.pop()
            for m, kept_as in reversed(self.call.swapped):   # inner modules first: the outer's originals win
                for n, b in (m.__dict__.pop(kept_as, None) or {}).items():
                    _set_buffer(m, n, b)
            self.call.swapped = []
        _recomputing[0] -= 1
        return self.inner.__exit__(*exc)


def marking_recompute(context_fn=None, respect_saved_tensors_hooks=None):
    """A context_fn for torch.utils.checkpoint: context_fn's own contexts (none: no-ops), the
    recompute's counted so that keep_running_stats tells it from the forward, and both given the
    call's _Call (keep_forward_start). checkpoint tells selective checkpointing's caching mode
    whether what it keeps goes through the saved-tensor hooks (an offload) only when that mode is
    the forward context itself; wrapped here, it is told here (without it, an offload around a
    selective checkpoint left the kept matmul outputs on the GPU)."""
    def fn():
        fwd, rec = context_fn() if context_fn is not None else (contextlib.nullcontext(), contextlib.nullcontext())
        if respect_saved_tensors_hooks is not None and hasattr(fwd, "respect_saved_tensors_hooks"):
            fwd.respect_saved_tensors_hooks = respect_saved_tensors_hooks
        call = _Call()
        return _InForward(fwd, call), _InRecompute(rec, call)
    return fn


def _spectral_norm_type():
    from torch.nn.utils import parametrizations

    return getattr(parametrizations, "_SpectralNorm", ())


def _set_buffer(m: torch.nn.Module, name: str, b: torch.Tensor) -> None:
    """Sets buffer `name` (dotted: a submodule's, as named_buffers() names them) of `m` to `b`."""
    owner, _, leaf = name.rpartition(".")
    setattr(m.get_submodule(owner) if owner else m, leaf, b)


def _buffers_put_back(kept_as: str):
    """A forward hook that sets back the buffers a pre-hook swapped out and kept in the module's
    attribute `kept_as` (keep_forward_start, keep_running_stats)."""
    def swap_back(m, args, out):
        kept = m.__dict__.pop(kept_as, None)
        for n, b in (kept or {}).items():
            _set_buffer(m, n, b)
    return swap_back


def _quantization_types() -> tuple:
    from torch.ao.nn.intrinsic.qat.modules.conv_fused import _ConvBnNd
    from torch.ao.quantization import FakeQuantizeBase
    from torch.ao.quantization.observer import ObserverBase

    return FakeQuantizeBase, ObserverBase, _ConvBnNd


def keeps_forward_start(m: torch.nn.Module, parent: torch.nn.Module | None = None) -> bool:
    """Whether `m`'s training forward updates buffers in place that its output depends on (or that
    a recompute must not update again), so that a recompute must start from the forward's values:
    spectral norm's power iteration (u, v), and quantization-aware training's observers and fake
    quantizers (the running min and max, and the scale and zero point computed from them; an
    observer inside a fake quantizer is the fake quantizer's) and its fused conv + BatchNorm
    modules, which fold the weight with the BatchNorm's running variance before the BatchNorm
    updates it."""
    if isinstance(m, _spectral_norm_type()):
        return True
    fake_quantize, observer, conv_bn = _quantization_types()
    return (isinstance(m, (fake_quantize, conv_bn)) or
            isinstance(m, observer) and not isinstance(parent, fake_quantize))


def keep_forward_start(module: torch.nn.Module) -> None:
    """A module whose training forward updates its buffers in place (keeps_forward_start) in a
    checkpointed module: the recompute would update them again from what the forward left.
    Spectral norm's u and v advanced twice a step, and the backward differentiated a weight
    divided by another sigma than the forward's; a QAT fake quantizer's moving min and max moved
    twice, and the recompute fake-quantized with another scale than the forward (MobileNetV2 under
    prepare_qat, one block checkpointed: 27 gradients and 19 observer buffers differed from the
    plain step's). The forward's starting buffers (the module's and its submodules') are kept by
    the checkpointed call (copies, made in the recompute too: the same ops); the recompute runs
    from copies of them, reaching the forward's values, and the module's own buffers are put back
    after it."""
    if getattr(module, "_mhc_keeps_forward_start", False):
        return

    def swap_in(m, args):
        if not m.training:
            return
        call = _recomputes[-1] if _recomputes else None
        i = call.read.get(id(m), 0) if call is not None else 0
        if call is not None and i < len(call.starts.get(id(m), ())):
            call.read[id(m)] = i + 1
            start = call.starts[id(m)][i]
            m._mhc_start_kept = dict(m.named_buffers())
            call.swapped.append((m, "_mhc_start_kept"))
            for n, b in start.items():
                _set_buffer(m, n, b.clone())
        else:
            start = {n: b.clone() for n, b in m.named_buffers()}
            if _forwards and not _recomputing[0]:
                _forwards[-1].starts.setdefault(id(m), []).append(start)

    module.register_forward_pre_hook(swap_in)
    module.register_forward_hook(_buffers_put_back("_mhc_start_kept"))
    module._mhc_keeps_forward_start = True


BATCHNORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.SyncBatchNorm)


def keep_running_stats(bn: torch.nn.Module) -> None:
    """BatchNorm in a checkpointed module runs its forward twice in training, the second time in
    the recompute, which would update its running statistics (and batch count) again: a model
    trained so evaluates differently. In the recompute, hooks give the BatchNorm copies of its
    buffers to update and put the originals back after it; its output does not depend on them
    (training normalises with the batch's statistics). The copies are made in the forward too,
    where they are dropped: selective checkpointing requires the recompute to run the same ops as
    the forward. The recompute is told by the checkpoint's context_fn (marking_recompute), public
    API only: the autograd graph task (torch._C._current_graph_task_id, private) also misses a
    recompute that runs outside a backward (a saved tensor unpacked by hand). `mhc advise` prints
    the same hooks."""
    if getattr(bn, "_mhc_keeps_running_stats", False):
        return

    def swap_in(m, args):
        if not m.training:
            return
        copies = {n: b.clone() for n, b in m.named_buffers(recurse=False)}
        if _recomputing[0]:
            m._mhc_stats_kept = dict(m.named_buffers(recurse=False))
            if _recomputes:
                _recomputes[-1].swapped.append((m, "_mhc_stats_kept"))
            for n, b in copies.items():
                setattr(m, n, b)

    bn.register_forward_pre_hook(swap_in)
    bn.register_forward_hook(_buffers_put_back("_mhc_stats_kept"))
    bn._mhc_keeps_running_stats = True


def checkpoint_module(module: torch.nn.Module, policy: str) -> None:
    """Checkpoints `module` in place with `policy` (full, save_matmuls, mhc); BatchNorm inside
    what is recomputed keeps its running statistics (keep_running_stats), spectral norm its power
    iteration and QAT's observers and fake quantizers their statistics (keep_forward_start)."""
    regions = mhc_maps(module) if policy == "mhc" else [module]
    for r in regions:
        for m, parent in _with_parents(r):
            if isinstance(m, BATCHNORMS) and m.track_running_stats:
                keep_running_stats(m)
            elif keeps_forward_start(m, parent):
                keep_forward_start(m)
    if policy == "mhc":
        for m in regions:
            m.forward = _checkpointed(m.forward, m)
        return
    context_fn = (functools.partial(create_selective_checkpoint_contexts, _save_matmuls_policy)
                  if policy == "save_matmuls" else None)
    module.forward = _checkpointed(module.forward, module, context_fn)


def _with_parents(root: torch.nn.Module):
    """Each module under root (root included) with its parent (None for root)."""
    yield root, None
    for parent in root.modules():
        for child in parent.children():
            yield child, parent


def mhc_maps(module: torch.nn.Module) -> list[torch.nn.Module]:
    """The hyper-connection maps inside module (itself included) that the mhc policy recomputes."""
    return [m for m in module.modules() if getattr(type(m), "MHC_RECOMPUTE", False)]
