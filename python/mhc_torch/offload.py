"""Offloading the tensors autograd saves for the backward to (pinned) host memory.

Two modes, one saved-tensor hook pair (torch.autograd.graph.saved_tensors_hooks):
- sync: the semantics of torch.autograd.graph.save_on_cpu(pin_memory=True): each saved tensor is
  copied to host memory when it is saved (on the compute stream) and copied back to a new device
  tensor when the backward unpacks it.
- streamed: the semantics of torchtune's OffloadActivations (use_streams=True): the device-to-host
  copy runs on a copy stream beside the compute stream, and the device tensor is kept (stashed)
  until its copy is known complete. The stash is bounded: before a new copy starts, the oldest
  stashed tensors are waited for and released until the stash and the new tensor fit in
  max_stash_bytes (the newest one always stays). The backward's first unpack releases the whole
  stash. In the backward, each unpack also starts copying back the tensors saved just before it
  (the next ones the backward needs, in reverse order of saving), as many as fit in
  max_stash_bytes (at least one): a prefetch, so that the copy overlaps the compute.

Both modes leave parameters (leaf tensors that require grad, and views of them: still on the
device, nothing to gain), tensors smaller than min_bytes and tensors on another device than the
model's where they are. A storage saved twice (one op's output saved again as the next op's input)
is copied to the host once. Memory behaviour is the same without streams (CPU tensors, fake
tensors): the same tensors are kept and released at the same points; only the waits are no-ops.
"""
from __future__ import annotations

import collections
import contextlib
import weakref

import torch

from . import placement


class _HostCopy:
    """One storage's bytes in host memory; while its device-to-host copy may still run, the
    device tensor it came from stays referenced in the forward stash."""

    __slots__ = ("host", "nbytes", "source", "__weakref__")

    def __init__(self, host: torch.Tensor, nbytes: int, source: torch.UntypedStorage):
        self.host, self.nbytes = host, nbytes
        self.source = weakref.ref(source)  # a later storage at the same address is another one


class _Saved:
    """What autograd keeps for one offloaded saved tensor."""

    __slots__ = ("order", "copy", "device", "prefetched", "ready", "unpacked", "__weakref__")

    def __init__(self, order: int, copy: _HostCopy, device: torch.device):
        self.order, self.copy, self.device = order, copy, device
        self.prefetched: torch.Tensor | None = None  # a device copy made ahead of its unpack
        self.ready = None  # the copy stream's event after that copy (CUDA only)
        self.unpacked = False


def _is_param(t: torch.Tensor) -> bool:
    base = t._base if t._is_view() else t
    return base is not None and base.is_leaf and base.requires_grad


def _view_key(t: torch.Tensor) -> tuple:
    return (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t._version)


class SavedTensorOffload:
    """Offloads what autograd saves inside `with self.hooks():` (see the module's docstring)."""

    def __init__(self, mode: str, min_bytes: int, max_stash_bytes: int, device: torch.device):
        self.streamed = mode == "streamed"
        self.min_bytes, self.max_stash_bytes, self.device = min_bytes, max_stash_bytes, device
        self._stash: collections.OrderedDict[int, tuple[torch.Tensor, object, int]] = collections.OrderedDict()
        self._stash_bytes = 0
        self._copies: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # view key -> _HostCopy
        self._order: list[weakref.ref] = []  # the forward's _Saved, in the order they were saved
        self._cursor: int | None = None  # the next _order index the backward's prefetch looks at
        self._prefetched_bytes = 0
        self._in_backward = False
        self._copy_stream = None

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    # Forward ----------------------------------------------------------------------------------
    def _pack(self, t: torch.Tensor):
        placement.note_saved(t)
        nbytes = t.numel() * t.element_size()
        if nbytes < self.min_bytes or t.device != self.device or _is_param(t):
            return t
        if self._in_backward:  # a new forward: the last one's bookkeeping is done
            self._in_backward = False
            self._order, self._cursor, self._prefetched_bytes = [], None, 0
        key = _view_key(t)
        copy = self._copies.get(key)
        if copy is None or copy.source() is not t.untyped_storage():
            copy = self._to_host(t.detach(), nbytes)
            self._copies[key] = copy
        saved = _Saved(len(self._order), copy, t.device)
        self._order.append(weakref.ref(saved))
        return saved

    def _to_host(self, t: torch.Tensor, nbytes: int) -> _HostCopy:
        pin = t.is_cuda
        if self.streamed:
            self._release_stash(keep_bytes=max(self.max_stash_bytes - nbytes, 0))
        host = placement.host_empty_like(t, placement.ACTIVATION)
        copy = _HostCopy(host, nbytes, t.untyped_storage())
        with torch.no_grad(), self._copy_context(t):
            host.copy_(t, non_blocking=pin)
            event = self._record_event(t)
        if self.streamed:
            self._stash[id(copy)] = (t, event, nbytes)
            self._stash_bytes += nbytes
        return copy

    def _release_stash(self, keep_bytes: int) -> None:
        """Waits for and drops the oldest stashed device tensors until at most keep_bytes remain."""
        while self._stash and self._stash_bytes > keep_bytes:
            _, (t, event, nbytes) = self._stash.popitem(last=False)
            if event is not None:
                torch.cuda.current_stream(t.device).wait_event(event)
            self._stash_bytes -= nbytes

    # Backward ---------------------------------------------------------------------------------
    def _unpack(self, saved):
        if not isinstance(saved, _Saved):
            return saved
        if not self._in_backward:
            self._in_backward = True
            self._release_stash(keep_bytes=0)
        saved.unpacked = True
        if saved.prefetched is not None:
            out, saved.prefetched = saved.prefetched, None
            self._prefetched_bytes -= saved.copy.nbytes
        else:
            out = self._to_device(saved)
        if saved.ready is not None:
            torch.cuda.current_stream(out.device).wait_event(saved.ready)
            saved.ready = None
        if self.streamed:
            self._prefetch(before=saved.order)
        return out

    def _to_device(self, saved: _Saved) -> torch.Tensor:
        host = saved.copy.host
        out = torch.empty_like(host, device=saved.device)  # allocated on the compute stream
        with torch.no_grad(), self._copy_context(out):
            out.copy_(host, non_blocking=host.is_pinned())
            saved.ready = self._record_event(out) if self.streamed else None
        return out

    def _prefetch(self, before: int) -> None:
        """Copies back the tensors saved before `before`, newest first, within the stash bound."""
        self._cursor = before - 1 if self._cursor is None else min(self._cursor, before - 1)
        while self._cursor >= 0:
            saved = self._order[self._cursor]()
            if saved is not None and not saved.unpacked and saved.prefetched is None:
                if self._prefetched_bytes and self._prefetched_bytes + saved.copy.nbytes > self.max_stash_bytes:
                    return
                saved.prefetched = self._to_device(saved)
                self._prefetched_bytes += saved.copy.nbytes
            self._cursor -= 1

    # Streams ----------------------------------------------------------------------------------
    def _copy_context(self, t: torch.Tensor):
        """The copy stream for a streamed offload (after the compute stream's work so far)."""
        if not self.streamed:
            return contextlib.nullcontext()
        if not t.is_cuda:
            return placement.side_stream()
        if self._copy_stream is None:
            self._copy_stream = torch.cuda.Stream(t.device)
        self._copy_stream.wait_stream(torch.cuda.current_stream(t.device))
        return torch.cuda.stream(self._copy_stream)

    def _record_event(self, t: torch.Tensor):
        return self._copy_stream.record_event() if self.streamed and t.is_cuda else None
