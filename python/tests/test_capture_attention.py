"""Attention with dropout is captured as a GPU runs it: CPU dispatch would take the math path
(saving the seq x seq probabilities and the dropout mask, 2.5x BERT-large's real peak), a GPU's
flash or memory-efficient kernel applies the dropout inside and saves only the output and the
log-sum-exp. So a step with attention dropout holds what the same step without it holds."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402

B, H, S, D = 2, 4, 256, 32


from torch.nn.functional import scaled_dot_product_attention as bound_attention  # noqa: E402  before any capture


class Attention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.qkv = nn.Linear(H * D, 3 * H * D)
        self.out = nn.Linear(H * D, H * D)
        self.dropout = dropout

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        positional = torch.nn.functional.scaled_dot_product_attention(q, k, v, None, p)
        keyword = bound_attention(q, k, v, dropout_p=p, is_causal=True)  # a name bound at import
        return self.out((positional + keyword).transpose(1, 2).reshape(B, S, H * D))


class Net(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.attn = Attention(dropout)

    def forward(self, x):
        return self.attn(x)


def _capture(tmp_path, dropout, autocast, setting=None):
    path = str(tmp_path / f"attn{dropout}{autocast}{setting is not None}.db")
    r = mhc_torch.capture(lambda: Net(dropout), lambda: (torch.randn(B, S, H * D),), steps=1, path=path,
                          autocast_dtype=torch.bfloat16 if autocast else None, loss_fn=lambda m, b: m(*b).sum(),
                          setting=setting)
    with sqlite3.connect(path) as db:
        names = {n for (n,) in db.execute("select s.text from kernels k join strings s on s.id = k.name")}
    return r.peak_bytes, names


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16"])
def test_attention_dropout_saves_what_the_gpu_kernel_saves(tmp_path, autocast):
    peak0, names0 = _capture(tmp_path, 0.0, autocast)
    peak1, names1 = _capture(tmp_path, 0.1, autocast)
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in names1
    assert not any("softmax" in n or "bernoulli" in n for n in names1), sorted(names1)
    assert peak1 == peak0  # the math path would add the probabilities and masks of both calls
    # a checkpoint's recompute in the backward runs the same kernel (else checkpoint refuses)
    _, names2 = _capture(tmp_path, 0.1, autocast, {"checkpoint": {"modules": ["Net.attn"]}})
    assert not any("softmax" in n or "bernoulli" in n for n in names2), sorted(names2)
