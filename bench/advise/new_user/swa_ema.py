"""An exponential moving average of the weights kept by PyTorch's own torch.optim.swa_utils:
AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999)) made once before the loop (a deep
copy of the model: its parameters and buffers, on the GPU), updated after every optimizer step
(update_parameters: foreach lerp over all parameters); the decoder of decoder.py with AdamW
(lr 3e-4) and bf16 autocast."""
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from decoder import loss_fn, make_batch, small_or_full  # noqa: F401 - the capture reads them from this file


def build_model(small=False):
    return small_or_full(small)


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=3e-4)
        # PASTE HERE
        run.state["ema"] = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    opt, ema = run.state["optimizer"], run.state["ema"]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model, batch)
    loss.backward()
    opt.step()
    ema.update_parameters(model)
    opt.zero_grad(set_to_none=True)
