"""settings_model.py's network stepped as with torch.amp.GradScaler (capture with --autocast fp16):
the scale is made in the first forward, saved by the loss scaling and read again by the unscale
after the backward (a forward-phase pass of its own), which the settings must follow."""
import torch

from settings_model import build_model, loss_fn, make_batch

# The capture takes the model file's build_model, make_batch and step: the first two are
# settings_model.py's, re-exported.
__all__ = ["build_model", "make_batch", "step"]


def step(model, batch, run):
    scaler = run.state.setdefault("scaler", torch.amp.GradScaler("cuda"))
    with run.autocast():
        loss = loss_fn(model, batch)
    scaler.scale(loss).backward()
    scaler.step(run.optimizer)
    scaler.update()
    run.zero_grad(set_to_none=True)
