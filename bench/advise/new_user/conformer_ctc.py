"""A Conformer-M speech recogniser written in plain PyTorch (as torchaudio's and ESPnet's Conformer
layers are written): a 4x convolutional subsampling of 80-bin log-mel frames, 16 Conformer blocks
of d_model 256 (macaron half-step feed-forwards, nn.MultiheadAttention with a key padding mask,
a convolution module of pointwise conv, GLU, depthwise conv1d of kernel 31, BatchNorm1d and SiLU),
a CTC head over 1,024 word pieces trained with F.ctc_loss over the true frame and label lengths
(padded clips of 8 to 16 s). Batch 32, bf16 autocast, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, FRAMES, MELS, VOCAB, LABELS = 32, 1600, 80, 1024, 200


class FeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Dropout(0.1),
                                 nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        return self.net(x)


class ConvModule(nn.Module):
    def __init__(self, d, kernel=31):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, pad):
        h = self.norm(x).masked_fill(pad.unsqueeze(-1), 0.0).transpose(1, 2)
        h = F.glu(self.pw1(h), dim=1)
        h = self.pw2(F.silu(self.bn(self.dw(h))))
        return self.drop(h.transpose(1, 2))


class ConformerBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ff1, self.ff2 = FeedForward(d), FeedForward(d)
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
        self.conv = ConvModule(d)
        self.out_norm = nn.LayerNorm(d)

    def forward(self, x, pad):
        x = x + 0.5 * self.ff1(x)
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]
        x = x + self.conv(x, pad)
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x)


class Conformer(nn.Module):
    def __init__(self, d=256, heads=4, layers=16):
        super().__init__()
        self.subsample = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
        self.proj = nn.Linear(d * (((MELS - 1) // 2 - 1) // 2), d)
        self.blocks = nn.ModuleList(ConformerBlock(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, VOCAB)

    def forward(self, feats, lengths):
        x = self.subsample(feats.unsqueeze(1))                      # B, d, T/4, F/4
        x = self.proj(x.permute(0, 2, 1, 3).flatten(2))
        lengths = ((lengths - 1) // 2 - 1) // 2
        pad = torch.arange(x.shape[1], device=x.device)[None, :] >= lengths[:, None]
        for block in self.blocks:
            x = block(x, pad)
        return self.head(x).log_softmax(-1), lengths


def build_model(small=False):
    return Conformer(32, 2, 16) if small else Conformer()


def make_batch(small=False):
    b, t = (2, 64) if small else (BATCH, FRAMES)
    feats = torch.randn(b, t, MELS)
    lengths = torch.linspace(t // 2, t, b).long()
    n = 8 if small else LABELS
    targets = torch.randint(1, VOCAB, (b, n))
    target_lengths = torch.linspace(n // 2, n, b).long()
    return feats, lengths, targets, target_lengths


def loss_fn(model, batch):
    feats, lengths, targets, target_lengths = batch
    log_probs, out_lengths = model(feats, lengths)
    return F.ctc_loss(log_probs.float().transpose(0, 1), targets, out_lengths, target_lengths, zero_infinity=True)
