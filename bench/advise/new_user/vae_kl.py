"""diffusers' AutoencoderKL in Stable Diffusion's VAE shape (channels 128/256/512/512, 2 ResNet
blocks a level, attention in the mid block, 4 latent channels), trained on 256 x 256 images with
a reconstruction loss and a small KL term (the LDM autoencoder's objective without its
discriminator and LPIPS), AdamW, bf16 autocast. Batch 8."""
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL

BATCH = 8


def build_model(small=False):
    ch = (32, 32, 32, 32) if small else (128, 256, 512, 512)   # small: every block kept, narrow
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=ch,
                         down_block_types=("DownEncoderBlock2D",) * len(ch),
                         up_block_types=("UpDecoderBlock2D",) * len(ch), layers_per_block=2,
                         norm_num_groups=32)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, 256)
    return (torch.rand(n, 3, s, s) * 2 - 1,)


def loss_fn(model, batch):
    x = batch[0]
    posterior = model.encode(x).latent_dist
    rec = model.decode(posterior.sample()).sample
    return F.mse_loss(rec.float(), x) + 1e-6 * posterior.kl().mean()
