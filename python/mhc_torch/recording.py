"""The trace a capture builds while the model runs: storages as allocations, ops as kernels timed
by the roofline (or measured kernel times), phases and layer markers on one clock (ns)."""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Callable

import torch

from . import autocast_cuda, inplace_backward, store, workspaces
from .capture_tables import HOST, SettingsRecording
from .flops import _flops_of
from .gpus import GpuSpec
from .kernel_times import KernelTimes, op_key
from .op_schema import _COPIES, _GPU_ALLOCATION_ORDER, _OPS, _Op, _dense_parts, _fake_outputs, _op, _split_arguments


def _graph_task_id() -> int:
    """The running backward's id, -1 outside the autograd engine."""
    return torch._C._current_graph_task_id()


@dataclass(eq=False)
class _Storage:
    alloc: store.Allocation
    phase: str  # forward, backward, optimizer, setup
    step: int
    alive_at_backward: bool = False
    refs: int = 1  # storages that stand for this allocation (inplace_backward folds two into one)


class Recording(SettingsRecording):
    """The trace being built: allocations, kernels and markers on one clock (ns)."""

    # called with the new phase whenever it is set (frame_holds.py installs its hook in the forward)
    on_phase: Callable[[str], None] | None = None

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, phase: str) -> None:
        self._phase = phase
        if self.on_phase is not None:
            self.on_phase(phase)

    def __init__(self, spec: GpuSpec, kernel_times: KernelTimes | None = None):
        self.spec = spec
        self.kernel_times = kernel_times
        self.t = 0
        self.allocs: list[store.Allocation] = []
        self.kernels: list[store.Kernel] = []
        self.markers: list[store.Marker] = []
        self.storages: dict[int, _Storage] = {}  # id(untyped storage) -> record, while alive
        self.records: list[_Storage] = []
        self.phase = "setup"
        self.step = -1
        # storages swapped under a tensor or a storage's allocation changed (set_, .data =,
        # resize_), counted, and those under way: what a frame's tensors stand for may have
        # changed (frame_holds.py)
        self.remaps = 0
        self.swapping = 0
        self.layer_of: Callable[[], int | None] = lambda: None
        self.kernel_layer: list[tuple[int | None, str]] = []
        self.live_bytes = 0
        self.peak_bytes = 0
        self.window_peak = 0  # since the step's last torch.cuda.reset_peak_memory_stats() (built_for_gpu.py)
        self.reserved_asked: list[str] = []  # torch.cuda.memory_reserved and such, called in a step (answered 0)
        self.in_engine = False  # an op of the autograd engine ran since the backward began
        # forward kernels of the steps by the autocast dtype they ran under (None: autocast off):
        # what the step did, which the recipe's dtype does not say for a step of the user's own
        self.forward_autocast: dict[torch.dtype | None, int] = {}
        self.graph_freeing_backwards: dict[int, int] = {}  # step -> backward calls that freed their graph
        self.workspaces = workspaces.Workspaces(spec)
        self.accumulations = inplace_backward.Accumulations()
        self.init_tables()
        self.fresh: dict[int, _Storage] = {}  # id(record) -> record a factory made in the backward, unused since
        self.watched: dict[weakref.ref, tuple[int, _Storage]] = {}  # storages whose end frees an allocation

    # Storages -------------------------------------------------------------------------------
    def track(self, t: torch.Tensor, category: int | None, label: str) -> _Storage | None:
        """The record of t's storage, created (allocated now) if new; None for empty storages. A
        sparse tensor's are its indices' and values' storages: the values' record is returned. A
        ZeroTensor (`aten._efficientzerotensor`: forward-mode AD's tangent of a tensor without one,
        the zero gradients of some backward formulas, and what multiplying by one gives) has none:
        its storage reports its size, but its allocator hands out no memory on any device. Nor has a
        tensor on the meta device (the C++ kernels of ZeroTensor's add and sub run the op once on
        meta copies of the operands, to learn the result's shape: no memory either)."""
        if t._is_zerotensor() or t.device.type == "meta":
            return None
        if t.layout == torch.sparse_coo:
            indices, values = _dense_parts(t)
            self._track_storage(indices.untyped_storage(), category, label)
            return self._track_storage(values.untyped_storage(), category, label)
        return self._track_storage(t.untyped_storage(), category, label)

    def _track_storage(self, st, category: int | None, label: str) -> _Storage | None:
        key = id(st)
        s = self.storages.get(key)
        if s is not None:
            return s
        nbytes = int(st.nbytes())
        if nbytes <= 0:
            return None
        a = store.Allocation(id=len(self.allocs) + 1, bytes=nbytes, t_alloc=self.t, t_free=None,
                             category=store.WORKSPACE if category is None else category, label=label)
        self.allocs.append(a)
        s = _Storage(a, self.phase, self.step)
        if category is not None:
            s.phase = "fixed"
        self.storages[key] = s
        self.records.append(s)
        host = self.host_category(st, new=category is None)
        if host is not None:
            self.to_host(a, host)
            s.phase = "fixed"
        else:
            self.live_bytes += nbytes
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes
            if self.live_bytes > self.window_peak:
                self.window_peak = self.live_bytes
        self._watch(st, key, s)
        return s

    def _watch(self, st, key: int, s: _Storage) -> None:
        """Frees `s` when the storage `st` dies (a weak reference's callback, the way MemTracker
        follows storages under fake tensors; weakref.finalize costs 30 times as much)."""
        self.watched[weakref.ref(st, self._storage_died)] = (key, s)

    def _storage_died(self, ref: weakref.ref) -> None:
        key, s = self.watched.pop(ref)
        self._freed(key, s)

    def _freed(self, key: int, s: _Storage) -> None:
        if self.storages.get(key) is s:
            del self.storages[key]
        if s.refs <= 0:
            return  # ended already (a storage resized to nothing, then dead)
        s.refs -= 1
        if s.refs > 0:
            return  # another storage still stands for this allocation
        self.fresh.pop(id(s), None)
        # what the capture itself drops after the last step (the model, its optimizer, the batch)
        # lives on in the training process: alive at the end, whichever reference cycles the
        # setting's hooks made (a checkpointed forward set on its module is one)
        if self.phase != "end":
            s.alloc.t_free = self.t
        if s.alloc.device == HOST:
            self.host_live -= s.alloc.bytes
        else:
            self.live_bytes -= s.alloc.bytes
        self.accumulations.on_free(self, s)

    @contextlib.contextmanager
    def storage_swap(self):
        """An op that swaps the storage under a tensor (`set_`, `.data =`) runs."""
        self.remaps += 1
        self.swapping += 1
        try:
            yield
        finally:
            self.swapping -= 1
            self.remaps += 1

    def resized(self, st, before: int, after: int) -> None:
        """`st.resize_()` changed a storage's bytes (FSDP2 frees a parameter's unsharded memory with
        resize_(0) and gathers into it again after resize_(size)): the allocation it stood for ends
        and, when it has bytes again, a new one begins (label and category kept)."""
        key = id(st)
        self.remaps += 1
        old = self.storages.get(key)
        if old is not None:
            self._freed(key, old)
        if after <= 0:
            return
        label = old.alloc.label if old is not None else "storage grown by untyped_storage().resize_"
        s = self._track_storage(st, old.alloc.category if old is not None else None, label)
        if s is not None and old is not None and old.phase == "fixed":
            s.phase = "fixed"

    def alias(self, t: torch.Tensor, s: _Storage) -> None:
        """t's storage is the same allocation as `s` (an op recorded as in place)."""
        st = t.untyped_storage()
        self.storages[id(st)] = s
        s.refs += 1
        self._watch(st, id(st), s)

    def bucket_seen(self, buf: torch.Tensor, index: int) -> None:
        """DDP's gradient bucket `index`, seen by the capture's communication hook: the reducer made
        it when DDP was built, before the capture followed storages, so its allocation counts from
        the start (data_parallel.py)."""
        s = self.track(buf, store.OTHER, f"DDP gradient bucket {index}")
        if s is None or s.alloc.label.startswith("DDP gradient bucket") and s.alloc.t_alloc == 0:
            return
        s.alloc.t_alloc = 0
        s.alloc.category = store.OTHER
        s.alloc.label = f"DDP gradient bucket {index}"
        s.phase = "fixed"

    def set_category(self, t: torch.Tensor, category: int, label: str) -> None:
        local = getattr(t, "_local_tensor", None)   # a DTensor (FSDP2's sharded parameter): its shard is
        if isinstance(local, torch.Tensor):         # the memory, the wrapper's storage is its global shape
            t = local
        for part in _dense_parts(t):
            s = self.track(part, category, label)
            if s is not None:
                s.alloc.category = category
                s.alloc.label = label
                s.phase = "fixed"

    def begin_backward(self) -> None:
        if self.phase != "backward":
            self.active_at_backward = len(self.active)
        # Forward storages still alive when the backward starts are saved for it: activations.
        for s in self.storages.values():
            if s.phase == "forward" and s.step == self.step:
                s.alive_at_backward = True
        self.phase = "backward"

    def end_backward(self) -> None:
        self.in_engine = False
        if self.phase == "backward":
            self.phase = "forward"  # what follows is the next micro-batch's forward, or the step's end
            # a module whose backward ModTracker saw begin but never end (an nn.Identity, whose
            # output is its input) is not running after the backward: the optimizer's kernels and
            # the next step's loss were put in it
            del self.active[getattr(self, "active_at_backward", 0):]

    def _follow_autograd(self) -> None:
        """The backward phase from the autograd engine itself, for steps that call
        loss.backward() without telling the capture (a step function of the user's own)."""
        if _graph_task_id() != -1:
            if self.phase != "backward":
                self.begin_backward()
            self.in_engine = True
        elif self.in_engine:
            self.end_backward()

    # Ops --------------------------------------------------------------------------------------
    def on_op(self, func, args, kwargs, out) -> None:
        self._follow_autograd()
        op = _OPS.get(func) or _op(func)
        name = op.name
        storages = self.storages
        new_outs = [o for o in _fake_outputs(out) if id(o.untyped_storage()) not in storages]
        if not new_outs and not op.writes:  # a view, an alias or a metadata query: no kernel
            if self.fresh and not op.shape_only:
                self._used(_split_arguments(op, args, kwargs)[0])
            return
        reads, mutated = _split_arguments(op, args, kwargs)
        if op.shape_only:
            reads = []
        reads = self._fold_backward_formula(name, args, reads, mutated, new_outs)
        if not new_outs and not mutated:
            return  # a view, an alias or a metadata query: no kernel
        if self.phase == "forward" and self.step >= 0:
            dt = autocast_cuda.region_dtype()
            self.forward_autocast[dt] = self.forward_autocast.get(dt, 0) + 1
        start = self.t
        where = self.module_of()
        label = f"{where}:{name}" if where else name
        if op.allocate_only:
            for o in new_outs:
                self.track(o, None, label)
            return
        # Every storage is tracked (allocated if new) before the host check, inputs first.
        in_records = [self.track(t, store.OTHER, op.untracked) for t in reads]
        # before the outputs, and an in-place sparse add's new parts (its self's, mutated)
        ahead = workspaces.add_ahead(self, workspaces.sparse_add_ahead(name, args, kwargs, self.on_host), start)
        mutated_records = [self.track(t, store.OTHER, op.untracked) for t in mutated]
        order = _GPU_ALLOCATION_ORDER.get(name)
        if order is not None and len(order) == len(new_outs):
            new_outs = [new_outs[i] for i in order]
        if not where and len(new_outs) == 1 and len(in_records) == 1 and name in _COPIES:
            src = in_records[0]   # a copy of a parameter made by the step's own code (an EMA's weights)
            if src is not None and src.alloc.category == store.PARAM:
                label = f"{name} of {src.alloc.label}"
        out_records = [self.track(o, None, label) for o in new_outs]
        if self.host_seen and self.route_host_op(name, reads, mutated,
                                                 in_records + mutated_records + out_records):
            return
        accesses: dict[int, int] = {}
        for records, mode in ((in_records, store.READ), (mutated_records, store.READ_WRITE)):
            for s in records:
                if s is not None:
                    accesses[s.alloc.id] = accesses.get(s.alloc.id, 0) | mode
        fresh = self.in_backward_formula() and name in inplace_backward.FRESH
        for s in out_records:
            if s is not None:
                accesses[s.alloc.id] = accesses.get(s.alloc.id, 0) | store.WRITE
                if fresh:
                    self.fresh[id(s)] = s
                else:
                    self.fresh.pop(id(s), None)
        if not accesses:
            return
        self._record_kernel(func, op, args, kwargs, out, reads, mutated, new_outs, accesses, start, where, ahead)

    def _record_kernel(self, func, op: _Op, args, kwargs, out, reads, mutated, new_outs, accesses, start, where,
                       ahead=()):
        name = op.name
        in_backward = self.phase == "backward"
        made = self.workspaces.persistent(name, in_backward, func, args, kwargs)
        workspaces.add_persistent(self, made, start, accesses)
        if name in workspaces.CUBLAS_OPS:
            workspaces.add_uses(self, self.workspaces.used(name, in_backward, func, args, kwargs), accesses)
        # Roofline: bytes moved are the tensors' own extents (views, not whole storages); a
        # mutated argument is read and written.
        moved = 0
        for t in reads:
            moved += t.numel() * t.element_size()
        for t in mutated:
            moved += 2 * t.numel() * t.element_size()
        for t in new_outs:
            moved += t.numel() * t.element_size()
        flops = _flops_of(func, args, kwargs, out)
        dtype = (reads or mutated or new_outs)[0].dtype
        seconds = max(flops / self.spec.peak_flops(dtype) if flops else 0.0,
                      moved / self.spec.hbm_bw) + self.spec.launch_overhead_s
        dur = max(1, int(round(seconds * 1e9)))
        if self.kernel_times is not None:  # measured on the user's GPU where the profile has the op
            dur = self.kernel_times.duration(name, *op_key(op.params, args, kwargs), dur)
        k = store.Kernel(id=len(self.kernels) + 1, name=name, t_start=start, t_end=start + dur,
                         step=self.step, accesses=accesses, phase=self.phase_code(),
                         flops=flops, moved_bytes=moved, module=where)
        workspaces.add_transient(self, self.workspaces.transient(func, args, kwargs, name), start, start + dur, accesses)
        workspaces.end_ahead(ahead, start + dur, accesses)
        self.kernels.append(k)
        self.accumulations.after_kernel(self, name, reads, new_outs, k)
        self.kernel_layer.append((self.layer_of(), self.phase))
        self.t = start + dur

    def collective(self, name: str, reads, writes, where: str) -> store.Kernel:
        """A collective of the process group (data_parallel.py: the fake group runs it in C++, no
        op reaches the fake mode) as one kernel on the compute stream: it reads `reads` and writes
        `writes` (read and written when also read: an all-reduce in place). Its time is a launch
        (the link is not modelled); moved_bytes are the tensors' extents, as for any kernel."""
        self._follow_autograd()
        accesses: dict[int, int] = {}
        moved = 0
        for tensors, mode in ((reads, store.READ), (writes, store.WRITE)):
            for t in tensors:
                s = self.track(t, store.OTHER if mode == store.READ else None, f"untracked input of {name}")
                if s is not None:
                    accesses[s.alloc.id] = accesses.get(s.alloc.id, 0) | mode
                moved += t.numel() * t.element_size()
        start = self.t
        dur = max(1, int(round(self.spec.launch_overhead_s * 1e9)))
        k = store.Kernel(id=len(self.kernels) + 1, name=name, t_start=start, t_end=start + dur, step=self.step,
                         accesses=accesses, phase=self.phase_code(), flops=0, moved_bytes=moved, module=where)
        self.kernels.append(k)
        self.kernel_layer.append((self.layer_of(), self.phase))
        self.t = start + dur
        return k

    def in_backward_formula(self) -> bool:
        """A backward formula runs now (the engine, without grad mode: not a checkpoint's
        recompute of forward code)."""
        return self.phase == "backward" and not torch.is_grad_enabled()

    def _is_fresh(self, t: torch.Tensor) -> bool:
        s = self.storages.get(id(t.untyped_storage()))
        return s is not None and id(s) in self.fresh

    def _fold_backward_formula(self, name, args, reads, mutated, new_outs):
        """Records an op that fake tensors run out of place as the in-place op a GPU runs
        (inplace_backward.py): its output becomes its `self`'s allocation, read and written.
        Updates `mutated` and `new_outs` and returns the reads; every input is then no longer
        fresh."""
        folded = self.in_backward_formula() and inplace_backward.fold(name, args, new_outs, self._is_fresh)
        if folded:
            self_t, o = folded
            self.alias(o, self.storages[id(self_t.untyped_storage())])
            new_outs.remove(o)
            reads = [t for t in reads if t is not self_t]
            mutated.append(self_t)
        if self.fresh:
            self._used(reads + mutated)
        return reads

    def _used(self, tensors) -> None:
        """An op used these tensors: their storages are no longer fresh."""
        for t in tensors:
            s = self.storages.get(id(t.untyped_storage()))
            if s is not None:
                self.fresh.pop(id(s), None)

    # Markers ----------------------------------------------------------------------------------
    def layer_markers(self) -> None:
        """One layer marker per run of consecutive kernels of one layer in one phase."""
        run_start, prev = None, None
        for i, (layer, phase) in enumerate(self.kernel_layer + [(None, "")]):
            key = (layer, phase)
            if run_start is not None and key != prev:
                first, last = self.kernels[run_start], self.kernels[i - 1]
                self.markers.append(store.Marker(f"layer {prev[0]} {prev[1]}", first.t_start,
                                                 last.t_end, store.MARKER_LAYER, prev[0]))
                run_start = None
            if run_start is None and layer is not None and phase in ("forward", "backward"):
                run_start = i
            prev = key

    def finish_categories(self) -> None:
        for s in self.records:
            if s.phase == "forward":
                s.alloc.category = store.ACTIVATION if s.alive_at_backward else store.WORKSPACE
            elif s.phase in ("backward", "optimizer", "setup"):
                s.alloc.category = store.WORKSPACE
