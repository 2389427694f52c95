"""Data-parallel wrappers in a captured model: DistributedDataParallel (DDP) and FSDP2's
fully_shard, found in the model and recorded in the trace's meta (`capture.data_parallel`), so that
`mhc advise` can say what it models of them.

DDP runs in a capture on a process group of fake ranks (the "fake" backend of
torch.testing._internal.distributed.fake_pg, whose collectives return at once and carry no data):
- the user builds it with `init_sync=False` (its parameter check and broadcast read values, which
  fake tensors have none of; docs/advise.md);
- the fake group's all-reduce future holds no tensor, which DDP's reducer refuses ("expected the
  hook result is either a Tensor or a TensorList found None"): a model without a communication
  hook of its own gets one that averages the bucket in place and returns it, as the all-reduce of
  one rank's gradients would (same bytes, same buffer);
- the reducer's rebuild of its buckets after the first step (in the order the gradients became
  ready) sends the new order to the other ranks through a tensor read on the host, which fake
  tensors cannot; it is skipped: the buckets keep their first assignment, the same bytes in all.
The gradient buckets themselves (one flat buffer per bucket, `bucket_cap_mb`; the gradients are
views of them with `gradient_as_bucket_view=True`, else a second copy) are made by the reducer
when DDP is built, before the capture follows storages: the capture counts each from the start of
the capture (setup), when the hook first sees it.

FSDP2 (fully_shard) on the same fake group is one rank's memory (`following_fsdp2`):
- its parameters are the rank's shards (recording.py counts a DTensor's local tensor, not the
  wrapper's global-shape storage);
- FSDP2 frees a parameter's unsharded memory with `untyped_storage().resize_(0)` after a group's
  forward (reshard_after_forward) and backward, and makes it again with `resize_(size)` before the
  copy-out of the next all-gather (`free_storage`, `alloc_storage` in
  torch/distributed/fsdp/_fully_shard/_fsdp_param.py): fake_mode.py and recording.py follow the
  resizes; here the unsharded storages are named (category param, "<fqn> (unsharded)") when FSDP2 allocates them;
- the fake group runs its collectives in C++ without dispatching an op: each all-gather,
  reduce-scatter and all-reduce FSDP2 issues (`dist.all_gather_single`, `dist.reduce_scatter_single`,
  `dist.all_reduce`) is recorded here as a kernel of its own (`c10d::_allgather_base_`, ...) that
  reads its input and writes its output, so that its buffers are used when a GPU uses them
  (category comm: the all-gather output of W x the group's padded shards, the reduce-scatter input
  of the group's padded unsharded gradients and its output of one shard each);
- DTensor's sharding propagation runs each op once more on fake tensors of the global shape to
  learn its output's shape (`ShardingPropagator._propagate_tensor_meta_non_cached`): those ops are
  not the rank's and are left out (they made the optimizer's first step allocate global-shape
  temporaries).
What FSDP2 keeps alive (the all-gather result until the next all-gather's copy-in, the reduce-scatter
states until the end of the backward) it keeps by Python references, which the capture follows as
for any storage.
"""
from __future__ import annotations

import contextlib
import json
import os

import torch

from . import store


def _ddp_class():
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # a torch built without distributed
        return None
    return DistributedDataParallel


def _fsdp_class():
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return None
    return FSDPModule


def find(model: torch.nn.Module) -> tuple[list, list]:
    """The DDP modules and the FSDP2-sharded modules in the model (each in module order)."""
    ddp, fsdp = _ddp_class(), _fsdp_class()
    ddps = [m for m in model.modules() if ddp is not None and isinstance(m, ddp)]
    shards = [m for m in model.modules() if fsdp is not None and isinstance(m, fsdp)]
    return ddps, shards


def unsharded_storages(shards: list) -> list:
    """The storages of the unsharded parameters of FSDP2's modules `shards` (find(model)[1]) that
    have been gathered once (FSDP2 keeps one storage per parameter, resized to 0 between gathers)."""
    out = []
    for m in shards:
        group = m._get_fsdp_state()._fsdp_param_group
        for fp in group.fsdp_params if group is not None else ():
            out.extend(t.untyped_storage() for t in getattr(fp, "all_gather_outputs", ()))
    return out


def _world(group) -> int:
    try:
        return int(group.size())
    except Exception:  # noqa: BLE001 - a group that cannot say: unknown
        return 0


class _Reducer:
    """DDP's reducer, every call passed on except the bucket rebuild (see the module's note)."""

    def __init__(self, reducer):
        object.__setattr__(self, "_inner", reducer)

    def _rebuild_buckets(self):
        return False

    def __getattr__(self, name):
        return getattr(self._inner, name)


def prepare(model: torch.nn.Module, rec) -> dict[str, str]:
    """Lets the model's DDP modules run on fake ranks in the capture and returns the meta that
    says what the capture holds of each wrapper (empty when the model has none)."""
    ddps, shards = find(model)
    meta: dict[str, str] = {}
    if ddps:
        d = ddps[0]
        world = _world(d.process_group)
        if not d._comm_hooks:
            d.register_comm_hook(state=(rec, max(1, world)), hook=_averaged_in_place)
        d.reducer = _Reducer(d.reducer)
        meta["capture.data_parallel"] = "ddp"
        meta["capture.ddp"] = (f"world {world}, bucket_cap_mb {d.bucket_bytes_cap / 2**20:g}, "
                               f"gradient_as_bucket_view {str(bool(d.gradient_as_bucket_view)).lower()}, "
                               f"modules {len(ddps)}")
    if shards:
        reshard = set()
        offload = False
        world = replicas = 0
        for m in shards:
            st = m._get_fsdp_state()
            pg = st._fsdp_param_group
            if pg is not None:
                reshard.add("false" if pg.post_forward_mesh_info is None else "true")
                offload = offload or type(pg.offload_policy).__name__ == "CPUOffloadPolicy"
                world = max(world, _world(pg.mesh_info.shard_process_group))
                replicate = getattr(pg.mesh_info, "replicate_process_group", None)   # HSDP
                if replicate is not None:
                    replicas = max(replicas, _world(replicate))
        if replicas:
            world = f"{world * replicas} (shard {world} x replicate {replicas})"
        meta["capture.data_parallel"] = "fsdp2" if not ddps else "ddp+fsdp2"
        meta["capture.fsdp2"] = (f"world {world}, modules {len(shards)}, reshard_after_forward "
                                 f"{'/'.join(sorted(reshard)) or 'none'}, cpu_offload {str(offload).lower()}")
    return meta


def _averaged_in_place(state, bucket):
    """The all-reduce of a rank alone: the bucket averaged in place (world size from the group)."""
    rec, world = state
    buf = bucket.buffer()
    rec.bucket_seen(buf, bucket.index())
    fut = torch.futures.Future()
    fut.set_result(buf.div_(world))
    # the all-reduce of the bucket (the fake group moves no data): a kernel that reads and writes
    # it, which mhc advise times and splits into buckets of bucket_cap_mb
    rec.collective("c10d::allreduce_", [buf], [buf], rec.module_of())
    return fut


# The collectives FSDP2 calls through torch.distributed, the c10d op each becomes on a GPU, the
# names of (output, input) among their arguments (all_reduce: one tensor, read and written) and
# the position of their group argument. FSDP2 calls all_gather_single and reduce_scatter_single
# in torch 2.15, all_gather_into_tensor and reduce_scatter_tensor in 2.11 (same arguments): each
# one torch.distributed has is followed, a call made inside another followed one counted once.
_COLLECTIVES = {"all_gather_single": ("c10d::_allgather_base_", ("output_tensor", "input_tensor"), 2),
                "all_gather_into_tensor": ("c10d::_allgather_base_", ("output_tensor", "input_tensor"), 2),
                "reduce_scatter_single": ("c10d::_reduce_scatter_base_", ("output", "input"), 3),
                "reduce_scatter_tensor": ("c10d::_reduce_scatter_base_", ("output", "input"), 3),
                "all_reduce": ("c10d::allreduce_", ("tensor",), 2)}


def _argument(args, kwargs, position: int, name: str):
    return args[position] if position < len(args) else kwargs.get(name)


class _Fsdp2Capture:
    """What the capture follows of FSDP2 while it records (the module's note)."""

    def __init__(self, rec, fake):
        self.rec, self.fake = rec, fake
        self.owner = ""            # the FSDP module whose collectives run now ("blocks.0")
        self.done: list[tuple[str, int, int]] = []   # (op, group size, bytes on the wire per rank)
        self.comm_labels: dict[int, tuple[int, str]] = {}   # allocation id -> (category, label), set at the end
        self.in_collective = False   # a followed collective runs now (one it calls is not counted again)

    def _record(self, op: str, world: int, output: torch.Tensor, input_: torch.Tensor | None) -> None:
        from torch._subclasses.fake_tensor import FakeTensor

        if not isinstance(output, FakeTensor) or self.fake.recording is None:
            return
        rec = self.rec
        out_bytes = output.numel() * output.element_size()
        if input_ is None:   # an all-reduce in place
            rec.collective(op, [output], [output], rec.module_of())
            wire = 2 * out_bytes * (world - 1) // max(world, 1)
        else:
            rec.collective(op, [input_], [output], rec.module_of())
            in_bytes = input_.numel() * input_.element_size()
            wire = max(out_bytes, in_bytes) * (world - 1) // max(world, 1)
        self.done.append((op, world, wire))
        owner = f" ({self.owner})" if self.owner else ""
        if op == "c10d::_allgather_base_":
            self._name(output, store.COMM, f"FSDP2 all-gather output{owner}")
        elif op == "c10d::_reduce_scatter_base_":
            self._name(input_, store.COMM, f"FSDP2 reduce-scatter input{owner}")
            self._name(output, store.GRAD, f"FSDP2 reduce-scatter output: sharded gradients{owner}")

    def _name(self, t: torch.Tensor, category: int, label: str) -> None:
        s = self.rec.storages.get(id(t.untyped_storage()))
        if s is not None:
            self.comm_labels[s.alloc.id] = (category, label)
            s.alloc.category, s.alloc.label, s.phase = category, label, "fixed"

    def wrap_collective(self, name: str):
        import torch.distributed as dist

        op, params, group_at = _COLLECTIVES[name]
        original = getattr(dist, name)

        def collective(*args, **kwargs):
            if self.in_collective:
                return original(*args, **kwargs)
            tensors = [_argument(args, kwargs, i, p) for i, p in enumerate(params)]
            group = _argument(args, kwargs, group_at, "group")
            self.in_collective = True
            try:
                out = original(*args, **kwargs)
            finally:
                self.in_collective = False
            world = _world(group) if group is not None else dist.get_world_size()
            self._record(op, world, tensors[0], tensors[1] if len(tensors) > 1 else None)
            return out

        collective.__wrapped__ = original
        return dist, name, original, collective

    def wrap_owner(self, module, name: str, key):
        """`module.name(fsdp_params, ...)` runs with `self.owner` set to the group's module."""
        original = getattr(module, name)

        def owned(*args, **kwargs):
            before = self.owner
            self.owner = key(args[0])
            try:
                return original(*args, **kwargs)
            finally:
                self.owner = before

        return module, name, original, owned

    def wrap_outside_modules(self, cls, name: str):
        """`cls.name` (FSDP2's unshard, copy-out, reshard and gradient reduction, which its hooks
        run around a module's forward and backward) records its ops as outside every module: a
        checkpoint of the module recomputes its forward, not FSDP2's hooks (mhc advise's
        checkpoint region is the module's own kernels)."""
        original = getattr(cls, name)
        rec = self.rec

        def outside(*args, **kwargs):
            rec.active.append("")
            try:
                return original(*args, **kwargs)
            finally:
                del rec.active[len(rec.active) - 1 - rec.active[::-1].index("")]

        return cls, name, original, outside

    def meta(self) -> dict[str, str]:
        for a in self.rec.allocs:
            if a.id in self.comm_labels:
                a.category, a.label = self.comm_labels[a.id]
        by_op: dict[str, list[int]] = {}
        for op, _, wire in self.done:
            n = by_op.setdefault(op, [0, 0])
            n[0] += 1
            n[1] += wire
        return {"capture.collectives": json.dumps({op: {"count": n, "wire_bytes": b} for op, (n, b) in
                                                   sorted(by_op.items())}, sort_keys=True)}


def _group_name(fsdp_params) -> str:
    """The module of an FSDP parameter group, from its parameters' names ("blocks.0")."""
    names = [getattr(p, "_param_fqn", None) or "" for p in fsdp_params]
    parts = [n.split(".")[:-1] for n in names if n]
    if not parts:
        return ""
    common = os.path.commonprefix(parts)
    return ".".join(common)


@contextlib.contextmanager
def following_fsdp2(model: torch.nn.Module, rec, fake):
    """While the capture records: FSDP2's collectives as kernels, its unsharded parameters named,
    DTensor's sharding propagation left out (the module's note). Does nothing for a model without
    fully_shard. Yields the object whose meta() says which collectives ran."""
    if not find(model)[1]:
        with _sharding_propagation_unrecorded(model, fake):
            yield None
        return
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    cap = _Fsdp2Capture(rec, fake)
    propagate = ShardingPropagator._propagate_tensor_meta_non_cached

    def propagate_unrecorded(self, op_schema):
        with fake.paused():
            return propagate(self, op_schema)

    alloc = _fsdp_param.FSDPParam.alloc_all_gather_outputs

    def alloc_named(self):
        alloc(self)
        frozen = "" if self.sharded_param.requires_grad else ", frozen"
        for t in self.all_gather_outputs:
            rec.set_category(t, store.PARAM, f"{self._param_fqn} (unsharded{frozen})")

    import torch.distributed as dist

    patches = [cap.wrap_collective(n) for n in _COLLECTIVES if hasattr(dist, n)]
    patches += [cap.wrap_owner(_fsdp_param_group, "foreach_all_gather", _group_name),
                cap.wrap_owner(_fsdp_param_group, "foreach_reduce", _group_name),
                *(cap.wrap_outside_modules(_fsdp_param_group.FSDPParamGroup, n)
                  for n in ("unshard", "wait_for_unshard", "reshard", "post_backward")),
                (ShardingPropagator, "_propagate_tensor_meta_non_cached", propagate, propagate_unrecorded),
                (_fsdp_param.FSDPParam, "alloc_all_gather_outputs", alloc, alloc_named)]
    for where, name, _, new in patches:
        setattr(where, name, new)
    try:
        yield cap
    finally:
        for where, name, old, _ in patches:
            setattr(where, name, old)


@contextlib.contextmanager
def _sharding_propagation_unrecorded(model: torch.nn.Module, fake):
    """DTensor's sharding propagation left out for a model with DTensor parameters and no FSDP2:
    tensor parallelism (parallelize_module's ColwiseParallel, RowwiseParallel, SequenceParallel).
    Its global-shape ops (an RMSNorm's pow of the whole sequence, 4 x the rank's under
    SequenceParallel on 4 ranks) were recorded as the rank's memory, and their storages, which
    propagation reuses, as kernels' accesses outside their lifetimes. Nothing for other models."""
    try:
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._sharding_prop import ShardingPropagator
    except ImportError:  # a torch built without distributed
        yield
        return
    if not any(isinstance(p, DTensor) for p in model.parameters()):
        yield
        return
    propagate = ShardingPropagator._propagate_tensor_meta_non_cached

    def propagate_unrecorded(self, op_schema):
        with fake.paused():
            return propagate(self, op_schema)

    ShardingPropagator._propagate_tensor_meta_non_cached = propagate_unrecorded
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = propagate
