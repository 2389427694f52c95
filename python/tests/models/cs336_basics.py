"""The transformer language model of Stanford CS336 (assignment 1's `cs336_basics`), rebuilt op for
op in plain PyTorch, with the benchmark loop that recorded the real GPU snapshot
tests/data/public/torch-snapshot/stanford-cs336-training-step.pickle
(MAGMA27/assignment2-systems @15883f2: cs336_systems/benchmarking_script.py and
cs336-basics/cs336_basics/{model,nn_utils}.py, MIT licence, Stanford University 2025).

The original writes its einsums and rearranges with einops; here they are the torch.einsum calls
and views those lower to, so the ops and the tensors they make are the same. Its configuration:
vocabulary 10,000, context 256, d_model 768, 12 layers, 12 heads, d_ff 3,072, RoPE theta 10,000,
fp32, batch 32. The loop: five warm-up steps of forward, loss and backward with no zero_grad and
no optimizer (gradients accumulate), then the recorded step; `lm_head` and `loss` are loop
variables, alive until reassigned.

    mhc-torch capture python/tests/models/cs336_basics.py --autocast none --steps 6 -o cs336.db
"""
import math

import torch
from torch import nn

VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA, BATCH = 10000, 256, 768, 12, 12, 3072, 10000.0, 32


def _trunc_normal(rows, cols, std):
    # The original's nn.init.trunc_normal_ reads a tensor value (.item()), which fake tensors cannot;
    # a normal init fills the same storage in place.
    return torch.empty(rows, cols).normal_(0.0, std)


class Linear(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(_trunc_normal(d_out, d_in, math.sqrt(2 / (d_in + d_out))))

    def forward(self, x):
        return torch.einsum("...i,oi->...o", x, self.weight)


class Embedding(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.weight = nn.Parameter(_trunc_normal(vocab, d, 1.0))

    def forward(self, ids):
        return self.weight[ids, :]


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.float32)
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * (x * rms)).to(in_dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, context, dim, theta):
        super().__init__()
        d = torch.arange(0, dim, 2) / dim
        freqs = torch.einsum("t,f->tf", torch.arange(context).to(torch.float32), torch.tensor(theta) ** -d)
        self.register_buffer("_freq_cis_cache", torch.stack((torch.cos(freqs), torch.sin(freqs))), persistent=False)

    def forward(self, x):
        # (..., seq, d) -> pairs (..., seq, d/2, 2) -> x1, x2: views
        x1, x2 = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2).movedim(-1, 0).unbind(0)
        cos, sin = self._freq_cis_cache[:, : x.size(-2), :].unbind(0)
        x1_rot = cos * x1 - sin * x2
        x2_rot = sin * x1 + cos * x2
        return torch.concat((x1_rot, x2_rot), dim=-1)


def softmax(x, dim=-1):
    rescaled = x - torch.max(x, dim=dim, keepdim=True)[0]
    exponentiated = torch.exp(rescaled)
    return exponentiated / torch.sum(exponentiated, dim=dim, keepdim=True)


def attention(q, k, v, mask):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(k.shape[-1])
    scores = torch.where(mask, scores, float("-inf"))
    weights = softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads, rope):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.positional_encoder = rope

    def forward(self, x):
        # Variables as the original names and rebinds them: a tensor dies when its name is reused.
        b, s, d = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        q = self.positional_encoder(q)
        k = self.positional_encoder(k)
        iota = torch.arange(s, device=x.device)
        mask = (iota.view(s, 1) >= iota.view(1, s))[None, ...]
        out = attention(q, k, v, mask)
        out = out.transpose(1, 2).reshape(b, s, d).contiguous()
        return self.output_proj(out)


def silu(x):
    return x * torch.sigmoid(x)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1, self.w2, self.w3 = Linear(d_model, d_ff), Linear(d_ff, d_model), Linear(d_model, d_ff)

    def forward(self, x):
        return self.w2(silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, rope):
        super().__init__()
        self.attn = CausalSelfAttention(D_MODEL, HEADS, rope)
        self.ffn = SwiGLU(D_MODEL, D_FF)
        self.ln1, self.ln2 = RMSNorm(D_MODEL), RMSNorm(D_MODEL)

    def forward(self, x):
        x_attn = self.attn(self.ln1(x))
        attn_out = x + x_attn
        x_ffn = self.ffn(self.ln2(attn_out))
        return attn_out + x_ffn


class TransformerLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embeddings = Embedding(VOCAB, D_MODEL)
        rope = RotaryEmbedding(CONTEXT, D_MODEL // HEADS, THETA)
        self.layers = nn.ModuleList(Block(rope) for _ in range(LAYERS))
        self.ln_final = RMSNorm(D_MODEL)
        self.lm_head = Linear(D_MODEL, VOCAB)

    def forward(self, ids):
        x = self.token_embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def log_softmax(x, dim=-1):
    x_max = torch.max(x, dim=dim, keepdim=True)[0]
    x = x - x_max
    return x - torch.log(torch.sum(torch.exp(x), dim=dim, keepdim=True))


def cross_entropy(logits, targets):
    neg_log_softmax = -log_softmax(logits)
    return torch.mean(torch.gather(neg_log_softmax, -1, targets.unsqueeze(-1)))


def build_model():
    return TransformerLM()


def make_batch():
    return torch.randint(0, VOCAB, (BATCH, CONTEXT)), torch.randint(0, VOCAB, (BATCH, CONTEXT))


def step(model, batch, run):
    data, target = batch
    run.state["lm_head"] = model(data)
    run.state["loss"] = cross_entropy(run.state["lm_head"], target)
    run.state["loss"].backward()
