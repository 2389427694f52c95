"""Where memory lives when a setting moves it off the GPU, told to whoever records it.

On a GPU, a tensor's device says where it is. A capture runs on fake CPU tensors (the autograd
engine refuses fake CUDA tensors without a GPU), where "device" and "host" tensors are the same
kind, so the code that moves memory to the host (offloaded activations, optimizer state on the
host) says so here, and a capture reading this records those storages as host memory (device
-1). Training code pays a dictionary entry per host buffer and a thread-local lookup per region.
"""
from __future__ import annotations

import contextlib
import threading
import weakref

import torch

# What a host storage holds; a capture maps it to the trace's category.
ACTIVATION, OPTIMIZER, GRAD, PARAM, WORKSPACE = "activation", "optimizer", "grad", "param", "workspace"

_local = threading.local()
_host: dict[int, tuple[weakref.ref, str]] = {}  # id(untyped storage) -> (the storage, what)
_listeners: list = []  # objects with on_saved(tensor) and on_module(module, entering)


def host_empty_like(t: torch.Tensor, what: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An uninitialised host tensor shaped like t holding `what` (pinned when t is on a GPU)."""
    with on_host(what):
        h = torch.empty_like(t, dtype=dtype, device="cpu", pin_memory=t.is_cuda)
    mark_host(h, what)
    return h


def mark_host(t: torch.Tensor, what: str) -> None:
    """t's storage is (pinned) host memory holding `what` (for a capture that sees it later)."""
    st = t.untyped_storage()
    key = id(st)
    _host[key] = (weakref.ref(st, lambda _, k=key: _host.pop(k, None)), what)


def host_kind(t: torch.Tensor) -> str | None:
    """What t's storage holds if mark_host said it is host memory, else None."""
    return storage_host_kind(t.untyped_storage())


def storage_host_kind(st) -> str | None:
    """What an untyped storage holds if mark_host said it is host memory, else None."""
    entry = _host.get(id(st))
    return entry[1] if entry is not None and entry[0]() is st else None


@contextlib.contextmanager
def on_host(what: str):
    """Ops inside run on the CPU on host tensors, and the tensors they make are host memory
    holding `what`: a capture records those storages as host memory and the ops as host work,
    not GPU kernels."""
    stack = _local.__dict__.setdefault("host", [])
    stack.append(what)
    try:
        yield
    finally:
        stack.pop()


def host_region() -> str | None:
    """`what` of the innermost on_host region the current thread is in, else None."""
    stack = _local.__dict__.get("host")
    return stack[-1] if stack else None


@contextlib.contextmanager
def side_stream():
    """Copies inside run on a copy stream beside the compute stream (a capture's stream 1)."""
    _local.side = getattr(_local, "side", 0) + 1
    try:
        yield
    finally:
        _local.side -= 1


def side_stream_active() -> bool:
    return getattr(_local, "side", 0) > 0


def note_saved(t: torch.Tensor) -> None:
    """Autograd saves t for the backward. Saved-tensor hooks that take the place of a capture's
    own (an offload's) report the tensors they receive here, so that the capture still sees them."""
    for obj in _listeners:
        obj.on_saved(t)


@contextlib.contextmanager
def in_module(module: torch.nn.Module):
    """Code inside is `module`'s, though not called through the module: the part of a forward
    that checkpointing runs again in the backward."""
    for obj in _listeners:
        obj.on_module(module, True)
    try:
        yield
    finally:
        for obj in _listeners:
            obj.on_module(module, False)


def listened() -> bool:
    """Whether a capture listens (settings skip work only a capture needs when none does)."""
    return bool(_listeners)


@contextlib.contextmanager
def listening(obj):
    """Calls obj.on_saved(tensor) for each note_saved and obj.on_module(module, entering) around
    each in_module while inside."""
    _listeners.append(obj)
    try:
        yield
    finally:
        _listeners.remove(obj)
