"""Two optimizers in one step, each with its own parameter groups: the decoder of decoder.py with
AdamW over the blocks (weight decay 0.1 on matrices, none on biases and norms: nanoGPT's
configure_optimizers) and SGD with momentum over the embedding and head, stepped one after the
other in a step of the user's own."""
import torch

from decoder import loss_fn, make_batch, small_or_full  # noqa: F401 - the capture reads them from this file


def build_model(small=False):
    return small_or_full(small)


def optimizers(model):
    blocks = [p for n, p in model.named_parameters() if not n.startswith(("embed", "head"))]
    decay = [p for p in blocks if p.dim() >= 2]
    no_decay = [p for p in blocks if p.dim() < 2]
    adamw = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=3e-4, betas=(0.9, 0.95), foreach=True)
    sgd = torch.optim.SGD(list(model.embed.parameters()) + list(model.head.parameters()), lr=1e-2, momentum=0.9,
                          foreach=True)
    return adamw, sgd


def step(model, batch, run):
    if "opts" not in run.state:  # built once, before the training loop
        run.state["opts"] = optimizers(model)
    with run.autocast():
        loss = loss_fn(model, batch)
    run.backward(loss)
    for opt in run.state["opts"]:
        opt.step()
    for opt in run.state["opts"]:
        opt.zero_grad(set_to_none=True)
