"""Tensor and sequence parallelism as torchtitan writes them for Llama (its parallelize_llama's
plan): a Llama-style decoder (8 blocks of d_model 2048, 16 heads of 128, SwiGLU MLP 5632, RMSNorm,
vocabulary 32,000) over 4 ranks with torch.distributed.tensor.parallel.parallelize_module: the
embedding RowwiseParallel (its output sharded along the sequence), each RMSNorm SequenceParallel,
PrepareModuleInput gathering the sequence before attention and the MLP, q, k, v, w1 and w3
ColwiseParallel, o and w2 RowwiseParallel back to sequence shards, the head ColwiseParallel with a
replicated output; every parameter a DTensor (AdamW's foreach kernels take one kind of tensor).
The attention reads its local head count from the local shapes. A fake process group (one process
plays rank 0; collectives do not communicate). AdamW, bf16 autocast, batch 4 x 2048."""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

WORLD, VOCAB, D, HEADS, HIDDEN, LAYERS, BATCH, SEQ = 4, 32000, 2048, 16, 5632, 8, 4, 2048

# at import (the capture imports the file before its fake tensors: the mesh reads real values)
if not dist.is_initialized():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
MESH = init_device_mesh("cpu", (WORLD,))


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.head_dim = d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (p(x).view(b, t, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.attn, self.mlp = Attention(d, heads), MLP(d, hidden)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class Decoder(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, heads=HEADS, hidden=HIDDEN, layers=LAYERS):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def build_model(small=False):
    model = Decoder(512, 64, 4, 128, 2) if small else Decoder()
    gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
    block_plan = {"n1": SequenceParallel(), "attn": gather, "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
                  "attn.v": ColwiseParallel(), "attn.o": RowwiseParallel(output_layouts=Shard(1)),
                  "n2": SequenceParallel(), "mlp": gather, "mlp.w1": ColwiseParallel(), "mlp.w3": ColwiseParallel(),
                  "mlp.w2": RowwiseParallel(output_layouts=Shard(1))}
    for blk in model.blocks:
        parallelize_module(blk, MESH, block_plan)
    parallelize_module(model, MESH, {
        "embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    return model


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"ids": ids, "labels": ids.clone()}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())
