"""A tokenizer-free byte model on very long sequences, MEGABYTE's shape (Yu et al., 2023; as
lucidrains' MEGABYTE-pytorch writes it in plain PyTorch): 65,536 bytes a sequence cut into 8,192
patches of 8; a global decoder (8 blocks of d_model 1024, causal SDPA over the 8,192 patch
positions) reads each patch's 8 byte embeddings concatenated and shifted by one patch; a local
decoder (4 blocks of 512) runs within each patch over its 8 bytes (8,192 x batch short sequences),
conditioned on the global output projected per byte; a 256-way softmax over every byte. Batch 2,
bf16 autocast, AdamW (lr 2e-4, betas (0.9, 0.95), weight decay 0.1)."""
import torch
import torch.nn.functional as F
from torch import nn

BYTES, PATCH, BATCH = 65536, 8, 2


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MegaByte(nn.Module):
    def __init__(self, d_global=1024, d_local=512, global_layers=8, local_layers=4, patch=PATCH, max_patches=8192):
        super().__init__()
        self.patch = patch
        self.global_embed = nn.Embedding(256, d_global // patch)
        self.global_pos = nn.Parameter(torch.zeros(max_patches, d_global))
        self.global_pad = nn.Parameter(torch.zeros(d_global))
        self.global_blocks = nn.ModuleList(Block(d_global, 16) for _ in range(global_layers))
        self.to_local = nn.Linear(d_global, d_local * patch // patch)
        self.local_embed = nn.Embedding(256, d_local)
        self.local_pos = nn.Parameter(torch.zeros(patch, d_local))
        self.local_pad = nn.Parameter(torch.zeros(d_local))
        self.local_blocks = nn.ModuleList(Block(d_local, 8) for _ in range(local_layers))
        self.norm = nn.LayerNorm(d_local)
        self.head = nn.Linear(d_local, 256)

    def forward(self, ids):                                       # [b, n] bytes
        b, n = ids.shape
        p = n // self.patch
        g = self.global_embed(ids).view(b, p, -1) + self.global_pos[:p]
        g = torch.cat([self.global_pad.expand(b, 1, -1), g[:, :-1]], dim=1)   # a patch sees the ones before it
        for blk in self.global_blocks:
            g = blk(g)
        cond = self.to_local(g).reshape(b * p, 1, -1)             # each patch's context for its bytes
        x = self.local_embed(ids).view(b * p, self.patch, -1)
        x = torch.cat([self.local_pad.expand(b * p, 1, -1), x[:, :-1]], dim=1) + self.local_pos + cond
        for blk in self.local_blocks:
            x = blk(x)
        return self.head(self.norm(x)).view(b, n, 256)


def build_model(small=False):
    return MegaByte(64, 32, 2, 2, 4, 64) if small else MegaByte()


def make_batch(small=False):
    ids = torch.randint(0, 256, (2, 64) if small else (BATCH, BYTES))
    return {"ids": ids}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), weight_decay=0.1)


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["ids"].flatten())
