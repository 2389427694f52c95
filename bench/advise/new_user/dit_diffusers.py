"""A class-conditional latent diffusion transformer, diffusers' DiTTransformer2DModel (DiT-B/2 from
its configuration, no weights: 12 layers, 12 heads of 64, patch 2, adaLN-zero) on 32 x 32 x 4
latents, trained as diffusers' DiT examples do: a DDPMScheduler adds noise at random timesteps, the
model predicts noise and a learned variance (8 output channels, only the noise half in the loss),
class dropout for classifier-free guidance (10% of labels set to the null class 1000), AdamW(lr
1e-4, weight_decay 0) built once in the step, gradient clipping to 1.0 and diffusers' EMAModel of
the weights; bf16 autocast."""
import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler, DiTTransformer2DModel
from diffusers.training_utils import EMAModel

BATCH, LATENT, CLASSES = 64, 32, 1000


def build_model(small=False):
    return DiTTransformer2DModel(num_attention_heads=2 if small else 12, attention_head_dim=16 if small else 64,
                                 in_channels=4, out_channels=8, num_layers=2 if small else 12,
                                 sample_size=8 if small else LATENT, patch_size=2, num_embeds_ada_norm=CLASSES)


def make_batch(small=False):
    n, res = (2, 8) if small else (BATCH, LATENT)
    return torch.randn(n, 4, res, res), torch.randint(0, CLASSES, (n,))


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
        # PASTE HERE
        run.state["ema"] = EMAModel(model.parameters(), decay=0.9999)
        run.state["scheduler"] = DDPMScheduler(num_train_timesteps=1000)
    opt, ema, sched = run.state["optimizer"], run.state["ema"], run.state["scheduler"]
    latents, labels = (x.to("cuda", non_blocking=True) for x in batch)
    drop = torch.rand(labels.shape, device=labels.device) < 0.1
    labels = torch.where(drop, torch.full_like(labels, CLASSES), labels)   # the null class
    noise = torch.randn_like(latents)
    t = torch.randint(0, sched.config.num_train_timesteps, (latents.shape[0],), device=latents.device)
    noisy = sched.add_noise(latents, noise, t)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(noisy, timestep=t, class_labels=labels).sample
    eps, _variance = out.float().chunk(2, dim=1)
    loss = F.mse_loss(eps, noise)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    ema.step(model.parameters())
    opt.zero_grad(set_to_none=True)
