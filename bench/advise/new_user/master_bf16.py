"""bf16 weights with an fp32 master copy (captured with --weights bf16): the model's parameters,
activations and gradients are bf16; a step of the user's own copies each gradient to its fp32
master, steps AdamW on the masters and copies them back into the bf16 weights."""
import torch

# loss_fn and make_batch are this model file's (the capture reads them from it): decoder.py's
from decoder import loss_fn, make_batch, small_or_full  # noqa: F401


def build_model(small=False):
    return small_or_full(small)


def step(model, batch, run):
    params = [p for p in model.parameters() if p.requires_grad]
    if "master" not in run.state:  # built once, as a training script does before its loop
        run.state["master"] = [p.detach().float().requires_grad_(True) for p in params]
        run.state["opt"] = torch.optim.AdamW(run.state["master"], lr=1e-4, foreach=True)
    with run.autocast():
        loss = loss_fn(model, batch)
    run.backward(loss)
    for p, m in zip(params, run.state["master"]):
        m.grad = p.grad.float()
        p.grad = None
    run.state["opt"].step()
    run.state["opt"].zero_grad(set_to_none=True)
    with torch.no_grad():
        for p, m in zip(params, run.state["master"]):
            p.copy_(m)
