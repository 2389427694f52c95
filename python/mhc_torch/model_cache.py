"""The key/value cache a Hugging Face model makes itself in a training forward (its config's
use_cache: a forward without labels, as DPO's policy and reference). Each layer's cache update
copies its keys and values (transformers' DynamicLayer: torch.cat onto the cache), the attention
reads the copies, and the cache holds them while the model's output lives. Checkpointing turns
the cache off (mhc_torch.apply and the printed code set config.use_cache = False on each Hugging
Face model of the trained model that holds a checkpointed module, as transformers' own
checkpointing does), so the step with the setting makes no such copies where, and only where,
the config decided the cache:

- a forward given use_cache=True keeps its cache (the setting changes the config, not the call);
- the config object decides: the trained model's, or a copy of it made after the setting (a deep
  copy of the model copies use_cache = False with its config: DPO's reference made in the step);
  a copy made before (in build_model) has a config of its own, which keeps its cache.

While the capture runs, the kernels of each update of a cache that only the setting's switch made
are recorded: meta capture.model_cache_updates, [[model, first kernel id, last kernel id,
returned], ...], `model` the Hugging Face model of the trained model whose config.use_cache
mhc_torch.apply sets to False when a checkpointed module is inside it (the outermost one sharing
that config), `returned` the last kernel before the module that called the update (the
attention) returned: its frame holds the keys and values it would have rebound to the copies
until then. Meta capture.kept_cache_callers names the modules of the trained model whose forward,
with autograd recording, updates a cache given use_cache=True: checkpointed, their recompute would
append to it again (mhc advise refuses that). Which model made a cache is told by the Hugging Face models' calls under way (their
__call__, with the use_cache each was given) and the config the cache is made with, not by Python's
frames. A cache given to the model (generate()'s) is made outside its forward and is not listed."""
from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import sys
import weakref

import torch

_SWITCH = "_mhc_use_cache_switch"   # on a config object: (this capture's token, its models' weakrefs)
_captures = itertools.count()


def _use_cache_given(module: torch.nn.Module, args: tuple, kwargs: dict):
    """The use_cache a call of `module` was given (None: not given, the config decides), read as
    transformers' merge_with_config_defaults reads it: a keyword, or its place among forward's
    parameters."""
    if kwargs.get("use_cache") is not None:
        return kwargs["use_cache"]
    try:
        names = [n for n in inspect.signature(type(module).forward).parameters][1:]   # less self
    except (TypeError, ValueError):
        return None
    i = names.index("use_cache") if "use_cache" in names else -1
    return args[i] if 0 <= i < len(args) else None


def _switches(model: torch.nn.Module, token) -> list:
    """Tags the configs whose use_cache mhc_torch.apply would turn off (applying._hf_layers: the
    Hugging Face models of `model` that its own checkpointing serves) with the outermost models
    sharing each; returns the tagged configs, to untag."""
    from .applying import _hf_layers

    by_config: dict[int, tuple] = {}
    for m in model.modules():   # outer modules first
        config = getattr(m, "config", None)
        if config is None or not getattr(config, "use_cache", False) or not _hf_layers(m):
            continue
        _, models = by_config.setdefault(id(config), (config, []))
        if not any(any(x is m for x in outer().modules()) for outer in models):
            models.append(weakref.ref(m))
    for config, models in by_config.values():
        config.__dict__[_SWITCH] = (token, tuple(models))
    return [config for config, _ in by_config.values()]


@contextlib.contextmanager
def model_cache_updates(rec, model: torch.nn.Module):
    cache_utils, modeling = sys.modules.get("transformers.cache_utils"), sys.modules.get("transformers.modeling_utils")
    cache_class = getattr(cache_utils, "Cache", None)
    model_class = getattr(modeling, "PreTrainedModel", None)
    if cache_class is None or model_class is None:
        yield
        return
    # this capture's (a str: a deep copy of the config keeps it as it is); a tag a config kept from
    # another capture is not this one's
    token = f"{id(rec)}:{next(_captures)}"
    tagged = _switches(model, token)
    calls: list[tuple] = []   # the Hugging Face models' calls under way, innermost last: (model, use_cache given)
    original_init, original_update = cache_class.__init__, cache_class.update
    original_call = model_class.__dict__.get("__call__")

    def call(self, *args, **kwargs):
        calls.append((self, _use_cache_given(self, args, kwargs)))
        try:
            return torch.nn.Module.__call__(self, *args, **kwargs)
        finally:
            calls.pop()

    @functools.wraps(original_init)
    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self._mhc_models, self._mhc_kept = (), False
        config = kwargs.get("config")
        # the outermost of the calls under way that read this config: its use_cache decided
        # (an inner one is given what the outer one read from the config)
        inner = next((i for i in range(len(calls) - 1, -1, -1)
                      if config is None or getattr(calls[i][0], "config", None) is config), None)
        if inner is None:
            return
        config = getattr(calls[inner][0], "config", None)
        outer = inner
        while outer > 0 and getattr(calls[outer - 1][0], "config", None) is config:
            outer -= 1
        switch = getattr(config, _SWITCH, None)
        if calls[outer][1] is None and switch is not None and switch[0] == token:
            self._mhc_models = switch[1]
        self._mhc_kept = bool(calls[outer][1])   # asked for by the call: checkpointing leaves it on

    @functools.wraps(original_update)
    def update(self, *args, **kwargs):
        first = len(rec.kernels) + 1
        out = original_update(self, *args, **kwargs)
        names = [n for ref in getattr(self, "_mhc_models", ()) if ref() is not None and (n := rec.name_of(ref()))]
        caller = sys._getframe(1).f_locals.get("self")   # the attention, whose return the entry waits for
        name = rec.name_of(caller) if isinstance(caller, torch.nn.Module) and torch.is_grad_enabled() else None
        if getattr(self, "_mhc_kept", False) and name and rec.model_modules.get(name) == id(caller):
            rec.kept_cache_callers.add(name)   # a module of the trained model (not a copy named as it is)
        if names and len(rec.kernels) >= first and isinstance(caller, torch.nn.Module):
            entries = [[name, first, len(rec.kernels), len(rec.kernels)] for name in names]
            rec.model_cache_updates.extend(entries)

            def returned(*_):   # the attention's forward returned: its frame let go of its locals
                for entry in entries:
                    entry[3] = len(rec.kernels)
                handle.remove()

            handle = caller.register_forward_hook(returned, always_call=True)
        return out

    cache_class.__init__, cache_class.update = init, update
    model_class.__call__ = call
    try:
        yield
    finally:
        cache_class.__init__, cache_class.update = original_init, original_update
        if original_call is None:
            del model_class.__call__
        else:
            model_class.__call__ = original_call
        for config in tagged:
            config.__dict__.pop(_SWITCH, None)
