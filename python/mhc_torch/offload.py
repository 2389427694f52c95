"""Offloading the storages autograd saves for the backward to (pinned) host memory.

One saved-tensor hook pair (torch.autograd.graph.saved_tensors_hooks) over the named modules'
forward, in two modes:
- sync: the semantics of torch.autograd.graph.save_on_cpu(pin_memory=True), by storage: a saved
  tensor's storage is copied to host memory when it is saved (on the compute stream); autograd
  keeps no reference to the device storage.
- streamed: the semantics of torchtune's OffloadActivations(use_streams=True): the copy to the host
  runs on a copy stream beside the compute stream, so the device storage is kept alive (stashed)
  until a save that is offloaded comes `max_fwd_stash` or more saves after it (saves are counted
  over every save the hooks see, offloaded or not, but only an offloaded one lets go of the stash,
  as torchtune's pack_tensor does) or the backward starts; in the backward, unpacking save number i also copies
  back the storages of saves i-1 .. i-prefetch (the ones the backward needs next), ahead of use.

Which saves are offloaded: those of a storage on the model's device, of at least min_bytes
(storage bytes), that is not a parameter's or buffer's storage. The first such save of a storage
copies the whole storage to the host once; later saves of it share that copy. In the backward the
first unpack of a storage (or a prefetch) makes one device copy of it, which every unpack of that
storage gets; the host copy is dropped then, and the device copy is held until the storage's last
save is unpacked (then the backward's ops alone hold it). A storage that is still alive on the
device when the backward unpacks it (another save outside these hooks whose node has not run yet
kept it) is used as it is, without a copy; one that such a save held only until its node ran (the
caller's mul of a module's output: its node runs first) is gone by then and comes back. Without CUDA streams (CPU tensors, fake
tensors in a capture) the same storages are kept and dropped at the same points; only the waits
are no-ops, so a capture measures the memory a GPU would hold. A saved view counts as alive while
its base tensor is: the batch's labels, saved as `labels.flatten()` by a loss inside the forward,
are still on the device when the backward unpacks them (the program holds the batch), though the
view itself is gone.
"""
from __future__ import annotations

import collections
import contextlib
import sys
import weakref

import torch
import torch.utils.checkpoint
from torch.multiprocessing.reductions import StorageWeakRef

from . import placement


class _Stored:
    """One offloaded device storage: its host copy, then its device copy in the backward."""

    __slots__ = ("host", "nbytes", "source", "storage", "tensors", "producer", "device_copy", "ready", "pending",
                 "__weakref__")

    def __init__(self, host: torch.Tensor, nbytes: int, t: torch.Tensor):
        self.host: torch.Tensor | None = host  # uint8, the whole storage
        self.nbytes = nbytes
        self.source = weakref.ref(t.untyped_storage())  # a later storage at the same place is another one
        # the storage itself, weakly (the Python object above dies while autograd still holds it)
        self.storage = StorageWeakRef(t.untyped_storage())
        self.tensors: list[weakref.ref] = []  # the tensors saved on it: while one lives, so does it
        # the node that made it and saved it as its output outside these hooks (relu, tanh,
        # softmax): autograd keeps that output's data, not the tensor, so none of `tensors` may
        # live while the storage does (no cycle: the node is upstream of the saves that hold this)
        self.producer = None
        self.device_copy: torch.Tensor | None = None
        self.ready = None  # the copy stream's event after the device copy (CUDA only)
        self.pending = 0  # saves of it not unpacked yet

    def live_tensor(self) -> torch.Tensor | None:
        """A tensor on the device storage if one that was saved is still alive, or the output its
        producer saved, while that node keeps it."""
        for ref in self.tensors:
            t = ref()
            if t is not None:
                return t
        if self.producer is not None and self.storage.expired():
            self.producer = None   # its node let go of it (reading it would unpack what a checkpoint packed)
        if self.producer is not None:
            try:
                kept = self.producer._saved_result
            except RuntimeError:   # its backward ran: released
                kept = None
            if isinstance(kept, torch.Tensor) and kept.untyped_storage() is self.source():
                return kept
            self.producer = None
        return None


def _saved_as_its_output(t: torch.Tensor):
    """t's node if it saved t as its output (`_saved_result`) and t is not being saved as the output
    of the op that just ran (then its node would hold what holds it), else None."""
    node = t.grad_fn
    if node is None or (node._sequence_nr() == torch._C._autograd._get_sequence_nr() - 1
                        and not _packing_checkpoint_inputs()):
        return None
    return node if "_saved_result" in dir(node) else None


_SAVE_INPUTS = getattr(getattr(torch.utils.checkpoint, "_CheckpointFrame", None), "save_inputs", None)


def _packing_checkpoint_inputs() -> bool:
    """Whether this pack is torch.utils.checkpoint saving a call's inputs (`_CheckpointFrame.save_inputs`,
    which makes no node): then the node made last (the stem's ReLU before a checkpointed block) is
    not saving its own output, and it holds the input until its backward; taken for that save, the
    hook copied the input back at the recomputation although the ReLU still held it."""
    code = getattr(_SAVE_INPUTS, "__code__", None)
    frame = sys._getframe(2)   # above this and _saved_as_its_output: _pack, then autograd's caller
    for _ in range(4):
        if frame is None or code is None:
            return False
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


class _Saved:
    """What autograd keeps for one offloaded save: the storage and how the tensor views it."""

    __slots__ = ("index", "stored", "dtype", "offset", "size", "stride", "unpacked", "__weakref__")

    def __init__(self, index: int, stored: _Stored, t: torch.Tensor):
        self.index, self.stored = index, stored
        self.dtype, self.offset, self.size, self.stride = t.dtype, t.storage_offset(), t.size(), t.stride()
        self.unpacked = False


def _whole_storage(t: torch.Tensor) -> torch.Tensor:
    """t's storage as one flat uint8 tensor (a view: Tensor.set_ would keep a fake storage alive)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0).view(torch.uint8)


class SavedTensorOffload:
    """Offloads what autograd saves inside `with self.hooks():` (see the module's docstring)."""

    def __init__(self, model: torch.nn.Module, mode: str, min_bytes: int, max_fwd_stash: int, prefetch: int):
        self.streamed = mode == "streamed"
        self.min_bytes, self.max_fwd_stash, self.prefetch = min_bytes, max_fwd_stash, prefetch
        self._model = weakref.ref(model)
        self._device: torch.device | None = None
        self._fixed: set[int] = set()  # ids of the parameters' and buffers' storages
        self._fixed_refs: list = []
        self._stored: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id(storage) -> _Stored
        self._saves: dict[int, weakref.ref] = {}  # save number -> its _Saved, this forward's
        self._stash: collections.deque = collections.deque()  # (save number, device tensor, event)
        self._count = 0
        self._in_backward = True  # the next save starts a forward
        self._copy_stream = None
        self._fsdp2: list = []

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    # Forward ----------------------------------------------------------------------------------
    def _begin_forward(self) -> None:
        self._in_backward = False
        self._count = 0
        self._saves = {}
        model = self._model()
        fixed = list(model.parameters()) + list(model.buffers()) if model is not None else []
        self._device = fixed[0].device if fixed else torch.device("cpu")
        self._fixed_refs = [t.untyped_storage() for t in fixed]  # held for this forward: ids stay theirs
        self._fixed = {id(st) for st in self._fixed_refs}
        from .data_parallel import find

        self._fsdp2 = find(model)[1] if model is not None else []   # FSDP2's modules (fully_shard)

    def _eligible(self, t: torch.Tensor) -> bool:
        st = t.untyped_storage()
        return (t.device == self._device and st.nbytes() >= self.min_bytes and id(st) not in self._fixed
                and st.nbytes() % t.element_size() == 0 and not self._unsharded_parameter(st))

    def _unsharded_parameter(self, st) -> bool:
        """FSDP2 swaps a group's unsharded parameters into the module before its forward (they are
        not the model's parameters when the forward begins): a parameter all the same, not offloaded."""
        if not self._fsdp2:
            return False
        from .data_parallel import unsharded_storages

        return any(s._cdata == st._cdata for s in unsharded_storages(self._fsdp2))

    def _pack(self, t: torch.Tensor):
        placement.note_saved(t)
        if self._in_backward:
            self._begin_forward()
        index = self._count
        self._count += 1
        if not self._eligible(t):
            return t
        # torchtune's rule: the stash is let go of only when a save is offloaded (one kept as it
        # is, a parameter or a small tensor, still counts toward max_fwd_stash but releases nothing)
        self._release_stash(keep_after=index - self.max_fwd_stash)
        st = t.untyped_storage()
        stored = self._stored.get(id(st))
        if stored is None or stored.source() is not st or stored.host is None:
            stored = self._to_host(t, index)
            stored.producer = _saved_as_its_output(t)
            self._stored[id(st)] = stored
        saved = _Saved(index, stored, t)
        stored.pending += 1
        stored.tensors.append(weakref.ref(t))
        if t._base is not None:
            # a view's base holds the storage too, and the program may keep the base where the view
            # dies (a loss's `labels.flatten()` of the batch): the storage is then still there
            stored.tensors.append(weakref.ref(t._base))
        self._saves[index] = weakref.ref(saved)
        return saved

    def _to_host(self, t: torch.Tensor, index: int) -> _Stored:
        src = _whole_storage(t.detach())
        host = placement.host_empty_like(src, placement.ACTIVATION)
        with torch.no_grad(), self._copy_context(src):
            host.copy_(src, non_blocking=src.is_cuda)
            event = self._record_event(src)
        if self.streamed:
            self._stash.append((index, src, event))
        return _Stored(host, src.numel(), t)

    def _release_stash(self, keep_after: int) -> None:
        """Waits for and drops the stashed device storages saved at or before `keep_after`."""
        while self._stash and self._stash[0][0] <= keep_after:
            _, src, event = self._stash.popleft()
            if event is not None:
                torch.cuda.current_stream(src.device).wait_event(event)

    # Backward ---------------------------------------------------------------------------------
    def _unpack(self, saved):
        if not isinstance(saved, _Saved):
            return saved
        if not self._in_backward:
            self._in_backward = True
            self._release_stash(keep_after=self._count)
        stored = saved.stored
        live = self._still_on_device(stored, saved)
        if live is not None:
            return live
        if stored.device_copy is None:
            self._to_device(stored)
        dev = stored.device_copy
        if stored.ready is not None:
            torch.cuda.current_stream(dev.device).wait_event(stored.ready)
            stored.ready = None
        if not saved.unpacked:
            saved.unpacked = True
            stored.pending -= 1
            if stored.pending == 0:
                stored.device_copy = None  # the backward's ops hold it from here
        out = dev.view(saved.dtype).as_strided(saved.size, saved.stride, saved.offset)
        for j in range(saved.index - 1, saved.index - 1 - self.prefetch, -1):
            ahead = self._saves.get(j)
            ahead = ahead() if ahead is not None else None
            if (ahead is not None and not ahead.unpacked and ahead.stored.device_copy is None
                    and ahead.stored.host is not None and ahead.stored.live_tensor() is None):
                self._to_device(ahead.stored)
        return out

    def _still_on_device(self, stored: _Stored, saved: _Saved) -> torch.Tensor | None:
        """The saved view of the device storage itself, when something else (a save outside these
        hooks, the program) has kept it alive: no copy is needed, and the host copy is dropped."""
        t = stored.live_tensor()
        if t is None or stored.device_copy is not None or stored.source() is None:
            return None
        stored.host = None
        if not saved.unpacked:
            saved.unpacked = True
            stored.pending -= 1
        return _whole_storage(t.detach()).view(saved.dtype).as_strided(saved.size, saved.stride, saved.offset)

    def _to_device(self, stored: _Stored) -> None:
        if stored.host is None:
            raise RuntimeError("an offloaded saved tensor was unpacked again after its storage was "
                               "released (backward twice through one graph: retain_graph is not supported with offload)")
        host, stored.host = stored.host, None
        dev = torch.empty(stored.nbytes, dtype=torch.uint8, device=self._device)  # on the compute stream
        with torch.no_grad(), self._copy_context(dev):
            dev.copy_(host, non_blocking=host.is_pinned())
            stored.ready = self._record_event(dev)
        if stored.ready is not None:  # a prefetch whose unpack never comes must not free it mid-copy
            dev.record_stream(self._copy_stream)
        stored.device_copy = dev

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

