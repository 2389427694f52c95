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
"""
from __future__ import annotations

import torch


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
        world = 0
        for m in shards:
            st = m._get_fsdp_state()
            pg = st._fsdp_param_group
            if pg is not None:
                reshard.add("false" if pg.post_forward_mesh_info is None else "true")
                offload = offload or type(pg.offload_policy).__name__ == "CPUOffloadPolicy"
                world = max(world, _world(pg.mesh_info.shard_process_group))
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
    return fut
