"""fp16 mixed precision with loss scaling (captured with --autocast fp16): the step a GPU user
writes with torch.amp.GradScaler, scaling the loss, unscaling and checking the gradients for
infinities before AdamW steps."""
import torch

# loss_fn and make_batch are this model file's (the capture reads them from it): decoder.py's
from decoder import loss_fn, make_batch, small_or_full  # noqa: F401


def build_model(small=False):
    return small_or_full(small)


def step(model, batch, run):
    scaler = run.state.setdefault("scaler", torch.amp.GradScaler("cuda"))
    with run.autocast():
        loss = loss_fn(model, batch)
    scaler.scale(loss).backward()
    scaler.step(run.optimizer)
    scaler.update()
    run.zero_grad(set_to_none=True)
