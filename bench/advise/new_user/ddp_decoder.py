"""The decoder of decoder.py (2 blocks) in DistributedDataParallel over 4 ranks of a fake process
group (one process plays rank 0; collectives do not communicate). init_sync=False: DDP's
constructor otherwise checks and broadcasts parameter values, which fake tensors do not have."""
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from decoder import Decoder, loss_fn, make_batch  # noqa: F401

WORLD = 4

if not dist.is_initialized():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)


def build_model(small=False):
    model = Decoder(512, 64, 4) if small else Decoder(layers=2)
    return DistributedDataParallel(model, bucket_cap_mb=25, init_sync=False)
