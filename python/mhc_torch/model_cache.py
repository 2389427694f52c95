"""The key/value cache a Hugging Face model makes itself in a training forward (its config's
use_cache: a forward without labels, as DPO's policy and reference). Each layer's cache update
copies its keys and values (transformers' DynamicLayer: torch.cat onto the cache), the attention
reads the copies, and the cache holds them while the model's output lives. Checkpointing turns
the cache off (mhc_torch.apply and the printed code set model.config.use_cache = False, as
transformers' own checkpointing does), so the step with the setting makes no such copies.

While the capture runs, the kernels each update of a cache that a model's forward made ran are
recorded: meta capture.model_cache_updates, [[model, first kernel id, last kernel id, returned], ...],
the model the name of the Hugging Face model whose forward made the cache (a copy of the model
outside it, DPO's reference made with deepcopy, is named as the model is), `returned` the last
kernel before the module that called the update (the attention) returned: its frame holds the
keys and values it would have rebound to the copies until then. A cache given to the model
(generate()'s) is not its config's and is not listed."""
from __future__ import annotations

import contextlib
import functools
import sys

import torch


def _making_model(hf_model_class):
    """The Hugging Face model whose forward is making the cache now (under transformers' decorators
    and the cache's own __init__ chain), else None."""
    frame = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return None
        me = frame.f_locals.get("self")
        if frame.f_code.co_name == "forward" and isinstance(me, hf_model_class):
            return me
        frame = frame.f_back
    return None


@contextlib.contextmanager
def model_cache_updates(rec):
    cache_utils, modeling = sys.modules.get("transformers.cache_utils"), sys.modules.get("transformers.modeling_utils")
    cache_class = getattr(cache_utils, "Cache", None)
    model_class = getattr(modeling, "PreTrainedModel", None)
    if cache_class is None or model_class is None:
        yield
        return
    original_init, original_update = cache_class.__init__, cache_class.update

    @functools.wraps(original_init)
    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        model = _making_model(model_class)
        self._mhc_model = rec.name_of(model) if model is not None else None

    @functools.wraps(original_update)
    def update(self, *args, **kwargs):
        first = len(rec.kernels) + 1
        out = original_update(self, *args, **kwargs)
        name = getattr(self, "_mhc_model", None)
        caller = sys._getframe(1).f_locals.get("self")
        if name and len(rec.kernels) >= first and isinstance(caller, torch.nn.Module):
            entry = [name, first, len(rec.kernels), len(rec.kernels)]
            rec.model_cache_updates.append(entry)

            def returned(*_):   # the attention's forward returned: its frame let go of its locals
                entry[3] = len(rec.kernels)
                handle.remove()

            handle = caller.register_forward_hook(returned, always_call=True)
        return out

    cache_class.__init__, cache_class.update = init, update
    try:
        yield
    finally:
        cache_class.__init__, cache_class.update = original_init, original_update
