"""The fake-tensor mode a capture runs the model under: it hands each op the model runs to the
Recording, and makes the ops whose fake (meta) kernels differ from a GPU's behave as on the GPU
(sparse results' entries, same-dtype checks)."""
from __future__ import annotations

import contextlib
import functools

import torch
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException, FakeTensor,
                                           FakeTensorMode)

from . import batch_values, placement
from .recording import Recording, _graph_task_id


# Ops whose sparse COO result has as many entries as a sparse input on a GPU, which fake tensors
# give none (their meta kernels make an empty sparse tensor): the clone the autograd engine makes
# of nn.Embedding(sparse=True)'s gradient, its coalesce (SparseAdam), whose entries are the
# distinct rows looked up (the lookups are counted: an upper bound, exact for distinct ids), and
# sparse_mask (SparseAdam's moments at the gradient's rows: new values, the mask's indices), and
# the transpose of a sparse matrix (a clone with its index rows swapped: torch.sparse.mm's
# backward multiplies the gradient by the adjacency's transpose, which had no entries, no memory
# and no FLOPs).
_SPARSE_ROWS_KEPT = {torch.ops.aten.clone.default, torch.ops.aten._coalesce.default,
                     torch.ops.aten.sparse_mask.default, torch.ops.aten.t.default, torch.ops.aten.transpose.int}
_NOT_COALESCED = {torch.ops.aten.clone.default, torch.ops.aten.t.default, torch.ops.aten.transpose.int}


def _sparse_rows_kept(func, args, out):
    """out, or for the ops above the sparse tensor with the entries a GPU's has."""
    if func not in _SPARSE_ROWS_KEPT or not isinstance(out, FakeTensor) or out.layout != torch.sparse_coo:
        return out
    rows = args[1] if func is torch.ops.aten.sparse_mask.default else args[0]
    n, real = batch_values.sparse_entries(func, rows)   # fewer where coalesce merges repeated indices
    if out._nnz() == n:
        batch_values.keep_sparse_entries(out, real)
        return out
    if func is torch.ops.aten.sparse_mask.default:
        indices = rows._indices()
        values = args[0].new_empty((rows._nnz(),) + tuple(args[0].shape[rows.sparse_dim():]))
    elif n != rows._nnz():
        indices = rows._indices().new_empty((rows.sparse_dim(), n))
        values = rows._values().new_empty((n,) + tuple(rows._values().shape[1:]))
    else:
        indices, values = rows._indices().clone(), rows._values().clone()
    out = torch.ops.aten._sparse_coo_tensor_with_dims_and_tensors(
        rows.sparse_dim(), rows.dense_dim(), list(out.shape), indices, values, dtype=out.dtype,
        layout=torch.sparse_coo, device=out.device, is_coalesced=func not in _NOT_COALESCED)
    batch_values.keep_sparse_entries(out, real)
    return out


_aten = torch.ops.aten
# Sparse + sparse (the autograd engine accumulating nn.Embedding(sparse=True)'s gradient over
# micro-batches: AccumulateGrad's `variable_grad += new_grad`; a host optimizer's `grad.add_`): the
# CUDA kernel (add_out_sparse_cuda, aten/src/ATen/native/sparse/cuda/SparseCUDATensorMath.cu)
# concatenates both operands' indices and values, uncoalesced, into new tensors the result takes,
# so the gradient grows by each backward's entries; the meta kernel fake tensors run keeps self's.
# In place (add_), self's old indices and values die only once the new ones are made: both
# kernels (add_out_sparse_cuda, and the CPU's add_out_sparse_contiguous in SparseTensorMath.cpp)
# allocate the result's parts, fill them, then hand them to self, so for a moment both are held.
_SPARSE_ADDS = {_aten.add_.Tensor, _aten.add.Tensor}


def _sparse_add(func, args, replaced: list):
    """The GPU's result of a sparse + sparse add (in place: self, holding the concatenation), or
    None for any other op. Self's old parts go into `replaced`, which the caller empties once the
    op's new parts are recorded."""
    if func not in _SPARSE_ADDS or len(args) < 2:
        return None
    a, b = args[0], args[1]
    if not (isinstance(a, FakeTensor) and isinstance(b, FakeTensor)) or a.layout != torch.sparse_coo or \
            b.layout != torch.sparse_coo or a.shape != b.shape or a.sparse_dim() != b.sparse_dim():
        return None   # the meta kernel's answer (or its error)
    real_a, real_b = (batch_values.sparse_entries(None, t)[1] for t in (a, b))   # before self changes
    n = a._nnz() + b._nnz()
    dtype = a.dtype if func is _aten.add_.Tensor else torch.promote_types(a.dtype, b.dtype)
    indices = a._indices().new_empty((a.sparse_dim(), n))
    values = a._values().new_empty((n,) + tuple(a._values().shape[1:]), dtype=dtype)
    out = _aten._sparse_coo_tensor_with_dims_and_tensors(
        a.sparse_dim(), a.dense_dim(), list(a.shape), indices, values, dtype=dtype, layout=torch.sparse_coo,
        device=a.device, is_coalesced=False)
    if func is _aten.add_.Tensor:
        # self's parts are host memory where its old ones were, or where the op runs on the host (a
        # host optimizer's momentum buffer): the recording meets them first as the op's self
        host = placement.storage_host_kind(a._values().untyped_storage()) or placement.host_region()
        replaced += [a._indices(), a._values()]
        _aten.copy_sparse_to_sparse_(a, out)   # self takes new indices and values: the old ones die
        out = a
        if host is not None:
            for part in (a._indices(), a._values()):
                placement.mark_host(part, host)
    if real_a is not None and real_b is not None:
        batch_values.keep_sparse_entries(out, torch.cat([real_a, real_b], 1))
    return out


def _foreach_sparse_add(args, kwargs, dispatch, replaced: list) -> bool:
    """torch._foreach_add_(selfs, others) where a pair is sparse (SGD's foreach step: a sparse
    momentum buffer plus its gradient): every device's foreach kernel takes the slow path there,
    one add_ per pair, so each sparse pair concatenates as _sparse_add says, and the dense pairs run
    as one foreach op. False (nothing done) where no pair is sparse."""
    if len(args) < 2 or not isinstance(args[0], (list, tuple)) or not isinstance(args[1], (list, tuple)):
        return False
    pairs = list(zip(args[0], args[1]))
    sparse = [i for i, (a, b) in enumerate(pairs) if getattr(a, "layout", None) == torch.sparse_coo]
    if not sparse:
        return False
    for i in sparse:
        if _sparse_add(_aten.add_.Tensor, pairs[i], replaced) is None:
            return False
    dense = [p for i, p in enumerate(pairs) if i not in sparse]
    if dense:
        dispatch(_aten._foreach_add_.List, (), ([a for a, _ in dense], [b for _, b in dense]) + tuple(args[2:]), kwargs)
    return True


# Ops that put other storages under a tensor (a sparse tensor's: new indices and values)
_SWAPS = frozenset((_aten.set_, _aten.copy_sparse_to_sparse_, _aten.sparse_resize_, _aten.sparse_resize_and_clear_))


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


# Sparse-dense matmuls (torch.sparse.mm): the kernels read the dense operand as the sparse values'
# dtype on every device ("expected scalar type Float but found BFloat16"), and autocast has no rule
# for them, so an fp32 adjacency times an autocast Linear's bf16 output fails on the GPU too.
_SPARSE_MATMULS = {_aten._sparse_addmm.default: (1, 2), _aten.addmm.default: (1, 2), _aten.mm.default: (0, 1),
                   _aten._sparse_mm.default: (0, 1)}


def _check_sparse_matmul_dtype(func, args) -> None:
    where = _SPARSE_MATMULS.get(func)
    if where is None or len(args) <= where[1]:
        return
    a, b = args[where[0]], args[where[1]]
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dtype == b.dtype:
        return
    if torch.sparse_coo not in (a.layout, b.layout):
        return
    sparse, dense = (a, b) if a.layout == torch.sparse_coo else (b, a)
    raise RuntimeError(f"torch.sparse.mm: the sparse matrix is {sparse.dtype} and the dense one {dense.dtype}: the "
                       "GPU refuses it (expected scalar type ...; fake tensors do not check it, and autocast has no "
                       "rule for it); cast one to the other's dtype")


_COMPLEX_PARTS = (torch.float16, torch.float32, torch.float64)


def _check_complex_parts(func, args) -> None:
    """torch.complex(real, imag) of bf16 parts (a bf16 autocast Linear's outputs made a complex
    mask): every device's kernel refuses it, where the meta kernel makes a bcomplex32 tensor."""
    if func is not _aten.complex.default or len(args) < 2:
        return
    re, im = args[0], args[1]
    if isinstance(re, torch.Tensor) and isinstance(im, torch.Tensor) and re.dtype == im.dtype \
            and re.dtype not in _COMPLEX_PARTS:
        name = {torch.bfloat16: "BFloat16"}.get(re.dtype, str(re.dtype))
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got {name} and {name}: "
                           "every device refuses it (fake tensors do not check it); make the parts float with "
                           ".float() first")


# copy_ between a dense and a sparse COO tensor: every device's kernel (copy_sparse_wrapper_)
# refuses it, where fake tensors run the dense meta copy (there is no SparseMeta kernel) and pass:
# a step that fails on every device was captured (a host optimizer's dense gradient buffer given
# nn.Embedding(sparse=True)'s gradient).
_COPIES = {_aten.copy_.default, _aten.copy.default}


def _check_copy_layouts(func, args) -> None:
    if func not in _COPIES or len(args) < 2:
        return
    dst, src = args[0], args[1]
    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and \
            (dst.layout == torch.sparse_coo) != (src.layout == torch.sparse_coo):
        raise RuntimeError(f"copy_() between dense and sparse Tensors is not implemented! Found self layout "
                           f"{dst.layout} and src layout {src.layout}: every device refuses it (fake tensors "
                           "do not check it)")


def _check_same_dtype(func, args) -> None:
    """Raises as a GPU would for the ops above when self and source differ in dtype (or layout)."""
    _check_sparse_matmul_dtype(func, args)
    _check_copy_layouts(func, args)
    _check_complex_parts(func, args)
    entry = _SAME_DTYPE.get(func)
    if entry is None or len(args) <= entry[1]:
        return
    name, pos = entry
    dst, src = args[0], args[pos]
    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.dtype != src.dtype:
        raise RuntimeError(f"{name}: self ({dst.dtype}) and source ({src.dtype}) must have the same dtype: the GPU "
                           f"refuses it (fake tensors do not check it); cast the source with .to(self.dtype)")


class _RecordingFakeMode(FakeTensorMode):
    """Fake tensors that hand each op the model runs (not those FakeTensorMode runs for it, a
    decomposition's) to a Recording while one listens: what a TorchDispatchMode stacked above
    FakeTensorMode would see, with one Python dispatch per op instead of two."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.recording: Recording | None = None
        self._depth = 0  # ops of this mode's running now (>1: run by FakeTensorMode itself)
        self._replaced: list = []   # a sparse add_'s old parts, held until its new ones are recorded
        self.value_checks_pass = 0  # inside an op whose value check passes as on the GPU (torch.istft's)
        self.shadows = False  # values kept beside fake tensors (batch_values.py): building, a batch with ints

    def __deepcopy__(self, memo):
        """The mode itself: copy.deepcopy of a fake tensor (a module cloned with deepcopy, as
        nn.TransformerEncoder and nn.Transformer clone their layers) copies the tensor's __dict__,
        which holds its fake mode, and a copied mode made the clone's first op fail with `Mixing
        fake modes NYI`."""
        return self

    def _fake_like(self, shape, stride, dtype, device):
        """A new fake tensor, made as one of FakeTensorMode's own ops (not the model's)."""
        self._depth += 1
        try:
            return self.dispatch(torch.ops.aten.empty_strided.default, (), (shape, stride),
                                 {"dtype": dtype, "device": device})
        finally:
            self._depth -= 1

    def _run(self, func, types, args, kwargs, shadows: bool):
        """FakeTensorMode's op; where the batch's values are kept, an op whose output depends on
        them is answered from them and every op of theirs follows them (batch_values.py)."""
        added = _sparse_add(func, args, self._replaced)
        if added is not None:
            return added
        if func is _aten._foreach_add_.List and _foreach_sparse_add(args, kwargs or {}, lambda *a: super(
                _RecordingFakeMode, self).dispatch(*a), self._replaced):
            return None
        if not shadows:
            try:
                return super().dispatch(func, types, args, kwargs)
            except DataDependentOutputException:
                if func is torch.ops.aten.equal.default and self.value_checks_pass:
                    return False   # "the check failed" is the one answer that stops: it passes
                raise
        run_args = batch_values.bool_indices_as_long(func, args, self._fake_like) or args
        try:
            out = super().dispatch(func, types, run_args, kwargs)
        except (DynamicOutputShapeException, DataDependentOutputException):
            out = batch_values.answered(func, args, kwargs or {}, self._fake_like)
            if out is None and func is torch.ops.aten.equal.default and self.value_checks_pass:
                return False   # "the check failed" is the one answer that stops: it passes
            if out is None:
                raise
            return out
        batch_values.follow(func, args, kwargs or {}, out)
        return out

    def dispatch(self, func, types, args=(), kwargs=None):
        rec = self.recording
        if rec is not None and getattr(func, "overloadpacket", None) in _SWAPS:
            with rec.storage_swap():   # the frame holds keep no read through it (frame_holds.py)
                return self._dispatch(func, types, args, kwargs)
        return self._dispatch(func, types, args, kwargs)

    def _dispatch(self, func, types, args, kwargs):
        shadows = self.shadows and not self._depth
        if not self._depth:
            _check_same_dtype(func, args)
        rec = self.recording
        if rec is None or self._depth or rec.own_ops:
            try:
                return self._run(func, types, args, kwargs, shadows)
            finally:
                if not self._depth:
                    self._replaced.clear()
        kwargs = kwargs or {}
        self._depth += 1
        try:
            out = _sparse_rows_kept(func, args, self._run(func, types, args, kwargs, shadows))
            rec.on_op(func, args, kwargs, out)  # ops it runs itself are not the model's
        except Exception as e:
            # raised in the backward, where no line of the model's is on the stack: the node
            if _graph_task_id() != -1 and not hasattr(e, "mhc_backward_node"):
                node = torch._C._current_autograd_node()
                e.mhc_backward_node = node.name() if node is not None else None
            raise
        finally:
            self._depth -= 1
            if not self._depth:   # a sparse add_'s old parts die once its new ones are recorded
                self._replaced.clear()
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
