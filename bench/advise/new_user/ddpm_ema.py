"""diffusers' UNet2DModel (DDPM's 64 x 64 shape from its configuration, no weights) trained as
diffusers' train_unconditional.py does: a DDPMScheduler adds noise at random timesteps, the loss is
the MSE of the predicted noise, AdamW(lr=1e-4, weight_decay=1e-6) built once in the step, gradient
clipping to 1.0, and an exponential moving average of the weights (diffusers' EMAModel: a copy of
every parameter made before the first step, updated after each optimizer step). bf16 autocast."""
import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler, UNet2DModel
from diffusers.training_utils import EMAModel

BATCH, RES = 32, 64


def build_model(small=False):
    if small:   # every block kept, narrow
        return UNet2DModel(sample_size=32, in_channels=3, out_channels=3, layers_per_block=2,
                           block_out_channels=(8, 8, 16, 16, 32, 32), norm_num_groups=4,
                           down_block_types=("DownBlock2D", "DownBlock2D", "DownBlock2D", "DownBlock2D",
                                             "AttnDownBlock2D", "DownBlock2D"),
                           up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D", "UpBlock2D", "UpBlock2D",
                                           "UpBlock2D"))
    return UNet2DModel(sample_size=RES, in_channels=3, out_channels=3, layers_per_block=2,
                       block_out_channels=(128, 128, 256, 256, 512, 512),
                       down_block_types=("DownBlock2D", "DownBlock2D", "DownBlock2D", "DownBlock2D",
                                         "AttnDownBlock2D", "DownBlock2D"),
                       up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D", "UpBlock2D", "UpBlock2D",
                                       "UpBlock2D"))


def make_batch(small=False):
    n, res = (2, 32) if small else (BATCH, RES)
    return torch.randn(n, 3, res, res)


def loss_fn(model, clean):   # the step's loss at fixed noise and timesteps (run_printed.py checks by it)
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(clean.shape, generator=g).to(clean.device)
    t = torch.arange(clean.shape[0], device=clean.device) * 97 % 1000
    noisy = DDPMScheduler(num_train_timesteps=1000).add_noise(clean, noise, t)
    return F.mse_loss(model(noisy, t).sample.float(), noise)


def step(model, clean, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-6)
        # PASTE HERE
        run.state["ema"] = EMAModel(model.parameters(), decay=0.9999, use_ema_warmup=True)
        run.state["scheduler"] = DDPMScheduler(num_train_timesteps=1000)
    opt, ema, sched = run.state["optimizer"], run.state["ema"], run.state["scheduler"]
    clean = clean.to("cuda")
    noise = torch.randn_like(clean)
    t = torch.randint(0, sched.config.num_train_timesteps, (clean.shape[0],), device=clean.device)
    noisy = sched.add_noise(clean, noise, t)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        pred = model(noisy, t).sample
    loss = F.mse_loss(pred.float(), noise)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    ema.step(model.parameters())
    opt.zero_grad(set_to_none=True)
