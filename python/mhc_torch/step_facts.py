"""What a capture records in the trace's meta about the model, its optimizer and the step as the
user wrote them (the code `mhc advise` prints keeps them), and the versions it depends on."""
from __future__ import annotations

import contextlib
import sys
import weakref

import torch

from . import cudnn_rnn


# The LR schedulers built on each optimizer during a capture (their class names, in the order
# built): meta capture.lr_schedulers for the capture's optimizer.
_LR_SCHEDULERS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, list[str]]" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _lr_schedulers_recorded():
    """Records the LR schedulers a step or build_optimizer builds on an optimizer (LambdaLR,
    transformers' get_linear_schedule_with_warmup, ...): the optimizer code `mhc advise` prints
    replaces the optimizer object, and a scheduler keeps stepping the one it was built on, so the
    printed code says where to build it (capture.lr_schedulers). LRScheduler's subclasses call its
    __init__; SequentialLR and ReduceLROnPlateau do not, and are recorded by their own."""
    from torch.optim import lr_scheduler

    classes = [c for c in (lr_scheduler.LRScheduler, getattr(lr_scheduler, "SequentialLR", None),
                           getattr(lr_scheduler, "ReduceLROnPlateau", None)) if c is not None]
    inits = {c: c.__dict__["__init__"] for c in classes}

    def recording(init):
        def __init__(self, optimizer=None, *args, **kwargs):
            init(self, optimizer, *args, **kwargs)
            if isinstance(optimizer, torch.optim.Optimizer):
                names = _LR_SCHEDULERS.setdefault(optimizer, [])
                if type(self).__name__ not in names:
                    names.append(type(self).__name__)
        return __init__

    for c, init in inits.items():
        c.__init__ = recording(init)
    try:
        yield
    finally:
        for c, init in inits.items():
            c.__init__ = init


def lr_scheduler_meta(optimizer) -> dict[str, str]:
    names = _LR_SCHEDULERS.get(optimizer) if optimizer is not None else None
    return {"capture.lr_schedulers": ", ".join(names)} if names else {}


def _fused_refused(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, str]:
    """Why torch.optim would refuse fused=True for the parameters this optimizer steps, as
    meta capture.fused_refused (absent when it would not): its fused Adam and AdamW step floating-
    point tensors only (torch/optim/optimizer.py, _device_dtype_check_for_fused, on every device),
    so a model with complex weights (a Fourier neural operator's spectral weights) fails at its
    first step with fused=True, and mhc advise must not offer it."""
    names = {id(p): n for n, p in model.named_parameters()}
    odd = [p for g in optimizer.param_groups for p in g["params"] if not torch.is_floating_point(p)]
    if not odd:
        return {}
    first = names.get(id(odd[0]), "a parameter")
    more = f" and {len(odd) - 1} more" if len(odd) > 1 else ""
    dtypes = ", ".join(sorted({str(p.dtype).replace("torch.", "") for p in odd}))
    return {"capture.fused_refused": f"torch.optim's fused=True steps floating-point parameters only, and {first}"
                                     f"{more} {'is' if len(odd) == 1 else 'are'} {dtypes}: keep the optimizer "
                                     "unfused (foreach)"}


def model_facts(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, str]:
    """What the code `mhc advise` prints needs to know of the user's model and optimizer, as built
    (before a setting is applied): the optimizer's class and hyperparameters (the printed code keeps
    them), and for a Hugging Face model that supports it the layers its own activation-checkpointing
    call wraps and that call's name in the installed transformers (absent otherwise: the printed
    code then uses PyTorch's checkpoint wrapper)."""
    import json

    cls = type(optimizer)
    defaults = {k: list(v) if isinstance(v, tuple) else v for k, v in optimizer.defaults.items()
                if isinstance(v, (bool, int, float, str, type(None))) or
                isinstance(v, tuple) and all(isinstance(x, (int, float)) for x in v)}
    facts = {"capture.optimizer_class": f"{cls.__module__}.{cls.__qualname__}",
             "capture.optimizer_defaults": json.dumps(defaults, sort_keys=True)}
    # Parameter groups of one's own (build_optimizer): each group's parameter count and the
    # hyperparameters it sets otherwise than the defaults, so that printed code can keep them.
    # An LR scheduler built before (its warmup sets lr, to 0.0 for a linear warmup) keeps the lr
    # the user gave as the group's initial_lr: that is the group's hyperparameter.
    def given(g):
        lr = g.get("initial_lr")
        return {**g, "lr": lr} if isinstance(lr, (int, float)) and not isinstance(lr, bool) else g

    groups = [dict({k: list(v) if isinstance(v, tuple) else v for k, v in given(g).items()
                    if k in defaults and not isinstance(v, torch.Tensor) and v != optimizer.defaults[k]},
                   params=len(g["params"]))
              for g in optimizer.param_groups]
    if len(groups) > 1 or any(len(g) > 1 for g in groups):
        facts["capture.optimizer_groups"] = json.dumps(groups, sort_keys=True)
    # The trained weights' dtype (most of their bytes), whatever made it: the recipe's cast or the
    # model as built (printed DeepSpeed configs enable bf16 or fp16 by it).
    by_dtype: dict[torch.dtype, int] = {}
    for p in model.parameters():
        if p.requires_grad:
            by_dtype[p.dtype] = by_dtype.get(p.dtype, 0) + p.numel() * p.element_size()
    if by_dtype:
        facts["capture.weights_dtype"] = str(max(by_dtype, key=by_dtype.get)).replace("torch.", "")
    # The dtype of the tensors the optimizer steps (most of their bytes): fp32 masters of bf16
    # weights, or the weights. With its state on the host the optimizer steps fp32 copies of them
    # (mhc_torch.apply): mhc advise sizes the host's copies, state and temporaries by it.
    stepped: dict[torch.dtype, int] = {}
    for g in optimizer.param_groups:
        for p in g["params"]:
            stepped[p.dtype] = stepped.get(p.dtype, 0) + p.numel() * p.element_size()
    if stepped:
        facts["capture.optimizer_dtype"] = str(max(stepped, key=stepped.get)).replace("torch.", "")
    facts.update(_fused_refused(model, optimizer))
    # Recurrent layers run cuDNN's fused RNN kernel on a GPU, which the capture runs too, its reserve
    # space estimated (cudnn_rnn.py): the modules and what is estimated are named.
    facts.update(cudnn_rnn.meta(model))
    hf = sys.modules.get("transformers.modeling_utils")
    layers_mod = sys.modules.get("transformers.modeling_layers")
    if hf is not None and isinstance(model, hf.PreTrainedModel) and getattr(model, "supports_gradient_checkpointing", False):
        layer_cls = getattr(layers_mod, "GradientCheckpointingLayer", None)
        root = type(model).__name__
        names = [f"{root}.{n}" if n else root for n, m in model.named_modules()
                 if layer_cls is not None and isinstance(m, layer_cls)]
        if any(getattr(m, "gradient_checkpointing", False) for m in model.modules()):
            facts["capture.hf_checkpointing_on"] = "true"   # turned on by the user's own call
        if names:
            facts["capture.hf_checkpoint_layers"] = json.dumps(names)
            facts["capture.hf_checkpoint_call"] = ("activation_checkpointing_enable"
                                                   if hasattr(model, "activation_checkpointing_enable")
                                                   else "gradient_checkpointing_enable")
    return facts


def versions() -> dict[str, str]:
    """The versions a capture depends on, for the trace's meta: what fake tensors, autocast and
    the model code do changes with them (`mhc info` prints them; comparisons warn on a mismatch)."""
    from importlib import metadata

    out = {"torch_version": torch.__version__}
    try:
        out["transformers_version"] = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        out["transformers_version"] = "not installed"
    return out


@contextlib.contextmanager
def graph_freeing_backwards_counted(rec):
    """Counts, per step, the backward calls that free their graph (`loss.backward()`,
    `torch.autograd.backward` without retain_graph or create_graph): each ends one micro-batch's
    pass. The autograd engine also runs `torch.autograd.grad` (MAML's inner steps, a gradient
    penalty) and backward calls that keep the graph for another (PCGrad's one backward per task
    over one forward); those are no micro-batches (a MAML step of 4 tasks was taken for 24, a
    PCGrad step over 3 tasks for 3)."""
    import inspect

    backward = torch.autograd.backward
    signature = inspect.signature(backward)

    def counted(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        retain, create = bound.arguments.get("retain_graph"), bound.arguments.get("create_graph")
        if not (create if retain is None else retain):
            rec.graph_freeing_backwards[rec.step] = rec.graph_freeing_backwards.get(rec.step, 0) + 1
        return backward(*args, **kwargs)

    torch.autograd.backward = counted
    try:
        yield
    finally:
        torch.autograd.backward = backward


def _accumulation(recipe, rec, run, steps: int) -> dict[str, str]:
    """A step function that accumulates gradients itself (N forward and backward passes, then one
    step of the capture's optimizer, in every step) is N micro-batches a step, as --micro-batches N
    is: meta capture.micro_batches says so (the printed DeepSpeed configuration's
    gradient_accumulation_steps). A pass is a backward call that frees its graph
    (graph_freeing_backwards_counted). Any other step function (one pass; passes without one step
    of the capture's optimizer each, as a GAN's two) keeps the recipe's 1."""
    if recipe.step is None:
        return {}
    passes = {rec.graph_freeing_backwards.get(s, 0) for s in range(steps)}
    stepped = {run.optimizer_steps.get(s, 0) for s in range(steps)}
    if len(passes) == 1 and min(passes) > 1 and stepped == {1}:
        return {"capture.micro_batches": str(min(passes))}
    return {}


def _own_optimizers(recipe, run, facts: dict[str, str]) -> None:
    """A step function that trains with optimizers it builds itself and never steps the capture's
    (DLRM's SparseAdam and Adam, a GAN's two, AdamW over fp32 master copies): meta
    capture.optimizer names them ("step: SparseAdam, Adam") and capture.optimizer_class their
    classes, one entry each ("torch.optim.adam.Adam, torch.optim.adam.Adam"), not the capture's
    AdamW that nothing stepped, whose hyperparameters and groups (capture.optimizer_defaults,
    _groups) are left out with it. One such optimizer is adopted (StepRun._settle) and named as
    build_optimizer's is."""
    if recipe.step is None or run.optimizer_steps or run.adopted_facts or not run.built_qualnames:
        return
    facts["capture.optimizer"] = "step: " + ", ".join(q.rpartition(".")[2] for q in run.built_qualnames)
    facts["capture.optimizer_class"] = ", ".join(run.built_qualnames)
    for key in ("capture.optimizer_defaults", "capture.optimizer_groups"):
        facts.pop(key, None)


def _autocast_used(recipe, forward_autocast: dict) -> dict[str, str]:
    """Meta capture.autocast as the step ran it where a step or loss of the user's own says itself
    whether and how it autocasts: the dtype most of its forward kernels ran under, "none" where
    they ran without autocast (a WGAN-GP step in fp32 was recorded as bfloat16, the recipe's
    default, and mhc advise then withheld selective checkpointing of its critic, called several
    times a pass, for an autocast cache the step never had). The capture's own step autocasts as
    the recipe says; a step's own torch.autocast("cuda") is CUDA's policy (docs/torch.md)."""
    if not forward_autocast:
        return {}
    dtype = max(forward_autocast, key=lambda d: forward_autocast[d])
    if dtype == recipe.autocast_dtype:
        return {}
    if dtype is None:
        return {"capture.autocast": "none", "capture.autocast_policy": "none"}
    return {"capture.autocast": str(dtype).replace("torch.", ""), "capture.autocast_policy": "cuda"}
