"""An RWKV-4-style language model in plain PyTorch: token shift (nn.ZeroPad2d), time mixing with a
WKV recurrence written as a torch.autograd.Function (forward and backward as loops over time, the
state kept in fp32, saving its inputs and per-step outputs with ctx.save_for_backward, as the
CPU fallback of RWKV's CUDA kernel does), channel mixing with squared ReLU. 6 layers, d 1024,
batch 8 x 64 tokens."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, LAYERS, BATCH, SEQ = 50277, 1024, 6, 8, 64


class WKV(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, u, k, v):
        b, t, c = k.shape
        w, u, k, v = -torch.exp(w.float()), u.float(), k.float(), v.float()
        aa = k.new_zeros(b, c)
        bb = k.new_zeros(b, c)
        pp = k.new_full((b, c), -1e38)
        ys, states = [], []
        for i in range(t):
            states.append(torch.stack([aa, bb, pp]))
            kk, vv = k[:, i], v[:, i]
            ww = u + kk
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            ys.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
            ww = w + pp
            p = torch.maximum(ww, kk)
            e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
            aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
        ctx.save_for_backward(w, u, k, v, torch.stack(states, 1))
        return torch.stack(ys, 1)

    @staticmethod
    def backward(ctx, gy):
        w, u, k, v, states = ctx.saved_tensors
        gy = gy.float()
        t = k.shape[1]
        gw, gu = torch.zeros_like(w), torch.zeros_like(u)
        gk, gv = torch.zeros_like(k), torch.zeros_like(v)
        ga, gb = torch.zeros_like(k[:, 0]), torch.zeros_like(k[:, 0])
        for i in reversed(range(t)):  # gradient through the output at each step (the state's own chain simplified)
            aa, bb, pp = states[:, i].unbind(0)
            kk, vv = k[:, i], v[:, i]
            ww = u + kk
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            den = e1 * bb + e2
            y = (e1 * aa + e2 * vv) / den
            g = gy[:, i] / den
            gv[:, i] = g * e2
            gk[:, i] = g * e2 * (vv - y)
            gu += (g * e2 * (vv - y)).sum(0)
            ga, gb = ga + g * e1, gb - g * e1 * y
            gw += (ga * aa + gb * bb).sum(0) * w
        return gw, gu, gk, gv


class TimeMix(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.mix_k, self.mix_v, self.mix_r = (nn.Parameter(torch.rand(1, 1, d)) for _ in range(3))
        self.decay, self.first = nn.Parameter(torch.randn(d) * 0.1), nn.Parameter(torch.randn(d) * 0.1)
        self.key, self.value, self.receptance = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.output = nn.Linear(d, d, bias=False)

    def forward(self, x):
        xx = self.shift(x)
        k = self.key(x * self.mix_k + xx * (1 - self.mix_k))
        v = self.value(x * self.mix_v + xx * (1 - self.mix_v))
        r = torch.sigmoid(self.receptance(x * self.mix_r + xx * (1 - self.mix_r)))
        return self.output(r * WKV.apply(self.decay, self.first, k, v).to(r.dtype))


class ChannelMix(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.mix_k, self.mix_r = nn.Parameter(torch.rand(1, 1, d)), nn.Parameter(torch.rand(1, 1, d))
        self.key, self.value = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.receptance = nn.Linear(d, d, bias=False)

    def forward(self, x):
        xx = self.shift(x)
        k = torch.square(torch.relu(self.key(x * self.mix_k + xx * (1 - self.mix_k))))
        return torch.sigmoid(self.receptance(x * self.mix_r + xx * (1 - self.mix_r))) * self.value(k)


class RwkvBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att, self.ffn = TimeMix(d), ChannelMix(d)

    def forward(self, x):
        x = x + self.att(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class Rwkv(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, layers=LAYERS):
        super().__init__()
        self.emb, self.ln0 = nn.Embedding(vocab, d), nn.LayerNorm(d)
        self.blocks = nn.ModuleList(RwkvBlock(d) for _ in range(layers))
        self.ln_out, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.ln0(self.emb(ids))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_out(x))


def build_model(small=False):
    return Rwkv(512, 64, LAYERS) if small else Rwkv()


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 8) if small else (BATCH, SEQ))
    return {"ids": ids[:, :-1], "labels": ids[:, 1:]}


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["ids"]).flatten(0, 1).float(), batch["labels"].flatten())
