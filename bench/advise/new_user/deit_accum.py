"""Hugging Face DeiT-Small (DeiTForImageClassification from its configuration, no weights) trained
as its user writes the loop: bf16 autocast by torch.autocast("cuda", dtype=torch.bfloat16) in the
step (no torch.compile), a global batch of 256 images 224 x 224 as 4 micro-batches of 64 (each loss
divided by 4, loss.backward() on each), gradient clipping to 1.0, then AdamW(lr=5e-4,
weight_decay=0.05) built once in the step and stepped, gradients set to None."""
import torch
from transformers import DeiTConfig, DeiTForImageClassification

BATCH, MICRO = 256, 4


def build_model(small=False):
    if small:
        cfg = DeiTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=12, num_attention_heads=4,
                         intermediate_size=128, num_labels=10)
    else:
        cfg = DeiTConfig(image_size=224, patch_size=16, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                         intermediate_size=1536, num_labels=1000)
    return DeiTForImageClassification(cfg)


def make_batch(small=False):
    n, size, classes = (4, 32, 10) if small else (BATCH, 224, 1000)
    return {"pixel_values": torch.randn(n, 3, size, size), "labels": torch.randint(0, classes, (n,))}


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05)
        # PASTE HERE
    opt = run.state["optimizer"]
    for px, y in zip(batch["pixel_values"].chunk(MICRO), batch["labels"].chunk(MICRO)):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(pixel_values=px, labels=y).loss / MICRO
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
