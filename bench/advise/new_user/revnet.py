"""A reversible transformer (RevNet coupling as the Reformer and Reversible ViT train it;
reformer_pytorch's ReversibleSequence in plain PyTorch): each block splits the residual into two
halves, y1 = x1 + f(x2), y2 = x2 + g(y1), f attention and g an MLP. A torch.autograd.Function
runs the blocks under no_grad, saves only the last block's output, and in its backward rebuilds
each block's input from its output and recomputes f and g under enable_grad, one block at a time,
so the activations held do not grow with depth. ViT-L shape (24 blocks of 1024, 16 heads) on 196
patches of 224 x 224 images; batch 64, bf16 autocast, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn

D, LAYERS, HEADS, BATCH, CLASSES = 1024, 24, 16, 64, 1000


class Attn(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


class RevBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.f, self.g = Attn(d, heads), Mlp(d)

    def forward(self, x1, x2):
        y1 = x1 + self.f(x2)
        return y1, x2 + self.g(y1)

    def backward_pass(self, y1, y2, dy1, dy2):
        """The block's input from its output, and the gradients through it (f and g recomputed)."""
        with torch.enable_grad():
            y1 = y1.detach().requires_grad_()
            gy1 = self.g(y1)
            torch.autograd.backward(gy1, dy2)
        with torch.no_grad():
            x2 = y2 - gy1
            dx1 = dy1 + y1.grad
        with torch.enable_grad():
            x2 = x2.detach().requires_grad_()
            fx2 = self.f(x2)
            torch.autograd.backward(fx2, dx1)
        with torch.no_grad():
            x1 = y1 - fx2
            dx2 = dy2 + x2.grad
        return x1.detach(), x2.detach(), dx1, dx2


class Reversible(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, blocks):
        x1, x2 = x.chunk(2, dim=-1)
        with torch.no_grad():
            for blk in blocks:
                x1, x2 = blk(x1, x2)
        ctx.blocks = blocks
        y = torch.cat([x1, x2], dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        y1, y2 = y.chunk(2, dim=-1)
        dy1, dy2 = dy.chunk(2, dim=-1)
        for blk in reversed(ctx.blocks):
            y1, y2, dy1, dy2 = blk.backward_pass(y1, y2, dy1, dy2)
        return torch.cat([dy1, dy2], dim=-1), None


class RevViT(nn.Module):
    def __init__(self, d=D, layers=LAYERS, heads=HEADS, classes=CLASSES, patch=16, image=224):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, d, patch, patch)
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2, d))
        # each half of the residual is d wide: the stream is 2d
        self.blocks = nn.ModuleList(RevBlock(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(2 * d)
        self.head = nn.Linear(2 * d, classes)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2) + self.pos
        x = Reversible.apply(torch.cat([x, x], dim=-1), self.blocks)
        return self.head(self.norm(x).mean(1))


def build_model(small=False):
    return RevViT(32, LAYERS, 4, 10, 8, 32) if small else RevViT()


def make_batch(small=False):
    n = 2 if small else BATCH
    return {"images": torch.randn(n, 3, 32 if small else 224, 32 if small else 224),
            "labels": torch.randint(0, 10 if small else CLASSES, (n,))}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["images"]).float(), batch["labels"])
