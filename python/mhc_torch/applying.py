"""mhc_torch.apply: turns a setting (mhc_torch.settings) on for a real model and optimizer.

    model, optimizer = mhc_torch.apply(model, optimizer, {"checkpoint": {...}, "offload": {...}})

The same call serves a training script on a GPU, real tensors on a CPU and a capture on fake
tensors (`mhc-torch capture --setting`), so the memory a capture measures is the memory of the
code a user runs. Call it once, after building the model and its optimizer and before the first
step; the model is changed in place, the optimizer may be a new one: use the one returned.
"""
from __future__ import annotations

import os

import torch

from . import checkpointing, optimizers
from .offload import SavedTensorOffload
from .recipes import cast_model
from .settings import SettingError, load_setting


def module_name(model: torch.nn.Module, path: str) -> str:
    """A submodule's fully qualified name as the trace spells it (the root's class name first)."""
    root = type(model).__name__
    return f"{root}.{path}" if path else root


def resolve_modules(model: torch.nn.Module, names: list[str], key: str) -> list[torch.nn.Module]:
    """The modules that fully qualified names denote, or names as model.get_submodule spells them
    (without the root's class name: `mhc advise --setting` takes both, and --verify passes the
    setting on as given); a name the model lacks is a SettingError."""
    by_name = {module_name(model, path): m for path, m in model.named_modules()}
    out = []
    for name in names:
        m = by_name.get(name)
        if m is None and name:
            m = by_name.get(module_name(model, name))
        if m is None:
            raise SettingError(f"setting: {key}: {type(model).__name__} has no module '{name}' "
                               f"({_suggest(name, by_name, type(model).__name__)})")
        out.append(m)
    return out


def called_modules(model: torch.nn.Module, names: list[str], key: str) -> list[torch.nn.Module]:
    """resolve_modules for a setting that acts around a module's forward (checkpoint, offload): a
    container with no forward of its own (nn.ModuleList, nn.ModuleDict), which the model iterates
    and never calls, is a SettingError naming its children: wrapping its forward changes nothing
    (the step ran as before), and the printed checkpoint_wrapper makes it a module the model cannot
    iterate (a UNet's resnets list)."""
    modules = resolve_modules(model, names, key)
    for name, m in zip(names, modules):
        if type(m).forward is torch.nn.Module.forward:
            inner = [f"'{name}.{c}'" for c, _ in list(m.named_children())[:2]]
            more = ", ..." if len(m._modules) > 2 else ""
            raise SettingError(f"setting: {key}: '{name}' is an nn.{type(m).__name__}, which has no forward "
                               f"(the model iterates it and never calls it): name the modules inside it"
                               + (f" ({', '.join(inner)}{more})" if inner else ""))
    return modules


def _suggest(name: str, by_name: dict, root: str) -> str:
    """The names nearest to a wrong one (spelled as it is: with or without the root's class name),
    or how names are spelled."""
    import difflib

    short = not name.startswith(root + ".") and name != root
    names = [n.split(".", 1)[1] for n in list(by_name)[1:]] if short else list(by_name)
    close = sorted(difflib.get_close_matches(name, names, n=2, cutoff=0.75))
    if close:
        return "did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
    example = next((n for n in list(by_name)[1:] if n.count(".") == 1), next(iter(by_name)))
    return f"names are the trace's, e.g. '{example}', or model.get_submodule's, '{example.split('.', 1)[-1]}'"


def enter_around_forward(module: torch.nn.Module, context) -> None:
    """Enters `context` (a saved-tensor hooks object, entered again on each call) before the module's
    forward and leaves it after: forward hooks, the very lines `mhc advise` prints around its
    OffloadActivations (around the model itself when the offload is of the whole forward), so that
    what --verify captures is what the printed code runs. The exit runs also when the forward
    raises (always_call), so no hook stays on autograd's stack after an error."""
    module.register_forward_pre_hook(lambda *_: context.__enter__())
    module.register_forward_hook(lambda *_: context.__exit__(None, None, None), always_call=True)


def _hf_layers(model: torch.nn.Module) -> bool:
    """Whether `model` is a Hugging Face model with layers its own checkpointing checkpoints (the
    capture's meta capture.hf_checkpoint_layers: then mhc advise prints `model.config.use_cache =
    False` beside its checkpoint_wrapper)."""
    import sys

    hf = sys.modules.get("transformers.modeling_utils")
    layer_cls = getattr(sys.modules.get("transformers.modeling_layers"), "GradientCheckpointingLayer", None)
    return (hf is not None and layer_cls is not None and isinstance(model, hf.PreTrainedModel)
            and getattr(model, "supports_gradient_checkpointing", False)
            and any(isinstance(m, layer_cls) for m in model.modules()))


def _allocator(conf: str) -> None:
    """PYTORCH_CUDA_ALLOC_CONF for this process: set now if CUDA is initialised (the options
    that can change at run time do), else in the environment for CUDA's initialisation. The
    settings the environment already holds come first and the answer's after them (a later key
    wins), as `mhc advise` prints them and predicts the step: the answer's alone dropped the user's."""
    from .allocator_environment import allocator_env   # the variables PyTorch reads, in its order

    conf = ",".join(c for c in (allocator_env(), conf) if c)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.memory._set_allocator_settings(conf)
    else:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf


def _fsdp2_modules(model: torch.nn.Module, values: dict) -> list:
    """(module, value) for reshard_after_forward: each a fully_shard module, each value a bool."""
    out = []
    for (name, value), m in zip(values.items(), resolve_modules(model, list(values), "reshard_after_forward")):
        if not hasattr(m, "set_reshard_after_forward"):
            raise SettingError(f"setting: reshard_after_forward.{name}: not a fully_shard (FSDP2) module")
        if not isinstance(value, bool):
            raise SettingError(f"setting: reshard_after_forward.{name}: {value} ranks is set when sharding: "
                               f"fully_shard(module, reshard_after_forward={value})")
        out.append((m, value))
    return out


def apply(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, setting):
    """Applies `setting` (a dict, JSON text or a JSON file's path) to the model (in place) and the
    optimizer; returns (model, optimizer): use the optimizer returned, it may be a new one."""
    s = load_setting(setting)
    if getattr(model, "_mhc_setting", None) is not None:
        raise SettingError("setting: mhc_torch.apply was called on this model already")
    off, opt = s.get("offload"), s.get("optimizer", {})
    # Check everything before changing anything.
    checkpoints = []  # (module, policy)
    for i, group in enumerate(s.get("checkpoint", [])):
        key = "checkpoint" if len(s["checkpoint"]) == 1 else f"checkpoint[{i}]"
        resolve = resolve_modules if group["policy"] == "mhc" else called_modules   # mhc: the maps inside
        for name, m in zip(group["modules"], resolve(model, group["modules"], f"{key}.modules")):
            if group["policy"] == "mhc" and not checkpointing.mhc_maps(m):
                raise SettingError(f"setting: {key}.policy mhc: module '{name}' holds no mHC hyper-connection maps")
            checkpoints.append((m, group["policy"]))
    off_modules = (called_modules(model, off["modules"], "offload.modules") if off and off["modules"] else
                   [model] if off else [])
    if (opt or s.get("weights") == "bf16") and optimizer is None:
        raise SettingError("setting: optimizer/weights: pass the optimizer to apply")
    options = optimizers.impl_options(optimizer, opt.get("impl")) if opt else {}
    reshards = _fsdp2_modules(model, s.get("reshard_after_forward", {}))
    if opt.get("state") == "host" and optimizers.has_stepped(optimizer):
        raise SettingError("setting: the optimizer has taken steps already; apply the setting before the first step")
    if s.get("weights") == "bf16" and optimizer.state:
        raise SettingError("setting: weights bf16: the optimizer holds state already (" + optimizers.state_origin(optimizer)
                           + ") that the cast to bf16 would leave in its old dtype; apply the setting before "
                           "the optimizer makes state")

    if s.get("weights") == "bf16":
        cast_model(model, torch.bfloat16)  # the capture's --weights bf16 is this same cast
    for m, policy in checkpoints:
        checkpointing.checkpoint_module(m, policy)
    # As the printed code (and transformers' own checkpointing in the layers it checkpoints): a
    # recomputed layer would write its keys and values into the cache again, and transformers'
    # attention stopped on a mask of half the keys' length (DPO, the policy's layers checkpointed).
    # The Hugging Face model may be inside the user's own (PPO's policy with a value head, `lm`).
    checkpointed = {id(m) for m, _ in checkpoints}
    for hf in model.modules():
        if checkpointed and _hf_layers(hf) and getattr(hf.config, "use_cache", False) and any(
                id(m) in checkpointed for m in hf.modules()):
            hf.config.use_cache = False
    if off:
        manager = SavedTensorOffload(model, off["mode"], off["min_bytes"], off["max_fwd_stash"], off["prefetch"])
        hooks = manager.hooks()
        for m in off_modules:
            enter_around_forward(m, hooks)
    optimizer = _optimizer_part(optimizer, opt, options)
    if "allocator" in s:
        _allocator(s["allocator"])
    for m, value in reshards:
        m.set_reshard_after_forward(value, recurse=False)   # FSDP2's public switch (torch >= 2.6)
    model._mhc_setting = s
    return model, optimizer


def _optimizer_part(optimizer, opt: dict, options: dict):
    if opt.get("state") == "host":
        return optimizers.state_on_host(optimizer, options)
    if options:
        return optimizers.rebuild(optimizer, options)
    return optimizer


def apply_to_optimizer(optimizer: torch.optim.Optimizer, setting) -> torch.optim.Optimizer:
    """The optimizer part of a setting (its "optimizer" key), applied to this optimizer in place:
    the object stays the one the caller holds and becomes the one `apply` would have returned
    (class, parameter groups, state, hooks). The capture applies a setting so to an optimizer that
    a step function builds itself, which its code goes on using by name."""
    opt = load_setting(setting).get("optimizer", {})
    options = optimizers.impl_options(optimizer, opt.get("impl")) if opt else {}
    if opt.get("state") == "host" and optimizers.has_stepped(optimizer):
        raise SettingError("setting: the optimizer has taken steps already; apply the setting before the first step")
    new = _optimizer_part(optimizer, opt, options)
    if new is not optimizer:
        optimizer.__class__ = new.__class__
        optimizer.__dict__ = new.__dict__   # shared: the host gradient hooks update `new`'s buffers
    return optimizer
