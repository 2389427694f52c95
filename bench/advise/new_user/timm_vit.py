"""timm's ViT-B/16 (timm.create_model("vit_base_patch16_224"), no weights: pretrained=False) trained
as timm's train.py does by default: bf16 autocast, label-smoothing cross-entropy (0.1), AdamW
(lr 1e-3, weight decay 0.05) from timm's create_optimizer_v2 (no weight decay on biases, norms and
the position embedding: two parameter groups), gradient clipping to 1.0; batch 128 of 224 x 224."""
import timm
import torch
from timm.loss import LabelSmoothingCrossEntropy
from timm.optim import create_optimizer_v2

BATCH = 128


def build_model(small=False):
    if small:
        return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8,
                                 num_classes=10)   # every block kept (12), narrow
    return timm.create_model("vit_base_patch16_224", pretrained=False)


def make_batch(small=False):
    n, size, classes = (4, 32, 10) if small else (BATCH, 224, 1000)
    return torch.randn(n, 3, size, size), torch.randint(0, classes, (n,))


def loss_fn(model, batch):   # the step's loss (run_printed.py checks the printed code by it)
    x, y = batch
    return LabelSmoothingCrossEntropy(smoothing=0.1)(model(x), y)


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
        # PASTE HERE
        run.state["loss"] = LabelSmoothingCrossEntropy(smoothing=0.1)
    opt, criterion = run.state["optimizer"], run.state["loss"]
    x, y = (t.cuda(non_blocking=True) for t in batch)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = criterion(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
