"""Speech enhancement in the short-time Fourier domain, as DCCRN/CRN-style recipes write it: the
noisy waveform's torch.stft (n_fft 512, hop 128, Hann window, return_complex), a magnitude
(log1p) into 2 convolutional layers and a 2-layer LSTM of 512 units that predicts a complex ratio
mask, the masked spectrum back through torch.istft, and the negative SI-SDR of the estimate against
the clean waveform; Adam (lr 1e-3), bf16 autocast (the mask made fp32 before torch.complex,
which takes no bf16 parts); batch 16 clips of 4 s at 16 kHz. torch.istft checks the
window's overlap-add envelope by value (the NOLA condition) before it divides by it."""
import torch
from torch import nn

N_FFT, HOP = 512, 128


class Enhancer(nn.Module):
    def __init__(self, hidden=512):
        super().__init__()
        f = N_FFT // 2 + 1
        self.conv = nn.Sequential(nn.Conv1d(f, hidden, 3, padding=1), nn.PReLU(),
                                  nn.Conv1d(hidden, hidden, 3, padding=1), nn.PReLU())
        self.lstm = nn.LSTM(hidden, hidden, num_layers=2, batch_first=True)
        self.mask = nn.Linear(hidden, 2 * f)
        self.register_buffer("window", torch.hann_window(N_FFT))

    def forward(self, wav):
        spec = torch.stft(wav, N_FFT, HOP, window=self.window, return_complex=True)   # B x F x T
        feat = torch.log1p(spec.abs())
        h = self.conv(feat).transpose(1, 2)
        h, _ = self.lstm(h)
        m = self.mask(h).transpose(1, 2)
        re, im = m.float().chunk(2, dim=1)   # torch.complex takes no bf16 parts, on any device
        est = spec * torch.complex(torch.tanh(re), torch.tanh(im))
        return torch.istft(est, N_FFT, HOP, window=self.window, length=wav.shape[-1])


def build_model(small=False):
    return Enhancer(32 if small else 512)


def make_batch(small=False):
    n, t = (2, 4000) if small else (16, 64000)
    clean = torch.randn(n, t)
    return {"noisy": clean + 0.3 * torch.randn(n, t), "clean": clean}


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


def si_sdr(est, ref, eps=1e-8):
    ref = ref - ref.mean(-1, keepdim=True)
    est = est - est.mean(-1, keepdim=True)
    s = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + eps) * ref
    return 10 * torch.log10(s.pow(2).sum(-1) / ((est - s).pow(2).sum(-1) + eps) + eps)


def loss_fn(model, batch):
    return -si_sdr(model(batch["noisy"]), batch["clean"]).mean()
