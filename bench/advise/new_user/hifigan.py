"""A HiFi-GAN V1 vocoder (Kong et al.; jik876/hifi-gan's models.py written with today's
torch.nn.utils.parametrizations.weight_norm): a generator of 4 ConvTranspose1d upsamplings
(8, 8, 2, 2) from 80-bin mel frames to 22.05 kHz audio, each followed by 3 multi-receptive-field
ResBlocks of dilated Conv1d, every convolution weight-normed; a multi-period discriminator
(periods 2, 3, 5, 7, 11: the waveform reshaped to 2-D, Conv2d stacks, weight_norm) and a
multi-scale discriminator (3 scales by AvgPool1d, the first spectral_norm'd). The loss as the
reference code trains it: least-squares GAN losses, feature matching over every discriminator
layer, and 45 x the L1 distance of the mel spectrograms (torch.stft with a Hann window and a mel
filterbank matrix). Two AdamW optimizers (lr 2e-4, betas (0.8, 0.99)), one discriminator step
then one generator step; fp32, batch 16 segments of 8,192 samples."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm, weight_norm

BATCH, SEGMENT, MELS, HOP, NFFT = 16, 8192, 80, 256, 1024


class ResBlock(nn.Module):
    def __init__(self, ch, k, dilations=(1, 3, 5)):
        super().__init__()
        self.convs1 = nn.ModuleList(weight_norm(nn.Conv1d(ch, ch, k, dilation=d, padding=d * (k - 1) // 2))
                                    for d in dilations)
        self.convs2 = nn.ModuleList(weight_norm(nn.Conv1d(ch, ch, k, padding=(k - 1) // 2)) for _ in dilations)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, 0.1)), 0.1))
        return x


class Generator(nn.Module):
    def __init__(self, ch=512, rates=(8, 8, 2, 2), kernels=(3, 7, 11)):
        super().__init__()
        self.pre = weight_norm(nn.Conv1d(MELS, ch, 7, padding=3))
        self.ups = nn.ModuleList(weight_norm(nn.ConvTranspose1d(ch // 2 ** i, ch // 2 ** (i + 1), 2 * r, r, r // 2))
                                 for i, r in enumerate(rates))
        self.resblocks = nn.ModuleList(ResBlock(ch // 2 ** (i + 1), k) for i in range(len(rates)) for k in kernels)
        self.post = weight_norm(nn.Conv1d(ch // 2 ** len(rates), 1, 7, padding=3))
        self.kernels = len(kernels)

    def forward(self, mel):
        x = self.pre(mel)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, 0.1))
            blocks = self.resblocks[i * self.kernels:(i + 1) * self.kernels]
            x = sum(b(x) for b in blocks) / self.kernels
        return torch.tanh(self.post(F.leaky_relu(x)))


class PeriodDisc(nn.Module):
    def __init__(self, period, ch=32):
        super().__init__()
        self.period = period
        chans = [1, ch, 4 * ch, 16 * ch, 32 * ch, 32 * ch]
        self.convs = nn.ModuleList(weight_norm(nn.Conv2d(chans[i], chans[i + 1], (5, 1), (3 if i < 4 else 1, 1),
                                                         (2, 0))) for i in range(5))
        self.post = weight_norm(nn.Conv2d(chans[-1], 1, (3, 1), 1, (1, 0)))

    def forward(self, x):
        b, c, t = x.shape
        if t % self.period:
            x = F.pad(x, (0, self.period - t % self.period), "reflect")
        x = x.view(b, c, -1, self.period)
        feats = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            feats.append(x)
        x = self.post(x)
        feats.append(x)
        return x.flatten(1), feats


class ScaleDisc(nn.Module):
    def __init__(self, norm, ch=16):
        super().__init__()
        spec = [(1, ch, 15, 1, 1), (ch, 4 * ch, 41, 4, 4), (4 * ch, 16 * ch, 41, 4, 16), (16 * ch, 64 * ch, 41, 4, 64),
                (64 * ch, 64 * ch, 41, 4, 256), (64 * ch, 64 * ch, 5, 1, 1)]
        self.convs = nn.ModuleList(norm(nn.Conv1d(i, o, k, s, groups=g, padding=k // 2)) for i, o, k, s, g in spec)
        self.post = norm(nn.Conv1d(64 * ch, 1, 3, padding=1))

    def forward(self, x):
        feats = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            feats.append(x)
        x = self.post(x)
        feats.append(x)
        return x.flatten(1), feats


class Discriminators(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.mpd = nn.ModuleList(PeriodDisc(p, 4 if small else 32) for p in (2, 3, 5, 7, 11))
        self.msd = nn.ModuleList(ScaleDisc(spectral_norm if i == 0 else weight_norm, 4 if small else 16)
                                 for i in range(3))
        self.pool = nn.AvgPool1d(4, 2, padding=2)

    def forward(self, wav):
        outs = [d(wav) for d in self.mpd]
        x = wav
        for i, d in enumerate(self.msd):
            if i:
                x = self.pool(x)
            outs.append(d(x))
        return outs


def mel_filters(n_fft=NFFT, mels=MELS):
    # triangular filters, evenly spaced on the mel scale (the slaney-style bank librosa makes)
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)
    top = 2595 * torch.log10(torch.tensor(1 + 11025 / 700))
    edges = hz(torch.linspace(0, float(top), mels + 2))
    bins = torch.linspace(0, 11025, n_fft // 2 + 1)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    return torch.clamp(torch.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), min=0)


class HiFiGAN(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.G = Generator(32) if small else Generator()
        self.D = Discriminators(small)
        self.register_buffer("window", torch.hann_window(NFFT))
        self.register_buffer("fbank", mel_filters())

    def mel(self, wav):
        spec = torch.stft(F.pad(wav.squeeze(1), (384, 384), "reflect"), NFFT, HOP, window=self.window, center=False,
                          return_complex=True)
        return torch.log(torch.clamp(self.fbank @ spec.abs(), min=1e-5))


def build_model(small=False):
    return HiFiGAN(small)


def make_batch(small=False):
    n, t = (2, 2048) if small else (BATCH, SEGMENT)
    return torch.randn(n, MELS, t // HOP), torch.rand(n, 1, t) * 2 - 1


def generator_loss(model, fake, wav):
    loss_g = 45 * F.l1_loss(model.mel(fake), model.mel(wav))
    for (real_out, real_feats), (fake_out, fake_feats) in zip(model.D(wav), model.D(fake)):
        loss_g = loss_g + ((1 - fake_out) ** 2).mean()
        loss_g = loss_g + 2 * sum(F.l1_loss(f, r.detach()) for f, r in zip(fake_feats, real_feats))
    return loss_g


def loss_fn(model, batch):   # the generator's loss alone (run_printed.py checks the printed code by it)
    mel, wav = batch
    return generator_loss(model, model.G(mel), wav)


def step(model, batch, run):
    if "optD" not in run.state:
        run.state["optD"] = torch.optim.AdamW(model.D.parameters(), lr=2e-4, betas=(0.8, 0.99))
        run.state["optG"] = torch.optim.AdamW(model.G.parameters(), lr=2e-4, betas=(0.8, 0.99))
    opt_d, opt_g = run.state["optD"], run.state["optG"]
    mel, wav = batch
    fake = model.G(mel)
    loss_d = 0
    for (real_out, _), (fake_out, _) in zip(model.D(wav), model.D(fake.detach())):
        loss_d = loss_d + ((1 - real_out) ** 2).mean() + (fake_out ** 2).mean()
    opt_d.zero_grad(set_to_none=True)
    loss_d.backward()
    opt_d.step()
    loss_g = generator_loss(model, fake, wav)
    opt_g.zero_grad(set_to_none=True)
    loss_g.backward()
    opt_g.step()
