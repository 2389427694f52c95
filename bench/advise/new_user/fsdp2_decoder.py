"""The decoder of decoder.py sharded with FSDP2 (fully_shard per block and the root) over 4
ranks of a fake process group (one process plays rank 0; collectives do not communicate)."""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from decoder import Decoder, loss_fn, make_batch  # noqa: F401

WORLD = 4


# at import (the capture imports the file before its fake tensors: the mesh reads real values)
if not dist.is_initialized():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
MESH = init_device_mesh("cpu", (WORLD,))


def build_model(small=False):
    mesh = MESH
    model = Decoder(512, 64, 4) if small else Decoder(layers=4)
    for b in model.blocks:
        fully_shard(b, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh)
    return model
