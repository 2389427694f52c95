"""The decoder of decoder.py trained with Muon, as modded-nanogpt and Moonlight do: torch.optim.Muon
(Newton-Schulz orthogonalised momentum) over the blocks' 2-D weight matrices, AdamW over the
rest (embedding, output head, norms, biases), two optimizers stepped in the user's own step, bf16
autocast."""
import torch
import torch.nn.functional as F

from decoder import make_batch, small_or_full  # noqa: F401 (make_batch is this file's)


def build_model(small=False):
    return small_or_full(small)


def step(model, batch, run):
    if "muon" not in run.state:
        matrices = [p for n, p in model.blocks.named_parameters() if p.ndim == 2]
        others = [p for p in model.parameters() if not any(p is m for m in matrices)]
        run.state["muon"] = torch.optim.Muon(matrices, lr=0.02, momentum=0.95, weight_decay=0.01)
        run.state["adamw"] = torch.optim.AdamW(others, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0)
    muon, adamw = run.state["muon"], run.state["adamw"]
    ids, labels = batch["ids"].cuda(), batch["labels"].cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
    loss.backward()
    muon.step()
    adamw.step()
    model.zero_grad(set_to_none=True)
