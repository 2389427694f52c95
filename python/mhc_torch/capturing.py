"""Captures training steps of a PyTorch model on fake tensors as an mhc-toolkit trace.

The model runs under FakeTensorMode (shapes, dtypes and storages, no memory and no GPU), which hands
the capture every aten op the model runs, after autograd and autocast:
- an op is a kernel on stream 0 unless it only makes a view or an uninitialised tensor;
- every storage is an allocation, from the op that made it until its last reference dies (a weak
  reference's callback on the untyped storage, the way MemTracker tracks storages under fake tensors);
- accesses come from the op schema's alias information: inputs are read, mutated arguments are
  read-write, new outputs are written;
- durations come from a roofline of the target GPU (gpus.py) and torch.utils.flop_counter.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from . import autocast_cuda, ctc_loss, cudnn_rnn, generation, gpu_paths, inplace_backward, recipes, store, workspaces
from .autocast_cuda import user_cuda_autocast
from .built_for_gpu import BuiltForGpu, CudaInStep, cuda_calls_in_step, cuda_calls_on_fake_device
from .capture_tables import HOST, SettingsRecording
from .errors import a_kind
from .recipes import Recipe, StepRun, cast_model

# flop_counter warns that triton kernels cannot be counted; capture runs none.
logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)
from .gpus import GpuSpec, gpu as gpu_by_name
from .kernel_times import KernelTimes, op_key

# Ops that allocate without launching a kernel.
_ALLOCATE_ONLY = {
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
    "aten::new_empty_strided", "aten::_empty_affine_quantized",
}


# Factories that take a tensor for its shape, dtype and device only: they do not read it.
_SHAPE_ONLY_INPUT = {
    "aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::empty_like", "aten::rand_like",
    "aten::randn_like", "aten::randint_like", "aten::new_zeros", "aten::new_ones", "aten::new_full",
}


# Ops whose schema does not mark the argument they write (no `Tensor(a!)`): FSDP2's copy-in writes
# each rank's shard into its slice of the all-gather output and returns views of it.
_UNANNOTATED_WRITES = {"fsdp::all_gather_copy_in": "all_gather_output"}


class CaptureError(Exception):
    """The model cannot be captured: the message names the op and the reason (one line)."""


@dataclass(eq=False)
class _Storage:
    alloc: store.Allocation
    phase: str  # forward, backward, optimizer, setup
    step: int
    alive_at_backward: bool = False
    refs: int = 1  # storages that stand for this allocation (inplace_backward folds two into one)


@dataclass(frozen=True)
class _Op:
    """What the capture reads of an op's schema, read once per overload: the schema's accessors
    cost microseconds each, and a training step runs tens of thousands of ops."""
    name: str
    params: tuple[tuple[int, str, bool, bool], ...]  # (position, name, keyword only, written to)
    writes: bool  # an argument is written to (the schema's `Tensor(a!)`)
    shape_only: bool  # its tensor inputs give a shape, dtype and device only (_SHAPE_ONLY_INPUT)
    allocate_only: bool  # it allocates without a kernel (_ALLOCATE_ONLY)
    untracked: str  # the label of an input storage that the capture first sees here


_OPS: dict[Any, _Op] = {}

# Ops whose GPU kernel allocates its outputs in another order than it returns them (the order the
# caching allocator sees, which decides where each block lands): output index, first allocated
# first. CUDA's native_dropout makes the bool mask, then the output (dropout_cuda in
# aten/src/ATen/native/cuda/Dropout.cu; the H200's snapshot, datasets/recorded/, shows it).
_GPU_ALLOCATION_ORDER = {"aten::native_dropout": (1, 0)}


def _op(func) -> _Op:
    op = _OPS.get(func)
    if op is None:
        schema = func._schema
        unannotated = _UNANNOTATED_WRITES.get(schema.name)
        params = tuple((i, a.name, a.kwarg_only,
                        a.alias_info is not None and a.alias_info.is_write or a.name == unannotated)
                       for i, a in enumerate(schema.arguments))
        op = _OPS[func] = _Op(schema.name, params, any(p[3] for p in params), schema.name in _SHAPE_ONLY_INPUT,
                              schema.name in _ALLOCATE_ONLY, f"untracked input of {schema.name}")
    return op


def _dense_parts(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that hold t's memory: t itself, or for a sparse COO tensor (the gradient of
    nn.Embedding(sparse=True) and nn.EmbeddingBag(sparse=True)) its indices and values, which
    have storages where the sparse tensor has none."""
    if t.layout == torch.sparse_coo:
        return [t._indices(), t._values()]
    return [t]


def _split_arguments(op: _Op, args, kwargs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The fake tensors the op reads and those it writes to, in the schema's order. Real tensors
    (constants made by torch.tensor(), which lift_fresh copies onto the device) live in host
    memory, not on the device."""
    reads: list[torch.Tensor] = []
    mutated: list[torch.Tensor] = []
    n = len(args)
    for i, name, kwarg_only, written in op.params:
        if i < n and not kwarg_only:
            value = args[i]
        elif name in kwargs:
            value = kwargs[name]
        else:
            continue
        if isinstance(value, FakeTensor):
            (mutated if written else reads).extend(_dense_parts(value))
        elif isinstance(value, (list, tuple)):
            (mutated if written else reads).extend(p for v in value if isinstance(v, FakeTensor)
                                                   for p in _dense_parts(v))
    return reads, mutated


def _fake_outputs(out) -> list[torch.Tensor]:
    """The fake tensors of an op's result, in tree_flatten's order (a sparse one as its parts)."""
    if isinstance(out, FakeTensor):
        return _dense_parts(out)
    if not isinstance(out, (list, tuple, dict)):
        return []  # None, a number, a device: an op's result holds tensors only in these containers
    if isinstance(out, dict) or any(isinstance(o, (list, tuple, dict)) for o in out):
        return [p for o in tree_flatten(out)[0] if isinstance(o, FakeTensor) for p in _dense_parts(o)]
    return [p for o in out if isinstance(o, FakeTensor) for p in _dense_parts(o)]


@dataclass
class CaptureResult:
    path: str
    kernels: int
    allocations: int
    steps: int
    peak_bytes: int
    step_time_ns: list[int] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    flops_per_step: list[dict[str, int]] = field(default_factory=list)  # per step: phase -> FLOPs (kernel_info)


_flop_registry: dict | None = None
# Ops that fake tensors on the CPU dispatch to in place of the kernel a GPU runs, counted by the
# GPU kernel's formula when torch has none for them: torch 2.11's flop counter has no entry for
# the CPU flash attention, so every attention of a capture counted 0 FLOPs there (GPT-2 small:
# 6.07 TFLOP a step against 7.15 with torch 2.15). Each formula reads the same leading arguments
# (query, key, value; the backward's grad_out first), so the GPU op's formula fits.
_FLOPS_AS = {
    "_scaled_dot_product_flash_attention_for_cpu": torch.ops.aten._scaled_dot_product_flash_attention,
    "_scaled_dot_product_flash_attention_for_cpu_backward": torch.ops.aten._scaled_dot_product_flash_attention_backward,
}


def _grouped_mm_flops(out, mat_a, mat_b, *args, **kwargs) -> int:
    """aten._grouped_mm (mixture-of-experts layers: transformers' default "grouped_mm" experts),
    which torch's flop counter does not count: each row of a ragged operand belongs to one group,
    so the FLOPs are one matmul's over all rows whatever the offsets say. 2-D x 2-D, ragged along
    the contraction (the weights' gradient: (M, S) by (S, N) into (G, M, N)): 2 x M x S x N;
    otherwise (2-D x 3-D, the forward and the input's gradient: (S, K) by (G, K, N) into (S, N);
    3-D x 2-D; 3-D x 3-D, G matmuls): 2 x out.numel() x K."""
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return 2 * mat_a.shape[0] * mat_a.shape[1] * mat_b.shape[1]
    return 2 * out.numel() * mat_a.shape[-1]


def _conv_backward_flops(args, out, counted: int) -> int:
    """torch's formula for aten.convolution_backward (torch/utils/flop_counter.py,
    conv_backward_flop, torch 2.15) counts the weights' gradient as conv(input, grad_out) and leaves
    out `groups` (its argument `_groups` is unused): a grouped convolution's weight gradient was
    counted `groups` times over. A depthwise convolution (groups = channels: EfficientNet's,
    MobileNet's, ConvNeXt's 7 x 7) of C channels counted C times its FLOPs: EfficientNet-B0's
    backward came to 3.02 TFLOP against a forward of 74 GFLOP. Each group's weights see only its
    own C_in / groups inputs, so that term is divided by `groups`; the input's gradient (a
    transposed convolution with the grouped weight) is counted right."""
    if len(args) < 11 or not isinstance(args[9], int) or args[9] <= 1 or not args[10][1] or out[1] is None:
        return counted
    from torch.utils.flop_counter import conv_flop_count

    def t(shape):
        return [shape[1], shape[0]] + list(shape[2:])

    grad_out, x, transposed, groups = args[0].shape, args[1].shape, args[7], args[9]
    gw = t(out[1].shape)
    term = conv_flop_count(t(grad_out), t(x), gw) if transposed else conv_flop_count(t(x), t(grad_out), gw)
    return counted - term + term // groups


def _flops_of(func, args, kwargs, out) -> int:
    global _flop_registry
    if _flop_registry is None:
        from torch.utils.flop_counter import flop_registry  # warns once when triton is absent: harmless

        _flop_registry = flop_registry
    f = _flop_registry.get(func._overloadpacket)
    if f is None:
        f = _flop_registry.get(_FLOPS_AS.get(func._overloadpacket.__name__))
    if f is None and func._overloadpacket.__name__ == "_grouped_mm":
        return _grouped_mm_flops(out, *args)
    if f is None and func._overloadpacket.__name__.startswith("_cudnn_rnn"):
        return cudnn_rnn.flops(func, args, kwargs) or 0
    if f is None:
        return 0
    try:
        counted = int(f(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not accept this overload's arguments: count none
        return 0
    if func._overloadpacket is torch.ops.aten.convolution_backward:
        return _conv_backward_flops(args, out, counted)
    return counted


# Ops whose sparse COO result has as many entries as a sparse input on a GPU, which fake tensors
# give none (their meta kernels make an empty sparse tensor): the clone the autograd engine makes
# of nn.Embedding(sparse=True)'s gradient, its coalesce (SparseAdam), whose entries are the
# distinct rows looked up (the lookups are counted: an upper bound, exact for distinct ids), and
# sparse_mask (SparseAdam's moments at the gradient's rows: new values, the mask's indices).
_SPARSE_ROWS_KEPT = {torch.ops.aten.clone.default, torch.ops.aten._coalesce.default,
                     torch.ops.aten.sparse_mask.default}


def _sparse_rows_kept(func, args, out):
    """out, or for the ops above the sparse tensor with the entries a GPU's has."""
    if func not in _SPARSE_ROWS_KEPT or not isinstance(out, FakeTensor) or out.layout != torch.sparse_coo:
        return out
    rows = args[1] if func is torch.ops.aten.sparse_mask.default else args[0]
    if out._nnz() == rows._nnz():
        return out
    if func is torch.ops.aten.sparse_mask.default:
        indices = rows._indices()
        values = args[0].new_empty((rows._nnz(),) + tuple(args[0].shape[rows.sparse_dim():]))
    else:
        indices, values = rows._indices().clone(), rows._values().clone()
    return torch.ops.aten._sparse_coo_tensor_with_dims_and_tensors(
        rows.sparse_dim(), rows.dense_dim(), list(out.shape), indices, values, dtype=out.dtype,
        layout=torch.sparse_coo, device=out.device, is_coalesced=func is not torch.ops.aten.clone.default)


_aten = torch.ops.aten
# Ops whose CUDA (and CPU) kernels refuse a source of another dtype than self, where fake tensors'
# meta kernels do not check it: a step that fails on every device was captured (a router that
# index_add_s bf16 expert outputs into an fp32 buffer under autocast). op -> (its name in
# torch's message, the source's position).
_SAME_DTYPE = {op: (name, pos) for name, pos, ops in (
    ("index_add_()", 3, (_aten.index_add.default, _aten.index_add_.default)),
    ("index_copy_()", 3, (_aten.index_copy.default, _aten.index_copy_.default)),
    ("index_reduce_()", 3, (_aten.index_reduce.default, _aten.index_reduce_.default)),
    ("index_put_() (x[idx] = v)", 2, (_aten.index_put.default, _aten.index_put_.default,
                                      _aten._index_put_impl_.default)))
    for op in ops}


def _check_same_dtype(func, args) -> None:
    """Raises as a GPU would for the ops above when self and source differ in dtype."""
    entry = _SAME_DTYPE.get(func)
    if entry is None or len(args) <= entry[1]:
        return
    name, pos = entry
    dst, src = args[0], args[pos]
    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.dtype != src.dtype:
        raise RuntimeError(f"{name}: self ({dst.dtype}) and source ({src.dtype}) must have the same dtype: the GPU "
                           f"refuses it (fake tensors do not check it); cast the source with .to(self.dtype)")


def _graph_task_id() -> int:
    """The running backward's id, -1 outside the autograd engine."""
    return torch._C._current_graph_task_id()


# Ops that copy a tensor: outside every module, a copy of a parameter is labelled by it
# ("aten::clone of conv_in.weight": diffusers' EMAModel and torch's AveragedModel keep such copies).
_COPIES = frozenset({"aten::clone", "aten::_to_copy", "aten::copy"})


class _RecordingFakeMode(FakeTensorMode):
    """Fake tensors that hand each op the model runs (not those FakeTensorMode runs for it, a
    decomposition's) to a Recording while one listens: what a TorchDispatchMode stacked above
    FakeTensorMode would see, with one Python dispatch per op instead of two."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.recording: Recording | None = None
        self._depth = 0  # ops of this mode's running now (>1: run by FakeTensorMode itself)

    def __deepcopy__(self, memo):
        """The mode itself: copy.deepcopy of a fake tensor (a module cloned with deepcopy, as
        nn.TransformerEncoder and nn.Transformer clone their layers) copies the tensor's __dict__,
        which holds its fake mode, and a copied mode made the clone's first op fail with `Mixing
        fake modes NYI`."""
        return self

    def dispatch(self, func, types, args=(), kwargs=None):
        if not self._depth:
            _check_same_dtype(func, args)
        rec = self.recording
        if rec is None or self._depth:
            return super().dispatch(func, types, args, kwargs)
        kwargs = kwargs or {}
        self._depth += 1
        try:
            out = _sparse_rows_kept(func, args, super().dispatch(func, types, args, kwargs))
            rec.on_op(func, args, kwargs, out)  # ops it runs itself are not the model's
        except Exception as e:
            # raised in the backward, where no line of the model's is on the stack: the node
            if _graph_task_id() != -1 and not hasattr(e, "mhc_backward_node"):
                node = torch._C._current_autograd_node()
                e.mhc_backward_node = node.name() if node is not None else None
            raise
        finally:
            self._depth -= 1
        return out

    @contextlib.contextmanager
    def paused(self):
        """Ops run here are not the model's (DTensor's sharding propagation runs an op once on
        fake tensors of the global shape to learn its output's shape: data_parallel.py)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextlib.contextmanager
    def recording_to(self, rec: "Recording"):
        self.recording = rec
        # UntypedStorage.resize_ reaches no dispatch mode (PyTorch's MemTracker patches it the same
        # way): the recording follows it while it records.
        resize = torch.UntypedStorage.resize_

        @functools.wraps(resize)
        def resize_followed(st, size):
            before = st.nbytes()
            out = resize(st, size)
            after = st.nbytes()
            if after != before and self.recording is not None:
                self.recording.resized(st, before, after)
            return out

        torch.UntypedStorage.resize_ = resize_followed
        try:
            yield
        finally:
            torch.UntypedStorage.resize_ = resize
            self.recording = None


class Recording(SettingsRecording):
    """The trace being built: allocations, kernels and markers on one clock (ns)."""

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
        self.backward_passes: dict[int, int] = {}  # step -> backward passes begun in it
        self.workspaces = workspaces.Workspaces(spec)
        self.accumulations = inplace_backward.Accumulations()
        self.init_tables()
        self.fresh: dict[int, _Storage] = {}  # id(record) -> record a factory made in the backward, unused since
        self.watched: dict[weakref.ref, tuple[int, _Storage]] = {}  # storages whose end frees an allocation

    # Storages -------------------------------------------------------------------------------
    def track(self, t: torch.Tensor, category: int | None, label: str) -> _Storage | None:
        """The record of t's storage, created (allocated now) if new; None for empty storages. A
        sparse tensor's are its indices' and values' storages: the values' record is returned."""
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
        s.alloc.t_free = self.t
        if s.alloc.device == HOST:
            self.host_live -= s.alloc.bytes
        else:
            self.live_bytes -= s.alloc.bytes
        self.accumulations.on_free(self, s)

    def resized(self, st, before: int, after: int) -> None:
        """`st.resize_()` changed a storage's bytes (FSDP2 frees a parameter's unsharded memory with
        resize_(0) and gathers into it again after resize_(size)): the allocation it stood for ends
        and, when it has bytes again, a new one begins (label and category kept)."""
        key = id(st)
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
            self.backward_passes[self.step] = self.backward_passes.get(self.step, 0) + 1
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
        self._record_kernel(func, op, args, kwargs, out, reads, mutated, new_outs, accesses, start, where)

    def _record_kernel(self, func, op: _Op, args, kwargs, out, reads, mutated, new_outs, accesses, start, where):
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
        run_start = None
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


def _layer_lists(model: torch.nn.Module) -> dict[str, int]:
    """Fully qualified names (as ModTracker spells them) of the blocks of the model's largest
    ModuleList (its transformer layers), mapped to their index."""
    best, best_params = None, 0
    for path, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0:
            n = sum(p.numel() for p in m.parameters())
            if n > best_params:
                best, best_params = path, n
    if best is None:
        return {}
    root = type(model).__name__
    return {f"{root}.{best}.{i}": i for i in range(len(model.get_submodule(best)))}


def _fake_error(e: BaseException, outer: BaseException | None = None) -> CaptureError | None:
    """A one-line CaptureError for the exceptions that fake tensors raise on data-dependent ops,
    naming the user's source line (from the traceback of `outer`, the exception that carried `e`
    up through the model's code, when there is one)."""
    from torch._subclasses import fake_tensor as ft

    kinds = tuple(getattr(ft, n) for n in ("DynamicOutputShapeException", "DataDependentOutputException",
                                           "UnsupportedOperatorException") if hasattr(ft, n))
    try:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
        kinds += (GuardOnDataDependentSymNode,)
    except ImportError:
        pass
    if not isinstance(e, kinds):
        return None
    func = getattr(e, "func", None)
    op = str(func) if func is not None else str(e).splitlines()[0] if str(e) else type(e).__name__
    why = {"DynamicOutputShapeException": "its output shape depends on tensor values",
           "DataDependentOutputException": "its result depends on tensor values",
           "UnsupportedOperatorException": "it has no fake-tensor implementation"}.get(
        type(e).__name__, "it depends on tensor values")
    from .errors import called_from, user_frame, where

    frame = user_frame(outer or e) or user_frame(e)
    at = where(frame)
    if at:
        at += called_from(outer or e, frame) or (called_from(e, frame) if outer is not None else "")
    node = None if at else getattr(e, "mhc_backward_node", None)   # no line of the model's: the backward's node
    place = f" (at {at})" if at else f" (in the backward, in {node})" if node else ""
    if node and getattr(func, "_overloadpacket", None) is torch.ops.aten.nonzero:
        hint = ("; the backward of a write or read through a boolean mask in the forward (x[mask] = v, x[mask]) "
                "selects by the mask's values: write it as torch.where(mask, v, x), whose shapes do not depend on them")
    else:
        hint = _eager_experts_hint(outer or e) or _mask_hint(func) or _ctc_hint(func)
    return CaptureError(f"op {op} cannot run on fake tensors{place}: {why}{hint}")


def _ctc_hint(func) -> str:
    """What to write instead of F.ctc_loss with tensor lengths (python/mhc_torch/ctc_loss.py): its
    log_alpha's shape comes from the longest target length, a value the capture's fake tensors do
    not hold; given as Python lists the lengths are known."""
    packets = tuple(getattr(torch.ops.aten, n) for n in ("_ctc_loss", "ctc_loss") if hasattr(torch.ops.aten, n))
    if getattr(func, "_overloadpacket", None) not in packets:
        return ""
    return ("; F.ctc_loss's buffers are sized by the lengths' values: give input_lengths and target_lengths "
            "as Python lists (lengths.tolist()), which the capture supports")


def _mask_hint(func) -> str:
    """What to write instead of a selection by a boolean mask (x[mask], masked_select: nonzero's
    output, as many rows as the mask has True values), said after the error's line: a loss over
    the masked rows only (a GNN's training nodes, a masked language model's masked tokens) keeps
    its shapes with ignore_index or a weighted mean."""
    if getattr(func, "_overloadpacket", None) not in (torch.ops.aten.nonzero, torch.ops.aten.masked_select):
        return ""
    return ("; a selection by a boolean mask (x[mask], masked_select, nonzero) keeps as many elements as the mask "
            "has True values: for a loss over the masked rows keep the shapes, as in cross_entropy(logits, "
            "labels.masked_fill(~mask, -100)) (its ignore_index) or (loss * mask).sum() / mask.sum()")


def _eager_experts_hint(e: BaseException) -> str:
    """Hugging Face mixture-of-experts layers with experts_implementation="eager" loop over the
    experts a batch routes to (`nonzero`, `torch.where` on the routing mask): what to capture
    instead, said after the error's line. The "grouped_mm" experts (transformers' default) sort
    the tokens by expert and run grouped matmuls whose shapes do not depend on the routing."""
    tb, found = e.__traceback__, None
    while tb is not None:   # the innermost module of such a model: its experts
        module = tb.tb_frame.f_locals.get("self")
        # transformers sets experts_implementation on every model's config ("eager" where it has
        # no experts, Wav2Vec2ForCTC's): only an experts module (its decorator's attributes) counts
        if getattr(getattr(module, "config", None), "_experts_implementation", None) == "eager" and (
                hasattr(module, "_is_expert_parallel") or hasattr(module, "num_experts")):
            found = module
        tb = tb.tb_next
    if found is not None:
        return ("; the mixture-of-experts layer " + type(found).__name__ + " runs its experts with "
                "experts_implementation=\"eager\", which picks the experts a batch routes to by value: build "
                "the model with experts_implementation=\"grouped_mm\" (transformers' default), whose shapes "
                "do not depend on the routing (docs/torch.md)")
    return ""


@contextlib.contextmanager
def _older_objects_frozen():
    """The objects that exist before a capture starts left out of the collections it runs
    (gc.freeze): a full collection walks every object of the process, hundreds of thousands once
    torch and transformers are imported (about 0.3 s each), while the capture needs only its own
    reference cycles collected: an object older than the capture can hold the capture's tensors
    only while it is alive. Nothing is frozen when something else froze objects already (unfreeze
    would thaw them too)."""
    if gc.get_freeze_count() != 0:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _module_conversion_in_place():
    """`Module.to(...)`, `.half()`, `.float()` on a model built under fake tensors: torch (2.15)
    swaps every fake parameter with its converted copy (`torch.utils.swap_tensors`), which refuses
    a tensor that fake-tensor bookkeeping holds a weak reference to (either one), so conversions failed
    (`_apply(): Couldn't swap Linear.weight`: peft's `get_peft_model`, `model.to(torch.bfloat16)`
    in a build_model). Inside the capture a fake parameter takes the converted data in place
    (`param.data = new`, what Module.to does for ordinary tensors): the same object, the new
    dtype and storage."""
    swap = torch.utils.swap_tensors

    def swap_fake(t1, t2):
        if isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor):
            t1.data = t2.data
            return
        swap(t1, t2)

    torch.utils.swap_tensors = swap_fake
    try:
        yield
    finally:
        torch.utils.swap_tensors = swap


@contextlib.contextmanager
def _trunc_normal_without_values():
    """`torch.nn.init.trunc_normal_` (ViT's and timm's initialisation) samples by rejection in
    torch 2.15, looping until no value lies outside [a, b]: it asks fake tensors for values
    (`.item()`, `mask.any()`), so building such a model failed. A fake tensor's values are never
    read, so inside the capture it is filled by one normal_ and clamp_ (same shape, dtype and
    storage); real tensors keep torch's sampling."""
    init = torch.nn.init
    sample = getattr(init, "_no_grad_trunc_normal_", None)
    if sample is None:
        yield
        return

    def trunc_normal(tensor, mean, std, a, b, generator=None):
        if not isinstance(tensor, FakeTensor):
            return sample(tensor, mean, std, a, b, generator=generator)
        with torch.no_grad():
            return tensor.normal_(mean, std, generator=generator).clamp_(a, b)

    init._no_grad_trunc_normal_ = trunc_normal
    try:
        yield
    finally:
        init._no_grad_trunc_normal_ = sample


# The LR schedulers built on each optimizer during a capture (their class names, in the order
# built): meta capture.lr_schedulers for the capture's optimizer.
_LR_SCHEDULERS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, list[str]]" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _lr_schedulers_recorded():
    """Records the LR schedulers a step or build_optimizer builds on an optimizer (LambdaLR,
    transformers' get_linear_schedule_with_warmup, ...): the optimizer code `mhc advise` prints
    replaces the optimizer object, and a scheduler keeps stepping the one it was built on, so the
    printed code says where to build it (capture.lr_schedulers). LRScheduler's subclasses call its
    __init__; SequentialLR and ReduceLROnPlateau do not, and are recorded by their own."""
    from torch.optim import lr_scheduler

    classes = [c for c in (lr_scheduler.LRScheduler, getattr(lr_scheduler, "SequentialLR", None),
                           getattr(lr_scheduler, "ReduceLROnPlateau", None)) if c is not None]
    inits = {c: c.__dict__["__init__"] for c in classes}

    def recording(init):
        def __init__(self, optimizer=None, *args, **kwargs):
            init(self, optimizer, *args, **kwargs)
            if isinstance(optimizer, torch.optim.Optimizer):
                names = _LR_SCHEDULERS.setdefault(optimizer, [])
                if type(self).__name__ not in names:
                    names.append(type(self).__name__)
        return __init__

    for c, init in inits.items():
        c.__init__ = recording(init)
    try:
        yield
    finally:
        for c, init in inits.items():
            c.__init__ = init


def lr_scheduler_meta(optimizer) -> dict[str, str]:
    names = _LR_SCHEDULERS.get(optimizer) if optimizer is not None else None
    return {"capture.lr_schedulers": ", ".join(names)} if names else {}


@contextlib.contextmanager
def _value_checks_passed():
    """`torch._check_tensor_all_with(ValueError, cond, msg)` (and `torch._check_tensor_all`) assert
    that every value of a boolean tensor is true: transformers' `torch_compilable_check` calls it
    in 164 models (LLaVA's image tokens against its image features, ...), and it reads the answer
    with `.item()`, a value fake tensors do not hold, so every such model stopped the capture. A
    check changes no shape and no memory but its one-byte answer: inside the capture the answer
    is computed (`cond._is_all_true()`, the kernel the GPU runs) and the check taken as passed,
    as the step that runs on the GPU would pass it; real tensors are checked as torch does."""
    check_with, check_all = torch._check_tensor_all_with, torch._check_tensor_all

    def passed(cond) -> bool:
        if isinstance(cond, FakeTensor):
            cond._is_all_true()
            return True
        return False

    def tensor_all_with(error_type, cond, message=None):
        if not passed(cond):
            check_with(error_type, cond, message)

    def tensor_all(cond, message=None):
        if not passed(cond):
            check_all(cond, message)

    torch._check_tensor_all_with, torch._check_tensor_all = tensor_all_with, tensor_all
    try:
        yield
    finally:
        torch._check_tensor_all_with, torch._check_tensor_all = check_with, check_all


@contextlib.contextmanager
def _grad_scaler_on_fake_tensors(device: str):
    """fp16 training's `torch.amp.GradScaler("cuda")` inside the capture: without a GPU it
    disabled itself ("CUDA is not available. Disabling."), so the step captured had no loss
    scaling, unscaling or infinity checks; and on the capture's device its `step` asks whether an
    infinity was found (`found_inf.item()`), a value fake tensors do not hold. Here a scaler made
    for CUDA runs on the capture's device, and its step goes ahead as in a step whose gradients
    are finite (the GPU's answer costs no memory: a 4-byte tensor read by the host)."""
    from torch.amp import grad_scaler

    cls = grad_scaler.GradScaler
    init, maybe_step = cls.__init__, cls._maybe_opt_step

    def scaler_init(self, device_name="cuda", *args, **kwargs):
        init(self, device if device_name == "cuda" else device_name, *args, **kwargs)

    def opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if all(isinstance(v, FakeTensor) for v in optimizer_state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return maybe_step(self, optimizer, optimizer_state, *args, **kwargs)

    cls.__init__, cls._maybe_opt_step = scaler_init, opt_step
    try:
        yield
    finally:
        cls.__init__, cls._maybe_opt_step = init, maybe_step


@contextlib.contextmanager
def _collector_at_step_ends():
    """Python's cyclic garbage collector off during the capture (collected at each step's end
    instead): a storage kept only by a reference cycle would otherwise be freed after whichever
    op happened to trigger a collection, and two captures of one step would differ."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def capture(build_model: Callable[[], torch.nn.Module],
            make_batch: Callable[[], Any],
            steps: int = 1,
            gpu: str | GpuSpec = "h100-sxm",
            path: str = "trace.db",
            loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
            optimizer: Callable[[list], torch.optim.Optimizer] | None = None,
            autocast_dtype: torch.dtype | None = torch.bfloat16,
            device: str = "cpu",
            meta: dict[str, str] | None = None,
            replace: bool = True,
            autocast_policy: str = "cuda",
            param_dtype: torch.dtype | None = None,
            forward_only: bool = False,
            micro_batches: int = 1,
            zero_grad: str = "none",
            step: Callable | None = None,
            setting=None,
            build_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer] | None = None,
            kernel_times: str | KernelTimes | None = None) -> CaptureResult:
    """Runs `steps` training steps (forward, backward, optimizer step, zero_grad) of the model
    that `build_model()` returns, on fake tensors, and writes the trace to `path`.

    `make_batch()` returns the inputs (called under fake tensors, so tensors cost nothing);
    `loss_fn(model, batch)` returns the scalar loss (default: `model(**batch).loss` for a dict,
    `model(*batch).loss` or the output itself for a tuple); `optimizer(params)` builds the
    optimizer (default AdamW, foreach); or `build_optimizer(model)` builds it from the model as
    built (parameter groups of one's own: a model file's build_optimizer()). Raises CaptureError
    when an op cannot run on fake tensors.

    The recipe (recipes.py, docs/torch.md): `autocast_dtype` with CUDA autocast's cast lists
    (`autocast_policy="cuda"`, emulated on the fake CPU tensors; "cpu" keeps torch's CPU lists);
    `param_dtype` casts the built model (bf16 weights); `forward_only` runs the forward under
    no_grad; `micro_batches` forward+backward passes accumulate gradients before one optimizer
    step; `zero_grad` "none" | "zeros" | "never" after it; or `step(model, batch, run)`, a step
    function of one's own (recipes.StepRun).
    `setting` (a dict, JSON text or file: mhc_torch.settings) is applied to the model and
    optimizer with mhc_torch.apply once both are built, before the first step, and recorded in
    meta `capture.setting` (SettingError when it does not fit the model).
    `kernel_times` (a PyTorch profiler trace of the same step on the GPU, or a KernelTimes) gives
    each kernel the time measured there where the profile has its op (kernel_times.py), the
    roofline otherwise (KernelTimesError, one line, for a profile without kernels or shapes).
    An output that cannot be written (a missing folder; an existing file when `replace` is False)
    is refused before the capture runs (store.OutputError, one line naming the file).
    """
    spec = gpu if isinstance(gpu, GpuSpec) else gpu_by_name(gpu)
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if optimizer is not None and build_optimizer is not None:
        raise ValueError("pass optimizer(params) or build_optimizer(model), not both")
    recipe = Recipe(autocast_dtype, autocast_policy, param_dtype, forward_only, micro_batches, zero_grad, step)
    recipe.check()
    if setting is not None:
        from .settings import check_setting, dumps, read_setting

        setting_given = read_setting(setting)
        setting = check_setting(setting_given)
    store.check_output(path, replace)
    if isinstance(kernel_times, str):
        kernel_times = KernelTimes(kernel_times)
    rec = Recording(spec, kernel_times)
    fake = _RecordingFakeMode(allow_non_fake_inputs=False)
    # FakeTensorMode logs a traceback of its own before raising; the error raised says it all.
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    fake_log_level = fake_log.level
    fake_log.setLevel(logging.CRITICAL)
    try:
        with _older_objects_frozen(), _module_conversion_in_place(), _trunc_normal_without_values(), \
                _value_checks_passed(), _lr_schedulers_recorded(), _environment_kept(ALLOCATOR_ENV):
            with _grad_scaler_on_fake_tensors(device), _compiled_functions_refused():
                result = _run(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, recipe, device, setting,
                              build_optimizer)
    except CaptureError:
        raise
    except Exception as e:
        err = _fake_error(e)
        if err is None:
            cause = e.__cause__ or e.__context__
            err = _fake_error(cause, e) if cause is not None else None
        if err is not None:
            raise err from None
        raise
    finally:
        fake_log.setLevel(fake_log_level)
    layer_names, step_times, modules, facts = result
    rec.layer_markers()
    rec.finish_categories()
    rec.peak_bytes = _device_peak(rec.allocs)  # after the folds above moved lifetimes
    full_meta = {
        "source": "captured",
        "generator": f"mhc-torch 0.1 (torch {torch.__version__})",
        "accesses": "exact",
        "timing": "estimated",
        "timing_model": "roofline: max(flops / peak, bytes / hbm_bw) + launch overhead",
        "device_name": spec.device_name,
        "device_memory": str(spec.memory_bytes),
        "capture.gpu": spec.name,
        "capture.gpu.bf16_flops": repr(spec.bf16_flops),
        "capture.gpu.hbm_bw": repr(spec.hbm_bw),
        "capture.launch_overhead_ns": str(int(spec.launch_overhead_s * 1e9)),
        "capture.steps": str(steps),
        "capture.layers": str(len(layer_names)),
        "capture.peak_bytes": str(rec.peak_bytes),
        "capture.host_peak_bytes": str(rec.host_peak),
    }
    full_meta.update(recipe.meta())
    if torch.device(device).type == "cpu":   # where every autocast region goes through the capture's
        full_meta.update(_autocast_used(recipe, rec.forward_autocast))
    if kernel_times is not None:
        full_meta.update(kernel_times.meta())
    if setting is not None:
        full_meta["capture.setting"] = dumps(setting_given)
        if setting.get("weights") == "bf16" and param_dtype is None:
            full_meta["capture.param_dtype"] = "bfloat16"  # the setting's weights, cast by apply
    full_meta.update(facts)
    if getattr(rec, "user_save_on_cpu", False):
        full_meta["capture.save_on_cpu"] = "true"
    full_meta.update(rec.torch_func_meta())
    full_meta.update(rec.workspaces.meta())
    if autocast_dtype is not None and autocast_policy == "cuda":
        from .autocast_cuda import unmodelled_ops

        full_meta["capture.autocast_unmodelled"] = " ".join(unmodelled_ops()) or "none"
    full_meta.update(versions())
    full_meta.update(meta or {})
    if "capture.optimizer" in facts:   # the step's own optimizers, not the option's (mhc-torch capture)
        full_meta["capture.optimizer"] = facts["capture.optimizer"]
    store.write_trace(path, rec.allocs, rec.kernels, rec.markers, full_meta, modules=modules,
                      saved=rec.saved_pairs(), copies=rec.copies, replace=replace)
    flops = [dict.fromkeys(store.PHASE_NAMES, 0) for _ in range(steps)]
    for k in rec.kernels:
        if 0 <= k.step < steps:
            flops[k.step][store.PHASE_NAMES[k.phase]] += k.flops
    return CaptureResult(path=path, kernels=len(rec.kernels), allocations=len(rec.allocs), steps=steps,
                         peak_bytes=rec.peak_bytes, step_time_ns=step_times, meta=full_meta, flops_per_step=flops)


def model_facts(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, str]:
    """What the code `mhc advise` prints needs to know of the user's model and optimizer, as built
    (before a setting is applied): the optimizer's class and hyperparameters (the printed code keeps
    them), and for a Hugging Face model that supports it the layers its own activation-checkpointing
    call wraps and that call's name in the installed transformers (absent otherwise: the printed
    code then uses PyTorch's checkpoint wrapper)."""
    import json

    cls = type(optimizer)
    defaults = {k: list(v) if isinstance(v, tuple) else v for k, v in optimizer.defaults.items()
                if isinstance(v, (bool, int, float, str, type(None))) or
                isinstance(v, tuple) and all(isinstance(x, (int, float)) for x in v)}
    facts = {"capture.optimizer_class": f"{cls.__module__}.{cls.__qualname__}",
             "capture.optimizer_defaults": json.dumps(defaults, sort_keys=True)}
    # Parameter groups of one's own (build_optimizer): each group's parameter count and the
    # hyperparameters it sets otherwise than the defaults, so that printed code can keep them.
    # An LR scheduler built before (its warmup sets lr, to 0.0 for a linear warmup) keeps the lr
    # the user gave as the group's initial_lr: that is the group's hyperparameter.
    def given(g):
        lr = g.get("initial_lr")
        return {**g, "lr": lr} if isinstance(lr, (int, float)) and not isinstance(lr, bool) else g

    groups = [dict({k: list(v) if isinstance(v, tuple) else v for k, v in given(g).items()
                    if k in defaults and not isinstance(v, torch.Tensor) and v != optimizer.defaults[k]},
                   params=len(g["params"]))
              for g in optimizer.param_groups]
    if len(groups) > 1 or any(len(g) > 1 for g in groups):
        facts["capture.optimizer_groups"] = json.dumps(groups, sort_keys=True)
    # The trained weights' dtype (most of their bytes), whatever made it: the recipe's cast or the
    # model as built (printed DeepSpeed configs enable bf16 or fp16 by it).
    by_dtype: dict[torch.dtype, int] = {}
    for p in model.parameters():
        if p.requires_grad:
            by_dtype[p.dtype] = by_dtype.get(p.dtype, 0) + p.numel() * p.element_size()
    if by_dtype:
        facts["capture.weights_dtype"] = str(max(by_dtype, key=by_dtype.get)).replace("torch.", "")
    # The dtype of the tensors the optimizer steps (most of their bytes): fp32 masters of bf16
    # weights, or the weights. With its state on the host the optimizer steps fp32 copies of them
    # (mhc_torch.apply): mhc advise sizes the host's copies, state and temporaries by it.
    stepped: dict[torch.dtype, int] = {}
    for g in optimizer.param_groups:
        for p in g["params"]:
            stepped[p.dtype] = stepped.get(p.dtype, 0) + p.numel() * p.element_size()
    if stepped:
        facts["capture.optimizer_dtype"] = str(max(stepped, key=stepped.get)).replace("torch.", "")
    # Recurrent layers run cuDNN's fused RNN kernel on a GPU, which the capture runs too, its reserve
    # space estimated (cudnn_rnn.py): the modules and what is estimated are named.
    facts.update(cudnn_rnn.meta(model))
    hf = sys.modules.get("transformers.modeling_utils")
    layers_mod = sys.modules.get("transformers.modeling_layers")
    if hf is not None and isinstance(model, hf.PreTrainedModel) and getattr(model, "supports_gradient_checkpointing", False):
        layer_cls = getattr(layers_mod, "GradientCheckpointingLayer", None)
        root = type(model).__name__
        names = [f"{root}.{n}" if n else root for n, m in model.named_modules()
                 if layer_cls is not None and isinstance(m, layer_cls)]
        if any(getattr(m, "gradient_checkpointing", False) for m in model.modules()):
            facts["capture.hf_checkpointing_on"] = "true"   # turned on by the user's own call
        if names:
            facts["capture.hf_checkpoint_layers"] = json.dumps(names)
            facts["capture.hf_checkpoint_call"] = ("activation_checkpointing_enable"
                                                   if hasattr(model, "activation_checkpointing_enable")
                                                   else "gradient_checkpointing_enable")
    return facts


def _device_peak(allocs, device: int = 0) -> int:
    """The peak of live bytes on the device, frees before allocations at one instant (the
    order the simulator and `mhc info` use)."""
    events = []
    for a in allocs:
        if a.device == device:
            events.append((a.t_alloc, 1, a.bytes))
            if a.t_free is not None:
                events.append((a.t_free, 0, -a.bytes))
    live = peak = 0
    for _, _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def versions() -> dict[str, str]:
    """The versions a capture depends on, for the trace's meta: what fake tensors, autocast and
    the model code do changes with them (`mhc info` prints them; comparisons warn on a mismatch)."""
    from importlib import metadata

    out = {"torch_version": torch.__version__}
    try:
        out["transformers_version"] = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        out["transformers_version"] = "not installed"
    return out


def _default_loss(model, batch):
    out = model(**batch) if isinstance(batch, dict) else model(*batch) if isinstance(batch, (tuple, list)) else model(batch)
    if hasattr(out, "loss") and out.loss is not None:
        return out.loss
    if isinstance(out, torch.Tensor):
        return out if out.dim() == 0 else out.float().mean()
    raise TypeError("the model's output has no .loss and is not a tensor; pass loss_fn")


def _refuse_compiled(model: torch.nn.Module) -> None:
    """A torch.compile'd model (an OptimizedModule, or `module.compile()` in place) is refused in
    one line: the capture records eager PyTorch op by op, while compiled code fuses kernels and
    recomputes by itself (and Dynamo on fake tensors inside the capture crashed the process)."""
    for name, m in model.named_modules():
        if type(m).__name__ == "OptimizedModule" or getattr(m, "_compiled_call_impl", None) is not None:
            what = f"module '{name}'" if name else f"the model ({type(m).__name__})"
            raise CaptureError(f"{what} is torch.compile'd: a capture records eager PyTorch op by op, and compiled "
                               "code fuses kernels and recomputes by itself; return the module without "
                               f"torch.compile from build_model(), or {_EAGER_HINT}")


_EAGER_HINT = "run with TORCHDYNAMO_DISABLE=1 (torch.compile then changes nothing; the capture is of the eager step)"


@contextlib.contextmanager
def _compiled_functions_refused():
    """A torch.compile'd function called inside the step (a decorated helper) crashed the process
    (Dynamo compiling on fake tensors inside the capture). Dynamo's wrapper asks, before it
    compiles, whether to run the function eagerly instead (torch 2.15: _is_eager_on_nested_compile)
    and, in every version, which callback to install (_callback_from_stance); inside the capture
    either question raises a CaptureError naming the function. torch 2.11 has only the second: a
    capture there died with a segmentation fault. Only when Dynamo is loaded (a model that
    compiles imported it)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:
        yield
        return

    def refuse():
        fn = sys._getframe(2).f_locals.get("fn")   # the wrapper's compiled function
        name = getattr(fn, "__qualname__", None) or "a torch.compile'd function"
        raise CaptureError(f"function '{name}' is torch.compile'd: a capture records eager PyTorch op by op, and "
                           f"compiled code fuses kernels and recomputes by itself; {_EAGER_HINT}")

    patched = []
    ask = getattr(eval_frame, "_is_eager_on_nested_compile", None)
    if ask is not None:
        patched.append(("_is_eager_on_nested_compile", ask, lambda: refuse()))
    stance = getattr(eval_frame, "_callback_from_stance", None)
    if stance is not None:
        # None and False are the "run eagerly" callbacks (torch.compiler.disable): left alone.
        patched.append(("_callback_from_stance", stance,
                        lambda callback: stance(callback) if callback in (False, None) else refuse()))
    for name, _, new in patched:
        setattr(eval_frame, name, new)
    try:
        yield
    finally:
        for name, old, _ in patched:
            setattr(eval_frame, name, old)


def _accumulation(recipe, rec, run, steps: int) -> dict[str, str]:
    """A step function that accumulates gradients itself (N forward and backward passes, then one
    step of the capture's optimizer, in every step) is N micro-batches a step, as --micro-batches N
    is: meta capture.micro_batches says so (the printed DeepSpeed configuration's
    gradient_accumulation_steps). Any other step function (one pass; passes without one step of
    the capture's optimizer each, as a GAN's two) keeps the recipe's 1."""
    if recipe.step is None:
        return {}
    passes = {rec.backward_passes.get(s, 0) for s in range(steps)}
    stepped = {run.optimizer_steps.get(s, 0) for s in range(steps)}
    if len(passes) == 1 and min(passes) > 1 and stepped == {1}:
        return {"capture.micro_batches": str(min(passes))}
    return {}


def _own_optimizers(recipe, run, facts: dict[str, str]) -> None:
    """A step function that trains with optimizers it builds itself and never steps the capture's
    (DLRM's SparseAdam and Adam, a GAN's two, AdamW over fp32 master copies): meta
    capture.optimizer names them ("step: SparseAdam, Adam") and capture.optimizer_class their
    classes, one entry each ("torch.optim.adam.Adam, torch.optim.adam.Adam"), not the capture's
    AdamW that nothing stepped, whose hyperparameters and groups (capture.optimizer_defaults,
    _groups) are left out with it. One such optimizer is adopted (StepRun._settle) and named as
    build_optimizer's is."""
    if recipe.step is None or run.optimizer_steps or run.adopted_facts or not run.built_qualnames:
        return
    facts["capture.optimizer"] = "step: " + ", ".join(q.rpartition(".")[2] for q in run.built_qualnames)
    facts["capture.optimizer_class"] = ", ".join(run.built_qualnames)
    for key in ("capture.optimizer_defaults", "capture.optimizer_groups"):
        facts.pop(key, None)


def _build_optimizer(build_optimizer, model):
    """The model file's optimizer: an Optimizer over parameters of the model (each at most once:
    torch refuses a parameter in two groups), else one line saying what it returned."""
    opt = build_optimizer(model)
    if not isinstance(opt, torch.optim.Optimizer):
        raise CaptureError(f"build_optimizer(model) returned {a_kind(opt)}, not a torch.optim.Optimizer (one "
                           "optimizer; parameter groups of one's own go in it)")
    ours = {id(p) for p in model.parameters()}
    # mhc_torch.apply pasted into build_optimizer (what `mhc advise` prints): with the state on the
    # host the optimizer steps host copies of the model's parameters, paired in offloaded_params.
    ours.update(id(h) for p, h in getattr(opt, "offloaded_params", ()) if id(p) in ours)
    for g in opt.param_groups:
        for p in g["params"]:
            if id(p) not in ours:
                raise CaptureError(f"build_optimizer(model) returned an optimizer over a tensor of shape "
                                   f"{list(p.shape)} that is not a parameter of the model")
    return opt


# The variables PyTorch reads its caching allocator's settings from, the one it follows first
# (torch 2.15 takes PYTORCH_CUDA_ALLOC_CONF when both are set).
ALLOCATOR_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def allocator_env() -> str:
    """The allocator settings PyTorch would read from the environment now ("" for none)."""
    return next((os.environ[v].strip() for v in ALLOCATOR_ENV if os.environ.get(v, "").strip()), "")


def _readable_allocator_conf(conf: str) -> None:
    """The environment's allocator settings, which the trace records (meta allocator.conf), as mhc reads
    them: settings it cannot read made a trace that `mhc simulate` and `mhc advise` refused."""
    from .settings import allocator_conf_problem

    why = allocator_conf_problem(conf) if conf else None
    if why:
        name = next((v for v in ALLOCATOR_ENV if os.environ.get(v, "").strip()), ALLOCATOR_ENV[0])
        raise CaptureError(f"{name}: {why}; the trace records these settings (meta allocator.conf) and mhc "
                           "could not read them")


@contextlib.contextmanager
def _environment_kept(names):
    """The environment variables `names` as they were before, whatever the code inside sets."""
    before = {n: os.environ.get(n) for n in names}
    try:
        yield
    finally:
        for n, v in before.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


@contextlib.contextmanager
def _together(*contexts):
    """The contexts entered in order as one."""
    with contextlib.ExitStack() as stack:
        for c in contexts:
            stack.enter_context(c)
        yield


@contextlib.contextmanager
def _functorch_beside_capture(rec):
    """While the steps run: torch.func's grad, vjp, jacrev and hessian (per-sample gradients,
    vmap(grad(loss)), as Opacus and DP-SGD compute them) refuse to run under any saved-tensor hooks
    ("torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks"), and the
    capture records saves through hooks of its own around the whole step: a step that ran on the GPU
    stopped in the capture. Inside such a transform the capture's own hooks are set aside (what it
    saves is not recorded as saves: nothing there can be checkpointed or offloaded either, since
    both are saved-tensor hooks, which the transform refuses as it would on the GPU: meta
    capture.torch_func_modules names the modules that ran there) and put back after it; a user's own hooks still stop it, as in PyTorch."""
    graph = torch.autograd.graph
    disable = graph.disable_saved_tensors_hooks
    C = torch._C._autograd

    @contextlib.contextmanager
    def beside_capture(message: str):
        own = []
        while (top := C._top_saved_tensors_default_hooks(False)) is not None \
                and getattr(top[0], "mhc_capture_hook", False):
            own.append(top)
            C._pop_saved_tensors_default_hooks()
        rec.torch_func_depth += bool(own)
        try:
            with disable(message):
                yield
        finally:
            rec.torch_func_depth -= bool(own)
            for pack, unpack in reversed(own):
                C._push_saved_tensors_default_hooks(pack, unpack)

    graph.disable_saved_tensors_hooks = beside_capture
    try:
        yield
    finally:
        graph.disable_saved_tensors_hooks = disable


@contextlib.contextmanager
def _save_on_cpu_as_offload(model: torch.nn.Module, rec):
    """While the steps run: a step's own `torch.autograd.graph.save_on_cpu(pin_memory=...)` (every
    saved tensor copied to pinned host memory in the forward and back in the backward, PyTorch's
    tutorial "Hooks for saved tensors") is the capture's synchronous offload of the whole forward
    (offload.py, the setting {"offload": {"mode": "sync", "min_bytes": 0}}), whose host copies
    and copies back the capture records. On fake tensors of the capture's CPU device, PyTorch's
    own hooks made their "host" copies on the device (the step's peak rose where it falls on a GPU)
    and hid every save from the capture (mhc advise: "no saved tensors recorded"). Unlike
    PyTorch's hooks, the model's parameters and buffers stay where they are when saved (as
    torchtune's offload does): PyTorch copies a saved fp32 weight to the host and back too (a copy
    of the weight on the device in the backward), which is not captured."""
    from .offload import SavedTensorOffload

    cls = torch.autograd.graph.save_on_cpu
    init = cls.__init__

    def offloading(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        off = SavedTensorOffload(model, "sync", 0, 5, 0)
        rec.user_save_on_cpu = True
        torch.autograd.graph.saved_tensors_hooks.__init__(self, off._pack, off._unpack)

    cls.__init__ = offloading
    try:
        yield
    finally:
        cls.__init__ = init


def _autocast_used(recipe, forward_autocast: dict) -> dict[str, str]:
    """Meta capture.autocast as the step ran it where a step or loss of the user's own says itself
    whether and how it autocasts: the dtype most of its forward kernels ran under, "none" where
    they ran without autocast (a WGAN-GP step in fp32 was recorded as bfloat16, the recipe's
    default, and mhc advise then withheld selective checkpointing of its critic, called several
    times a pass, for an autocast cache the step never had). The capture's own step autocasts as
    the recipe says; a step's own torch.autocast("cuda") is CUDA's policy (docs/torch.md)."""
    if not forward_autocast:
        return {}
    dtype = max(forward_autocast, key=lambda d: forward_autocast[d])
    if dtype == recipe.autocast_dtype:
        return {}
    if dtype is None:
        return {"capture.autocast": "none", "capture.autocast_policy": "none"}
    return {"capture.autocast": str(dtype).replace("torch.", ""), "capture.autocast_policy": "cuda"}


def _leaf_safe_mod_tracker():
    """PyTorch's ModTracker, whose module hooks stop torch.autograd.grad(out, x) when x is a leaf
    passed to a module (a WGAN-GP's gradient penalty: the critic's gradient at interpolates made
    with requires_grad_(True)): ModTracker waits for the gradients of all of a module's inputs
    with register_multi_grad_hook, which asks the engine whether it will run each input's node,
    and for a leaf under autograd.grad the engine refuses ("A leaf node was passed to
    _will_engine_execute_node but we are currently running autograd.grad()"). On a GPU the step
    runs (no tracker). While this tracker is entered, a module's inputs that are leaves are left
    out of that wait (the module's backward ends with its other inputs' gradients), and a module
    whose inputs are all leaves ends its backward at the first of their gradients."""
    from torch.autograd.graph import register_multi_grad_hook
    from torch.distributed._tools import mod_tracker

    def past_leaves(tensors, fn, *, mode="all"):
        if mode == "all" and any(t.grad_fn is None for t in tensors):
            inner = [t for t in tensors if t.grad_fn is not None]
            if inner:
                return register_multi_grad_hook(inner, fn, mode="all")
            return register_multi_grad_hook(tensors, fn, mode="any")
        return register_multi_grad_hook(tensors, fn, mode=mode)

    class Tracker(mod_tracker.ModTracker):
        def __enter__(self):
            self._mhc_kept = mod_tracker.register_multi_grad_hook
            mod_tracker.register_multi_grad_hook = past_leaves
            try:
                return super().__enter__()
            except BaseException:
                mod_tracker.register_multi_grad_hook = self._mhc_kept
                raise

        def __exit__(self, *args):
            try:
                return super().__exit__(*args)
            finally:
                mod_tracker.register_multi_grad_hook = self._mhc_kept

    return Tracker()


def _run(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, recipe, device, setting, build_optimizer=None):

    from . import data_parallel, placement
    from .frame_holds import FrameHolds

    loss_fn = loss_fn or _default_loss
    with fake:
        # PyTorch reads the allocator's settings once, when CUDA initialises: at build_model()'s
        # first CUDA tensor or CUDA call if it makes one (built_for_gpu.py), else by the time the
        # model is built and goes to the GPU, what the script set before (its first lines) counts
        at_init: list[str] = []
        building = BuiltForGpu(device, lambda: at_init.append(allocator_env()))
        with torch.device(device), building, cuda_calls_on_fake_device(building):
            model = build_model()
        allocator_conf = allocator_at_build = at_init[0] if at_init else allocator_env()
        _readable_allocator_conf(allocator_conf)
        if not isinstance(model, torch.nn.Module):
            raise CaptureError(f"build_model() returned {a_kind(model)}, not a torch.nn.Module")
        _refuse_compiled(model)
        if any(t.device.type != torch.device(device).type for t in list(model.parameters()) + list(model.buffers())):
            model = model.to(device)
        if recipe.param_dtype is not None:
            model = cast_model(model, recipe.param_dtype)
        params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        # A forward-only step never steps its optimizer: a frozen model's is built over its frozen parameters.
        trained = [p for _, p in params] or (list(model.parameters()) if recipe.forward_only else [])
        if not trained:
            raise CaptureError("the model has no parameters" if not list(model.parameters()) else
                               "the model has no parameter that requires a gradient: a training step has nothing to "
                               "train; capture its inference step with --forward-only (forward_only=True)")
        if build_optimizer is not None:
            opt = _build_optimizer(build_optimizer, model)
        else:
            opt = (optimizer or (lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)))(trained)
        facts = model_facts(model, opt)
        optimizer_setting = None
        if setting is not None:
            from .applying import apply
            from .settings import load_setting

            # A step function may train with an optimizer it builds itself: the setting's optimizer
            # part waits until the step shows which optimizer trains (StepRun._settle).
            setting = load_setting(setting)
            if recipe.step is not None and setting.get("optimizer"):
                optimizer_setting = setting["optimizer"]
                setting = {k: v for k, v in setting.items() if k != "optimizer"}
            with _environment_kept(ALLOCATOR_ENV):   # its allocator is set at run time: recorded below
                model, opt = apply(model, opt, setting)
            if setting.get("allocator"):
                allocator_conf = ",".join(c for c in (allocator_conf, setting["allocator"]) if c)
        facts.update(data_parallel.prepare(model, rec))
        for n, p in model.named_parameters():
            rec.set_category(p, store.PARAM, n)
        for n, b in model.named_buffers():
            rec.set_category(b, store.OTHER, f"buffer {n}")
        gc.collect()
        for st in building.alive():   # held since build_model (a plain attribute, a cache): on the device all along
            rec._track_storage(st, store.OTHER, "held since build_model")
        if building.cuda_initialised:
            facts["capture.cuda_init"] = "build_model"
        param_name = {id(p): n for n, p in params}
        param_name.update({id(h): param_name.get(id(p), "?") for p, h in getattr(opt, "offloaded_params", ())})
        layers = _layer_lists(model)
        tracker = _leaf_safe_mod_tracker()
        # Names from the model's root, also for modules a step calls directly (a GAN's netG and
        # netD in a model that is never called itself): ModTracker names a module the first time
        # it runs, from the outermost module then running, so netD alone was "Discriminator",
        # a name the model file's model cannot resolve (mhc_torch.apply refused the setting).
        if hasattr(tracker, "_get_mod_name"):
            tracker._get_mod_name(model)

        def layer_of():
            for p in tracker.parents:
                i = layers.get(p)
                if i is not None:
                    return i
            return None

        rec.layer_of = layer_of
        rec.track_modules(tracker)
        rec.set_model(model)
        step_times = []
        with torch.device(device), BuiltForGpu(device, lambda: None) as making:
            with cuda_calls_on_fake_device(making):
                batch = make_batch()
        # a batch made on "cuda" (as the training script has it) goes where the model went
        batch = tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) and t.device.type != torch.device(
            device).type else t, batch)
        for t in tree_flatten(batch)[0]:
            if isinstance(t, torch.Tensor):
                rec.set_category(t, store.OTHER, "batch")
        # the batch's size as the printed code needs it (DeepSpeed's train_micro_batch_size_per_gpu):
        # the leading dimension of its first tensor that has one
        leading = next((t.shape[0] for t in tree_flatten(batch)[0] if isinstance(t, torch.Tensor) and t.dim() > 0),
                       None)
        if leading is not None:
            facts["capture.batch_size"] = str(int(leading))
        run = StepRun(rec, model, opt, loss_fn, recipe, device, param_name, optimizer_setting)
        on_cpu = torch.device(device).type == "cpu"
        kernels = gpu_paths.kernels_as_on_gpu() if on_cpu else contextlib.nullcontext()
        rnns = cudnn_rnn.rnn_as_on_gpu(recipe.autocast_policy == "cuda") if on_cpu else contextlib.nullcontext()
        ctc = ctc_loss.ctc_on_fake()
        foreach = gpu_paths.foreach_as_on_gpu() if on_cpu else contextlib.nullcontext()
        user_autocast = user_cuda_autocast(torch.device(device).type) if on_cpu else contextlib.nullcontext()
        cuda_calls = cuda_calls_in_step(rec, rec.spec.device_name) if on_cpu else contextlib.nullcontext()
        cuda_tensors = CudaInStep(device) if on_cpu else contextlib.nullcontext()
        holds = FrameHolds(rec, model)
        if on_cpu:   # one `with` item: Python allows 20 blocks nested
            user_autocast = _together(user_autocast, _save_on_cpu_as_offload(model, rec), _functorch_beside_capture(rec),
                                     generation.generate_on_fake(rec))
        with placement.listening(rec), recipes.autocast_kernels(device, recipe), tracker, fake.recording_to(rec), run, \
                _collector_at_step_ends(), kernels, rnns, ctc, foreach, user_autocast, cuda_calls, cuda_tensors, \
                gpu_paths.transformers_masks_as_on_gpu(), gpu_paths.grouped_mm_as_on_gpu(), holds, \
                data_parallel.following_fsdp2(model, rec, fake) as fsdp2:
            for s in range(steps):
                rec.step, rec.phase = s, "forward"
                t0 = rec.t
                with rec.saved_hooks():
                    run.run_step(s, batch)
                gc.collect()  # storages held only by reference cycles end here, not at a random op
                rec.end_backward()
                rec.markers.append(store.Marker("step", t0, rec.t, store.MARKER_STEP, s))
                step_times.append(rec.t - t0)
        rec.phase = "end"
        if allocator_conf:
            facts["allocator.conf"] = allocator_conf
        if allocator_env() != allocator_at_build:
            facts["capture.allocator_conf_late"] = allocator_env()
        if fsdp2 is not None:
            facts.update(fsdp2.meta())
        facts.update(holds.meta({a for a, _, _ in rec.saved_pairs()}))
        facts.update(run.adopted_facts)
        facts.update(lr_scheduler_meta(run.optimizer))
        if rec.reserved_asked:
            facts["capture.reserved_asked"] = ", ".join(rec.reserved_asked)
        facts.update(_accumulation(recipe, rec, run, steps))
        _own_optimizers(recipe, run, facts)
        facts.update(rec.unpack_meta())
        facts.update(rec.pack_meta())
        facts.update(rec.calls_meta())
        facts.update(rec.unregistered_meta())
        modules = rec.module_records(model)
        del run, opt, model, batch
    return list(layers), step_times, modules, facts
