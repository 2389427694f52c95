"""Stable Diffusion fine-tuning as diffusers' examples/text_to_image/train_text_to_image.py runs it:
the UNet2DConditionModel of SD 1.5's shape (from its configuration, no weights: 320/640/1280/1280
channels, 2 ResNet blocks a level, cross-attention to 768-wide text at three levels) trained with
the script's `--gradient_checkpointing` (unet.enable_gradient_checkpointing(): diffusers'
checkpointing of every down, mid and up block), a frozen CLIP text encoder (ViT-L/14's text tower,
12 layers of 768) and a frozen AutoencoderKL (SD's VAE) run under no_grad, the latents scaled by the
VAE's scaling factor, noise added by a DDPMScheduler at random timesteps, the MSE of the predicted
noise, AdamW (lr 1e-5, weight decay 1e-2) over the UNet; bf16 autocast, batch 4 of 512 x 512.
build_model(small=True) and make_batch(small=True) are a two-level UNet and two images of 16 x 16."""
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel
from torch import nn
from transformers import CLIPTextConfig, CLIPTextModel


class StableDiffusion(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        ch = (32, 64) if small else (320, 640, 1280, 1280)
        text = 32 if small else 768
        self.unet = UNet2DConditionModel(
            sample_size=8 if small else 64, block_out_channels=ch, layers_per_block=1 if small else 2,
            down_block_types=("CrossAttnDownBlock2D",) * (len(ch) - 1) + ("DownBlock2D",),
            up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * (len(ch) - 1),
            cross_attention_dim=text, attention_head_dim=8, norm_num_groups=8 if small else 32)
        self.unet.enable_gradient_checkpointing()
        self.text = CLIPTextModel(CLIPTextConfig(
            hidden_size=text, intermediate_size=4 * text, num_hidden_layers=2 if small else 12,
            num_attention_heads=4 if small else 12, vocab_size=1000 if small else 49408, max_position_embeddings=77,
            bos_token_id=0, eos_token_id=2))
        levels = 2 if small else 4
        self.vae = AutoencoderKL(block_out_channels=(16, 32) if small else (128, 256, 512, 512),
                                 down_block_types=("DownEncoderBlock2D",) * levels,
                                 up_block_types=("UpDecoderBlock2D",) * levels, latent_channels=4,
                                 norm_num_groups=8 if small else 32, layers_per_block=1 if small else 2)
        self.text.requires_grad_(False)
        self.vae.requires_grad_(False)
        self.scheduler = DDPMScheduler(num_train_timesteps=1000)


def build_model(small=False):
    return StableDiffusion(small)


def make_batch(small=False):
    n, res = (2, 16) if small else (4, 512)
    return {"pixel_values": torch.rand(n, 3, res, res) * 2 - 1, "input_ids": torch.randint(3, 1000, (n, 77))}


def build_optimizer(model):
    return torch.optim.AdamW(model.unet.parameters(), lr=1e-5, weight_decay=1e-2)


def loss_fn(model, batch):
    with torch.no_grad():
        latents = model.vae.encode(batch["pixel_values"]).latent_dist.sample() * model.vae.config.scaling_factor
        text = model.text(batch["input_ids"])[0]
    noise = torch.randn_like(latents)
    t = torch.randint(0, model.scheduler.config.num_train_timesteps, (latents.shape[0],), device=latents.device)
    noisy = model.scheduler.add_noise(latents, noise, t)
    pred = model.unet(noisy, t, text).sample
    return F.mse_loss(pred.float(), noise.float(), reduction="mean")
