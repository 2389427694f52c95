"""An RNN language model whose recurrent matrix is kept orthogonal by
`torch.nn.utils.parametrizations.orthogonal` (the matrix exponential of a skew-symmetric
parameter, computed again at each use unless cached), its output projection under
`parametrizations.weight_norm`; 256 steps unrolled by hand over a vocabulary of 32,000.
The user caches the parametrizations for the forward (`parametrize.cached()`), as PyTorch's docs
advise for a weight used at every step. Batch 32 x 256, hidden 1024, fp32, Adam."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations, parametrize

VOCAB, HIDDEN, SEQ, BATCH = 32000, 1024, 256, 32


class OrthogonalRNN(nn.Module):
    def __init__(self, vocab=VOCAB, hidden=HIDDEN):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.inp = nn.Linear(hidden, hidden)
        self.rec = parametrizations.orthogonal(nn.Linear(hidden, hidden, bias=False))
        self.out = parametrizations.weight_norm(nn.Linear(hidden, vocab))

    def forward(self, tokens):
        x = self.inp(self.emb(tokens))
        h = torch.zeros(tokens.shape[0], x.shape[-1], device=x.device, dtype=x.dtype)
        states = []
        with parametrize.cached():
            for t in range(tokens.shape[1]):
                h = torch.tanh(x[:, t] + self.rec(h))
                states.append(h)
            return self.out(torch.stack(states, dim=1))


def build_model(small=False):
    return OrthogonalRNN(100, 16) if small else OrthogonalRNN()


def make_batch(small=False):
    n, s, v = (2, 8, 100) if small else (BATCH, SEQ, VOCAB)
    return torch.randint(0, v, (n, s + 1))


def loss_fn(model, tokens):
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
