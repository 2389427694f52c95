"""What the capture reads of an aten op: its schema (read once per overload), the fake tensors it
reads, writes and returns, and the tables of ops whose schema or kernel needs saying more."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten
from torch._subclasses.fake_tensor import FakeTensor


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
    have storages where the sparse tensor has none. A DTensor (tensor parallelism's activations,
    which autograd saves and modules return as DTensors) is its local shard: the wrapper's
    storage is of the global shape and holds nothing."""
    local = getattr(t, "_local_tensor", None)
    if isinstance(local, torch.Tensor):
        t = local
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


# Ops that copy a tensor: outside every module, a copy of a parameter is labelled by it
# ("aten::clone of conv_in.weight": diffusers' EMAModel and torch's AveragedModel keep such copies).
_COPIES = frozenset({"aten::clone", "aten::_to_copy", "aten::copy"})
