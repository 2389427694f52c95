"""How long the model's own Python frames hold the storages of its forward.

A storage that autograd saves lives until the backward in the captured step whatever the Python
code does; under activation checkpointing (or offloading) autograd no longer holds it and it dies
when the last Python reference to it goes. That is rarely its last use: `q, k, v = ...` views of a
projection stay referenced by the module's `forward` until it returns, so does a module's input
argument (`Linear.forward(self, input)` holds the LayerNorm output it was called with until the
matmul is done). `mhc advise` needs this to predict a checkpointed step (advise/src/transforms/
checkpoint_lifetimes.cpp); the capture records it: when a module's `forward` returns in the forward phase,
every storage one of its locals (arguments included; tuples, lists and dicts of tensors read up to
four deep) still refers to, other than the value returned, is held at least until the last kernel
that ran before the return; so is every tensor it was called with (nn.Module's call keeps its
arguments until `forward` returns, also when `forward` rebinds the name: `x = x + self.attn(x)`).
Meta `capture.frame_holds` lists `[allocation id, kernel id]`, the latest
such kernel of each saved storage.

The return events come from `sys.setprofile` while a step runs, filtered to the code of the
model's modules' `forward` methods and to the model's other Python functions (any code outside
torch, mhc_torch and the standard library: a model file's helpers, transformers' integrations).
A helper's locals are held until it returns, which can be long after their last use: transformers'
grouped-mm experts function keeps the gathered expert inputs (128 MiB each in an OLMoE layer at
4 x 2048) until it returns, and a checkpointed layer frees them only then; before 2026-12-04 only
the modules' own frames were read, and advise predicted such a layer 1.1% under its reserved bytes.
torch's functional Python (torch.nn.functional, torch.functional) is read the same way: before
2026-12-05 an nn.MultiheadAttention layer checkpointed was predicted 0.60% under its reserved bytes.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
import weakref

import torch

from .errors import _machinery
from .op_schema import _dense_parts


_DEPTH = 4       # containers read inside containers (a dict of lists of tensors: 2)
_ITEMS = 4096    # a container longer than this is not read (a frame's list of every layer's cache)
# mhc_torch's own mHC model (mhc-27b, tiny-mhc) is a model's code, not machinery: its sinkhorn()
# holds its argument, the logits, until it returns
_MHC_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mhc_model.py")


def _functional(filename: str) -> bool:
    """torch's functional Python (torch/nn/functional.py, torch/functional.py): its frames hold their
    locals until they return as the model's helpers do. F.multi_head_attention_forward keeps q, k
    and v, views of the packed in-projection, until it returns (after the attention weights'
    mean): nn.MultiheadAttention checkpointed frees that projection only then."""
    path = filename.replace("\\", "/")
    return path.endswith(("/torch/nn/functional.py", "/torch/functional.py"))


def storage_of(t: torch.Tensor):
    """The storage under `t`: inside torch.func's transforms (vmap, grad) the model's Python sees
    functorch's wrappers, which have none ("Cannot access storage of TensorWrapper"); the capture
    records the tensor they wrap."""
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t.untyped_storage()


class FrameHolds:
    def __init__(self, rec, model: torch.nn.Module):
        self.rec = rec
        self.codes = set()
        for m in model.modules():
            forward = getattr(type(m), "forward", None)
            # a decorated forward (transformers wraps some): the wrapper's frame and the method's own
            for f in (forward, inspect.unwrap(forward) if callable(forward) else None):
                code = getattr(f, "__code__", None)
                if code is not None:
                    self.codes.add(code)
        self.helpers: dict = {}   # code -> whether its frames hold (the model's own Python, not a forward)
        self.held: dict[int, int] = {}   # allocation id -> kernel id
        self._arguments: dict[int, list[int]] = {}   # id(frame) -> its tensor arguments' allocation ids
        self.inputs: set[int] = set()   # allocation ids a module's forward was called with
        self._previous = None
        self._returned: dict[int, weakref.ref] = {}   # a forward's returned tensors, until the caller drops them

    def _tensors(self, value, returned, depth: int = _DEPTH):
        """The tensors in `value`, also inside tuples, lists and dicts (and their subclasses:
        transformers' ModelOutput) nested up to _DEPTH deep, other than `returned`."""
        if isinstance(value, torch.Tensor):
            if value is not returned:
                # a sparse COO tensor has no storage: its indices and values hold its memory (a
                # DTensor's, its local shard)
                yield from _dense_parts(value)
        elif depth > 0 and isinstance(value, (tuple, list, dict)):
            items = value.values() if isinstance(value, dict) else value
            if len(items) <= _ITEMS:
                for v in items:
                    yield from self._tensors(v, returned, depth - 1)

    def _helper(self, code) -> bool:
        """A function of the model's own Python (not torch's, mhc_torch's or the standard library's).
        mhc_torch's own mHC model (mhc_model.py) is a model's code. Code compiled from a string (`exec`
        of a model's text, a notebook cell, generated code: `<string>`, `<ipython-input-...>`) is the
        model's; frozen modules (`<frozen ...>`) are not."""
        known = self.helpers.get(code)
        if known is None:
            name = code.co_filename
            known = self.helpers[code] = (not name.startswith("<frozen") if name.startswith("<") else
                                          not _machinery(name) or os.path.abspath(name) == _MHC_MODEL
                                          or _functional(name))
        return known

    def _profile(self, frame, event, arg):
        if event not in ("call", "return") or self.rec.phase != "forward":
            return
        forward = frame.f_code in self.codes
        if not forward and (event == "call" or not self._helper(frame.f_code)):
            return
        storages = self.rec.storages
        if event == "call":
            # The arguments: nn.Module's call holds them (its *args) until forward returns, even
            # when forward rebinds the name (`x = x + self.attn(x)`). Allocation ids only: a
            # reference here would keep them alive.
            ids = [s.alloc.id for value in frame.f_locals.values() for t in self._tensors(value, None)
                   if (s := storages.get(id(storage_of(t)))) is not None]
            self._arguments[id(frame)] = ids
            self.inputs.update(ids)
            return
        arguments = self._arguments.pop(id(frame), [])
        kernel = len(self.rec.kernels)
        if kernel == 0:
            return
        if forward:
            self._watch_returned(arg)
        returned = {id(storage_of(v)) for v in self._tensors(arg, None)}
        returned_ids = {storages[k].alloc.id for k in returned if k in storages}
        held = []
        for value in frame.f_locals.values():
            for t in self._tensors(value, arg):
                key = id(storage_of(t))
                s = storages.get(key)
                if s is not None and key not in returned:
                    held.append(s.alloc.id)
        # The model's frames that called this one hold their locals past its return: NeRF's
        # `h = F.relu(layer(h))` keeps the old `h` until F.relu returns and the name is rebound (an
        # offloaded Linear's input freed after the matmul in the prediction, after the ReLU in the
        # step: reserved +10.08%).
        caller = frame.f_back
        while caller is not None:
            if caller.f_code in self.codes or self._helper(caller.f_code):
                for value in caller.f_locals.values():
                    for t in self._tensors(value, None):
                        s = storages.get(id(storage_of(t)))
                        if s is not None:
                            held.append(s.alloc.id)
            caller = caller.f_back
        for aid in held + [a for a in arguments if a not in returned_ids]:
            if self.held.get(aid, 0) < kernel:
                self.held[aid] = kernel

    def _watch_returned(self, value) -> None:
        """What a module's forward returns, its caller may keep past its last read: a discriminator's
        list of every layer's features (HiFi-GAN's, kept by the step's loop until the loss is
        summed), which a checkpoint of that module would otherwise free at once. The tensor
        objects die where the caller's code drops them (autograd holds a saved one through the
        capture's pack hook only as a detached alias), which is recorded as a hold."""
        for t in self._tensors(value, None):
            s = self.rec.storages.get(id(storage_of(t)))
            if s is None:
                continue
            aid = s.alloc.id

            def dropped(ref, aid=aid):
                self._returned.pop(id(ref), None)
                kernel = len(self.rec.kernels)
                if self.rec.phase == "forward" and kernel and self.held.get(aid, 0) < kernel:
                    self.held[aid] = kernel
            try:
                ref = weakref.ref(t, dropped)
            except TypeError:   # a tensor that takes no weak reference: not watched
                continue
            self._returned[id(ref)] = ref

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)
        return False

    def meta(self, saved_allocations) -> dict[str, str]:
        """The holds of the storages whose lifetime a setting changes: those autograd saves, and
        the inputs of modules, which a checkpoint of the module saves in their place (and an
        offload of its saved inputs moves to the host). An input that autograd did not save (an
        fp32 feature map that autocast copies to bf16 for the convolution that reads it) but the
        model's frame keeps: the offload of the checkpointed module's input was predicted to free
        it after its read, where the frame keeps it to the forward's end (stft_enhance.py: 7.86
        MiB, 2.55% of the peak, until 2026-12-07)."""
        kept = set(saved_allocations) | self.inputs
        rows = sorted([a, k] for a, k in self.held.items() if a in kept)
        return {"capture.frame_holds": json.dumps(rows, separators=(",", ":"))}
