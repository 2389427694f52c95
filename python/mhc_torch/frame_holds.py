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

The hook is called at every event of every frame (26 million in a capture of diffusers' UNet with
an EMA of its weights), so it returns at once outside the model's frames, knowing each code object's
kind after its first call. sys.settrace, which is called only at a frame's start, is no cheaper: it
has the interpreter work out the line of every instruction it runs. And a profile function is kept
at every event for another reason: until Python 3.13, the interpreter copies a frame's variables
into its f_locals dict before each call of one, once code has read that frame's f_locals (as this
hook does), and that dict keeps the tensors it refers to until the next copy; the capture records
those frees where they happen.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
import weakref

import torch

from .errors import _machinery
from .frame_storages import StorageKeys, storage_of, tensors

# mhc_torch's own mHC model (mhc-27b, tiny-mhc) is a model's code, not machinery: its sinkhorn()
# holds its argument, the logits, until it returns
_MHC_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mhc_model.py")
_HELPER, _FORWARD = 1, 2   # a code's kind (0: neither)


def _functional(filename: str) -> bool:
    """torch's functional Python (torch/nn/functional.py, torch/functional.py): its frames hold their
    locals until they return as the model's helpers do. F.multi_head_attention_forward keeps q, k
    and v, views of the packed in-projection, until it returns (after the attention weights'
    mean): nn.MultiheadAttention checkpointed frees that projection only then."""
    path = filename.replace("\\", "/")
    return path.endswith(("/torch/nn/functional.py", "/torch/functional.py"))


def _helper(code) -> bool:
    """A function of the model's own Python (not torch's, mhc_torch's or the standard library's).
    mhc_torch's own mHC model (mhc_model.py) is a model's code. Code compiled from a string (`exec`
    of a model's text, a notebook cell, generated code: `<string>`, `<ipython-input-3-1b2c>`) is the
    model's; frozen modules (`<frozen importlib._bootstrap>`) are not."""
    name = code.co_filename
    if name.startswith("<"):
        return not name.startswith("<frozen")
    return not _machinery(name) or os.path.abspath(name) == _MHC_MODEL or _functional(name)


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
        # id(code) -> its kind; the codes are kept, so an id is not another code's (hashing a code
        # object hashes its constants, names and bytecode: 0.3 us, a call)
        self._kinds: dict[int, int] = {}
        self._kept_codes: list = []
        self._keys = StorageKeys()
        self.held: dict[int, int] = {}   # allocation id -> kernel id
        self._arguments: dict[int, list[int]] = {}   # id(frame) -> its tensor arguments' allocation ids
        self.inputs: set[int] = set()   # allocation ids a module's forward was called with
        self._previous = None
        self._returned: dict[int, weakref.ref] = {}   # a forward's returned tensors, until the caller drops them

    def _kind(self, code) -> int:
        """_FORWARD for a module's forward, _HELPER for the model's other Python, 0 for the rest."""
        kind = self._kinds.get(id(code))
        if kind is None:
            kind = self._kinds[id(code)] = _FORWARD if code in self.codes else _HELPER if _helper(code) else 0
            self._kept_codes.append(code)
        return kind

    def _hook(self):
        """sys.setprofile's function: a module's forward starts (its arguments), a forward or a
        helper of the model returns, in the forward phase."""
        rec, kinds, kind_of = self.rec, self._kinds, self._kind
        called, returning = self._called, self._returning

        def profile(frame, event, arg):
            if event == "return":
                if rec.phase == "forward":
                    code = frame.f_code
                    kind = kinds.get(id(code))
                    if kind is None:
                        kind = kind_of(code)
                    if kind:
                        returning(frame, arg, kind == _FORWARD)
            elif event == "call" and rec.phase == "forward":
                code = frame.f_code
                kind = kinds.get(id(code))
                if kind is None:
                    kind = kind_of(code)
                if kind == _FORWARD:
                    called(frame)
        return profile

    def _allocations(self, values, skip) -> list[int]:
        """The allocation ids of the recorded storages that `values` refer to (skip aside)."""
        keys: list[int] = []
        self._keys.add_values(values, skip, keys)
        storages = self.rec.storages
        return [s.alloc.id for k in keys if (s := storages.get(k)) is not None]

    def _called(self, frame) -> None:
        """A module's forward starts: the arguments. nn.Module's call holds them (its *args) until
        forward returns, even when forward rebinds the name (`x = x + self.attn(x)`). Allocation ids
        only: a reference here would keep them alive."""
        ids = self._allocations(frame.f_locals.values(), None)
        self._arguments[id(frame)] = ids
        self.inputs.update(ids)

    def _returning(self, frame, arg, forward: bool) -> None:
        """A forward or a helper of the model returns `arg` in the forward phase: what its frame and
        the model's frames that called it hold is held until the last kernel so far."""
        storages = self.rec.storages
        arguments = self._arguments.pop(id(frame), [])
        kernel = len(self.rec.kernels)
        if kernel == 0:
            return
        if forward:
            self._watch_returned(arg)
        returned = {id(storage_of(v)) for v in tensors(arg, None)}
        returned_ids = {storages[k].alloc.id for k in returned if k in storages}
        keys: list[int] = []
        self._keys.add_values(frame.f_locals.values(), arg, keys)
        held = [s.alloc.id for k in keys if k not in returned and (s := storages.get(k)) is not None]
        held += self._callers_hold(frame.f_back)
        current = self.held
        for aid in held + [a for a in arguments if a not in returned_ids]:
            if current.get(aid, 0) < kernel:
                current[aid] = kernel

    def _callers_hold(self, caller) -> list[int]:
        """The allocation ids that the model's frames from `caller` up hold. They hold their locals
        past the return of the frames they called: NeRF's `h = F.relu(layer(h))` keeps the old `h`
        until F.relu returns and the name is rebound (an offloaded Linear's input freed after the
        matmul in the prediction, after the ReLU in the step: reserved +10.08%). Every such frame's
        f_locals is read (which keeps what it holds until its next event, as the capture records);
        a value two of them hold (a module's input passed down) is read once."""
        kinds, kind_of, add = self._kinds, self._kind, self._keys.add_values
        keys: list[int] = []
        seen: set[int] = set()
        while caller is not None:
            code = caller.f_code
            kind = kinds.get(id(code))
            if kind is None:
                kind = kind_of(code)
            if kind:
                add(caller.f_locals.values(), None, keys, seen)
            caller = caller.f_back
        storages = self.rec.storages
        return [s.alloc.id for k in keys if (s := storages.get(k)) is not None]

    def _watch_returned(self, value) -> None:
        """What a module's forward returns, its caller may keep past its last read: a discriminator's
        list of every layer's features (HiFi-GAN's, kept by the step's loop until the loss is
        summed), which a checkpoint of that module would otherwise free at once. The tensor
        objects die where the caller's code drops them (autograd holds a saved one through the
        capture's pack hook only as a detached alias), which is recorded as a hold."""
        for t in tensors(value, None):
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
        sys.setprofile(self._hook())
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
