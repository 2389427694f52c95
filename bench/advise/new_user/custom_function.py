"""Custom autograd Functions in the decoder of decoder.py: the MLP's activation is a squared ReLU
written as a torch.autograd.Function that saves its input with ctx.save_for_backward, and the
attention output goes through a scaled residual Function that keeps its input as an attribute
of ctx (ctx.x = x, as older fused-kernel code does: autograd's saved-tensor hooks never see it)."""
import torch
import torch.nn.functional as F

import decoder
from decoder import loss_fn, make_batch  # noqa: F401 - the capture reads them from this file


class SquaredReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x) ** 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * torch.relu(x)


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x  # kept on ctx, not through save_for_backward
        return torch.tanh(x) * 0.5 + x

    @staticmethod
    def backward(ctx, grad):
        t = torch.tanh(ctx.x)
        return grad * (0.5 * (1 - t * t) + 1)


class Block(decoder.Block):
    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + ScaledTanh.apply(self.proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.down(SquaredReLU.apply(self.up(self.ln2(x))))


def build_model(small=False):
    m = decoder.small_or_full(small)
    d, heads = (64, 4) if small else (decoder.HIDDEN, decoder.HEADS)
    m.blocks = torch.nn.ModuleList(Block(d, heads) for _ in m.blocks)
    return m
