"""Optical flow with torchvision's RAFT (raft_small, no weights) trained as torchvision's
references/optical_flow/train.py does: image pairs, the model's list of flow predictions (one per
refinement iteration, 12 in training) and the sequence loss (each prediction's L1 error to the
ground-truth flow weighted by gamma^(n-1-i), gamma 0.8, over valid pixels), AdamW (lr 4e-4, weight decay
1e-4), batch 6 pairs of 368 x 496 (the FlyingChairs crop); build_model(small=True) and
make_batch(small=True) are one pair of 128 x 128 (RAFT's correlation pyramid needs 128 at least),
which bench/advise/cpu_profiler_peak.py runs for real on the CPU."""
import torch
from torchvision.models.optical_flow import raft_small

ITERS = 12


def build_model(small=False):
    return raft_small(weights=None)


def make_batch(small=False):
    n, h, w = (1, 128, 128) if small else (6, 368, 496)
    return {"img1": torch.rand(n, 3, h, w) * 2 - 1, "img2": torch.rand(n, 3, h, w) * 2 - 1,
            "flow": torch.randn(n, 2, h, w) * 5, "valid": torch.ones(n, h, w, dtype=torch.bool)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=1e-4, eps=1e-8)


def loss_fn(model, batch, gamma=0.8):
    preds = model(batch["img1"], batch["img2"], num_flow_updates=ITERS)
    valid = batch["valid"][:, None]
    loss = 0
    for i, p in enumerate(preds):
        w = gamma ** (len(preds) - 1 - i)
        loss = loss + w * ((p - batch["flow"]).abs() * valid).mean()
    return loss
