"""A VQ-VAE (van den Oord et al.) with the exponential-moving-average codebook of the paper's
appendix, as the widely copied PyTorch implementations write the quantiser (the Sonnet port
VectorQuantizerEMA): distances to 512 codes of 64 dimensions, argmin, one-hot encodings, the
codes' cluster sizes and sums updated in place in buffers under no_grad (Laplace smoothing),
the straight-through estimator (x + (q - x).detach()) and the commitment loss 0.25. Encoder and
decoder of strided convolutions and residual stacks on 256 x 256 images (a 64 x 64 latent grid),
MSE reconstruction, Adam (lr 2e-4), bf16 autocast, batch 32."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, SIZE, CODES, DIM = 32, 256, 512, 64


class Residual(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.net = nn.Sequential(nn.ReLU(), nn.Conv2d(ch, ch // 4, 3, padding=1), nn.ReLU(), nn.Conv2d(ch // 4, ch, 1))

    def forward(self, x):
        return x + self.net(x)


class VectorQuantizerEMA(nn.Module):
    def __init__(self, codes, dim, decay=0.99, eps=1e-5):
        super().__init__()
        self.decay, self.eps = decay, eps
        self.register_buffer("embedding", torch.randn(codes, dim))
        self.register_buffer("cluster_size", torch.zeros(codes))
        self.register_buffer("embed_avg", self.embedding.clone())

    def forward(self, z):
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        dist = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.embedding.t()
                + self.embedding.pow(2).sum(1))
        idx = dist.argmin(1)
        onehot = F.one_hot(idx, self.embedding.shape[0]).type(flat.dtype)
        q = F.embedding(idx, self.embedding).view(z.shape[0], z.shape[2], z.shape[3], -1).permute(0, 3, 1, 2)
        if self.training:
            with torch.no_grad():
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0).float(), alpha=1 - self.decay)
                self.embed_avg.mul_(self.decay).add_((onehot.t() @ flat).float(), alpha=1 - self.decay)
                n = self.cluster_size.sum()
                size = (self.cluster_size + self.eps) / (n + self.embedding.shape[0] * self.eps) * n
                self.embedding.copy_(self.embed_avg / size.unsqueeze(1))
        commit = F.mse_loss(z, q.detach())
        return z + (q - z).detach(), 0.25 * commit


class VQVAE(nn.Module):
    def __init__(self, ch=128, codes=CODES, dim=DIM):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, ch // 2, 4, 2, 1), nn.ReLU(), nn.Conv2d(ch // 2, ch, 4, 2, 1),
                                     nn.ReLU(), nn.Conv2d(ch, ch, 3, padding=1), Residual(ch), Residual(ch),
                                     nn.ReLU(), nn.Conv2d(ch, dim, 1))
        self.quantizer = VectorQuantizerEMA(codes, dim)
        self.decoder = nn.Sequential(nn.Conv2d(dim, ch, 3, padding=1), Residual(ch), Residual(ch), nn.ReLU(),
                                     nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(ch // 2, 3, 4, 2, 1))

    def forward(self, x):
        q, commit = self.quantizer(self.encoder(x))
        return self.decoder(q), commit


def build_model(small=False):
    return VQVAE(16, 32, 8) if small else VQVAE()


def make_batch(small=False):
    return torch.randn(2 if small else BATCH, 3, 32 if small else SIZE, 32 if small else SIZE)


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=2e-4)


def loss_fn(model, batch):
    recon, commit = model(batch)
    return F.mse_loss(recon.float(), batch) + commit
