"""A GPT-style decoder whose user keeps the saved activations in fp8 (in the manner of COAT, Xi et
al. 2024, and of activation-compression work before it): the forward runs inside a
`torch.autograd.graph.saved_tensors_hooks` pair of the user's own whose pack hook stores every
saved activation (of 4,096 elements or more) as float8_e4m3fn with a per-tensor scale, and whose
unpack hook gives back a tensor of the saved dtype for the backward. Weights, and autocast's bf16
copies of them, are kept as they are. 12 layers of 1536, 12 heads, vocabulary 50,304, batch
8 x 2048, bf16 autocast, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 50_304, 1536, 12, 12, 2048, 8
FP8_MAX = 448.0


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=VOCAB, d=HIDDEN, heads=HEADS, layers=LAYERS):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def is_weight(t):
    """A parameter, or autocast's bf16 copy of one (which its cache keeps anyway)."""
    fn = t.grad_fn
    if t.is_leaf:
        return True
    return fn.name() == "ToCopyBackward0" and any(
        f is not None and f.name() == "torch::autograd::AccumulateGrad" for f, _ in fn.next_functions)


def pack_fp8(t):
    if not t.is_floating_point() or t.numel() < 4096 or is_weight(t):
        return t
    scale = t.detach().abs().amax().float().clamp(min=1e-12) / FP8_MAX
    return (t.detach() / scale).to(torch.float8_e4m3fn), scale, t.dtype


def unpack_fp8(packed):
    if isinstance(packed, torch.Tensor):
        return packed
    q, scale, dtype = packed
    return (q.float() * scale).to(dtype)


def build_model(small=False):
    return GPT(1000, 64, 4, 2) if small else GPT()


def make_batch(small=False):
    n, t, v = (2, 32, 1000) if small else (BATCH, SEQ, VOCAB)
    ids = torch.randint(0, v, (n, t + 1))
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def loss_fn(model, batch):
    ids, targets = batch
    with torch.autograd.graph.saved_tensors_hooks(pack_fp8, unpack_fp8):
        logits = model(ids)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
