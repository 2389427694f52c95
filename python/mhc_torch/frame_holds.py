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
kind after its first call, and it is installed only while the phase is the forward: outside it the
interpreter calls `slice` instead, a C callable that takes the same three arguments and runs no
Python (two thirds of a step's events are in its backward and optimizer). A profile function is
kept at every event, not removed, because until Python 3.13 the interpreter copies a frame's
variables into its f_locals dict at each of its events while one is set (and when code reads
f_locals, as this hook does), and that dict keeps the tensors it refers to until the next copy:
without a profile function a frame copied in the forward would keep a tensor it drops in the
backward until it returns. The capture records those frees where they happen. sys.settrace, which
is called only at a frame's start, is no cheaper: it has the interpreter work out the line of every
instruction.

The callers' frames are read once and the read kept until the model's code runs again (a Python
call from one of its frames, or the return of one: torch's dataclasses' `__init__`, which return
several times inside each op, are no model code), until an op swaps a storage (`set_`, `.data =`,
`resize_`) or a storage they held that the capture had not followed is followed, or until the phase
leaves the forward: until then no frame of the model's can change what it holds, only the kernel it
is held to moves. The reads are made with torch's function modes off (the capture's CudaInStep
would take every `untyped_storage()` call: 6 us each, against 1). MHC_FRAME_HOLDS_CHECK=1 reads
every kept frame again and stops on a difference.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import weakref

import torch

from . import store
from .errors import _machinery
from .frame_storages import StorageKeys, storage_of, tensors

# mhc_torch's own mHC model (mhc-27b, tiny-mhc) is a model's code, not machinery: its sinkhorn()
# holds its argument, the logits, until it returns
_MHC_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mhc_model.py")
# a code's kind (0: none of these). _QUIET: torch's or the standard library's code compiled from a
# string (a dataclass's generated __init__, which torch's fake tensors run several times an op): its
# returns are read as a helper's, but it changes nothing the model's frames hold
_HELPER, _FORWARD, _QUIET = 1, 2, 3


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
    def __init__(self, rec, model: torch.nn.Module, keep_reads: bool = True):
        """keep_reads: callers' frames read once until the model's code runs again; only where
        every storage swap reaches the capture (`.data =` through CudaInStep: the CPU device)."""
        self.rec = rec
        self.keep_reads = keep_reads
        self.check = os.environ.get("MHC_FRAME_HOLDS_CHECK") == "1"
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
        # id(frame) -> [allocation ids, keys the capture did not follow then, last kernel held to, ids
        # of the values read there]: the model's callers' frames read since the model's code last ran
        self._read: dict[int, list] = {}
        self._read_values: set[int] = set()   # the ids of the values read in _read's frames
        self._remaps = 0   # rec.remaps when _read was last found true
        self._profile = None
        self._thread = None
        self._c_calls: list[tuple[int, int]] = []   # allocations and kernels made when each C call running began

    def _kind(self, frame) -> int:
        """_FORWARD for a module's forward, _HELPER for the model's other Python, _QUIET for code
        compiled from a string in a module of torch or the standard library, 0 for the rest: of
        frame's code."""
        code = frame.f_code
        kind = self._kinds.get(id(code))
        if kind is None:
            kind = _FORWARD if code in self.codes else _HELPER if _helper(code) else 0
            if kind == _HELPER and code.co_filename.startswith("<"):
                module = frame.f_globals.get("__file__")
                if isinstance(module, str) and _machinery(module):
                    kind = _QUIET
            self._kinds[id(code)] = kind
            self._kept_codes.append(code)
        return kind

    def _hook(self):
        """sys.setprofile's function while the phase is the forward: a module's forward starts (its
        arguments), a forward or a helper of the model returns. A Python call from the model's
        code, or its return, ends the callers' reads kept: a frame of the model's can change what
        it and its callers hold between its events (a store into a list is none), and no frame
        below it can return before one of them (a frame that C code calls has the frame
        running as its caller: its call is one)."""
        kinds, kind_of, read = self._kinds, self._kind, self._read
        called, returning, forget, returned_frame = self._called, self._returning, self._forget_reads, self._returned_frame
        c_call = self._c_call
        no_torch_function = torch._C.DisableTorchFunction

        def profile(frame, event, arg):
            if event == "c_call" or event == "c_return" or event == "c_exception":
                kind = kinds.get(id(frame.f_code))
                if kind is None:
                    kind = kind_of(frame)
                if kind == _HELPER or kind == _FORWARD:
                    c_call(event == "c_call")
            elif event == "return":
                kind = kinds.get(id(frame.f_code))
                if kind is None:
                    kind = kind_of(frame)
                if kind:
                    if read:
                        if kind == _QUIET:
                            returned_frame(frame)
                        else:   # it may have changed what its callers hold (`held[i] = x`, no event)
                            forget()
                    with no_torch_function():
                        returning(frame, arg, kind == _FORWARD)
            elif event == "call":
                kind = kinds.get(id(frame.f_code))
                if kind is None:
                    kind = kind_of(frame)
                if kind == _FORWARD:
                    with no_torch_function():
                        called(frame)
                if read:
                    back = frame.f_back
                    if back is not None:
                        kind = kinds.get(id(back.f_code))
                        if kind is None:
                            kind = kind_of(back)
                        if kind == _HELPER or kind == _FORWARD:
                            forget()
        return profile

    def _c_call(self, starts: bool) -> None:
        """A C function the model's code (or torch's functional Python) calls starts or returns. A
        composite op of ATen's runs several kernels and holds what it made in C++ until the op that
        takes it as an argument returns: F.cross_entropy's log_softmax output, which under autocast
        nll_loss reads through a cast, lives until nll_loss is done, not until the cast (a storage
        saved by log_softmax and offloaded died one kernel early in the prediction). So what the
        call made is held until the last of its kernels that reads it or a cast of it (autocast's
        cast is inside the op it casts for); not to the call's end: F.linear's matmul frees its
        contiguous copy of a transposed input before linear adds the bias (nn.MultiheadAttention's
        in-projection, batch_first). A call of one kernel holds nothing past it."""
        rec = self.rec
        if starts:
            self._c_calls.append((len(rec.allocs), len(rec.kernels)))
            return
        first, first_kernel = self._c_calls.pop() if self._c_calls else (len(rec.allocs), len(rec.kernels))
        if len(rec.kernels) > first_kernel + 1 and len(rec.allocs) > first:
            for aid, kernel in self._last_reads(first, rec.kernels[first_kernel:]).items():
                self._hold((aid,), kernel)

    @staticmethod
    def _last_reads(first: int, kernels) -> dict[int, int]:
        """For each allocation above id `first` that `kernels` read: the last of them that reads it
        or a cast of it (an `aten::_to_copy` that reads it and writes a new allocation)."""
        last: dict[int, int] = {}
        source: dict[int, int] = {}   # a cast's output -> the allocation it was cast from
        for k in kernels:
            reads = [a for a, mode in k.accesses.items() if a > first and mode & store.READ]
            if k.name == "aten::_to_copy" and len(reads) == 1:
                for a, mode in k.accesses.items():
                    if a > first and mode == store.WRITE:
                        source[a] = reads[0]
            for a in reads:
                while a is not None:
                    last[a] = k.id
                    a = source.get(a)
        return last

    def _phase_set(self, phase: str) -> None:
        """The recording's phase changed: the hook in the forward, `slice` (no Python, the same
        f_locals copies) elsewhere. Only the capture's thread, the one whose profile it is."""
        if threading.get_ident() != self._thread:
            return
        if phase == "forward":
            sys.setprofile(self._profile)
        else:
            self._c_calls.clear()   # their returns are not seen outside the forward
            self._forget_reads()
            sys.setprofile(slice)

    def _forget_reads(self) -> None:
        """The kept reads' holds into `held`, each up to the last kernel it was seen at."""
        for ids, _, kernel, _ in self._read.values():
            self._hold(ids, kernel)
        self._read.clear()
        self._read_values.clear()

    def _returned_frame(self, frame) -> None:
        """A _QUIET frame returns: its kept read ends (its id can be another frame's)."""
        entry = self._read.pop(id(frame), None)
        if entry is not None:
            self._hold(entry[0], entry[2])
            self._read_values.difference_update(entry[3])

    def _hold(self, ids, kernel: int) -> None:
        current = self.held
        for aid in ids:
            if current.get(aid, 0) < kernel:
                current[aid] = kernel

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
        self._hold(held + [a for a in arguments if a not in returned_ids], kernel)
        self._callers_hold(frame.f_back, kernel)

    def _callers_hold(self, caller, kernel: int) -> None:
        """The model's frames from `caller` up hold what they refer to until `kernel` at least.
        They hold their locals past the return of the frames they called: NeRF's `h =
        F.relu(layer(h))` keeps the old `h` until F.relu returns and the name is rebound (an
        offloaded Linear's input freed after the matmul in the prediction, after the ReLU in the
        step: reserved +10.08%). Every such frame's f_locals is read (which keeps what it holds
        until its next event, as the capture records), or its read kept (module docstring). They
        are read from the outermost in: a value several hold (a module's input passed down) is
        read in the outermost only, which returns after the others."""
        kinds, kind_of, read = self._kinds, self._kind, self._read
        frames = []
        while caller is not None:
            kind = kinds.get(id(caller.f_code))
            if kind is None:
                kind = kind_of(caller)
            if kind:
                frames.append(caller)
            caller = caller.f_back
        if not self._reads_still_true(frames):
            self._forget_reads()
        keep = self.keep_reads and not self.rec.swapping
        for frame in reversed(frames):
            entry = read.get(id(frame))
            if entry is not None:
                entry[2] = kernel
                continue
            values: list[int] = []
            ids, untracked = self._frame_allocations(frame, self._read_values, values)
            if keep:
                read[id(frame)] = [ids, untracked, kernel, values]
            else:
                self._hold(ids, kernel)
        if not keep:
            self._read_values.clear()
        elif self.check:
            self._check_kept(frames)

    def _reads_still_true(self, frames) -> bool:
        """The kept reads of these frames are what reading them again would give: no storage
        swapped since (rec.remaps), none they held that the capture did not follow is followed."""
        if self.rec.swapping:   # inside set_ or `.data =`: the storage may be swapped at any return
            return not self._read
        if self.rec.remaps != self._remaps:
            self._remaps = self.rec.remaps
            return not self._read
        storages = self.rec.storages
        for frame in frames:
            entry = self._read.get(id(frame))
            if entry is not None and entry[1] and any(k in storages for k in entry[1]):
                return False
        return True

    def _frame_allocations(self, frame, seen: set, added: list) -> tuple[list[int], list[int]]:
        """The allocation ids of what `frame`'s variables refer to (values whose id is in `seen`
        aside), and the storage keys among them the capture does not follow (yet)."""
        keys: list[int] = []
        self._keys.add_values(frame.f_locals.values(), None, keys, seen, added)
        storages = self.rec.storages
        ids, untracked = [], []
        for k in keys:
            s = storages.get(k)
            if s is None:
                untracked.append(k)
            else:
                ids.append(s.alloc.id)
        return ids, untracked

    def _check_kept(self, frames) -> None:
        """MHC_FRAME_HOLDS_CHECK=1: the kept reads of these frames are what reading them all again
        gives."""
        kept, again = set(), set()
        for frame in frames:
            kept.update(self._read[id(frame)][0])
            again.update(self._frame_allocations(frame, set(), [])[0])
        if kept != again:
            top = frames[0].f_code
            raise AssertionError(f"frame holds: the kept reads above {top.co_name} ({top.co_filename}) "
                                 f"hold {sorted(kept)}, read again {sorted(again)}")

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
        self._thread = threading.get_ident()
        self._profile = self._hook()
        self.rec.on_phase = self._phase_set
        self._phase_set(self.rec.phase)
        return self

    def __exit__(self, *exc):
        self.rec.on_phase = None
        sys.setprofile(self._previous)
        self._forget_reads()
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
